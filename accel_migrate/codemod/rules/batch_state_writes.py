"""AM032 batch-state-writes: state that outlives a training step, written from the batch.

## What
Reports, as needs-review, an in-place write into a tensor that is bound outside
the training step and written inside it from values of the step's batch:
``memory.index_copy_(0, index, feats)`` (an instance-discrimination memory bank),
``memory[index] = feats``, ``queue[:, ptr:ptr + n] = keys.T`` (a MoCo-style
queue), ``bank.index_add_(...)``, ``scatter_``, an update in place
(``last.copy_(feats)``, ``stats.mul_(m).add_(x.mean(0))``, through ``.data``
too)... A training step is a loop
that runs a backward and takes its batches from a data loader. Also such a
write into a buffer of a model class of the file (``self.register_buffer(...)``
or a ``torch`` tensor set in ``__init__``) made in its ``forward`` or a method
``forward`` calls, when a training step runs the class: MoCo's
``_dequeue_and_enqueue`` writing ``self.queue[:, ptr:ptr + n] = keys.T``, a
VQ-VAE's EMA codebook statistics (``self.cluster_size.mul_(d).add_(counts)``),
or a queue rebuilt from itself (``self.queue = torch.cat([keys, self.queue])``;
not a value that only replaces the old, as a hidden state); the same for a
model class of a local module (``ModelMoCo`` of a ``model.py``), reported
where the training step runs it (``loss = net(im_1, im_2)``;
``project_state_writes``), and the same of an object of a local module
that is not a model but trains models of its own, where a training step
calls its method (basicsr's ``model.feed_data(train_data)``, whose
``_dequeue_and_enqueue`` refills and shuffles a training-pair pool
``self.queue_lr`` from each batch). Also a tensor bound at module level
(JEM's replay buffer), written from the batch in a training step of a
function. Also such a write
into a parameter of the class (``self.loc = nn.Parameter(...)``): a
data-dependent initialisation, as Glow's ``ActNorm`` sets ``loc`` and ``scale``
from the first batch it sees (``self.loc.data.copy_(-mean)``). And a variable
kept across the steps of a training loop, rebound in the step from itself and
the batch, that the backpropagated loss reads: a running statistic of the
targets (``y_mean = 0.9 * y_mean + 0.1 * y.mean()``), DINO's centre of the
teacher's outputs (not a loop's target, ``images = images.to(device)``, nor a
smoothed loss that only the log reads). And a data-dependent initialisation
before training: a function handed a batch of a data loader taken outside any
loop (``next(iter(train_loader))``) that rewrites a ``weight`` or ``bias`` in
place from something other than itself (LSUV's ``layer.weight.data /=
out.std()``). And a replay buffer a training step fills: a call, in the
step, of a method of an object of the file or of another module that appends
what it is handed to a list another of its methods picks items of
(igebm-pytorch's ``buffer.push(neg_img, neg_id)``, whose ``get`` draws the
next chains' starting points with ``random.choices(self.buffer, k=n)``;
``replay_buffers``). Writes whose
value comes through a collective (``accel.gather``, ``torch.distributed``)
are not reported. Nothing is rewritten.

## Why
After migration each process runs the step on its share of the batch, so it
writes only its share's rows. The tensor is not a parameter: no gradient
averaging keeps the processes' copies equal, so each copy misses the rows the
other processes wrote, and the next steps (a loss against the bank, a kNN
evaluation over it) read values the original never had. A parameter set so is
worse: DDP copies the parameters to every process once, when it wraps the
model, so each process then trains a model of its own.

## Example
```python
# before
for x, index in loader:
    feats = model(x)
    loss = F.cross_entropy(F.linear(feats, memory) / t, index)
    loss.backward()
    optimizer.step()
    memory.index_copy_(0, index, feats.detach())
# after
# (unchanged: reported as needs-review)
```

## Fix safety
Report only: whether a write may be made global depends on what the tensor
means. A parameter set from the batch (the data-dependent initialisations
above) leaves the whole file unchanged: each process would train a model of
its own, which is no numerics difference but a wrong migration. Gather what is written from every process first (``rows =
accel.gather(feats.detach())`` with ``accel.gather(index)``) so each process
writes every row, or keep the state out of the step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..analysis import variable_names
from ..kept_state import _nodes, _StateWrites, kept_state_write
from ..model_methods import stepped_method
from ..patterns import self_attribute
from ..project_state_writes import step_state_write
from ..replay_buffers import buffer_push
from ..rule import Rule
from ..state_write_names import STATE_WRITES
from ..subtrees import findall
from ..trained_models import snippet

if TYPE_CHECKING:
    from ..analysis import ModuleIndex


def defer_to_batch_state_writes(rule: Rule, statement: cst.CSTNode) -> bool:
    """For AM009: ``statement`` (``queue[:, i:j] = feats.T``, which AM009 cannot
    classify) writes a tensor kept across steps, which this rule reports with the
    cause (unless it is not selected: then AM009 reports it as before)."""
    if not rule.context.runs("AM032") or not isinstance(statement, cst.Assign):
        return False
    return any(
        isinstance(target.target, cst.Subscript)
        and isinstance(target.target.value, cst.Name)
        and kept_state_write(
            rule.index,
            statement,
            target.target.value,
            [statement.value, target.target],
            False,
        )
        for target in statement.targets
    )


class BatchStateWrites(Rule):
    code = "AM032"
    name = "batch-state-writes"
    summary = (
        "a tensor kept across steps written from the batch -> reported "
        "(each process writes its share's rows)"
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        pushed = buffer_push(self.index, node) if self.index.loaders else None
        if pushed is not None:
            where, attribute = pushed
            self.report(
                node,
                "needs-review",
                f"{where} keeps what this training step hands it in `{attribute}` "
                "and hands it back in later steps (a replay buffer): after "
                "migration each process keeps only what its own share of the "
                "batch made, so each buffer holds other samples than the "
                "original's, and the inputs drawn from it differ; the losses "
                "will not match the original's step for step",
                if_migrated=True,
            )
            return
        if not (isinstance(func, cst.Attribute) and func.attr.value in STATE_WRITES):
            self._check_imported_model(node)
            return
        if self._chained(node):
            return  # the outer call of `t.mul_(d).add_(x)` reports the chain
        receiver, args = _written(node)
        if isinstance(receiver, cst.Name):
            self._check(node, receiver, args, snippet(node))
        elif self_attribute(receiver) is not None:
            self._check_model_state(node, receiver, args, snippet(node))  # type: ignore[arg-type]
        elif isinstance(receiver, cst.Attribute) and _reads_other(
            self.index, receiver, args
        ):
            self._check_initialisation(node, receiver)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        # `layer.weight.data /= torch.sqrt(out.var())` (LSUV)
        target = node.target
        if isinstance(target, cst.Attribute) and target.attr.value == "data":
            written = _without_data(target)
            if (
                isinstance(written, cst.Attribute)
                and self_attribute(written) is None
                and _reads_other(self.index, written, [node.value])
            ):
                self._check_initialisation(node, written)

    def _check_imported_model(self, node: cst.Call) -> None:
        """A training step runs a model of a local module whose ``forward``
        writes a buffer of its own from its inputs (``project_state_writes``)."""
        found = step_state_write(self.index, node)
        if found is None:
            return
        fact, writes = found
        self.report(
            node,
            "needs-review",
            f"a training step runs a `{fact.name}` of {fact.file} here "
            f"(`{snippet(node)}`), and {writes} from this process's "
            "share of the batch: after migration each process writes it from its "
            + (
                "share only (and DDP hands every process the main process's "
                "buffers at each forward), so the buffer differs from the "
                "original's; gather what is written from every process first "
                "(accel.gather), as MoCo's distributed code does"
                if fact.returns == "model"
                else "share only, into a copy of its own (no collective makes the "
                "copies equal), so what it keeps and hands back in later steps "
                "differs from the original's; gather what is written from every "
                "process first (accel.gather)"
            ),
            if_migrated=True,
        )

    def _check_initialisation(self, node: cst.CSTNode, target: cst.Attribute) -> None:
        """``layer.weight.data /= ...`` in a function that is handed a batch of a
        training loader taken before training (``next(iter(train_loader))``):
        a data-dependent initialisation (LSUV, weight normalisation's init)."""
        if target.attr.value not in _PARAMETER_NAMES:
            return
        function = self.index.enclosing_function(node)
        if function is None:
            return
        for site in self.index.call_sites(function):
            for _, arg in self.index.arguments(site):
                batch = _loader_batch(self.index, arg, 0)
                if batch is None:
                    continue
                self.block(
                    node,
                    f"`{function.name.value}` rewrites `{snippet(target)}` in place "
                    f"and is handed a batch of a data loader taken before training "
                    f"(`{batch}`): a data-dependent initialisation. After migration "
                    "the loader gives each process its share of that batch, so each "
                    "process would initialise its copy of the model from its share, "
                    "and nothing makes the copies equal again (DDP copies the "
                    "parameters once, when it wraps the model): every process would "
                    f"train a different model. {_LEFT_WHOLE}; initialise from the "
                    "whole batch (the dataset itself, not the sharded loader) before "
                    "the model is prepared",
                )
                return

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            written = target.target
            if isinstance(written, cst.Name):
                # `y_mean = 0.9 * y_mean + 0.1 * y.mean()` in the step, read by
                # the loss: a running statistic of the batch kept in a variable
                if _StateWrites(self.index).running(node, written):
                    self.report(
                        node,
                        "needs-review",
                        f"`{written.value}` is kept across training steps, updated "
                        f"here from itself and this process's share of the batch "
                        f"(`{snippet(node)}`), and the loss reads it: each process "
                        f"keeps its own running `{written.value}` of its shares, "
                        "which differs from the original's, and so do the losses; "
                        "compute the update from values gathered from every "
                        "process (accel.gather), or keep it out of the training step",
                        if_migrated=True,
                    )
                continue
            if isinstance(written, cst.Attribute) and self_attribute(written):
                # `self.queue = torch.cat([keys, self.queue])[:, :K]` in forward:
                # an update of what it held (not `self.hidden = h`, which each
                # process keeps for its own rows)
                if any(
                    isinstance(n, cst.Attribute) and n.deep_equals(written)
                    for n in findall(node.value, m.Attribute())
                ):
                    self._check_model_state(node, written, [node.value], "")
                continue
            if not isinstance(written, cst.Subscript):
                continue
            tensor = _without_data(written.value)
            if isinstance(tensor, cst.Name):
                self._check(node, tensor, [node.value, written], "")
            elif self_attribute(tensor) is not None:
                self._check_model_state(
                    node, tensor, [node.value, written], ""  # type: ignore[arg-type]
                )

    def _chained(self, call: cst.Call) -> bool:
        """Is ``call`` the receiver of another in-place write (``t.mul_(d)`` of
        ``t.mul_(d).add_(x)``)?"""
        attribute = self.index.parent(call)
        outer = self.index.parent(attribute) if attribute is not None else None
        return (
            isinstance(attribute, cst.Attribute)
            and attribute.value is call
            and isinstance(outer, cst.Call)
            and outer.func is attribute
            and attribute.attr.value in STATE_WRITES
        )

    def _check_model_state(
        self, node: cst.CSTNode, target: cst.Attribute, parts: object, text: str
    ) -> None:
        """A write into a buffer of a model class from its ``forward`` (or a
        method ``forward`` calls), when a training step runs the class: MoCo's
        ``self.queue[:, ptr:ptr + n] = keys.T`` in ``_dequeue_and_enqueue``."""
        found = stepped_method(self.index, node)
        if found is None:
            return
        cls, function = found
        name = target.attr.value
        parameter = _parameter(self.index, cls, name)
        if not parameter and not _state_tensor(cls, name):
            return
        if not any(
            n.value != "self" for part in _nodes(parts) for n in variable_names(part)
        ):
            return  # a constant written (`self.count[0] = 0`)
        if _StateWrites(self.index)._through_collective(node):
            return
        shown = text or snippet(node)
        if parameter:
            self.block(
                node,
                f"`{cls.name.value}.{function.name.value}` sets the parameter "
                f"`self.{name}` from this process's share of the batch (`{shown}`: "
                f"a data-dependent initialisation), and a training step runs a "
                f"`{cls.name.value}`: after migration each process would set it "
                "from its share only, and nothing makes the copies equal again (DDP "
                "copies the parameters once, when it wraps the model), so every "
                f"process would train a different model. {_LEFT_WHOLE}; run the "
                "initialisation on the whole first batch before the model is "
                "prepared, or gather its inputs from every process (accel.gather)",
            )
            return
        self.report(
            node,
            "needs-review",
            f"`{cls.name.value}.{function.name.value}` writes the buffer "
            f"`self.{name}` from this process's share of the batch (`{shown}`), "
            f"and a training step runs a `{cls.name.value}`: after migration each "
            "process writes it from its share only (and DDP hands every process "
            "the main process's buffers at each forward), so the buffer differs "
            "from the original's; gather what is written from every process "
            "first (accel.gather), as MoCo's distributed code does",
            if_migrated=True,
        )

    def _check(
        self,
        node: cst.CSTNode,
        name: cst.Name,
        parts: object,
        text: str,
    ) -> None:
        if not kept_state_write(self.index, node, name, parts, bool(text)):
            return
        shown = text or snippet(node)
        self.report(
            node,
            "needs-review",
            f"`{name.value}` is kept across training steps and written here from "
            f"this process's share of the batch (`{shown}`): each process writes "
            f"it from its share only (its rows, or its share's values), so its copy "
            f"of `{name.value}` misses what the other processes write and differs "
            "from the original's; gather "
            "what is written from every process first (accel.gather), or keep "
            "the write out of the training step",
            if_migrated=True,
        )


def _without_data(node: cst.BaseExpression) -> cst.BaseExpression:
    """``memory.data`` is ``memory`` (its storage)."""
    if isinstance(node, cst.Attribute) and node.attr.value == "data":
        return node.value
    return node


def _written(call: cst.Call) -> tuple[cst.BaseExpression, list[cst.CSTNode]]:
    """The tensor a chain of in-place writes writes (``t`` of
    ``t.data[:n].mul_(d).add_(x)``), and every argument of the chain."""
    args: list[cst.CSTNode] = list(call.args)
    receiver = call.func.value  # type: ignore[attr-defined]
    while True:
        if (
            isinstance(receiver, cst.Call)
            and isinstance(receiver.func, cst.Attribute)
            and receiver.func.attr.value in STATE_WRITES
        ):
            args += receiver.args
            receiver = receiver.func.value
        elif isinstance(receiver, cst.Subscript):
            args.append(receiver)  # the rows picked (`queue[:, ptr:ptr + n]`)
            receiver = receiver.value
        else:
            break
    return _without_data(receiver), args


def _state_tensor(cls: cst.ClassDef, name: str) -> bool:
    """Is ``self.<name>`` a buffer of ``cls`` (``self.register_buffer("name",
    ...)``) or a tensor it builds (``self.name = torch.zeros(...)``)?"""
    for call in findall(cls, m.Call(func=m.Attribute(attr=m.Name("register_buffer")))):
        args = call.args  # type: ignore[attr-defined]
        if args and m.matches(args[0].value, m.SimpleString()):
            if args[0].value.value.strip("\"'") == name:  # type: ignore[attr-defined]
                return True
    for assign in findall(cls, m.Assign()):
        for target in assign.targets:  # type: ignore[attr-defined]
            if self_attribute(target.target) == name and m.matches(
                assign.value,  # type: ignore[attr-defined]
                m.Call(func=m.Attribute(value=m.Name("torch"))),
            ):
                return True
    return False


#: A parameter each process would set differently is no numerics difference
#: but a different model per process: the setup is not migrated.
_LEFT_WHOLE = (
    "The file is left unchanged: a training setup is migrated whole or not at all"
)

#: What makes a parameter of a module (``nn.Parameter(...)``).
_PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def _parameter(index: ModuleIndex, cls: cst.ClassDef, name: str) -> bool:
    """Is ``self.<name>`` a parameter ``cls`` makes (``self.loc =
    nn.Parameter(torch.zeros(1, c, 1, 1))``, ``self.register_parameter("loc",
    nn.Parameter(...))``): what a Glow ``ActNorm`` sets from its first batch?"""
    for call in findall(cls, m.Call()):
        if not index.qualnames(call.func) & _PARAMETERS:  # type: ignore[attr-defined]
            continue
        parent = index.parent(call)
        if isinstance(parent, cst.Assign) and any(
            self_attribute(t.target) == name for t in parent.targets
        ):
            return True
        arg = index.parent(parent) if isinstance(parent, cst.Arg) else None
        if (
            isinstance(arg, cst.Call)
            and m.matches(arg.func, m.Attribute(attr=m.Name("register_parameter")))
            and arg.args
            and m.matches(arg.args[0].value, m.SimpleString())
            and arg.args[0].value.value.strip("\"'") == name  # type: ignore[attr-defined]
        ):
            return True
    return False


#: The attributes a data-dependent initialisation rewrites.
_PARAMETER_NAMES = frozenset({"weight", "bias", "weight_g", "weight_v", "scale", "loc"})
#: Calls that keep the batch they are applied to (``batch.to(device)``).
_SAME_BATCH = frozenset({"to", "cuda", "float", "double", "half", "contiguous"})


def _reads_other(index: ModuleIndex, target: cst.Attribute, parts: object) -> bool:
    """Does what is written into ``target`` read a variable other than the one
    ``target`` hangs from, an imported module or a function of the file (not
    ``layer.weight.data.copy_(torch.linalg.qr(layer.weight)[0])``)?"""
    root: cst.BaseExpression = target
    while isinstance(root, cst.Attribute):
        root = root.value
    name = root.value if isinstance(root, cst.Name) else None
    return any(
        n.value != name
        and not index.imported_once(n.value)
        and index.local_function(n) is None
        for part in _nodes(parts)
        for n in variable_names(part)
    )


def _loader_batch(
    index: ModuleIndex, expr: cst.BaseExpression, depth: int
) -> str | None:
    """``expr`` is (a part of) a batch taken from a data loader outside any loop
    (``next(iter(train_loader))``, ``init_batch`` unpacked from it, its
    ``.to(device)``): the spelling of the ``next`` call, or None."""
    if depth > 4:
        return None
    while True:
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in _SAME_BATCH
        ):
            expr = expr.func.value
        elif isinstance(expr, cst.Subscript):
            expr = expr.value
        else:
            break
    if isinstance(expr, cst.Call):
        if not index.qualnames(expr.func) & {"builtins.next"} or not expr.args:
            return None
        if index.loop_paths(expr) != [()]:
            return None  # taken in a loop: a step's batch, not a one-off
        source = expr.args[0].value
        if isinstance(source, cst.Call) and index.qualnames(source.func) & {
            "builtins.iter"
        }:
            source = source.args[0].value if source.args else source
        key = index.key(source)
        return snippet(expr) if key is not None and key in index.loaders else None
    key = index.key(expr)
    if key is None:
        return None
    for value in index.values.get(key, []):
        if value is not None:
            found = _loader_batch(index, value, depth + 1)
            if found:
                return found
    for value, _, _ in index.unpacked.get(key, []):
        found = _loader_batch(index, value, depth + 1)
        if found:
            return found
    return None
