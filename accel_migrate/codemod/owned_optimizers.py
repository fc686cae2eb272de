"""Optimizers a script takes from an object's attributes and steps.

NVIDIA/pix2pixHD's train.py: ``model = create_model(opt)`` (a Pix2PixHDModel,
an nn.Module of models/ whose ``initialize`` builds ``self.optimizer_G`` and
``self.optimizer_D``, wrapped in DataParallel), then ``optimizer_G, optimizer_D
= model.module.optimizer_G, model.module.optimizer_D`` and, in the loop,
``losses, generated = model(...)``, ``loss_G.backward()``,
``optimizer_G.step()``. Nothing in the file builds an optimizer or calls
``model.train()``: the file's own rules saw a backward and rewrote it while the
model stayed unprepared (the runtime then stopped the run). The object whose
attributes give a stepped optimizer is trained through them: AM004 takes that
for evidence that it is a model (``AllOrNothing._model_evidence``), so a loop
that calls it and runs a backward leaves the file whole unless it is prepared.

Static only: nothing runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .analysis import method_call
from .trained_models import snippet

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex


def stepped_attribute_owners(index: ModuleIndex) -> dict[Key, str]:
    """The variables whose attribute (``model.module.optimizer_G``,
    ``net.optim``) is bound to a name this file steps (``optimizer_G.step()``),
    each with the evidence as code (``optimizer_G = model.module.optimizer_G``);
    every value of the stepped name must be such an attribute of one
    variable."""
    found: dict[Key, str] = {}
    for call in index.calls:
        stepped = method_call(call, "step")
        if stepped is None or not isinstance(stepped.value, cst.Name):
            continue
        key = index.key(stepped.value)
        if key is None:
            continue
        values = index.values.get(key, [])
        if not values or any(v is None for v in values):
            continue
        owners = {_owner(index, v) for v in values}  # type: ignore[arg-type]
        if len(owners) != 1 or None in owners:
            continue
        (owner,) = owners
        assert owner is not None
        # the evidence, as code: the binding of the optimizer it steps
        found.setdefault(owner, f"{key[1]} = {snippet(values[0])}")  # type: ignore[arg-type]
    return found


def _owner(index: ModuleIndex, value: cst.BaseExpression) -> Key | None:
    """The variable at the root of an attribute chain (``model`` of
    ``model.module.optimizer_G``); None for anything else."""
    if not isinstance(value, cst.Attribute):
        return None
    root: cst.BaseExpression = value
    while isinstance(root, cst.Attribute):
        root = root.value
    if not isinstance(root, cst.Name) or root.value == "self":
        return None
    return index.key(root)
