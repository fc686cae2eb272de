"""AM025 batch-size-shapes: the loader's batch size used as a shape in a step.

## What
In a loop over a prepared data loader (training or evaluation; also one a class
keeps, ``for x_, z_ in self.data_loader``), a batch size a
prepared loader was configured with (``batch_size``, ``args.batch_size``,
``opt.batch_size``: the expression given to ``DataLoader(batch_size=...)``, also
through ``**kwargs``, or the argument a loader factory of another module is
handed for the parameter its DataLoader takes its batch size from, ProGAN's
``get_data_loader(dataset, current_batch_size, ...)``, also a factory returning a
tuple of loaders of one size, ``map(accel.prepare_dataloader,
make_loaders(x, y, batch_size))``) used as a shape:

- ``x.view(batch_size, ...)`` / ``x.reshape(batch_size, ...)`` where ``x`` is the
  batch the loop draws from that loader is rewritten to ``x.view(x.size(0), ...)``:
  the batch's own size, which is the configured one wherever the original ran;
- the same when the batch size is a parameter of the function that reshapes
  (``def train(model, loader, batch_size)``) and every call in this file passes
  it the loop's loader's batch size (``train(model, train_loader,
  args.batch_size)``); where some call passes another value, it is reported,
  naming each call's line and value (also when a call passes an integer literal,
  ``log_images(model, loader, 32)``: likely the batch size, which this rule cannot
  show);
- any other use as a shape (``recon.view(args.batch_size, 1, 28, 28)`` on a model's
  output, ``torch.ones(batch_size, 1)`` labels, ``torch.randn(batch_size, nz)``
  noise, ``torch.full((batch_size,), 1.0)``, ``torch.arange(batch_size)``,
  ``.expand``/``.repeat``/``.new_zeros``...) is reported as needs-review, once
  a line (``torch.cat([torch.arange(B) + B, torch.arange(B)])`` is one finding);
- the batch size handed to a function or method of the file that shapes a tensor
  with it, in a function that loops over a prepared loader (``hidden =
  model.init_hidden(args.batch_size)`` before the loop, whose body makes
  ``weight.new_zeros(1, bsz, nhid)``: a recurrent state carried across the
  batches) is reported as needs-review; so is the batch size handed to a method
  of a model class of another module of the project that shapes a tensor with
  that parameter (the Udacity sentiment notebook's ``h =
  net.init_hidden(batch_size)`` with ``SentimentRNN`` in model.py making
  ``weight.new(n_layers, batch_size, hidden_dim).zero_()``; ``.new(...)``, the
  legacy constructor, counts as a shape as ``.new_zeros`` does);
- a model built from a local module (``model = build_model(cfg)``) whose class
  keeps the configured batch size and shapes a tensor with it in ``forward``
  (``self.batch_size = cfg.batch_size``, then ``x.view(self.batch_size,
  self.seq_len, -1)``) or in another method of its own (a state reset the loop
  calls before every batch, the HAN's ``model._init_hidden_state()`` making
  ``torch.zeros(2, batch_size, hidden)`` with ``batch_size =
  self.batch_size``), in a file that shards a loader, is reported as
  needs-review at the call that builds it;
- a buffer made with the batch size outside the loop and filled in place in a
  step (the Variable-era DCGAN: ``label = torch.FloatTensor(opt.batchSize)``
  before the loop, ``label.data.resize_(batch_size).fill_(real_label)`` in it;
  also ``.copy_``, ``.fill_``, ``.normal_`` with no resize) is reported as
  needs-review. A resize through ``.data`` resizes another tensor object: the
  buffer keeps the configured size, and part of it is never filled. Where the
  first use of the buffer in every step is a resize of the tensor itself to the
  batch (``input.resize_as_(real_cpu)``, ``label.resize_(batch_size)`` with
  ``batch_size = real_cpu.size(0)``), the size it was made with no longer
  matters: nothing is reported;
- a tensor made with the batch size before the loop and used whole in a step
  beside a value of the step's batch, with no fill (a GAN's targets: ``y_real,
  y_fake = torch.ones(opt.batch_size, 1), torch.zeros(opt.batch_size, 1)`` or
  ``self.y_real_ = torch.ones(self.batch_size, 1)`` before the epochs, then
  ``BCE_loss(D(x), y_real)`` in every step; ``valid = torch.full((batch_size,),
  1.0)``) is reported as needs-review, naming the line of the use; one used
  with nothing of the batch beside it (``netG(fixed_noise)`` for a preview) is
  not. A resize to the batch size in a step (``label.resize_(opt.batchSize)``)
  is a use as a shape, reported as above;
- such a tensor whose rows differ from each other (``torch.randn``,
  ``torch.arange``, ...) cut to the step's rows (``noise[:b]``, ``ids[:b]``) is
  reported too: every process takes the same first rows. A constant one
  (``ones[:b]`` of ``torch.ones(opt.batch_size)``) is the same cut anywhere and
  is not;
- an alias of the batch size (``B = args.batch_size``, every value of ``B`` one)
  and a multiple of it (``torch.eye(2 * B)``, SimCLR's two views,
  ``torch.cat([torch.arange(B) + B, torch.arange(B)])``) count as the batch
  size. A name that the step rebinds, on an earlier line of the loop's body and
  not under a branch, to something else (``batch_size = real.size(0)``, the
  batch's own row count, then ``torch.full((batch_size,), 1.0)``) does not, nor
  does one rebound under ``if i == 0:`` (``if not i:``) of the loop's own
  ``enumerate`` counter, with no ``continue`` before it and nothing setting the
  configured size back (the first step of every pass: it holds from then on).
  Under any other branch the rebinding may not have run: still reported;
- ``range(batch_size)``, or ``range(4)`` in a loop over a loader whose batch size
  is the literal ``4`` (``for i in range(4): label = labels[i]``, the classic CIFAR
  tutorial's per-class accuracy), counts a batch's rows by the configured size:
  reported as needs-review.

## Why
By default the migrated script keeps the original's global batch and splits it:
each process gets ``batch_size / N`` samples of every batch. A tensor shaped with
the configured batch size has ``N`` times too many rows: reshaping the batch fails
at world size 2, and labels of the wrong length fail in the loss (``nn.BCELoss``:
"Using a target size that is different to the input size") or broadcast against
the share's outputs (a ``(b, 1)`` output against ``(B,)`` targets makes a
``(b, B)`` grid: harmless for constant targets and a mean, wrong otherwise); a loop over ``range(batch_size)`` indexes past the rows of each process's
batch.

## Example
```python
# before
train_loader = DataLoader(dataset, batch_size=batch_size, shuffle=True)
for images, _ in train_loader:
    images = images.reshape(batch_size, -1).to(device)
    real_labels = torch.ones(batch_size, 1).to(device)
# after
train_loader = accel.prepare_dataloader(DataLoader(dataset, batch_size=batch_size, shuffle=True))
for images, _ in train_loader:
    images = images.reshape(images.size(0), -1).to(accel.device())
    real_labels = torch.ones(batch_size, 1).to(accel.device())  # needs-review
```

## Fix safety
The rewrite is made only where the value is provably the same: the tensor is a
batch the loop binds from a loader whose batch size is that very variable, and it
is not rebound in the loop except by calls that keep its first dimension
(``.to``, ``.float()``, this very reshape); a parameter counts as that variable
only when its function never rebinds it and every call of the function in this
file passes that variable (or the same integer literal), followed up to three
calls deep. In the original such a reshape works
only when the batch is full, and then ``x.size(0)`` is the configured size. For
the reported cases, take the size from the batch (``x.size(0)``), or launch with
``--batch-mode per-device`` (each process takes whole batches of the configured
size; the global batch is then ``N`` times larger).
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from ..analysis import Key, attr_chain
from ..batch_shapes import (
    KEEP_ROWS,
    RESHAPES,
    SHAPE_FUNCTIONS,
    SHAPE_METHODS,
    same_size,
    shape_receiver,
    short_code,
)
from ..batch_size_buffers import BufferFindings, shape_args
from ..batch_size_derived import DerivedFindings
from ..batch_size_handed import _PARAMETER_DEPTH, HandedSizes
from ..batch_size_spellings import configured_spelling, multiple, rebound_in_step
from ..batches import LoaderLoop, batch_size_of, loader_loop, same_variable
from ..loader_factory_sizes import factory_batch_size, factory_loader_loop
from ..names import DATALOADER_CALLS
from ..patterns import prepared_loader_map
from ..rule import Rule
from ..scopes import ScopeProvider

#: Re-exported: the shape finder's names, for those who import them from here.
__all__ = [
    "KEEP_ROWS",
    "RESHAPES",
    "SHAPE_FUNCTIONS",
    "SHAPE_METHODS",
    "BatchSizeShapes",
]


class BatchSizeShapes(BufferFindings, DerivedFindings, HandedSizes, Rule):
    code = "AM025"
    name = "batch-size-shapes"
    summary = "loader batch size used as a shape in a step -> the batch's own size, or reported"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._loops: dict[cst.For, LoaderLoop | None] = {}
        #: shape arguments to rewrite: the argument node -> the batch's name
        self._rewrite: dict[cst.Arg, str] = {}
        #: the lines a shape made with the batch size is reported on
        self._shape_lines: set[int] = set()

    def _loop(self, loop: cst.For) -> LoaderLoop | None:
        if loop not in self._loops:
            self._loops[loop] = loader_loop(self.index, loop) or factory_loader_loop(
                self.index, loop
            )
        return self._loops[loop]

    def _enclosing_loops(self, node: cst.CSTNode) -> list[tuple[cst.For, LoaderLoop]]:
        found = []
        for path in self.index.loop_paths(node):
            for loop in path:
                if isinstance(loop, cst.For):
                    info = self._loop(loop)
                    if info is not None:
                        found.append((loop, info))
        return found

    @cached_property
    def _batch_sizes(self) -> list[cst.BaseExpression]:
        """The batch sizes of every prepared loader of the file."""
        found = []
        for call in self.index.calls:
            if not self.qualnames(call.func) & DATALOADER_CALLS:
                continue
            holder = self.index.parent(call)
            wrapper = self.index.parent(holder) if holder is not None else None
            if wrapper is not None and self.index.is_runtime_call(
                wrapper, "prepare_dataloader"
            ):
                size = batch_size_of(self.index, call)
                if size is not None:
                    found.append(size)
        for call in self.index.calls:
            # `accel.prepare_dataloader(get_loader(ds, bs))`, `get_loader` of
            # another module building its DataLoader with `batch_size=bs`
            # `map(accel.prepare_dataloader, make_loaders(x, y, bs))` too, a tuple
            holder = self.index.parent(call)
            wrapper = self.index.parent(holder) if holder is not None else None
            if wrapper is not None and (
                self.index.is_runtime_call(wrapper, "prepare_dataloader")
                or prepared_loader_map(self.index, wrapper)
            ):
                size = factory_batch_size(self.index, call)
                if size is not None:
                    found.append(size)
        return found

    def _configured(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Is ``expr`` spelled as the batch size of a prepared loader? (Of another
        loader than the loop's too: the original's sizes are often equal.) A
        parameter is when a call of its function passes it one, and so is an
        alias or a multiple of one (``batch_size_spellings``); a name the step
        rebinds first to something else (``batch_size = x.size(0)``) is not."""
        if depth > 2 * _PARAMETER_DEPTH:
            return False
        if rebound_in_step(self.index, expr, self._configured, self._line, depth):
            return False
        if any(same_size(self.index, expr, size, False) for size in self._batch_sizes):
            return True
        if configured_spelling(self.index, expr, self._configured, depth):
            return True
        passed = self._passed(expr) if depth < _PARAMETER_DEPTH else None
        return passed is not None and any(
            value is not None and self._configured(value, depth + 1)
            for _, value in passed
        )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        self._batch_shaped_model(node)
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if "builtins.range" in self.qualnames(func):
            self._row_range(node)
            return
        if method in SHAPE_METHODS or method == "resize_":
            dims = shape_args(node)
        elif self.qualnames(func) & SHAPE_FUNCTIONS:
            dims = shape_args(node)
        else:
            self._handed_to_shape(node)
            return
        sizes = [
            (arg, expr)
            for arg, expr in dims
            if isinstance(expr, (cst.Name, cst.Attribute)) or multiple(expr)
        ]
        if not sizes:
            return
        loops = self._enclosing_loops(node)
        if not loops:
            self._preallocated(node, sizes)
            return
        hits = [(arg, expr) for arg, expr in sizes if self._configured(expr)]
        if not hits:
            if method in RESHAPES:
                self._literal_parameter(node, loops)
            return
        arg, expr = hits[0]
        spelled = attr_chain(expr) or short_code(expr)
        if method in RESHAPES and arg is node.args[0] and expr is arg.value:
            batch = self._provable_batch(node, expr, loops)
            if batch is not None:
                self._rewrite[arg] = batch
                self.report(
                    node,
                    "fixed",
                    f"the loader's batch size `{spelled}` used as a shape: each "
                    f"process's batch is its share of the global batch -> "
                    f"{batch}.size(0)",
                )
                return
        if method == "resize_":
            receiver = node.func.value  # type: ignore[attr-defined]
            if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
                receiver = receiver.value  # the fix resizes the tensor itself
            tensor = short_code(receiver)
            self.report(
                node,
                "needs-review",
                f"`{tensor}` is resized to {self._what_size(spelled, expr)} in a "
                "step: with the global batch split across processes each "
                f"process's batch has {spelled} / N samples, so `{tensor}` has N "
                "times its rows at world size > 1 (a size error in the loss, or "
                f"rows never filled); resize it to the batch (`{tensor}"
                f".resize_as_(x)`, `{tensor}.resize_(x.size(0))` for a batch `x`), "
                "or launch with `--batch-mode per-device`",
                if_migrated=True,
            )
            return
        line = self._line(node)
        if line in self._shape_lines:
            return  # one finding a line: `torch.cat([torch.arange(B) + B, torch.arange(B)])`
        self._shape_lines.add(line)
        self.report(
            node,
            "needs-review",
            self._what_size(spelled, expr) + " is used as a shape in a step: "
            f"with the global batch split across processes each process's batch has "
            f"{spelled} / N samples, so this shape is wrong at world size > 1; take "
            "the size from the batch (`x.size(0)`), or launch with "
            "`--batch-mode per-device`",
            if_migrated=True,
        )

    def _row_range(self, call: cst.Call) -> None:
        """``for i in range(4)`` (or ``range(args.batch_size)``) in a loop over a
        prepared loader whose batch size is that literal (or that variable): the
        rows of a full batch counted by its configured size (the classic CIFAR
        tutorial's per-class accuracy). Each process's batch has fewer rows: the
        loop indexes past them or skips rows. Reported; never rewritten (the rule
        cannot tell that the loop counts the batch's rows)."""
        if len(call.args) != 1 or call.args[0].keyword or call.args[0].star:
            return
        count = call.args[0].value
        loops = self._enclosing_loops(call)
        if not loops:
            return
        if isinstance(count, cst.Integer):
            sizes = [
                batch_size_of(self.index, loader)
                for _, info in loops
                for loader in info.loaders
            ]
            if not any(
                s is not None and same_size(self.index, count, s, True) for s in sizes
            ):
                return
            spelled = count.value
        elif isinstance(count, (cst.Name, cst.Attribute)) and self._configured(count):
            spelled = attr_chain(count) or "batch_size"
        else:
            return
        self.report(
            call,
            "needs-review",
            f"`range({spelled})` in a step counts a batch's rows by the loader's "
            f"batch size `{spelled}`: with the global batch split across processes "
            f"each process's batch has {spelled} / N samples, so indexing the batch "
            "by it fails (or reads the wrong rows) at world size > 1; count the "
            "batch's own rows (`range(x.size(0))` for a batch `x`), or launch with "
            "`--batch-mode per-device`",
            if_migrated=True,
        )

    def _provable_batch(
        self,
        call: cst.Call,
        size: cst.BaseExpression,
        loops: list[tuple[cst.For, LoaderLoop]],
    ) -> str | None:
        """The batch variable ``call`` reshapes, when its first dimension is provably
        the batch size ``size`` (of the loader its loop draws it from)."""
        receiver = shape_receiver(call)
        if not isinstance(receiver, cst.Name):
            return None
        key = self.index.key(receiver)
        for loop, info in loops:
            if key not in info.batch:
                continue
            if not info.loaders:
                return None  # a factory's loader (`factory_loader_loop`): reported
            sizes = [batch_size_of(self.index, c) for c in info.loaders]
            if not all(s is not None and self._provably(size, s) for s in sizes):
                return None
            if self._rebound(receiver, key, loop, size):
                return None
            return receiver.value
        return None

    def _what_size(self, spelled: str, expr: cst.BaseExpression) -> str:
        handed = self._handed_down(expr)
        if not handed:
            if isinstance(expr, cst.BinaryOperation):  # `2 * B`
                return f"`{spelled}`, a multiple of the loader's batch size,"
            return f"the loader's batch size `{spelled}`"
        return f"`{spelled}`{handed}, the loader's batch size at a call,"

    def _line(self, node: cst.CSTNode) -> int:
        return self.original_line(node)

    def _rebound(
        self, name: cst.Name, key: Key | None, loop: cst.For, size: cst.BaseExpression
    ) -> bool:
        """Is the batch rebound in the loop by anything but ``x = x.<keeps rows>``?"""
        scope = self.get_metadata(ScopeProvider, name, None)
        if scope is None or key is None:
            return True
        for binding in scope[name.value]:
            node = binding.node
            if not isinstance(node, cst.CSTNode) or not self._inside(node, loop.body):
                continue
            holder = self.index.parent(node)
            assign = (
                self.index.parent(holder)
                if isinstance(holder, cst.AssignTarget)
                else None
            )
            if not isinstance(assign, cst.Assign) or not self._keeps_rows(
                assign.value, name.value, size
            ):
                return True
        return False

    def _inside(self, node: cst.CSTNode, block: cst.CSTNode) -> bool:
        return any(a is block for a in self.index.ancestors(node))

    def _keeps_rows(
        self, value: cst.BaseExpression, name: str, size: cst.BaseExpression
    ) -> bool:
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            method = value.func.attr.value
            if method in RESHAPES:
                first = value.args[0] if value.args else None
                if first is None or first.keyword is not None:
                    return False
                if not same_variable(self.index, first.value, size, strict=True):
                    return False
            elif method not in KEEP_ROWS:
                return False
            value = value.func.value
        return isinstance(value, cst.Name) and value.value == name

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        batch = self._rewrite.get(original_node)
        if batch is None:
            return updated_node
        return updated_node.with_changes(
            value=cst.Call(
                func=cst.Attribute(value=cst.Name(batch), attr=cst.Name("size")),
                args=[cst.Arg(cst.Integer("0"))],
            )
        )
