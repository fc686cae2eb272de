"""Model classes of a local module whose forward reduces over the samples of its
batch (``HelperFact.batch_mixing``).

cedrickchee/capsule-net-pytorch's ``CapsuleLayer.routing`` (capsule_layer.py),
which ``forward`` runs, updates the routing logits with the agreement averaged
over the batch (``.mean(dim=0, keepdim=True)``); ``Net`` (model.py) builds it
as ``self.digits``; the script that trains it only writes ``model = Net(...)``.
AM037 (batch-mixing-forward) reads this fact where a training file that shards
a loader builds such a model, as it reads the forward of a model class of the
file itself: after migration each process reduces over its share of the batch.

A class mixes its batch when ``forward`` (or a method it calls on ``self``,
transitively) reduces over dimension 0 (``mean``, ``sum``, ``std``, ... with
``dim=0``, a tuple holding 0, or 0 as the dimension argument; not a tensor of
the model itself, ``self.weight.norm(dim=0)``, nor one stacked along a new
first dimension, ``torch.stack([a, b]).sum(0)``), or multiplies matrices over
dimension 0 (Barlow Twins' cross-correlation ``bn(z1).T @ bn(z2)``:
``batch_contractions``), or sets rows of its batch against rows of its batch
(``log_density(zs.view(B, 1, D), mu.view(1, B, D))``, ``z.unsqueeze(1) -
z.unsqueeze(0)``; not against its own tensors, ``self.centers.unsqueeze(0)``:
``batch_pairs``), or when it builds (or derives
from) a local class that does, in its module or another local module. A
function that returns a model does when it builds such a class. A subclass
of torch's BatchNorm with a ``forward`` of its own mixes its batch too (MoCo's
``SplitBatchNorm``, built through ``norm_layer=partial(SplitBatchNorm, ...)``):
the runtime cannot make it normalise by the global batch and refuses it at
its first forward at more than one process; this names it before the run.

Static only: ``ast``, nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .project_helpers import HelperFacts

#: Methods (and ``torch.`` functions) that reduce a tensor over a dimension.
REDUCTIONS = frozenset(
    {
        "amax",
        "amin",
        "log_softmax",
        "logsumexp",
        "max",
        "mean",
        "median",
        "min",
        "norm",
        "prod",
        "softmax",
        "std",
        "sum",
        "var",
    }
)


def batch_mixing(
    reader: HelperFacts, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
) -> str:
    """Where the model class (or model-returning function) ``node`` of
    ``reader``'s module reduces over its batch, as a phrase for a finding
    (``"`CapsuleLayer.routing` reduces over dimension 0 (`.mean` over dim 0,
    capsule_layer.py line 61)"``); "" when it does not."""
    from .batch_contractions import contracts_batch_ast
    from .batch_pairs import batch_names, paired_rows
    from .project_draws import class_methods
    from .project_helpers import _own_nodes
    from .project_nodes import built_model_phrase
    from .stochastic_layers import _forward_methods

    if isinstance(node, ast.ClassDef):
        methods = list(class_methods(node).values())
        own = unsynced_batchnorm(reader, node)
        if own:
            return own
        for method in _forward_methods(methods):
            records = record_values(_own_nodes(method))
            names = batch_names(method)
            for call in _own_nodes(method):
                if isinstance(call, ast.Call) and _reduces_first(reader, call, records):
                    assert isinstance(call.func, ast.Attribute)
                    return (
                        f"`{node.name}.{method.name}` reduces over dimension 0 "
                        f"(`.{call.func.attr}` over dim 0, {reader.file} line "
                        f"{call.lineno})"
                    )
                paired = paired_rows(call, names)
                if paired:
                    return (
                        f"`{node.name}.{method.name}` sets rows of its batch against "
                        f"rows of its batch ({paired}: every sample compared with "
                        f"every other, {reader.file} line {call.lineno})"
                    )
                product = contracts_batch_ast(call, reader._dotted)
                if product:
                    return (
                        f"`{node.name}.{method.name}` reduces over dimension 0 "
                        f"(`{product}` sums over the batch's samples, "
                        f"{reader.file} line {call.lineno})"
                    )
    else:
        methods = []
    return built_model_phrase(reader, node, methods, lambda fact: fact.batch_mixing)


#: torch's BatchNorm classes, which the runtime converts to normalise by the
#: global batch only where a subclass keeps their ``forward``.
BATCHNORM_BASES = frozenset(
    {
        "torch.nn.BatchNorm1d",
        "torch.nn.BatchNorm2d",
        "torch.nn.BatchNorm3d",
        "torch.nn.modules.batchnorm.BatchNorm1d",
        "torch.nn.modules.batchnorm.BatchNorm2d",
        "torch.nn.modules.batchnorm.BatchNorm3d",
        "torch.nn.modules.batchnorm._BatchNorm",
    }
)


def unsynced_batchnorm(reader: HelperFacts, node: ast.ClassDef) -> str:
    """A subclass of torch's BatchNorm with a ``forward`` of its own (MoCo's
    ``SplitBatchNorm``, which folds the batch into groups), as a phrase; "".
    It normalises by the statistics of the batch it is handed, and the runtime
    (``runtime/sync_batchnorm``) cannot convert it to the global batch's: in
    train mode at more than one process it refuses it at its first forward."""
    from .project_draws import class_methods

    forward = class_methods(node).get("forward")
    if forward is None or not any(
        reader._dotted(base) in BATCHNORM_BASES for base in node.bases
    ):
        return ""
    return (
        f"`{node.name}` ({reader.file} line {node.lineno}) is a BatchNorm layer "
        "with a forward of its own, which normalises by the statistics of the "
        "batch it is handed; the runtime converts only BatchNorm layers that keep "
        "torch's forward to the global batch's statistics, and stops at this "
        "one's first forward in train mode (UnsyncedBatchNormError) unless "
        "launched with --no-sync-batchnorm"
    )


def record_values(nodes: Iterable[ast.AST]) -> frozenset[str]:
    """Names bound, in the body of a ``for`` loop, from a string-keyed item of
    its target: ``for t in targets: iou = box_iou(t["boxes"], anchors)``. The
    loop walks records one at a time (a detector's per-image target dicts), so
    dimension 0 of such a value is the record's (its boxes), not the batch's."""
    found: set[str] = set()
    for loop in nodes:
        if not isinstance(loop, ast.For):
            continue
        items = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
        for statement in ast.walk(loop):
            if not isinstance(statement, ast.Assign):
                continue
            if _reads_record(statement.value, items) or any(
                isinstance(n, ast.Name) and n.id in found
                for n in ast.walk(statement.value)
            ):
                for target in statement.targets:
                    found.update(
                        n.id for n in ast.walk(target) if isinstance(n, ast.Name)
                    )
    return frozenset(found)


def _reads_record(value: ast.AST, items: set[str]) -> bool:
    """Does ``value`` read ``t["key"]`` of a loop target ``t``?"""
    return any(
        isinstance(n, ast.Subscript)
        and isinstance(n.value, ast.Name)
        and n.value.id in items
        and isinstance(n.slice, ast.Constant)
        and isinstance(n.slice.value, str)
        for n in ast.walk(value)
    )


def _reduces_first(
    reader: HelperFacts, call: ast.Call, records: frozenset[str] = frozenset()
) -> bool:
    """``x.mean(dim=0)``, ``torch.sum(x, 0)``, ``x.var(dim=(0, 2))``: a reduction
    over dimension 0 of a value that is not the model's own tensor, nor one
    of a record a loop walks (``record_values``: ``iou.max(0)`` of a boxes by
    anchors matrix built from ``t["boxes"]`` in ``for t in targets``)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in REDUCTIONS:
        return False
    name = func.attr
    dotted = reader._dotted(func)
    function_form = dotted in (f"torch.{name}", f"torch.nn.functional.{name}")
    position = (1 if function_form else 0) + (name == "norm")
    dim = None
    for keyword in call.keywords:
        if keyword.arg in ("dim", "axis"):
            dim = keyword.value
    if dim is None and not any(isinstance(a, ast.Starred) for a in call.args):
        dim = call.args[position] if len(call.args) > position else None
    if not _over_first(dim):
        return False
    receiver = call.args[0] if function_form and call.args else func.value
    root = receiver
    while isinstance(root, ast.Attribute):
        root = root.value
    if root is not receiver and isinstance(root, ast.Name) and root.id == "self":
        return False  # `self.weight.norm(dim=0)`: the model's own tensor
    if isinstance(receiver, ast.Name) and receiver.id in records:
        return False
    return not (
        isinstance(receiver, ast.Call)
        and reader._dotted(receiver.func) in ("torch.stack", "torch.cat")
    )


def _over_first(dim: ast.expr | None) -> bool:
    if isinstance(dim, (ast.Tuple, ast.List)):
        return any(_over_first(e) for e in dim.elts)
    return isinstance(dim, ast.Constant) and dim.value == 0 and type(dim.value) is int
