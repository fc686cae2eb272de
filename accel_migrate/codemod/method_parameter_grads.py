"""Methods of a model class that differentiate what they are handed with
respect to the model's own parameters (``HelperFact.parameter_grads``).

dome272/VQGAN-pytorch's ``VQGAN.calculate_lambda(perceptual_loss, gan_loss)``
takes ``torch.autograd.grad(perceptual_loss, last_layer_weight)`` and the same
of the GAN loss, where ``last_layer_weight = self.decoder.model[-1].weight``,
and weighs the GAN loss by the ratio of their norms. A training step that hands
it its losses gets, after migration, the gradients of each process's share of
the batch: nothing averages them (DDP averages only what a backward accumulates
into ``.grad``), so the weight, and the loss it weighs, differ from the
original's on every process. AM040 reports the call in the training step.

Inputs count as the model's parameters when they read ``self`` (also through
local names the method binds) and name a ``.weight`` or ``.bias`` or call
``.parameters()``. Static only: ``ast``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .names import AUTOGRAD_GRAD

#: How many local assignments deep the inputs are followed.
_DEPTH = 3


def parameter_grads(
    cls: ast.ClassDef, dotted: Callable[[ast.expr], str]
) -> tuple[tuple[str, str], ...]:
    """(method, the gradient call as written) for each method of ``cls`` that
    takes ``torch.autograd.grad`` with respect to the instance's parameters."""
    found: list[tuple[str, str]] = []
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for call in ast.walk(method):
            if not isinstance(call, ast.Call) or dotted(call.func) not in AUTOGRAD_GRAD:
                continue
            inputs = call.args[1] if len(call.args) > 1 else None
            for keyword in call.keywords:
                if keyword.arg == "inputs":
                    inputs = keyword.value
            if inputs is not None and _own_parameters(method, inputs):
                text = ast.unparse(call)
                if len(text) > 80:
                    text = text[:77] + "..."
                found.append((method.name, f"`{text}`"))
                break
    return tuple(found)


def lineage_parameter_grads(
    lineage: list[tuple[ast.ClassDef, Callable[[ast.expr], str]]],
) -> tuple[tuple[str, str], ...]:
    """``parameter_grads`` of a class and of the bases the project defines for
    it (``class_lineage``: ``class VQGAN(VQBase)`` whose ``calculate_lambda`` is
    ``VQBase``'s), each base's read in its own module's names; a method a class
    nearer the instance defines hides a base's of the same name."""
    found: list[tuple[str, str]] = []
    hidden: set[str] = set()
    for position, (cls, dotted) in enumerate(lineage):
        for method, call in parameter_grads(cls, dotted):
            if method not in hidden:
                where = f" (in its base `{cls.name}`)" if position else ""
                found.append((method, call + where))
        hidden |= {
            s.name
            for s in cls.body
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
    return tuple(found)


def _own_parameters(method: ast.AST, inputs: ast.expr) -> bool:
    """Does ``inputs`` read the instance's parameters (``self...weight``,
    ``self.parameters()``), also through names ``method`` binds?"""
    nodes = list(ast.walk(inputs))
    seen: set[str] = set()
    for _ in range(_DEPTH):
        names = {
            n.id for n in nodes if isinstance(n, ast.Name) and n.id != "self"
        } - seen
        if not names:
            break
        seen |= names
        for node in ast.walk(method):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in names for t in node.targets
            ):
                nodes.extend(ast.walk(node.value))
    reads_self = any(isinstance(n, ast.Name) and n.id == "self" for n in nodes)
    parameters = any(
        (isinstance(n, ast.Attribute) and n.attr in ("weight", "bias"))
        or (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("parameters", "named_parameters")
        )
        for n in nodes
    )
    return reads_self and parameters
