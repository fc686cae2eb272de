"""Where a value comes from that differs between processes: the clock, the pid,
random draws (functions, tensor methods, ``torch.distributions``), and the
runtime's calls whose result is the same on every process (``divergence``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .random_names import (
    DISTRIBUTION_DRAWS,
    DISTRIBUTIONS,
    DRAW_METHODS,
)
from .rank_variables import RANK_VARIABLES  # re-exported

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex

#: Calls whose result differs between ranks wherever they are made: the clock, the pid.
_RANK_LOCAL_CALL_PREFIXES = (
    "time.",
    "datetime.",
    "os.getpid",
)
#: Of them, the clock: each process's own reading is as right as the original's.
CLOCK_PREFIXES = ("time.", "datetime.")
_ENVIRON_GETTERS = ("os.environ.get", "os.getenv", "os.environ.__getitem__")


def rank_environment_read(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """``os.environ.get("RANK")``, ``os.getenv("LOCAL_RANK", "0")`` or
    ``os.environ["RANK"]``: a read of a variable the launcher sets per process.
    A key that is not a string literal does not count: a helper such as ``def
    flag(name): return os.environ.get(name) == "1"`` reads the switches the
    user sets alike for every process, and a rank variable is read by name."""
    if isinstance(node, cst.Call):
        if not node.args or not any(
            q in _ENVIRON_GETTERS for q in index.qualnames(node.func)
        ):
            return False
        key: cst.BaseExpression = node.args[0].value
    elif isinstance(node, cst.Subscript):
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return False
        if "os.environ" not in index.qualnames(node.value):
            return False
        key = node.slice[0].slice.value
    else:
        return False
    if isinstance(key, (cst.SimpleString, cst.ConcatenatedString)):
        value = key.evaluated_value
        if isinstance(value, str):
            return value in RANK_VARIABLES
    return False


#: ``torch.distributed``'s query of this process's rank: a script half-written
#: for DDP hands it on (``train(model, dist.get_rank())``) as it does a rank
#: variable's read, and under the migrated script's launcher it differs between
#: processes as much.
RANK_QUERIES = frozenset({"torch.distributed.get_rank"})


def rank_query(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """``dist.get_rank()`` / ``torch.distributed.get_rank()``."""
    return isinstance(node, cst.Call) and bool(
        index.qualnames(node.func) & RANK_QUERIES
    )


def method_draw(
    index: ModuleIndex, call: cst.Call, distributions: set[Key] | None = None
) -> str | None:
    """How a random draw made by a method reads (``.normal_()``,
    ``Normal(...).rsample()``), or None. ``distributions``: the variables that
    may hold a ``torch.distributions`` object (``distribution_values``)."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    name = func.attr.value
    if name in DRAW_METHODS or name == "rsample":
        return f".{name}()"
    if name not in DISTRIBUTION_DRAWS:
        return None
    receiver = func.value
    if isinstance(receiver, cst.Call) and any(
        q.startswith(DISTRIBUTIONS) for q in index.qualnames(receiver.func)
    ):
        return f".{name}()"
    key = index.key(receiver)
    if distributions is not None and key is not None and key in distributions:
        return f".{name}()"
    return None


def distribution_values(index: ModuleIndex) -> set[Key]:
    """Variables that may hold a ``torch.distributions`` object."""
    return index.tagged(
        lambda e: isinstance(e, cst.Call)
        and any(q.startswith(DISTRIBUTIONS) for q in index.qualnames(e.func))
    )


_UNIFORM_RUNTIME_CALLS = (
    "reduce",
    "global_loss",
    "gather",
    "gather_in_order",
    "world_size",
    "rank",
)
#: ``x.item()`` and ``float(x)``: a tensor read as a Python number.
TENSOR_READ = m.Call(func=m.Attribute(attr=m.Name("item")), args=[]) | m.Call(
    func=m.Name("float"), args=[m.Arg(keyword=None)]
)


def _read_tensor(read: cst.Call) -> cst.BaseExpression:
    """The tensor that ``x.item()`` or ``float(x)`` reads."""
    if isinstance(read.func, cst.Attribute):
        return read.func.value
    return read.args[0].value
