"""Optimizer classes looked up by name, read in the file that calls them.

Real scripts pick their optimizer class by name and call it:

- ``OPTIMIZERS[args.opt](model.parameters(), lr=args.lr)`` with ``OPTIMIZERS =
  {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}`` assigned once at module
  level (every value an optimizer class);
- ``getattr(torch.optim, cfg.optimizer)(model.parameters(), lr=cfg.lr)``: an
  attribute of ``torch.optim`` called with parameters (what the script names
  there is one of its optimizer classes, or the run fails as the original does);
- ``get_optimizer_class(args.opt)(model.parameters(), ...)`` with the helper in a
  local module whose every return is an optimizer class (``HelperFact.returns``
  "optimizer class", read in its module: ``optimizer_factories``).

Such a call builds an optimizer as ``torch.optim.SGD(...)`` does: AM004 reads
the parameters it is handed, AM005 wraps it, AM014 knows it. Without this, the
call was no optimizer to the codemod: the loader was sharded, the model left
unprepared, and only the runtime's first-step guard stopped the run.
"""

from __future__ import annotations

import libcst as cst

from .analysis import ModuleIndex
from .names import is_optimizer_class


def looked_up_optimizer(index: ModuleIndex, call: cst.Call) -> bool:
    """Does ``call`` build an optimizer of a class looked up by name?"""
    func = call.func
    if isinstance(func, cst.Subscript):
        return _table(index, func.value)
    if isinstance(func, cst.Call):
        if "builtins.getattr" in index.qualnames(func.func):
            return (
                len(func.args) == 2
                and not any(a.star or a.keyword for a in func.args)
                and "torch.optim" in index.qualnames(func.args[0].value)
            )
        return index.helper(func.func, "optimizer class") is not None
    return False


def _table(index: ModuleIndex, table: cst.BaseExpression) -> bool:
    """``table`` is a variable whose one value is a dict display of optimizer
    classes (``OPTIMIZERS = {"sgd": optim.SGD, "adam": optim.Adam}``)."""
    if not isinstance(table, cst.Name):
        return False
    key = index.key(table)
    values = index.values.get(key, []) if key is not None else []
    if len(values) != 1 or not isinstance(values[0], cst.Dict):
        return False
    if index.augmented.get(key):  # type: ignore[arg-type]
        return False
    elements = values[0].elements
    return bool(elements) and all(
        isinstance(e, cst.DictElement)
        and any(is_optimizer_class(q) for q in index.qualnames(e.value))
        for e in elements
    )
