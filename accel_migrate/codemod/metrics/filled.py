"""Tensors made full of zeros (``torch.zeros((data.shape[0], k))``,
``x.new_zeros(n)``, ``np.empty(...)``): the batch's row count in their size is
no count of anything. Their value is the starting point of whatever the loop adds
into them (the haqishen SIIM-ISIC solution's TTA: ``logits = torch.zeros(
(data.shape[0], out_dim))`` then ``logits += model(get_trans(data, I))``), so
what they hold is what is added, not a sum of rows (``metrics.kinds``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ..patterns import strip_methods

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

#: Functions that make a tensor or array of zeros (or of no set value) of a size.
_FILLERS = frozenset(
    f"{lib}.{name}"
    for lib in ("torch", "numpy")
    for name in ("zeros", "empty", "zeros_like", "empty_like")
)
#: Tensor methods that do the same.
_FILL_METHODS = frozenset({"new_zeros", "new_empty"})
#: Methods that give the same numbers back (another device, dtype or graph).
_SAME_NUMBERS = frozenset(
    {"to", "cuda", "cpu", "float", "double", "half", "long", "detach", "clone"}
)


def zero_filled(index: ModuleIndex, value: cst.BaseExpression) -> bool:
    """Is ``value`` a tensor (or array) of zeros of some size, moved or cast?"""
    made = strip_methods(value, _SAME_NUMBERS)
    if not isinstance(made, cst.Call):
        return False
    if isinstance(made.func, cst.Attribute) and made.func.attr.value in _FILL_METHODS:
        return True
    return bool(index.qualnames(made.func) & _FILLERS)
