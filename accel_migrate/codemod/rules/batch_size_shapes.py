"""AM025 batch-size-shapes: the loader's batch size used as a shape in a step.

## What
In a loop over a prepared data loader (training or evaluation; also one a class
keeps, ``for x_, z_ in self.data_loader``), a batch size a
prepared loader was configured with (``batch_size``, ``args.batch_size``,
``opt.batch_size``: the expression given to ``DataLoader(batch_size=...)``, also
through ``**kwargs``) used as a shape:

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
  ``.expand``/``.repeat``/``.new_zeros``...) is reported as needs-review;
- the batch size handed to a function or method of the file that shapes a tensor
  with it, in a function that loops over a prepared loader (``hidden =
  model.init_hidden(args.batch_size)`` before the loop, whose body makes
  ``weight.new_zeros(1, bsz, nhid)``: a recurrent state carried across the
  batches) is reported as needs-review;
- a model built from a local module (``model = build_model(cfg)``) whose class
  keeps the configured batch size and shapes a tensor with it in ``forward``
  (``self.batch_size = cfg.batch_size``, then ``x.view(self.batch_size,
  self.seq_len, -1)``), in a file that shards a loader, is reported as
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
  batch's own row count, then ``torch.full((batch_size,), 1.0)``) does not;
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
import libcst.matchers as m

from .. import model_methods
from ..analysis import Key, ModuleIndex, attr_chain, bind_arguments
from ..batch_size_buffers import BufferFindings
from ..batch_size_buffers import shape_args as _shape_args
from ..batch_size_spellings import configured_spelling, multiple, rebound_in_step
from ..batches import LoaderLoop, batch_size_of, loader_loop, same_variable
from ..names import DATALOADER_CALLS
from ..patterns import strip_methods
from ..rule import Rule
from ..scopes import ScopeProvider
from ..subtrees import findall

#: Tensor methods whose arguments are a shape.
SHAPE_METHODS = frozenset(
    {"view", "reshape", "expand", "repeat", "new_zeros", "new_ones", "new_empty"}
)
RESHAPES = frozenset({"view", "reshape"})
#: How many calls deep a batch size handed down as a parameter is followed.
_PARAMETER_DEPTH = 3
#: Calls named in a needs-review message about a parameter.
_CALLS_SHOWN = 3
#: torch functions whose leading arguments are a shape (or a length).
SHAPE_FUNCTIONS = frozenset(
    f"torch.{name}"
    for name in (
        "zeros",
        "eye",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "arange",
        "Tensor",
        "FloatTensor",
        "LongTensor",
        "cuda.FloatTensor",
        "cuda.LongTensor",
    )
)
#: Methods that keep a tensor's first dimension (a batch rebound by them is still
#: the batch).
KEEP_ROWS = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "float",
        "double",
        "half",
        "bfloat16",
        "long",
        "type",
        "contiguous",
        "detach",
        "clone",
        "requires_grad_",
    }
)


class BatchSizeShapes(BufferFindings, Rule):
    code = "AM025"
    name = "batch-size-shapes"
    summary = "loader batch size used as a shape in a step -> the batch's own size, or reported"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._loops: dict[cst.For, LoaderLoop | None] = {}
        #: shape arguments to rewrite: the argument node -> the batch's name
        self._rewrite: dict[cst.Arg, str] = {}

    def _loop(self, loop: cst.For) -> LoaderLoop | None:
        if loop not in self._loops:
            self._loops[loop] = loader_loop(self.index, loop)
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
        if any(_same_size(self.index, expr, size, False) for size in self._batch_sizes):
            return True
        if configured_spelling(self.index, expr, self._configured, depth):
            return True
        passed = self._passed(expr) if depth < _PARAMETER_DEPTH else None
        return passed is not None and any(
            value is not None and self._configured(value, depth + 1)
            for _, value in passed
        )

    def _passed(
        self, expr: cst.BaseExpression
    ) -> list[tuple[cst.Call, cst.BaseExpression | None]] | None:
        """For a parameter of a function of this file that its body never rebinds,
        what each call of the function passes it (None where a call passes it
        nothing this rule can read: its default, ``*args``); None when ``expr`` is
        no such parameter or nothing here calls the function."""
        if not isinstance(expr, cst.Name):
            return None
        key = self.index.key(expr)
        scope = key[0] if key is not None else None
        function = getattr(scope, "node", None)
        if not isinstance(function, cst.FunctionDef) or (
            self.index.function_scope_key(function, expr.value) != key
        ):
            return None
        if not all(isinstance(b.node, cst.Param) for b in scope[expr.value]):  # type: ignore[index]
            return None
        sites = self.index.call_sites(function)
        if not sites:
            return None
        found: list[tuple[cst.Call, cst.BaseExpression | None]] = []
        for site in sites:
            args = [a for k, a in self.index.arguments(site) if k == key]
            found.append((site, args[0] if len(args) == 1 else None))
        return found

    def _provably(
        self, size: cst.BaseExpression, loader_size: cst.BaseExpression, depth: int = 0
    ) -> bool:
        """Is ``size`` provably the value ``loader_size``: the same variable, or a
        parameter every call passes that variable (the loader's batch size handed
        down: ``train(model, loader, args.batch_size)``)?"""
        if _same_size(self.index, size, loader_size, True):
            return True
        passed = self._passed(size) if depth < _PARAMETER_DEPTH else None
        return passed is not None and all(
            value is not None and self._provably(value, loader_size, depth + 1)
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
            dims = _shape_args(node)
        elif self.qualnames(func) & SHAPE_FUNCTIONS:
            dims = _shape_args(node)
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
        spelled = attr_chain(expr) or _code(expr)
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
            tensor = _code(receiver)
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

    def _handed_to_shape(self, call: cst.Call) -> None:
        """``hidden = model.init_hidden(args.batch_size)`` before the loop over
        the loader: a configured batch size handed to a function or method of
        this file that shapes a tensor with it (``weight.new_zeros(1, bsz,
        nhid)``), in a function that loops over a prepared loader."""
        target = self._shaping_callee(call)
        if target is None:
            return
        function, bound = target
        for name, arg in bind_arguments(function, bound, call):
            if not isinstance(arg, (cst.Name, cst.Attribute)) or not self._configured(
                arg
            ):
                continue
            shape = _shaped_by(self.index, function, name)
            if (
                shape is None
                or self._enclosing_loops(shape)  # reported there, through `_passed`
                or not self._loops_over_a_loader(call)
            ):
                continue
            spelled = attr_chain(arg) or "batch_size"
            self.report(
                call,
                "needs-review",
                f"{self._what_size(spelled, arg)} is handed to "
                f"`{function.name.value}`, which shapes a tensor with it "
                f"(`{_code(shape)}`, line {self._line(shape)}), and what it makes "
                "is used with this loader's batches: with the global batch split "
                f"across processes each process's batch has {spelled} / N samples, "
                "so that shape is wrong at world size > 1; take the size from the "
                "batch (`x.size(0)`), or launch with `--batch-mode per-device`",
                if_migrated=True,
            )
            return

    def _shaping_callee(self, call: cst.Call) -> tuple[cst.FunctionDef, int] | None:
        """The function of this file ``call`` runs: a local function, or the one
        method of that name of the local classes its receiver may hold."""
        func = call.func
        if isinstance(func, cst.Name):
            return self.index.callee(call)
        if not isinstance(func, cst.Attribute):
            return None
        methods = {
            statement
            for cls in model_methods.instance_classes(self.index, func.value)
            for statement in cls.body.body
            if isinstance(statement, cst.FunctionDef)
            and statement.name.value == func.attr.value
        }
        return (methods.pop(), 1) if len(methods) == 1 else None

    def _loops_over_a_loader(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in, or in a function (or module) with, a loop over a
        prepared loader?"""
        if self._enclosing_loops(node):
            return True
        scope = self.index.enclosing_function(node) or self.index.module
        return any(
            isinstance(loop, cst.For) and self._loop(loop) is not None
            for loop in findall(scope, m.For())
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
                s is not None and _same_size(self.index, count, s, True) for s in sizes
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
        receiver = _receiver(call)
        if not isinstance(receiver, cst.Name):
            return None
        key = self.index.key(receiver)
        for loop, info in loops:
            if key not in info.batch:
                continue
            sizes = [batch_size_of(self.index, c) for c in info.loaders]
            if not all(s is not None and self._provably(size, s) for s in sizes):
                return None
            if self._rebound(receiver, key, loop, size):
                return None
            return receiver.value
        return None

    def _literal_parameter(
        self, call: cst.Call, loops: list[tuple[cst.For, LoaderLoop]]
    ) -> None:
        """``images.view(batch_size, -1)`` on the loop's batch, where
        ``batch_size`` is a parameter some call passes an integer literal
        (``log_images(model, loader, 32)``): likely the loader's batch size,
        which this rule cannot show; reported."""
        first = call.args[0] if call.args else None
        if first is None or first.keyword is not None or first.star:
            return
        passed = self._passed(first.value)
        if not passed or not any(isinstance(v, cst.Integer) for _, v in passed):
            return
        receiver = _receiver(call)
        key = self.index.key(receiver) if isinstance(receiver, cst.Name) else None
        if key is None or not any(key in info.batch for _, info in loops):
            return
        name = first.value.value  # type: ignore[attr-defined]
        self.report(
            call,
            "needs-review",
            f"`{name}`{self._handed_down(first.value)} is the first dimension of "
            f"a reshape of the batch `{receiver.value}` in a step: "  # type: ignore[union-attr]
            "with the global batch split across processes each process's batch has "
            "the loader's batch size / N samples, so if that literal is the loader's "
            "batch size this reshape fails at world size > 1; take the size from the "
            f"batch (`{receiver.value}.size(0)`), or launch with "  # type: ignore[union-attr]
            "`--batch-mode per-device`",
            if_migrated=True,
        )

    def _what_size(self, spelled: str, expr: cst.BaseExpression) -> str:
        handed = self._handed_down(expr)
        if not handed:
            if isinstance(expr, cst.BinaryOperation):  # `2 * B`
                return f"`{spelled}`, a multiple of the loader's batch size,"
            return f"the loader's batch size `{spelled}`"
        return f"`{spelled}`{handed}, the loader's batch size at a call,"

    def _handed_down(self, expr: cst.BaseExpression) -> str:
        """`` (a parameter of `train()`; the call at line 40 passes `64`)``, for a
        parameter; empty otherwise."""
        passed = self._passed(expr)
        if not passed:
            return ""
        callee = self.index.callee(passed[0][0])
        name = callee[0].name.value if callee is not None else "a function"
        calls = "; ".join(
            f"line {self._line(site)} passes "
            + (
                f"`{cst.Module([]).code_for_node(value)}`"
                if value is not None
                else "no value it can read"
            )
            for site, value in passed[:_CALLS_SHOWN]
        )
        return f" (a parameter of `{name}()`: {calls})"

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

    def _batch_shaped_model(self, node: cst.Call) -> None:
        """``model = build_model(cfg)`` or ``SeqClassifier(cfg)`` of a local
        module whose model class keeps the configured batch size and shapes a
        tensor with it in ``forward`` (``HelperFact.batch_shape``), in a file
        that shards a loader: each process's batch has a share of that size."""
        fact = self.index.helper(node.func)
        if fact is None or fact.returns != "model":
            return
        shaped = fact if fact.kind == "class" else fact.model_class
        if shaped is None or not shaped.batch_shape or not self.index.loaders:
            return
        self.report(
            node,
            "needs-review",
            f"builds {shaped.where}, whose {shaped.batch_shape}: each process's "
            "batch holds its share of the configured batch size, so that shape "
            "has too many rows (a reshape fails or mixes samples); take the size "
            f"from the batch in {shaped.file} (`x.size(0)`), or launch with "
            "--batch-mode per-device",
        )

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


def _shaped_by(
    index: ModuleIndex, function: cst.FunctionDef, parameter: str
) -> cst.Call | None:
    """A shape call in ``function`` with its parameter ``parameter`` among the
    sizes (``weight.new_zeros(1, bsz, nhid)``), or None."""
    for call in findall(function, m.Call()):
        func = call.func  # type: ignore[attr-defined]
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if method not in SHAPE_METHODS and not (
            index.qualnames(func) & SHAPE_FUNCTIONS
        ):
            continue
        if any(
            m.matches(expr, m.Name(parameter))
            for _, expr in _shape_args(call)  # type: ignore[arg-type]
        ):
            return call  # type: ignore[return-value]
    return None


def _code(node: cst.CSTNode) -> str:
    text = cst.Module(body=[]).code_for_node(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _same_size(
    index: ModuleIndex, a: cst.BaseExpression, b: cst.BaseExpression, strict: bool
) -> bool:
    """One variable (``same_variable``), or one integer literal (``64``)."""
    if isinstance(a, cst.Integer) and isinstance(b, cst.Integer):
        return a.evaluated_value == b.evaluated_value
    return same_variable(index, a, b, strict=strict)


def _receiver(call: cst.Call) -> cst.BaseExpression:
    """What ``call`` (``x.to(device).view(...)``) reshapes, less the calls that
    keep its rows."""
    return strip_methods(call.func.value, KEEP_ROWS)  # type: ignore[attr-defined]
