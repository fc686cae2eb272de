"""NumPy arrays that write themselves to a file: ``arr.dump(path)`` and
``arr.tofile(path)``, on a value known to be an ``ndarray``.

AM017 (main-process-writes) asks it: these methods write a file by its path
like ``np.save`` does, but as a method of the array they carry no qualified
name, so the rule needs to know that the value they are called on is an array
(a variable only ever bound to ``np.zeros(...)``, ``np.array(...)``, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .patterns import argument

if TYPE_CHECKING:
    from .rule import Rule

#: ``ndarray`` methods that write the array to a file, with where the path is.
ARRAY_WRITERS: dict[str, tuple[int, str]] = {
    "dump": (0, "file"),
    "tofile": (0, "fid"),
}

#: NumPy functions whose value is a new ``ndarray``.
ARRAY_MAKERS = frozenset(
    f"numpy.{name}"
    for name in (
        "zeros",
        "ones",
        "empty",
        "full",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "array",
        "asarray",
        "arange",
        "linspace",
        "concatenate",
        "stack",
        "vstack",
        "hstack",
    )
)


def is_ndarray(rule: Rule, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """``np.zeros(...)`` (an ``ARRAY_MAKERS`` call), or a variable or attribute
    only ever bound to one."""
    if depth > 3:
        return False
    if isinstance(expr, cst.Call):
        return bool(rule.qualnames(expr.func) & ARRAY_MAKERS)
    if m.matches(expr, m.Name() | m.Attribute()):
        key = rule.index.key(expr)
        values = rule.index.values.get(key, []) if key is not None else []
        return bool(values) and all(
            v is not None and is_ndarray(rule, v, depth + 1) for v in values
        )
    return False


def array_write(rule: Rule, call: cst.Call) -> tuple[str, cst.BaseExpression] | None:
    """For ``arr.dump(path)`` / ``arr.tofile(path)`` on an array: the method's
    name (``ndarray.dump``) and the path it writes."""
    func = call.func
    if not (
        isinstance(func, cst.Attribute)
        and func.attr.value in ARRAY_WRITERS
        and is_ndarray(rule, func.value)
    ):
        return None
    path = argument(call, *ARRAY_WRITERS[func.attr.value])
    if path is None:
        return None
    return f"ndarray.{func.attr.value}", path
