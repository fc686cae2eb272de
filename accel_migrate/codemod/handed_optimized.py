"""The models a trainer class is handed that it builds an optimizer over.

A library trainer (``HelperFact.trains``) names the ``__init__`` parameter its
backward step runs (``trained_parameter``). A GAN trainer is handed two models
and trains both: akanimax/pro_gan_pytorch's ``ProGAN(gen, dis, device)`` runs
``self.gen`` in ``optimize_discriminator``'s step and hands ``self.dis`` to the
loss, and its ``train()`` builds ``Adam(params=self.gen.parameters(), ...)`` and
``Adam(params=self.dis.parameters(), ...)``. A caller that prepared only the
first would train the second unsynchronised on every process;
``optimized_parameters`` names every ``__init__`` parameter stored on ``self``
whose ``.parameters()`` feed an optimizer a method of the class builds, so the
caller prepares each model it hands for one (``optimized_models``).

Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .library_trainers import Lineage, _methods, _own_method, _stored_through_bases
from .project_nodes import _own_nodes, self_attribute

_PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})


def optimized_parameters(
    lineage: Lineage, is_optimizer: Callable[[ast.Call], bool]
) -> tuple[tuple[str, int], ...]:
    """(parameter, position among the positional parameters after ``self``; -1
    keyword only) for each ``__init__`` parameter stored on ``self`` whose
    ``self.X.parameters()`` (or ``named_parameters()``) is handed to an
    optimizer built in a method of the class (``is_optimizer``), in the order
    of the optimizers; () when there is none."""
    owner = next(
        (i for i, cls in enumerate(lineage) if _own_method(cls, "__init__")), None
    )
    if owner is None:
        return ()
    init = _own_method(lineage[owner], "__init__")
    stored = _stored_through_bases(lineage[owner:])
    if init is None or not stored:
        return ()
    positional = [a.arg for a in [*init.args.posonlyargs, *init.args.args][1:]]
    found: dict[str, int] = {}
    for method in _methods(lineage):
        calls = sorted(
            (n for n in _own_nodes(method) if isinstance(n, ast.Call)),
            key=lambda n: (n.lineno, n.col_offset),
        )
        for call in calls:
            if not is_optimizer(call):
                continue
            for attr in _optimized_attributes(call):
                name = stored.get(attr)
                if name is not None and name not in found:
                    found[name] = positional.index(name) if name in positional else -1
    return tuple(found.items())


def _optimized_attributes(call: ast.Call) -> list[str]:
    """``X`` of each ``self.X.parameters()`` in the parameters an optimizer call
    is handed (its first positional argument or ``params=``)."""
    handed = [k.value for k in call.keywords if k.arg == "params"]
    if call.args and not isinstance(call.args[0], ast.Starred):
        handed.append(call.args[0])
    found: list[str] = []
    for value in handed:
        for node in ast.walk(value):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _PARAMETER_METHODS
            ):
                attr = self_attribute(node.func.value)
                if attr is not None and attr not in found:
                    found.append(attr)
    return found
