"""Model classes of a local module that pad an RNN's output to the longest
sequence of the batch they are handed (``HelperFact.share_padded``).

galsang/BiDAF-pytorch's ``LSTM`` (utils/nn.py) packs its input by length and
unpacks it with ``pad_packed_sequence(x_packed, batch_first=True)``: the output
is as long as the batch's longest sequence, and ``BiDAF`` (model/model.py)
builds its start and end logits over those positions, with a cross-entropy over
them. After migration each process unpacks its share of the batch, padded to
the share's longest sequence: the logits have fewer positions where the share's
longest is shorter than the batch's, the softmax runs over other positions, and
the loss differs from the original's although the runtime collates the global
batch (its input padding is the original's). AM037 (batch-mixing-forward)
reads this fact where a training file that shards a loader builds such a model.

A ``pad_packed_sequence`` call pads to a fixed length where it is given
``total_length`` from anything but a maximum (``total_length=x.size(1)``: the
input's padded length); ``total_length=int(lengths.max())`` is the batch's
longest again. A class pads so when a method of it calls such an unpacking, or
when it builds (or derives from) a local class that does, in its module or
another local module. A function that returns a model does when it builds
such a class.

Static only: ``ast``, nothing is imported or run.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .project_helpers import HelperFacts

#: Unpacking a packed sequence back to a padded batch.
_UNPACK = frozenset({"torch.nn.utils.rnn.pad_packed_sequence"})


def share_padded(
    reader: HelperFacts, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
) -> str:
    """Where the model class (or model-returning function) ``node`` of
    ``reader``'s module pads to its batch's longest sequence, as a phrase for a
    finding (``"`LSTM.forward` unpacks with `pad_packed_sequence` to the
    longest sequence of its batch (utils/nn.py line 54)"``); "" when it does
    not."""
    from .project_draws import class_methods
    from .project_helpers import _own_nodes
    from .project_nodes import built_model_phrase

    if isinstance(node, ast.ClassDef):
        methods = list(class_methods(node).values())
        for method in methods:
            for call in _own_nodes(method):
                if isinstance(call, ast.Call) and _unpacks_to_longest(reader, call):
                    return (
                        f"`{node.name}.{method.name}` unpacks with "
                        "`pad_packed_sequence` to the longest sequence of its "
                        f"batch ({reader.file} line {call.lineno})"
                    )
    else:
        methods = []
    return built_model_phrase(reader, node, methods, lambda fact: fact.share_padded)


def _unpacks_to_longest(reader: HelperFacts, call: ast.Call) -> bool:
    """``pad_packed_sequence(packed, batch_first=True)``, or with
    ``total_length`` taken from a maximum (``int(x_len.max())``)."""
    if reader._dotted(call.func) not in _UNPACK:
        return False
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return False  # `*args` / `**kwargs`: not known
    total = next((k.value for k in call.keywords if k.arg == "total_length"), None)
    if total is None and len(call.args) > 3:
        total = call.args[3]
    if total is None:
        return True
    return any(
        isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Attribute) and n.func.attr in ("max", "amax"))
            or (isinstance(n.func, ast.Name) and n.func.id == "max")
        )
        for n in ast.walk(total)
    )
