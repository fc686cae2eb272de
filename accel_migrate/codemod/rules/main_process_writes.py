"""AM017 main-process-writes: loggers and files the script writes exist on the main process only.

## What
Wraps what writes experiment logs and output files in
``accel.on_main_process(...)``, which makes the object on the main process and a
stand-in that accepts every call (and ``with``) and does nothing on the others:

- TensorBoard writers: ``SummaryWriter(...)`` (``torch.utils.tensorboard`` and
  ``tensorboardX``) becomes ``accel.on_main_process(SummaryWriter, ...)``;
- wandb and MLflow calls that create or write a run (``wandb.init``,
  ``wandb.log``, ``wandb.finish``, ``wandb.watch``, ``mlflow.log_metric``, ...):
  ``wandb.log({...}, step=step)`` becomes
  ``accel.on_main_process(wandb.log, {...}, step=step)``;
- files opened for writing, ``open(path, "w")`` (modes with ``w``, ``a``, ``x`` or
  ``+``, also in ``with``): ``accel.on_main_process(open, path, "w")``;
- functions that write a file by its path: ``torchvision.utils.save_image``,
  ``numpy.save`` / ``savez`` / ``savez_compressed`` / ``savetxt`` and
  ``matplotlib.pyplot.savefig``.

## Why
Every process runs the script. Without this, N processes would each create a
TensorBoard event file and a wandb run, and append the same lines to the same
CSV or JSON log at the same time (interleaved, or truncated by each other's
``"w"``). The stand-in keeps the script unchanged around it: ``writer.add_scalar``,
``f.write``, ``csv.writer(f)``, ``json.dump(x, f)`` and ``torch.save(obj, f)`` still
run on every process and do nothing but on the main one. The arguments are still
evaluated on every process, so a logged ``accel.global_loss(loss)`` (a
collective) is reached by all of them.

## Example
```python
# before
writer = SummaryWriter(log_dir=run_dir)
log = open(os.path.join(run_dir, "metrics.csv"), "w")
wandb.log({"loss": loss.item()}, step=step)
# after
writer = accel.on_main_process(SummaryWriter, log_dir=run_dir)
log = accel.on_main_process(open, os.path.join(run_dir, "metrics.csv"), "w")
accel.on_main_process(wandb.log, {"loss": accel.global_loss(loss).item()}, step=step)
```

## Fix safety
Safe for output that only the script's user reads: what the main process writes
is what the original script wrote (with AM008 and AM009 the logged values are
global). A file that the script writes and then reads back on every process (on a
later line, or anywhere in a loop around the write, whose next pass reads it) is
left as it is and reported as needs-review (the other processes would find no
file, or read it before it is written). Reading ``wandb.run``, ``wandb.config`` or
``wandb.summary`` is reported as needs-review: they are only set on the main
process (under a sweep the config comes from the wandb server, on the main
process only).
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
from libcst.metadata import PositionProvider

from ..patterns import string_value
from ..rule import Rule, tidy_args
from .torch_save import OPEN_CALLS, write_mode

LOGGER_CLASSES = frozenset(
    {
        "torch.utils.tensorboard.SummaryWriter",
        "torch.utils.tensorboard.writer.SummaryWriter",
        "tensorboardX.SummaryWriter",
        "tensorboardX.writer.SummaryWriter",
    }
)
RUN_FUNCTIONS = frozenset(
    {
        *(
            f"wandb.{name}"
            for name in (
                "init",
                "log",
                "finish",
                "watch",
                "unwatch",
                "save",
                "log_artifact",
                "log_model",
                "use_artifact",
                "alert",
                "define_metric",
            )
        ),
        *(
            f"mlflow.{name}"
            for name in (
                "start_run",
                "end_run",
                "log_metric",
                "log_metrics",
                "log_param",
                "log_params",
                "log_artifact",
                "log_artifacts",
                "log_dict",
                "log_text",
                "log_figure",
                "set_tag",
                "set_tags",
                "pytorch.log_model",
            )
        ),
    }
)
#: Functions that write a file at a path, with where that path is given
#: (position, keyword).
PATH_WRITERS: dict[str, tuple[int, str]] = {
    "torchvision.utils.save_image": (1, "fp"),
    "numpy.save": (0, "file"),
    "numpy.savez": (0, "file"),
    "numpy.savez_compressed": (0, "file"),
    "numpy.savetxt": (0, "fname"),
    "matplotlib.pyplot.savefig": (0, "fname"),
}
RUN_STATE = frozenset({"wandb.run", "wandb.config", "wandb.summary"})
_READERS = frozenset(
    {
        "builtins.open",
        "io.open",
        "torch.load",
        "json.load",
        "pickle.load",
        "numpy.load",
        "numpy.loadtxt",
        "numpy.genfromtxt",
        "matplotlib.pyplot.imread",
        "matplotlib.image.imread",
        "PIL.Image.open",
        "torchvision.io.read_image",
        "imageio.imread",
        "imageio.v2.imread",
        "imageio.v3.imread",
    }
)
#: Suffixes numpy adds to a path given without one.
_NUMPY_SUFFIXES = (".npy", ".npz")


class MainProcessWrites(Rule):
    code = "AM017"
    name = "main-process-writes"
    summary = "SummaryWriter / wandb / open(path, 'w') / save_image -> accel.on_main_process(...)"

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        names = self.qualnames(original_node.func)
        if names & LOGGER_CLASSES:
            what = "logger created on the main process only"
        elif names & RUN_FUNCTIONS:
            name = sorted(names & RUN_FUNCTIONS)[0]
            what = f"{name}(...) runs on the main process only"
        elif writers := names & PATH_WRITERS.keys():
            name = sorted(writers)[0]
            if self._read_again(original_node, _path_argument(original_node, name)):
                self._report_read_again(original_node)
                return updated_node
            what = f"{name}(...) writes its file on the main process only"
        elif names & OPEN_CALLS and (mode := write_mode(original_node)) is not None:
            if self._read_again(original_node, _path_argument(original_node)):
                self._report_read_again(original_node)
                return updated_node
            what = f'file opened for writing ("{mode}") on the main process only'
        else:
            return updated_node
        self.report(original_node, "fixed", f"{what} -> accel.on_main_process(...)")
        func = updated_node.func
        if func.lpar:
            func = func.with_changes(lpar=(), rpar=())
        return updated_node.with_changes(
            func=self.runtime_attr("on_main_process"),
            args=tidy_args([cst.Arg(value=func), *updated_node.args]),
        )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if not self.qualnames(node) & RUN_STATE:
            return
        parent = self.parent(node)
        if isinstance(parent, cst.Attribute) and self.qualnames(parent) & RUN_STATE:
            return
        name = sorted(self.qualnames(node) & RUN_STATE)[0]
        self.report(
            node,
            "needs-review",
            f"`{name}` is only set on the main process (wandb.init runs there only); "
            "on the others it is empty: read settings from the script's own arguments",
        )

    @cached_property
    def _reads(self) -> list[tuple[int, str, frozenset[int]]]:
        """(line, path key, enclosing loops) of every call that reads a file."""
        found = []
        for call in self.index.calls:
            if not self.is_call_to(call, _READERS) or not call.args:
                continue
            if self.is_call_to(call, OPEN_CALLS) and write_mode(call) is not None:
                continue
            source = call.args[0].value
            if self.is_call_to(source, OPEN_CALLS) and source.args:  # type: ignore[attr-defined]
                source = source.args[0].value  # type: ignore[attr-defined]
            line = self.get_metadata(PositionProvider, call).start.line
            found.append((line, _path_key(source), self._loops(call)))
        return found

    def _loops(self, node: cst.CSTNode) -> frozenset[int]:
        return frozenset(
            id(a)
            for a in self.index.ancestors(node)
            if isinstance(a, (cst.For, cst.While))
        )

    def _report_read_again(self, call: cst.Call) -> None:
        self.report(
            call,
            "needs-review",
            "a file that every process writes and the script reads back: "
            "write it on the main process only (accel.on_main_process) "
            "and add accel.barrier() before it is read",
        )

    def _read_again(self, call: cst.Call, path: cst.BaseExpression | None) -> bool:
        """Is the file at ``path`` read after ``call`` writes it: on a later line, or
        anywhere in a loop around the write (the next pass reads it)?"""
        if path is None:
            return False
        key = _path_key(path)
        line = self.get_metadata(PositionProvider, call).start.line
        loops = self._loops(call)
        return any(
            read == key and (later > line or bool(around & loops))
            for later, read, around in self._reads
        )


def _path_key(path: cst.BaseExpression) -> str:
    """A path's code, or a string path without the suffix numpy would add
    (``np.savez("w")`` writes ``w.npz``)."""
    value = string_value(path)
    if value is None:
        return cst.Module([]).code_for_node(path)
    for suffix in _NUMPY_SUFFIXES:
        value = value.removesuffix(suffix)
    return repr(value)


def _path_argument(
    call: cst.Call, writer: str | None = None
) -> cst.BaseExpression | None:
    """The path a call writes to: ``open``'s first argument, or where ``writer``
    (a PATH_WRITERS name) takes it."""
    position, keyword = PATH_WRITERS[writer] if writer else (0, "file")
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return positional[position].value if len(positional) > position else None
