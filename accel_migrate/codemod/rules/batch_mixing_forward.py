"""AM037 batch-mixing-forward: a model's forward that reduces over the samples of its batch is reported.

## What
Reports, as needs-review, a reduction over dimension 0 (``y.mean(dim=0)``,
``x.std(0)``, ``torch.var(h, 0)``, ``x.var(dim=(0, 2))``; also ``sum``, ``max``, ``min``, ``amax``,
``amin``, ``median``, ``logsumexp``, ``norm``, ``prod``, ``softmax``,
``log_softmax``) in the ``forward`` of a model class defined in the file, or in
a method ``forward`` calls on ``self``, when a training step calls an instance
of that class (or of a class that builds it): the minibatch standard-deviation
layer of ProGAN and StyleGAN discriminators, a head that compares each sample
with the batch's mean feature, a normalisation layer of the project's own.
Not a reduction of the model's own tensors (``self.weight.norm(dim=0)``), nor of
values stacked along a new first dimension (``torch.stack([a, b]).sum(0)``), nor
of a value built from one record a loop of the method walks (the torchvision
detection reference's ``for t in targets: iou = box_iou(t["boxes"], anchors);
best, which = iou.max(0)``: dimension 0 is the image's boxes).
Reported too, a matrix product over dimension 0 there: Barlow Twins'
cross-correlation ``self.bn(z1).T @ self.bn(z2)``, ``torch.mm(x.t(), x)``,
``torch.einsum("bi,bj->ij", a, b)`` (``batch_contractions.py``), which sums
the batch's samples into a features-by-features matrix.
Reported too, rows of the batch set against rows of the batch there (two
operands of ``-``, ``+``, ``*``, ``/`` or two arguments of one call, one
broadcast along a new dimension 1 and the other along a new dimension 0:
``log_density(zs.view(B, 1, D), mu.view(1, B, D), logvar.view(1, B, D))``
then a logsumexp over dimension 1, beta-TCVAE's minibatch stratified sampling
computed in the model's forward; ``z.unsqueeze(1) - z.unsqueeze(0)``,
``z[:, None] - z[None]``), both computed from the method's arguments
(``batch_pairs.py``): every sample compared with every other. Not a distance
of the batch to the model's own tensors (``x.unsqueeze(1) -
self.centers.unsqueeze(0)``: prototypes, centres), nor to a value built only
from the batch's shape (``torch.arange(x.size(0)).unsqueeze(0)``).
A model of another local module is read the same way (``HelperFact.batch_mixing``,
``batch_mixing_models.py``), with the classes it builds in any local module: the
finding is at the call that builds it (``model = Net(...)`` whose
``self.digits = CapsuleLayer(...)`` in capsule_layer.py averages its routing
agreement over the batch), in a file that shards a loader, or that hands its
models to a trainer of another file of the batch that trains them there (ProGAN's
``ProGAN(gen, dis)`` of gan.py, whose discriminator ends with a minibatch
standard-deviation layer). A BatchNorm subclass of a local module with a
``forward`` of its own, which such a model builds (also through
``functools.partial``: MoCo's ``norm_layer=partial(SplitBatchNorm,
num_splits=8)``), is named so too: the runtime cannot convert it to normalise
by the global batch and stops at its first forward in train mode
(``UnsyncedBatchNormError``); the finding says so before the run.

Also, in a training step, a matrix whose rows and columns are both picked by
the step's batch (``adj[batch][:, batch]``, ``adj[batch, :][:, batch]``,
``adj[batch[:, None], batch]``, ``adj[np.ix_(batch, batch)]``): the induced
subgraph of a Cluster-GCN or GraphSAINT-style node batch, which a graph
convolution then mixes the batch's samples with (and whose degrees normalise it).

Also, in a training step, a tensor of the step's batch moved along dimension
0: ``torch.roll(images, n)`` without ``dims`` (the flattened batch rolls across
its samples) or over dimension 0, ``x.flip(0)``, ``torch.flip(x, [0])``
(PatrickHua/SimSiam's stream fork pairs each frame with the one before it,
``images1 = torch.roll(images, args.n_offset)``): each process moves only its
own share's values, so the samples at the ends of each share are paired with
others than the original's. A dimension that may be 0 is reported too, with
the condition in the finding: a negative one, ``-k``, is dimension 0 of a
``k``-dimensional tensor (``torch.roll(images, 1, dims=-4)`` of a batch of
images), and one the code does not give (``dims=args.dim``, a parameter)
cannot be proven not the batch's; a name bound only to integers (``DIM =
2``) is read as them.

A model of a local module whose forward (or a layer class it builds) unpacks
an RNN's output with ``pad_packed_sequence`` to the longest sequence of its
batch (no ``total_length``, or one taken from ``lengths.max()``: BiDAF-pytorch's
``LSTM``) is reported at the call that builds it the same way
(``HelperFact.share_padded``, ``share_padding.py``): each process pads to its
share's longest, and span logits over the positions change their softmax.

## Why
After migration each process runs the model on its share of the batch. A
statistic over dimension 0 is then the share's, not the batch's the original
computed it over, and every sample's output depends on which samples share its
process: the losses differ from the original's, by little or by much, with no
error. The runtime makes torch's BatchNorm layers normalise by the global batch
(``docs/runtime.md``); a layer of the project's own is not changed. A
batch-by-batch matrix built on each process holds only the pairs of its share:
the edges between samples of different processes are lost.

## Example
```python
# before
class MinibatchStdDev(nn.Module):
    def forward(self, x):
        y = x.view(4, -1, x.size(1))
        y = torch.sqrt((y - y.mean(dim=0)).pow(2).mean(dim=0) + 1e-8)
        return torch.cat([x, y.mean(1, keepdim=True).repeat(4, 1)], dim=1)
# after
# (unchanged: reported as needs-review)
```

## Fix safety
Report only. Where dimension 0 of that value is not the batch (a time-first
sequence model's ``h.mean(0)`` over time steps), the forward is per-sample and
the finding can be left with ``# accel-migrate: skip[AM037]``. Otherwise keep
each process's batch the original's size (``launch --batch-mode per-device``,
which trains with a larger global batch) or compute the statistic over the
global batch with ``accel.gather``.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from .. import python_ast
from ..batch_contractions import contracts_batch_cst
from ..batch_mixing_models import REDUCTIONS
from ..batch_pairs import method_batch_names, reads_values, view_axis
from ..first_dimension import (
    dim_argument,
    moving_samples,
    not_the_batch,
    of_a_record,
    over_first,
    paired_index,
)
from ..model_methods import reads_step_value, stepped_method, training_step
from ..parameterless_modules import parameterless_class
from ..reduction.pairwise import _broadcast_axis
from ..reduction.placement import code
from ..rule import Rule
from ..subtrees import findall
from ..trained_models import snippet

_REDUCTIONS = REDUCTIONS


def _axis(expr: cst.BaseExpression) -> int | None:
    """0 for ``b.unsqueeze(0)``, ``b[None]``, ``b.view(1, B, D)``; 1 for
    ``a.unsqueeze(1)``, ``a[:, None]``, ``a.view(B, 1, D)``; None otherwise."""
    axis = _broadcast_axis(expr)
    if axis is not None:
        return axis
    while m.matches(
        expr, m.Call(func=m.Attribute(attr=m.Name("expand") | m.Name("repeat")))
    ):
        expr = expr.func.value  # type: ignore[attr-defined]
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return None
    return view_axis(
        expr.func.attr.value,
        [a.value for a in expr.args if not a.star and a.keyword is None],
        lambda a: m.matches(a, m.Integer("1")),
    )


def _reads(expr: cst.BaseExpression, names: frozenset[str]) -> bool:
    """Does ``expr`` read a value of one of ``names`` (``batch_pairs``)?"""
    try:
        tree = python_ast.parse(f"({code(expr)})", mode="eval")
    except SyntaxError:
        return False
    return reads_values(tree.body, names)


class BatchMixingForward(Rule):
    code = "AM037"
    name = "batch-mixing-forward"
    summary = (
        "a reduction over dimension 0 in a trained model's forward -> reported "
        "(each process reduces over its own share of the batch)"
    )

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self._contraction(node)
        self._paired_rows(node)

    def _paired_rows(self, node: cst.BinaryOperation | cst.Call) -> None:
        """``zs.view(B, 1, D)`` against ``mu.view(1, B, D)`` (two arguments of
        one call, or the operands of ``-``, ``+``, ``*``, ``/``) in a stepped
        forward, both computed from the method's arguments (``batch_pairs``)."""
        if isinstance(node, cst.BinaryOperation):
            operands = [node.left, node.right]
        else:
            operands = [a.value for a in node.args if not a.star]
        axes = [_axis(o) for o in operands]
        if not (0 in axes and 1 in axes):
            return
        found = stepped_method(self.index, node)
        if found is None or parameterless_class(self.index, found[0], False):
            # a loss module (`ContrastiveLoss.forward`): no model is prepared
            # from it, and AM007 reports the comparison at its backward
            return
        names = self._batch_names(found[1])
        pairs = list(zip(axes, operands, strict=True))
        rows = [o for a, o in pairs if a == 1 and _reads(o, names)]
        columns = [o for a, o in pairs if a == 0 and _reads(o, names)]
        if not rows or not columns:
            return
        cls, method = found[0].name.value, found[1].name.value
        self.report(
            node,
            "needs-review",
            f"`{cls}.{method}` sets rows of its batch against rows of its batch "
            f"(`{snippet(rows[0])}` against `{snippet(columns[0])}`: every sample "
            f"compared with every other, a batch-by-batch matrix), and a training "
            f"step runs a `{cls}`: after migration each process compares only the "
            "samples of its own share of the batch, so what is computed from the "
            "matrix (a logsumexp, a softmax or a sum over the batch's samples) "
            "and the losses "
            "will not match the original's (keep each process's batch the original's size "
            "with launch --batch-mode per-device, or gather the other side over "
            "the processes; skip this if dimension 0 is not the batch here)",
            if_migrated=True,
        )

    def _batch_names(self, function: cst.FunctionDef) -> frozenset[str]:
        """``batch_pairs.batch_names`` of a method, read once per method."""
        cache = self.__dict__.setdefault("_names_cache", {})
        held = cache.get(id(function))
        if held is None or held[0] is not function:
            held = cache[id(function)] = (function, method_batch_names(code(function)))
        return held[1]

    def _contraction(self, node: cst.BinaryOperation | cst.Call) -> None:
        """``bn(z1).T @ bn(z2)``, ``torch.mm(x.t(), x)``: a product over
        dimension 0 in a stepped forward (``batch_contractions``)."""
        if not contracts_batch_cst(node, self.qualnames):
            return
        place = self._stepped_forward(node)
        if place is None:
            return
        cls, method = place
        self.report(
            node,
            "needs-review",
            f"`{cls}.{method}` multiplies matrices over dimension 0 "
            f"(`{snippet(node)}` sums over the batch's samples: a "
            "cross-correlation or covariance of the batch), and a training step "
            f"runs a `{cls}`: after migration each process sums over its own "
            "share of the batch, not the batch the original summed over, so the "
            "losses will not match the original's (sum the matrix over the "
            "processes, as a distributed run does with all_reduce, or skip this "
            "if dimension 0 is not the batch here)",
            if_migrated=True,
        )

    def visit_Call(self, node: cst.Call) -> None:
        self._batch_mixing_model(node)
        self._share_padded_model(node)
        self._contraction(node)
        self._paired_rows(node)
        self._moved_samples(node)
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in _REDUCTIONS:
            return
        name = func.attr.value
        names = self.qualnames(func)
        function_form = bool(names & {f"torch.{name}", f"torch.nn.functional.{name}"})
        # `x.norm(p, dim)`: its first argument is the order, not the dimension
        position = (1 if function_form else 0) + (name == "norm")
        if not over_first(dim_argument(node, position)):
            return
        receiver = node.args[0].value if function_form and node.args else func.value
        if not_the_batch(receiver, self.qualnames):
            return
        found = stepped_method(self.index, node)
        if found is None or of_a_record(receiver, found[1]):
            return
        cls, method = found[0].name.value, found[1].name.value
        self.report(
            node,
            "needs-review",
            f"`{cls}.{method}` reduces over dimension 0 (`.{func.attr.value}` over "
            f"dim 0), and a training step runs a `{cls}`: after migration each "
            "process reduces over its own share of the batch, not the batch the "
            "original reduced over, so the losses will not match the original's "
            "(if dimension 0 is not the batch here, this can be skipped)",
            if_migrated=True,
        )

    def _batch_mixing_model(self, node: cst.Call) -> None:
        """``model = Net(...)`` (or ``build_model(cfg)``) of a local module whose
        model reduces over its batch in ``forward`` (``HelperFact.batch_mixing``:
        a class it builds in another module, CapsNet's routing), in a file that
        shards a loader."""
        fact = self.index.helper(node.func)
        if fact is None or fact.returns != "model" or not fact.batch_mixing:
            return
        if not (self.index.loaders or self._hands_batch_trainer):
            return
        self.report(
            node,
            "needs-review",
            f"builds {fact.where}, in which {fact.batch_mixing}: after migration "
            "each process reduces over its own share of the batch, not the batch "
            "the original reduced over, so the losses will not match the "
            "original's (if dimension 0 is not the batch there, this can be "
            "skipped)",
            if_migrated=True,
        )

    @cached_property
    def _hands_batch_trainer(self) -> bool:
        """Does the file hand what it builds to a trainer of another file of
        this batch that trains it there, sharding its loaders
        (``HelperFact.trains`` and ``batch_migrated``: ProGAN's
        ``ProGAN(gen, dis).train(dataset, ...)``)? Its models then train on
        each process's share of the batch, though this file shards none."""
        for call in self.index.calls:
            fact = self.index.helper(call.func)
            if fact is not None and fact.trains and fact.batch_migrated:
                return True
        return False

    def _share_padded_model(self, node: cst.Call) -> None:
        """``model = BiDAF(...)`` of a local module whose model (or a layer class
        it builds) unpacks an RNN's output to its batch's longest sequence
        (``HelperFact.share_padded``), in a file that shards a loader."""
        fact = self.index.helper(node.func)
        if fact is None or fact.returns != "model" or not fact.share_padded:
            return
        if not (self.index.loaders or self._hands_batch_trainer):
            return
        self.report(
            node,
            "needs-review",
            f"builds {fact.where}, in which {fact.share_padded}: after migration "
            "each process unpacks its share of the batch, padded to the share's "
            "longest sequence, not the batch's, so where the model or the loss "
            "reads the padded positions (a softmax or cross-entropy over sequence "
            "positions, as span start/end logits do) the losses will not match "
            "the original's; pass total_length=<the input's padded length> "
            "(x.size(1)) to pad_packed_sequence",
            if_migrated=True,
        )

    def visit_Subscript(self, node: cst.Subscript) -> None:
        index = paired_index(node, self.qualnames)
        if index is None:
            return
        steps = [p for p in self.index.loop_paths(node) if training_step(self.index, p)]
        if not steps or not reads_step_value(self.index, index, steps[0][0]):
            return
        shown = snippet(node)
        self.report(
            node,
            "needs-review",
            f"`{shown}` pairs the samples of this step's batch with each other (a "
            "batch-by-batch matrix: a graph's induced subgraph, a mask between "
            "samples): after migration each process builds it over its own share "
            "of the batch and loses the pairs across processes, so what is "
            "computed from it (a graph convolution over the subgraph, its "
            "degrees) differs from the original's",
            if_migrated=True,
        )

    def _moved_samples(self, node: cst.Call) -> None:
        """``torch.roll(images, n)`` (no ``dims``: the batch is flattened) or
        over dimension 0, ``x.flip(0)``, of a value of a training step's batch:
        PatrickHua/SimSiam's stream fork pairs each frame with the one before
        it, ``images1 = torch.roll(images, args.n_offset)``."""
        found = moving_samples(node, self.qualnames, self._dim_values)
        if found is None:
            return
        receiver, condition = found
        steps = [p for p in self.index.loop_paths(node) if training_step(self.index, p)]
        if not steps or not reads_step_value(self.index, receiver, steps[0][0]):
            return
        if self._unread(node):
            return
        self.report(
            node,
            "needs-review",
            f"`{snippet(node)}` moves values between the samples of this step's "
            "batch (a roll without dims rolls the flattened batch; over dimension "
            "0, or a flip of it, it pairs each sample with another): after "
            "migration each process does it to its own share of the batch, so "
            "the samples at the ends of each share get other values than the "
            "original's and the losses will not match (do it where the whole "
            "batch is, before the loader shards it: in the dataset or a "
            "collate_fn, or skip this if dimension 0 is not the batch here)"
            + condition,
            if_migrated=True,
        )

    def _dim_values(self, node: cst.BaseExpression) -> list[int] | None:
        """The dimensions ``node`` may hold: an integer, a negated one, or a
        name whose every binding is a plain assignment of those; None when
        that cannot be read from the code (a parameter, an option, a call)."""
        if isinstance(node, cst.Integer):
            return [int(node.value, 0)]
        if m.matches(
            node, m.UnaryOperation(operator=m.Minus(), expression=m.Integer())
        ):
            return [-int(node.expression.value, 0)]  # type: ignore[attr-defined]
        if isinstance(node, (cst.Tuple, cst.List)):
            values: list[int] = []
            for element in node.elements:
                inner = (
                    None
                    if isinstance(element, cst.StarredElement)
                    else self._dim_values(element.value)
                )
                if inner is None:
                    return None
                values.extend(inner)
            return values
        if isinstance(node, cst.Name):
            bindings = self.plain_assignments(node)
            if not bindings:
                return None
            values = []
            for _, value in bindings:
                inner = None if value is node else self._dim_values(value)
                if inner is None:
                    return None
                values.extend(inner)
            return values
        return None

    def _unread(self, call: cst.Call) -> bool:
        """Is ``call`` the value of ``y = y.flip(0)`` at the end of a loop's
        body that binds ``y`` again, with no statement after it reading ``y``?
        Nothing computed from the moved samples then reaches a loss."""
        statement = self.index.parent(call)
        line = self.index.parent(statement) if statement is not None else None
        if not (
            m.matches(statement, m.Assign(targets=[m.AssignTarget(target=m.Name())]))
            and isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
        ):
            return False
        name = statement.targets[0].target.value  # type: ignore[union-attr]
        block = self.index.parent(line)
        loop = self.index.parent(block) if block is not None else None
        if not isinstance(block, cst.IndentedBlock) or not isinstance(loop, cst.For):
            return False
        after = list(block.body)[list(block.body).index(line) + 1 :]
        return not any(
            n.value == name for s in after for n in findall(s, m.Name())
        ) and any(n.value == name for n in findall(loop.target, m.Name()))

    def _stepped_forward(self, node: cst.Call) -> tuple[str, str] | None:
        found = stepped_method(self.index, node)
        return (found[0].name.value, found[1].name.value) if found else None
