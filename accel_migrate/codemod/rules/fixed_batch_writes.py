"""AM041 fixed-batch-writes: a file written from a batch taken once off a sharded loader holds one process's share of it.

## What
Reports, as needs-review, a call that writes a file (``torchvision.utils.save_image``,
``torch.save``, ``numpy.save`` / ``savez`` / ``savetxt``, a TensorBoard
writer's ``add_image`` / ``add_images`` / ``add_video`` / ``add_figure`` /
``add_embedding``, ``wandb.log``, MLflow, a local module's helper that writes)
whose arguments are made from a batch the script takes once from a data loader
it shards, outside a loop over that loader: ``fixed_x, _ =
next(iter(test_loader))``, or ``x_fixed, c_org = next(data_iter)`` with
``data_iter = iter(loader)`` (GAN, VAE and segmentation scripts that save the
reconstructions or translations of a fixed batch every epoch). It follows the
batch through assignments (``recon = model(fixed_x)``, ``grid =
torch.cat([fixed_x, recon])``), ``self.`` attributes and the parameters of the
file's functions (``sample(G, fixed_x, epoch)``). Nothing is rewritten.

## Why
``accel.prepare_dataloader`` gives each process its share of every batch: the
first batch's first rows on the main process. A batch taken once with
``next(...)`` is that share, so the images or tensors the main process saves of
it (AM010 and AM017 write them there) show only its rows, where the original's
file showed the whole batch. Training is not changed, and nothing fails.

## Example
```python
# before
fixed_x, _ = next(iter(test_loader))
for epoch in range(epochs):
    ...
    save_image(model(fixed_x), f"recon_{epoch}.png")
# after
fixed_x, _ = next(iter(test_loader))
for epoch in range(epochs):
    ...
    accel.on_main_process(save_image, model(fixed_x), f"recon_{epoch}.png")  # AM017
# AM041 [needs-review] `save_image(...)` writes `fixed_x` into
# `f"recon_{epoch}.png"`, made from the batch `next(iter(test_loader))` takes
# once (line 1) from a loader that is sharded ...
```

## Fix safety
Report only: the fixed batch may also be trained on or evaluated, where its
share is right. To keep the saved file the original's, take the fixed batch
from the dataset itself, which is not sharded (``fixed_x =
torch.stack([test_set[i][0] for i in range(batch_size)])``), or gather it
(``accel.gather``) before it is saved.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.metadata import PositionProvider

from ..analysis import Key
from ..divergence_finders import _next_batch
from ..file_changes import PATH_WRITERS, argument, written_path
from ..names import SAVES
from ..rule import Rule
from ..subtrees import findall
from .main_process_writes import RUN_FUNCTIONS

#: Methods of a TensorBoard writer that write an image, a video, a figure or an
#: embedding of tensors.
_WRITER_METHODS = frozenset(
    {"add_image", "add_images", "add_video", "add_figure", "add_embedding"}
)
_WRITES = frozenset(PATH_WRITERS) | SAVES | RUN_FUNCTIONS
_NEXT = m.Call(func=m.Name("next"))


class FixedBatchWrites(Rule):
    code = "AM041"
    name = "fixed-batch-writes"
    summary = (
        "a file written from a batch taken once off a sharded loader "
        "(`fixed_x = next(iter(loader))`) -> reported (it holds the main "
        "process's share of the batch)"
    )
    #: Before AM010 and AM017 rewrite the writes it looks for.
    phase = 40

    def visit_Module(self, node: cst.Module) -> None:
        if not self.index.loaders or not any(
            m.matches(call, _NEXT) for call in self.index.calls
        ):
            return
        origins = self._fixed_batches()
        if not origins:
            return
        for call in self.index.calls:
            if not self._writes(call):
                continue
            read = self._fixed_read(call, origins)
            if read is None:
                continue
            leaf, origin = read
            self._report(call, leaf, origin)

    # -- where fixed batches come from ------------------------------------------------
    def _fixed_batches(self) -> dict[Key, cst.Call]:
        """Each variable that holds (something made from) a batch taken once off a
        sharded loader, and the ``next(...)`` call that took it."""
        origins: dict[Key, cst.Call] = {}
        bindings = self._bindings()
        for key, values in bindings:
            for value in values:
                call = self._taken_once(value)
                if call is not None:
                    origins[key] = call
                    break
        gathered = {key for key, values in bindings if self._gathers(values)}
        origins = {k: v for k, v in origins.items() if k not in gathered}
        if not origins:
            return origins
        for _ in range(6):  # through assignments and parameters, until it settles
            before = len(origins)
            for key, values in bindings:
                if key in origins or key in gathered:
                    continue
                for value in values:
                    found = self._reads(value, origins)
                    if found is not None:
                        origins[key] = origins[found]
                        break
            for call in self.index.calls:
                for parameter, passed in self.index.arguments(call):
                    if parameter in origins:
                        continue
                    found = self._reads(passed, origins)
                    if found is not None:
                        origins[parameter] = origins[found]
            if len(origins) == before:
                break
        return origins

    def _bindings(self) -> list[tuple[Key, list[cst.BaseExpression]]]:
        """Every variable's assigned values, unpacked ones included (``fixed_x, _ =
        next(...)`` binds ``fixed_x`` to the call)."""
        found: dict[Key, list[cst.BaseExpression]] = {}
        for key, values in self.index.values.items():
            found.setdefault(key, []).extend(v for v in values if v is not None)
        for key, unpacked in self.index.unpacked.items():
            found.setdefault(key, []).extend(value for value, _, _ in unpacked)
        return list(found.items())

    def _gathers(self, values: list[cst.BaseExpression]) -> bool:
        """Is one of a variable's values ``accel.gather(...)`` (``fixed_x =
        accel.gather(fixed_x)``: the whole batch again, on every process)?"""
        return any(
            isinstance(v, cst.Call) and self.index.is_runtime_call(v, "gather")
            for v in values
        )

    def _taken_once(self, value: cst.BaseExpression) -> cst.Call | None:
        """The ``next(...)`` in ``value`` that takes a batch off a sharded loader
        outside a loop of its function that reads a loader (a batch kept, not a
        step's)."""
        for call in findall(value, _NEXT) + (
            [value] if m.matches(value, _NEXT) else []
        ):
            assert isinstance(call, cst.Call)
            if "builtins.next" not in self.qualnames(call.func):
                continue
            if not _next_batch(self.index, call) or self._in_loader_loop(call):
                continue
            return call
        return None

    def _in_loader_loop(self, node: cst.CSTNode) -> bool:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return False
            if isinstance(ancestor, (cst.For, cst.While)) and self.index.reads_loader(
                ancestor
            ):
                return True
        return False

    def _reads(self, expr: cst.CSTNode, origins: dict[Key, cst.Call]) -> Key | None:
        """The first fixed-batch variable ``expr`` reads (a name or a ``self.``
        attribute), if any."""
        leaf = self._leaf(expr, origins)
        return None if leaf is None else self.index.key(leaf)

    def _leaf(
        self, expr: cst.CSTNode, origins: dict[Key, cst.Call]
    ) -> cst.Name | cst.Attribute | None:
        candidates: list[cst.CSTNode] = [expr] if isinstance(expr, cst.Name) else []
        candidates += findall(expr, m.Name() | m.Attribute(value=m.Name("self")))
        for node in candidates:
            parent = self.index.parent(node)
            if isinstance(parent, cst.Attribute) and parent.attr is node:
                continue  # `x.size`: an attribute's name, not a variable
            if isinstance(parent, cst.Arg) and parent.keyword is node:
                continue
            if self._gathered(node, expr):
                continue  # `accel.gather(fixed_x)`: the whole batch again
            key = self.index.key(node)
            if key is not None and key in origins:
                assert isinstance(node, (cst.Name, cst.Attribute))
                return node
        return None

    def _gathered(self, node: cst.CSTNode, within: cst.CSTNode) -> bool:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.Call) and self.index.is_runtime_call(
                ancestor, "gather"
            ):
                return True
            if ancestor is within:
                return False
        return False

    # -- what writes ------------------------------------------------------------------
    def _writes(self, call: cst.Call) -> bool:
        if self.qualnames(call.func) & _WRITES:
            return True
        if m.matches(call.func, m.Attribute()) and (
            call.func.attr.value in _WRITER_METHODS  # type: ignore[attr-defined]
        ):
            return True
        helper = self.index.helper(call.func)
        return helper is not None and bool(helper.writes)

    def _fixed_read(
        self, call: cst.Call, origins: dict[Key, cst.Call]
    ) -> tuple[cst.Name | cst.Attribute, cst.Call] | None:
        for arg in call.args:
            leaf = self._leaf(arg.value, origins)
            if leaf is not None:
                key = self.index.key(leaf)
                assert key is not None
                return leaf, origins[key]
        return None

    def _report(
        self, call: cst.Call, leaf: cst.Name | cst.Attribute, origin: cst.Call
    ) -> None:
        name = _code(call.func)
        taken = _code(origin)
        line = self._line(origin)
        path = self._path(call)
        into = f" into `{_code(path)}`" if path is not None else ""
        self.report(
            call,
            "needs-review",
            f"`{name}(...)` writes `{_code(leaf)}`{into}, made from the batch "
            f"`{taken}` takes once (line {line}) from a loader that is sharded: on the main "
            "process, which writes the file, it holds only that process's share "
            "of the batch (its first rows), so the file shows those rows where "
            "the original's showed the whole batch (rows sliced off its start, "
            "`x[:8]`, are the original's only while the share holds them); take "
            "the fixed batch from the "
            "dataset itself, which is not sharded (torch.stack([dataset[i][0] for "
            "i in range(n)])), or gather it (accel.gather) before it is used",
            # Of a file another rule leaves whole, nothing is sharded: not said.
            if_migrated=True,
        )

    def _path(self, call: cst.Call) -> cst.BaseExpression | None:
        """The file a write names (``save_image(x, path)``, ``torch.save(x, path)``)."""
        names = self.qualnames(call.func)
        for writer in sorted(names & PATH_WRITERS.keys()):
            return written_path(call, writer)
        if names & SAVES:
            return argument(call, 1, "f")
        return None

    def _line(self, node: cst.CSTNode) -> int:
        start = self.get_metadata(PositionProvider, node).start
        return self.context.original_place(self._current_code, start.line, 0)[0]


def _code(node: cst.CSTNode) -> str:
    text = cst.Module([]).code_for_node(node)
    return text if len(text) <= 60 else text[:57] + "..."
