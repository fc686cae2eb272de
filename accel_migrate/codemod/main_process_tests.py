"""Which tests choose the main process by the launcher's rank variables.

A script written for one GPU but ready for DDP picks the process that prints
or saves with ``if int(os.environ.get("RANK", 0)) == 0:``, ``if
os.getenv("LOCAL_RANK", "0") == "0":`` or ``if not rank:`` over ``rank =
int(os.environ["RANK"])``. Under ``accel-migrate launch`` (torchrun) every
process has ``RANK`` and ``LOCAL_RANK``, and the runtime reads the same
variables: such a test is true on exactly the processes where
``accel.is_main_process()`` (``RANK``) or ``accel.is_local_main_process()``
(``LOCAL_RANK``) is. Run as one process (no launcher) the variable is unset,
and the test is the main process's only where its default passes it (``0``,
``"0"``, or ``-1`` in ``(-1, 0)``): ``os.environ.get("RANK") == "0"`` is False
there and is not such a test.

``main_process_test`` decides it by evaluating the test, read as the values it
can take: the variable's value ``str(r)`` (or ``r`` through ``int``) for the
ranks ``r`` of a launch, and its default when unset. Only literals,
comparisons and ``not`` take part; anything else is not such a test.

``torch.distributed.get_rank()`` (``dist.get_rank() == 0``, ``not
dist.get_rank()``) is read as ``int(os.environ["RANK"])``: under the launcher
the runtime starts the default process group with torchrun's ``RANK``
(``runtime.comm.ProcessGroupCollectives``), and with no group started it
raises, as ``os.environ["RANK"]`` does unset. Not in a file that starts a
process group itself (``init_process_group``: its rank is the file's choice).

The dist-aware helpers a single-GPU fork keeps (ConvNeXt's, DeiT's
``utils.py``) are read through, where they are functions of the file called
with no arguments: ``is_main_process()`` whose body is one ``return
get_rank() == 0`` is that test, and ``get_rank()`` whose body is ``if not
is_dist_avail_and_initialized(): return 0`` then ``return dist.get_rank()``
reads ``RANK`` with ``0`` where no group is started: its guard is true
exactly where ``dist.is_initialized()`` is (``dist.is_initialized()``, or a
function of the file that returns False where ``dist.is_available()`` or
``dist.is_initialized()`` is not and else True). Any other body, a guard on
anything else (``if args.cpu: return 0``), or an argument, is not such a
read.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import libcst as cst

from .rank_helpers import rank_helper_body, returned_test
from .rank_local_calls import rank_environment_read, rank_query

if TYPE_CHECKING:
    from .rule import Rule

#: The variables torchrun sets and the runtime reads, and what tells their 0.
MAIN_PROCESS_CALLS = {"RANK": "is_main_process", "LOCAL_RANK": "is_local_main_process"}
#: What a read gives where it raises (``os.environ["RANK"]`` unset, ``int(None)``).
_RAISES = object()
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    cst.Equal: operator.eq,
    cst.NotEqual: operator.ne,
    cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le,
    cst.GreaterThan: operator.gt,
    cst.GreaterThanEqual: operator.ge,
    cst.In: lambda a, b: a in b,
    cst.NotIn: lambda a, b: a not in b,
}
#: Ranks tried; a literal beyond them makes the test not one of these.
_RANKS = range(16)


@dataclass(frozen=True)
class _Read:
    """A read of a rank variable: its name, whether ``int`` casts it, and what
    it gives when the variable is unset (None with no default, ``_RAISES``)."""

    variable: str
    cast: bool
    unset: Any

    def value(self, rank: int | None) -> Any:
        if rank is not None:
            return rank if self.cast else str(rank)
        if not self.cast or self.unset is _RAISES:
            return self.unset
        try:
            return int(self.unset)
        except (TypeError, ValueError):
            return _RAISES


def main_process_test(rule: Rule, test: cst.BaseExpression) -> tuple[str, str] | None:
    """(runtime function, variable) when ``test`` is true on exactly the main
    process (``"is_main_process"``, ``"RANK"``) or the first process of each
    machine (``"is_local_main_process"``, ``"LOCAL_RANK"``), as described in the
    module docstring; else None."""
    reads: list[_Read] = []
    if not _collect(rule, test, reads) or not reads:
        return None
    variables = {r.variable for r in reads}
    if len(variables) != 1:
        return None
    variable = variables.pop()
    if variable not in MAIN_PROCESS_CALLS or _environment_written(rule, variable):
        return None
    for rank in _RANKS:
        if _evaluate(rule, test, rank) is not (rank == 0):
            return None
    unset = _evaluate(rule, test, None)
    if unset is not True and unset is not _RAISES:
        return None
    return MAIN_PROCESS_CALLS[variable], variable


def _read(rule: Rule, node: cst.BaseExpression, depth: int = 0) -> _Read | None:
    """``os.environ.get("RANK", "0")``, ``int(...)`` of it, a variable bound
    only to one such read, or ``int(os.environ["LOCAL_RANK"]) if "LOCAL_RANK"
    in os.environ else 0``."""
    if depth > 3:
        return None
    if isinstance(node, cst.Call) and "builtins.int" in rule.qualnames(node.func):
        if len(node.args) != 1 or node.args[0].keyword is not None:
            return None
        inner = _read(rule, node.args[0].value, depth + 1)
        if inner is None or inner.cast:
            return None
        return _Read(inner.variable, True, inner.unset)
    if rank_environment_read(rule.index, node):
        return _environment(node)
    if rank_query(rule.index, node):
        assert isinstance(node, cst.Call)
        if node.args or "init_process_group" in rule.context.original_code:
            return None  # another group's rank, or a group the file starts
        return _Read("RANK", True, _RAISES)
    if isinstance(node, cst.Call) and not node.args:
        helper = rank_helper(rule, node)
        if helper is not None:
            return helper
    if isinstance(node, cst.IfExp):
        return _guarded_read(rule, node, depth)
    if isinstance(node, cst.Name):
        bindings = rule.plain_assignments(node)
        if not bindings:
            return None
        found = [_read(rule, value, depth + 1) for _, value in bindings]
        first = found[0]
        if first is None or any(r != first for r in found):
            return None
        return first
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
        return _option_read(rule, node, depth)
    return None


def rank_helper(rule: Rule, call: cst.Call) -> _Read | None:
    """``get_rank()`` of the file's own dist-aware helper (``rank_helpers``):
    ``RANK`` through ``int``, ``0`` where no group is started."""
    query = rank_helper_body(rule, call)
    read = _read(rule, query) if query is not None else None
    if read is None or read.variable != "RANK":
        return None  # `get_rank(group)`, or a file that starts its own group
    return _Read("RANK", True, 0)


def _option_read(rule: Rule, node: cst.Attribute, depth: int) -> _Read | None:
    """``args.local_rank`` where ``args`` is bound only to the command line's
    parsed namespace (``parser.parse_args()``) and ``--local_rank``'s default is
    a read (``rank_local_options``): ``accel-migrate launch`` (torchrun) passes
    no ``--local_rank``, so the option is its default. Not where the file
    stores into the attribute, nor where the option has a ``type=`` and the
    default is a string (argparse converts a string default)."""
    options = rule.index.rank_local_options
    parsed = options.options.get(node.attr.value, ())
    if len(parsed) != 1 or options.stored(node.attr.value):
        return None
    bindings = rule.plain_assignments(node.value)
    if not bindings or not all(
        options.from_command_line(rule.parent(value)) for _, value in bindings
    ):
        return None
    read = _read(rule, parsed[0].default, depth + 1)
    typed = any(
        a.keyword is not None and a.keyword.value == "type" for a in parsed[0].call.args
    )
    if read is None or (typed and not read.cast):
        return None
    return read


def _environment(node: cst.BaseExpression) -> _Read:
    """The variable and default of a read ``rank_environment_read`` accepted."""
    if isinstance(node, cst.Subscript):
        key = node.slice[0].slice.value  # type: ignore[attr-defined]
        return _Read(key.evaluated_value, False, _RAISES)
    assert isinstance(node, cst.Call)
    variable = node.args[0].value.evaluated_value  # type: ignore[attr-defined]
    rest = node.args[1:]
    # A default that is not a literal: unknown, read as raising (not main).
    default = _literal(rest[0].value) if rest else None
    return _Read(variable, False, default)


def _guarded_read(rule: Rule, node: cst.IfExp, depth: int) -> _Read | None:
    """``int(os.environ["V"]) if "V" in os.environ else 0``."""
    test = node.test
    if not (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.In)
        and "os.environ" in rule.qualnames(test.comparisons[0].comparator)
    ):
        return None
    inner = _read(rule, node.body, depth + 1)
    default = _literal(node.orelse)
    if inner is None or default is _RAISES or _literal(test.left) != inner.variable:
        return None
    if not isinstance(default, int if inner.cast else str):
        return None  # `int(...) if ... else "0"`: not one value's type
    return _Read(inner.variable, inner.cast, default)


def _literal(node: cst.BaseExpression) -> Any:
    """The value of an int, string, negative int, or a tuple/list/set of them;
    ``_RAISES`` for anything else."""
    if isinstance(node, cst.Integer):
        return int(node.value, 0)
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
    ):
        return -int(node.expression.value, 0)
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        items = [_literal(e.value) for e in node.elements]
        if any(
            i is _RAISES or isinstance(e, cst.StarredElement)
            for i, e in zip(items, node.elements, strict=True)
        ):
            return _RAISES
        return tuple(items)
    return _RAISES


def _collect(
    rule: Rule, node: cst.BaseExpression, reads: list[_Read], depth: int = 0
) -> bool:
    """Is ``node`` made of rank reads, literals, comparisons and ``not`` only?"""
    read = _read(rule, node)
    if read is not None:
        reads.append(read)
        return True
    returned = returned_test(rule, node)
    if returned is not None:
        return depth < 3 and _collect(rule, returned, reads, depth + 1)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return _collect(rule, node.expression, reads, depth)
    if isinstance(node, cst.Comparison):
        return _collect(rule, node.left, reads, depth) and all(
            type(c.operator) in _COMPARE and _collect(rule, c.comparator, reads, depth)
            for c in node.comparisons
        )
    value = _literal(node)
    if value is _RAISES:
        return False
    return not any(isinstance(v, int) and v > _RANKS[-1] for v in _flat(value))


def _flat(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def _evaluate(rule: Rule, node: cst.BaseExpression, rank: int | None) -> Any:
    """The value of ``node`` (accepted by ``_collect``) on the process of rank
    ``rank`` (None: the variable unset). ``_RAISES`` where it raises."""
    read = _read(rule, node)
    if read is not None:
        return read.value(rank)
    returned = returned_test(rule, node)
    if returned is not None:
        return _evaluate(rule, returned, rank)
    if isinstance(node, cst.UnaryOperation):
        inner = _evaluate(rule, node.expression, rank)
        return inner if inner is _RAISES else not inner
    if isinstance(node, cst.Comparison):
        left = _evaluate(rule, node.left, rank)
        result: Any = True
        for comparison in node.comparisons:
            right = _evaluate(rule, comparison.comparator, rank)
            if left is _RAISES or right is _RAISES:
                return _RAISES
            try:
                ok = _COMPARE[type(comparison.operator)](left, right)
            except TypeError:
                return _RAISES
            result = result and ok
            left = right
        return bool(result)
    if isinstance(node, cst.BaseExpression):
        return _literal(node)
    return _RAISES


def _environment_written(rule: Rule, variable: str) -> bool:
    """Does the file set the variable itself (``os.environ["RANK"] = ...``,
    ``os.environ.update(...)``, ``os.putenv``)? Then the runtime and the
    script may read different values."""
    code = rule.context.original_code
    return (
        f'environ["{variable}"] =' in code
        or f"environ['{variable}'] =" in code
        or "environ.update" in code
        or "putenv" in code
    )
