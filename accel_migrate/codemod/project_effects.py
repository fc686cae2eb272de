"""What the statements of a local function or class write, print or call, and
whether that is all they do (``HelperFact.effects_only``): the effects part of
the project view's facts (``project_helpers``). Static only: ``ast``."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .names import FILE_CHANGERS, SAVES
from .project_nodes import _own_nodes
from .shell_commands import RUNNERS, kind, literal_command

if TYPE_CHECKING:
    from .project_helpers import HelperFacts

_WRITERS = frozenset(
    {
        *SAVES,
        *FILE_CHANGERS,
        "os.makedirs",
        "os.mkdir",
        "numpy.save",
        "numpy.savez",
        "numpy.savetxt",
        "torchvision.utils.save_image",
        "matplotlib.pyplot.savefig",
    }
)
_PRINTS = frozenset({"builtins.print", "sys.stdout.write", "sys.stderr.write"})
_FLUSHES = frozenset({"sys.stdout.flush", "sys.stderr.flush"})
_COLLECTIVE_PREFIXES = ("torch.distributed.", "accel_migrate.runtime.")
#: What a process asks torch.distributed about the group it belongs to.
_GROUP_QUERIES = frozenset(
    {"torch.distributed.get_world_size", "torch.distributed.get_rank"}
)
#: What a process asks torch.distributed (or the runtime) about itself and its
#: group: no collective, nothing another process must join.
_RANK_QUESTIONS = frozenset(
    {
        *_GROUP_QUERIES,
        "torch.distributed.is_available",
        "torch.distributed.is_initialized",
        "torch.distributed.get_backend",
        "torch.distributed.is_nccl_available",
        "torch.distributed.is_gloo_available",
        "torch.distributed.is_torchelastic_launched",
        "accel_migrate.runtime.is_main_process",
        "accel_migrate.runtime.is_local_main_process",
        "accel_migrate.runtime.process_index",
        "accel_migrate.runtime.num_processes",
    }
)
#: Calls that change nothing (what an effects-only helper may also do).
_PURE_PREFIXES = ("os.path.", "time.", "datetime.", "math.", "json.dumps", "str.")
_PURE_BUILTINS = frozenset(
    f"builtins.{n}"
    for n in (
        "str int float bool len round format isinstance min max abs sorted list "
        "dict tuple range enumerate zip repr sum any all type getattr hasattr"
    ).split()
)
_PURE_METHODS = frozenset(
    {"format", "join", "item", "tolist", "strftime", "split", "strip", "keys", "items"}
)
_FILE_METHODS = frozenset({"write", "writelines", "flush", "close"})


class _Effects:
    """What statements write, print or call, and whether that is all they do."""

    def __init__(self, facts: HelperFacts, in_class: bool) -> None:
        self.facts = facts
        self.in_class = in_class
        self.writes: set[str] = set()
        self.prints = False
        self.collectives = False
        #: The calls of ``torch.distributed`` (or the runtime) that are more
        #: than a question about the process (``_RANK_QUESTIONS``): collectives.
        self.collective_calls: set[str] = set()
        #: What it asks torch.distributed about the process group
        #: (``get_world_size``, ``get_rank``), here or in what it calls.
        self.queries: set[str] = set()
        self.pure = True
        #: Names (and ``self.x`` attributes) bound to a file opened here.
        self.handles: set[str] = set()

    def body(self, statements: list[ast.stmt]) -> None:
        nodes = [n for s in statements for n in (s, *_own_nodes(s))]
        for node in nodes:  # the files opened here first: their writes are known
            if isinstance(node, ast.withitem) and node.optional_vars is not None:
                if isinstance(node.optional_vars, ast.Name) and self._opens(
                    node.context_expr
                ):
                    self.handles.add(node.optional_vars.id)
            elif isinstance(node, ast.Assign) and self._opens(node.value):
                self.handles.update(_spelling(t) for t in node.targets)
        for node in nodes:
            self._node(node)

    def _node(self, node: ast.AST) -> None:
        if isinstance(
            node, (ast.Global, ast.Nonlocal, ast.Delete, ast.Yield, ast.YieldFrom)
        ):
            self.pure = False
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            for target in targets:
                self._target(target, value)
        elif isinstance(node, ast.Call):
            self._call(node)

    def _target(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            return
        if (
            self.in_class
            and isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            return  # the object's own state: a stand-in holds none of it
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._target(element, None)
            return
        self.pure = False  # an argument's attribute, an item, a global's field

    def _opens(self, expr: ast.expr) -> bool:
        return (
            isinstance(expr, ast.Call)
            and self.facts._dotted(expr.func) in ("builtins.open", "io.open")
            and _write_mode(expr)
        )

    def _call(self, call: ast.Call) -> None:
        facts = self.facts
        target = facts.resolve(call.func)
        if isinstance(target, str):
            if target in ("builtins.open", "io.open"):
                if _write_mode(call):
                    self.writes.add(f"open(..., {_mode(call)!r})")
                return
            if target in _WRITERS:
                self.writes.add(target)
                return
            if target in RUNNERS:
                if kind(literal_command(call)) == "read":
                    self.prints = True  # `nvidia-smi`: prints facts, changes nothing
                    return
                # a shell command (`os.system("cp ...")`): what it changes cannot
                # be seen, so the helper is never moved, only reported
                self.writes.add(f"{target} (a shell command)")
                self.pure = False
                return
            if target in _PRINTS:
                self.prints = True
                return
            if target in _FLUSHES or target in _PURE_BUILTINS:
                return
            if target.startswith(_COLLECTIVE_PREFIXES):
                if target in _GROUP_QUERIES:
                    self.queries.add(target.rsplit(".", 1)[1])
                if target not in _RANK_QUESTIONS:
                    self.collective_calls.add(target)
                self.collectives = True
                self.pure = False
                return
            if target.startswith(_PURE_PREFIXES):
                return
            self.pure = False
            return
        if isinstance(target, tuple):
            fact = facts._follow(target)
            if fact is None:
                self.pure = False
                return
            self.writes.update(fact.writes)
            self.prints = self.prints or fact.prints
            self.collectives = self.collectives or fact.collectives
            self.collective_calls.update(fact.collective_calls)
            self.queries.update(fact.group_queries)
            if not fact.effects_only:
                self.pure = False
            return
        func = call.func
        if isinstance(func, ast.Attribute):
            receiver = _spelling(func.value)
            if func.attr in _FILE_METHODS and receiver in self.handles:
                return
            if func.attr in _PURE_METHODS:
                return
            if (
                self.in_class
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
            ):
                return  # another method of the class: its effects are counted there
        self.pure = False


def method_writes(
    facts: HelperFacts, cls: ast.ClassDef
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each method of ``cls`` that writes files in its own statements
    (``HelperFact.method_writes``), with what it writes."""
    found = []
    for statement in cls.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            own = _Effects(facts, in_class=True)
            own.body(statement.body)
            if own.writes:
                found.append((statement.name, tuple(sorted(own.writes))))
    return tuple(found)


def _spelling(expr: ast.expr) -> str:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        return f"{expr.value.id}.{expr.attr}"
    return ""


def _mode_argument(call: ast.Call) -> ast.expr | None:
    """The mode ``open(path, mode)`` is given (its second argument, or
    ``mode=``); None where it is given none."""
    mode: ast.expr | None = call.args[1] if len(call.args) > 1 else None
    for keyword in call.keywords:
        if keyword.arg == "mode":
            mode = keyword.value
    return mode


def _mode(call: ast.Call) -> str:
    mode = _mode_argument(call)
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return mode.value
    return "?"


def _write_mode(call: ast.Call) -> bool:
    mode = _mode_argument(call)
    if mode is None:
        return False
    if not isinstance(mode, ast.Constant) or not isinstance(mode.value, str):
        return True  # a mode the analysis cannot read may write
    return any(c in mode.value for c in "wax+")
