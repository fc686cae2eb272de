"""The channels a training script shows its numbers through, besides ``print``.

A value of this process's share of the batch is as wrong in a progress bar's
postfix, a ``logger.info`` line, a TensorBoard scalar or a wandb chart as in a
print. AM008 makes such values global and AM033 reports those it cannot, for
every channel named here, from one definition:

- ``print`` (also ``accel.print``) and ``tqdm.write``;
- the ``logging`` module's functions (``logging.info``) and the methods of a
  logger it made (``logger = logging.getLogger(__name__)``; ``logger.info``), and
  loguru's ``logger``;
- a tqdm bar's ``set_postfix`` / ``set_description`` (``pbar = tqdm(loader)`` or
  ``with tqdm(...) as pbar``);
- a TensorBoard ``SummaryWriter``'s ``add_scalar`` / ``add_scalars`` / ``add_text``;
- ``wandb.log`` (also ``run.log`` of ``run = wandb.init(...)``) and MLflow's
  ``log_metric`` / ``log_metrics``;
- a function of the file that logs through one of these and returns nothing
  (``def log_metrics(step, loss, acc): print(...)``): what it is given is shown.

Each is recognised before the other rules run and after (``accel.on_main_process(
wandb.log, ...)``, ``accel.on_main_process(SummaryWriter, ...)``), by qualified
name and by what the receiver was made from, never by a method's name alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .index_syntax import parameter_names
from .names import TQDM_CALLS
from .reduction.placement import code
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: ``tqdm.write``: a print that keeps progress bars intact.
TQDM_WRITE = frozenset(
    {"tqdm.tqdm.write", "tqdm.auto.tqdm.write", "tqdm.std.tqdm.write"}
)
_LOG_LEVELS = (
    "debug",
    "info",
    "warning",
    "warn",
    "error",
    "critical",
    "exception",
    "log",
)
_LOGGING_FUNCTIONS = frozenset(f"logging.{level}" for level in _LOG_LEVELS)
_RUN_LOGS = frozenset({"wandb.log", "mlflow.log_metric", "mlflow.log_metrics"})
_SUMMARY_WRITERS = frozenset(
    {
        "torch.utils.tensorboard.SummaryWriter",
        "torch.utils.tensorboard.writer.SummaryWriter",
        "tensorboardX.SummaryWriter",
        "tensorboardX.writer.SummaryWriter",
    }
)
#: The levels of a run's progress lines (the others are warnings and errors).
PROGRESS_LEVELS = frozenset({"debug", "info"})
_LOGGER_MAKERS = frozenset({"logging.getLogger"})
#: Methods that show their arguments, by what their receiver was made with.
_METHODS: tuple[tuple[frozenset[str], frozenset[str]], ...] = (
    (frozenset(_LOG_LEVELS), _LOGGER_MAKERS),
    (
        frozenset(
            {"set_postfix", "set_postfix_str", "set_description", "set_description_str"}
        ),
        TQDM_CALLS,
    ),
    (frozenset({"add_scalar", "add_scalars", "add_text"}), _SUMMARY_WRITERS),
    (frozenset({"log"}), frozenset({"wandb.init"})),
)


def channel(index: ModuleIndex, call: cst.Call, depth: int = 0) -> str | None:
    """How ``call`` shows its arguments (``"print"``, ``"pbar.set_postfix"``,
    ``"logger.info"``, ``"log_metrics"``...), or None when it is no log call."""
    func: cst.BaseExpression = call.func
    if index.is_runtime_call(call, "print"):
        return "print"
    if index.is_runtime_call(call, "on_main_process") and call.args:
        func = call.args[0].value  # `accel.on_main_process(wandb.log, {...})`
    names = index.qualnames(func)
    if "builtins.print" in names:
        return "print"
    if not names.isdisjoint(TQDM_WRITE | _LOGGING_FUNCTIONS | _RUN_LOGS):
        return code(func)
    if any(n.startswith("loguru.logger.") for n in names):
        return code(func)
    if isinstance(func, cst.Attribute):
        for methods, makers in _METHODS:
            if func.attr.value in methods and _made_by(index, func.value, makers):
                return code(func)
    if func is call.func and depth == 0 and _logging_helper(index, call):
        return code(func)
    return None


def progress_log(index: ModuleIndex, call: cst.Call) -> bool:
    """``logging.info(...)`` / ``logger.debug(...)`` (a logger of ``logging`` or
    loguru): a line of the run's progress, not a warning or an error."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value in PROGRESS_LEVELS):
        return False
    names = index.qualnames(func)
    if not names.isdisjoint(_LOGGING_FUNCTIONS):
        return True
    if any(n.startswith("loguru.logger.") for n in names):
        return True
    return _made_by(index, func.value, _LOGGER_MAKERS)


def logged_in(index: ModuleIndex, node: cst.CSTNode) -> tuple[cst.Call, str] | None:
    """The log call (and its channel) in whose arguments ``node`` is, within its
    statement."""
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.Call):
            found = channel(index, ancestor)
            if found is not None:
                return ancestor, found
        if isinstance(ancestor, (cst.BaseStatement, cst.BaseSmallStatement)):
            return None
    return None


def _made_by(
    index: ModuleIndex,
    receiver: cst.BaseExpression,
    makers: frozenset[str],
    depth: int = 0,
) -> bool:
    """Was ``receiver`` (a variable, or ``self.x``) made by a call to one of
    ``makers``: assigned from it (``pbar = tqdm(...)``), bound by ``with
    tqdm(...) as pbar``, or assigned from a variable that was (``self.logger =
    logger``)?"""
    key = index.key(receiver)
    if key is None or depth > 2:
        return False
    values: list[cst.BaseExpression | None] = list(index.values.get(key, ()))
    if isinstance(receiver, cst.Name):
        values += _with_values(index, receiver)
    return any(
        (isinstance(value, cst.Call) and _calls(index, value, makers))
        or (
            isinstance(value, (cst.Name, cst.Attribute))
            and _made_by(index, value, makers, depth + 1)
        )
        for value in values
    )


def _calls(index: ModuleIndex, call: cst.Call, makers: frozenset[str]) -> bool:
    func = call.func
    if index.is_runtime_call(call, "on_main_process") and call.args:
        func = call.args[0].value  # `accel.on_main_process(SummaryWriter, ...)`
    return not index.qualnames(func).isdisjoint(makers)


def _with_values(index: ModuleIndex, name: cst.Name) -> list[cst.BaseExpression]:
    """The context managers of the ``with ... as name`` statements binding ``name``."""
    scope = index._scopes.get(name)
    if scope is None:
        return []
    found = []
    for assignment in scope[name.value]:
        target = getattr(assignment, "node", None)
        asname = index.parent(target) if target is not None else None
        item = index.parent(asname) if asname is not None else None
        if isinstance(asname, cst.AsName) and isinstance(item, cst.WithItem):
            found.append(item.item)
    return found


def _logging_helper(index: ModuleIndex, call: cst.Call) -> bool:
    """Does ``call`` run a function of the file whose job is to log what it is
    given: it returns no value, trains nothing (a step function that prints its
    loss is no log helper), and shows one of its parameters through a channel?"""
    function = index.local_function(call.func)
    if function is None or index.runs_backward(function.body):
        return False
    if any(
        r.value is not None  # type: ignore[attr-defined]
        for r in findall(function.body, m.Return())
    ):
        return False
    params = parameter_names(function)
    for inner in findall(function.body, m.Call()):
        if channel(index, inner, depth=1) is None:  # type: ignore[arg-type]
            continue
        shown = {
            n.value  # type: ignore[attr-defined]
            for arg in inner.args  # type: ignore[attr-defined]
            for n in findall(arg, m.Name())
        }
        if shown & params:
            return True
    return False
