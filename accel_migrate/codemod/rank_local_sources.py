"""Where a value that differs between processes comes from: the provenance of
the divergence analysis's facts.

``divergence`` says *that* a value differs between processes (a name set from
the clock, a random draw, this process's share of the data...); this module
says *why*, for the findings that name it: ``range(start_epoch, args.epoch)``
differs because ``start_epoch`` is read from a checkpoint whose folder is named
from ``datetime.datetime.now()`` at line 95. It follows the value back through
the variables it is computed from (assignments, ``+=``, ``x.append(v)``, loop
variables, parameters at their call sites, the returns of local functions,
stores into a namespace's attributes (``args.local_rank = ...``), the default
of a command-line option ``args.x`` is parsed from (``rank_local_options``), and
the tests of the branches that set it) to the sources the divergence analysis
reads as rank-local:

- "clock": ``time.*`` and ``datetime.*`` calls; "pid": ``os.getpid()``;
- "environment": a variable the launcher sets per process (``os.environ["RANK"]``);
- "random": a random draw the analysis takes for rank-local;
- "data": a loop over a (sharded) data loader, a batch taken with ``next``;
- "exception": an assignment in an ``except`` handler (an exception may be
  raised on one process only).

A value's sources are listed nearest first. ``complete`` is False when some
variable on the way is bound in a way this walk does not follow (a ``with``
target, a walrus, an ``except ... as``): a rule that relaxes a check on the
kinds of the sources asks for a complete list. Read only: nothing here changes
what ``divergence`` decides.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .analysis import attr_chain
from .parsed_namespaces import option_items
from .project_namespaces import handed_keys
from .random_names import is_random_draw
from .rank_local_calls import (
    _RANK_LOCAL_CALL_PREFIXES,
    _UNIFORM_RUNTIME_CALLS,
    rank_environment_read,
    rank_query,
)
from .rank_local_definitions import _Definition, collect_definitions
from .rank_local_syntax import (
    _calls,
    _dict_entry,
    _entry_key,
    _inside,
    _outer,
    _rebinds,
    _statements,
)
from .scopes import BuiltinAssignment
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex
    from .project_namespaces import HandedOption

_SUITES = (
    cst.IndentedBlock,
    cst.SimpleStatementSuite,
    cst.Else,
    cst.If,  # an `elif`
    cst.ExceptHandler,
    cst.Finally,
)
_ORDER = ("data", "clock", "pid", "environment", "random", "exception")
_LIMIT = 400  # expressions visited per question


@dataclass(frozen=True)
class Source:
    """One reason a value differs between processes."""

    kind: str  # "clock", "pid", "environment", "random", "data", "exception"
    node: cst.CSTNode  # the call, the loop's iterable, the except handler
    #: The variables from the asked value to the source, nearest first.
    through: tuple[str, ...] = ()
    #: For a source in another file of the batch: what and where it is
    #: (`` `os.environ.get('LOCAL_RANK', -1)` in main.py at line 12``).
    origin: str = ""


@dataclass
class Provenance:
    sources: list[Source] = field(default_factory=list)
    complete: bool = True

    @property
    def kinds(self) -> set[str]:
        return {s.kind for s in self.sources}


class RankLocalSources:
    """The provenance map of one module (``ModuleIndex.rank_local_sources``)."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self._definitions: dict[Key, list[_Definition]] | None = None
        self._cache: dict[cst.CSTNode, Provenance] = {}
        self._handed: dict[Key, tuple[HandedOption, ...]] | None = None
        self._handed_nodes: dict[Key, cst.CSTNode] = {}

    def of(self, expr: cst.CSTNode) -> Provenance:
        """The sources that make ``expr`` differ between processes."""
        if expr not in self._cache:
            self._cache[expr] = self._walk(expr)
        return self._cache[expr]

    def first(self, expr: cst.CSTNode) -> Source | None:
        """The source a finding names: the nearest of the first kind found of
        the data, the clock, the pid, a draw, an exception handler."""
        found = self.of(expr).sources
        for kind in _ORDER:
            for source in found:
                if source.kind == kind:
                    return source
        return None

    def reaching_values(self, name: cst.CSTNode) -> list[cst.CSTNode]:
        """The expressions a variable read at ``name`` may hold: the values of
        its definitions that can reach the read (``rank = get_rank()`` for
        ``seed + rank``)."""
        key = self.index.key(name)
        definitions = self.definitions.get(key) if key is not None else None
        if not definitions:
            return []
        return [
            node
            for kind, node, _ in self._reaching(name, key, definitions)  # type: ignore[arg-type]
            if kind == "value"
        ]

    # -- the walk ------------------------------------------------------------------
    def _walk(self, start: cst.CSTNode) -> Provenance:
        result = Provenance()
        seen_keys: set[Key] = set()
        seen_definitions: set[tuple[Key, int, str | None]] = set()
        seen_nodes: set[tuple[cst.CSTNode, str | None]] = set()
        # An entry read by its literal key (``res["AUC"]``) is followed as that
        # entry: where the value is a dict built with literal keys (``performance
        # = OrderedDict([("Avg Run Time (ms/batch)", self.times), ("AUC",
        # auc)])``), only the entry's value is its source, not the other
        # entries' (ganomaly's clock-timed "Avg Run Time"). The key is carried
        # through plain hops only: a variable's definitions and a local
        # function's returns.
        queue: deque[tuple[cst.CSTNode, tuple[str, ...], str | None]] = deque(
            [(start, (), None)]
        )
        visited = 0
        while queue:
            expr, through, wanted = queue.popleft()
            if wanted is not None:
                value = _dict_entry(self.index, expr, wanted)
                if value is not None:
                    expr, through, wanted = value, (*through, f'["{wanted}"]'), None
                elif not isinstance(expr, (cst.Name, cst.Attribute, cst.Call)):
                    wanted = None
            if (expr, wanted) in seen_nodes:
                continue
            seen_nodes.add((expr, wanted))
            visited += 1
            if visited > _LIMIT:
                result.complete = False
                break
            for source in self._direct(expr, through):
                result.sources.append(source)
            keep = wanted if isinstance(expr, cst.Call) else None
            for inner, path in self._returns(expr, through):
                queue.append((inner, path, keep))
            keep = wanted if isinstance(expr, (cst.Name, cst.Attribute)) else None
            entries = {
                read.value: key  # type: ignore[attr-defined]
                for read in findall(expr, m.Subscript())
                if (key := _entry_key(read)) is not None
                and isinstance(read.value, cst.Name)  # type: ignore[attr-defined]
            }
            for name, key in entries.items():
                if name is not expr:
                    queue.append((name, through, key))
            for read, option in option_items(self.index, expr):
                # `opt["local_rank"]` of `opt = vars(args)`: the option's default
                spelled = cst.Module([]).code_for_node(read)
                queue.append((option.default, (*through, spelled, option.flag), None))
            for name in self._names(expr):
                if name in entries and name is not expr:
                    continue  # followed as that entry
                key = self._key(name)
                if key is None:
                    continue
                spelled = attr_chain(name) or key[1]
                path = (*through, spelled)
                if key in self.handed:
                    # `args.local_rank` of `def train(args)` another file hands
                    # its parsed namespace (`project_namespaces`)
                    for option in self.handed[key]:
                        node = self._handed_nodes[key]
                        shown = (*path, option.flag)
                        result.sources.append(
                            Source("environment", node, shown, option.origin)
                        )
                    continue
                definitions = self.definitions.get(key)
                if definitions is None and self.index.key(name) is None:
                    continue  # `args.x` never stored: its namespace is followed
                if definitions is None:
                    if key not in seen_keys and not self._plain_binding(key):
                        result.complete = False
                    seen_keys.add(key)
                    continue
                seen_keys.add(key)
                for kind, node, _ in self._reaching(name, key, definitions):
                    if (key, id(node), keep) in seen_definitions:
                        continue
                    seen_definitions.add((key, id(node), keep))
                    if kind == "counter":
                        continue  # `i` of `enumerate(loader)`: the same everywhere
                    if kind == "option":
                        # `args.local_rank` of `parser.parse_args()`: the default
                        flag = self.options_by_default[node]
                        queue.append((node, (*path, flag), keep))
                    elif kind == "data":
                        result.sources.append(Source("data", node, path))
                    elif kind == "exception":
                        result.sources.append(Source("exception", node, path))
                    else:
                        queue.append((node, path, keep))
        return result

    def _direct(self, expr: cst.CSTNode, through: tuple[str, ...]) -> list[Source]:
        """The sources in ``expr`` itself: clock, pid, environment and random
        calls, a per-process environment variable read by subscript, a batch
        taken with ``next``, a comprehension over a loader."""
        index = self.index
        divergence = index.divergence
        found = []
        for call in _calls(expr, index):
            names = index.qualnames(call.func)
            if any(q.startswith("os.getpid") for q in names):
                found.append(Source("pid", call, through))
            elif rank_environment_read(index, call) or rank_query(index, call):
                found.append(Source("environment", call, through))
            elif any(q.startswith(_RANK_LOCAL_CALL_PREFIXES) for q in names):
                found.append(Source("clock", call, through))
            elif any(is_random_draw(q) for q in names) and divergence.random_is_local(
                call
            ):
                found.append(Source("random", call, through))
            elif "builtins.next" in names and call.args:
                inner = call.args[0].value
                if index.holds_tagged(inner, index.loaders) or (
                    isinstance(inner, cst.Call)
                    and inner.args
                    and index.holds_tagged(inner.args[0].value, index.loaders)
                ):
                    found.append(Source("data", call, through))
        for read in findall(expr, m.Subscript()):
            if rank_environment_read(index, read):
                found.append(Source("environment", read, through))
        for comp in findall(expr, m.CompFor()):
            if index.loader_loop(comp.iter)[0]:  # type: ignore[attr-defined]
                found.append(Source("data", comp.iter, through))  # type: ignore[attr-defined]
        # `datetime.datetime.now().strftime(...)`: name the reading, not its format
        return [s for s in found if not _outer(s, found)]

    def _returns(
        self, expr: cst.CSTNode, through: tuple[str, ...]
    ) -> list[tuple[cst.CSTNode, tuple[str, ...]]]:
        """The returned values of the local functions ``expr`` calls."""
        found = []
        for call in _calls(expr, self.index):
            callee = self.index.callee(call)
            if callee is None or callee[0] not in self.index.divergence.tainted_returns:
                continue
            function = callee[0]
            for ret in findall(function.body, m.Return()):
                value = ret.value  # type: ignore[attr-defined]
                if value is not None and self.index.enclosing_function(ret) is function:
                    found.append((value, (*through, f"{function.name.value}()")))
        return found

    def _names(self, expr: cst.CSTNode) -> list[cst.BaseExpression]:
        """The variables ``expr`` reads (``self.x`` whole), outside lambdas and
        runtime calls that are the same on every process."""
        found: list[cst.BaseExpression] = []
        index = self.index
        sources = self

        class _Names(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> bool:
                return not index.is_runtime_call(node, *_UNIFORM_RUNTIME_CALLS)

            def visit_Attribute(self, node: cst.Attribute) -> bool:
                if index.key(node) is not None:
                    found.append(node)
                    return False
                key = sources._key(node)
                if key is not None and (
                    key in sources.definitions or key in sources.handed
                ):
                    found.append(node)  # `args.x = ...`: its stores, and `args`
                node.value.visit(self)
                return False

            def visit_Name(self, node: cst.Name) -> bool:
                found.append(node)
                return False

            def visit_Arg(self, node: cst.Arg) -> bool:
                node.value.visit(self)
                return False

            def visit_Lambda(self, node: cst.Lambda) -> bool:
                return False

        if isinstance(expr, cst.Name):
            return [expr]
        expr.visit(_Names())
        return found

    def _key(self, node: cst.CSTNode) -> Key | None:
        """``index.key``, and for an attribute of a variable (``args.local_rank``,
        ``self.args.seed``) the variable's scope with the whole chain: the key
        under which this walk keeps the attribute's stores."""
        key = self.index.key(node)
        if key is not None or not isinstance(node, cst.Attribute):
            return key
        base = self._key(node.value)
        if base is None:
            return None
        return (base[0], f"{base[1]}.{node.attr.value}")

    def _plain_binding(self, key: Key) -> bool:
        """A name bound only by imports, definitions or nothing (a builtin)."""
        scope, name = key
        assignments = getattr(scope, "assignments", None)
        if assignments is None:
            return isinstance(scope, cst.ClassDef)  # `self.x` never assigned
        for assignment in assignments[name]:
            if isinstance(assignment, BuiltinAssignment):
                continue
            node = getattr(assignment, "node", None)
            if not isinstance(
                node, (cst.Import, cst.ImportFrom, cst.FunctionDef, cst.ClassDef)
            ):
                return False
        return True

    # -- definitions -------------------------------------------------------------
    @property
    def definitions(self) -> dict[Key, list[_Definition]]:
        """For each variable (and attribute of one, ``args.x``): what sets it, as
        ("value", expression to follow), ("option", the default of a rank-local
        command-line option ``args.x`` is parsed from),
        ("data", a loader loop's iterable), ("exception", a handler) or
        ("counter", the step counter of ``enumerate(loader)``), each with the
        node that binds it (the statement, loop or call; for a parameter, its
        function)."""
        if self._definitions is None:
            self._definitions = collect_definitions(self)
        return self._definitions

    @property
    def handed(self) -> dict[Key, tuple[HandedOption, ...]]:
        """The rank-local options of the namespaces the batch's other files
        hand this file's functions (``project_namespaces``), by the key of the
        parameter's attribute (``args.local_rank``)."""
        if self._handed is None:
            self._handed, self._handed_nodes = handed_keys(self.index)
        return self._handed

    @property
    def options_by_default(self) -> dict[cst.CSTNode, str]:
        """The flag of each rank-local option (``--local_rank``), by its default."""
        return {
            option.default: option.flag
            for parsed in self.index.rank_local_options.options.values()
            for option in parsed
        }

    def _reaching(
        self, use: cst.CSTNode, key: Key, definitions: list[_Definition]
    ) -> list[_Definition]:
        """The definitions of ``key`` that can reach ``use``: where an earlier
        statement of a block around the use (in its function) rebinds the name
        outright (``seq_len = ...``, or both arms of an ``if``), only the
        definitions from that statement on (and those in other functions, which
        a call in between may run); all of them otherwise."""
        index = self.index
        below: cst.CSTNode = use
        child: cst.CSTNode = use
        for ancestor in index.ancestors(use):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            body = _statements(ancestor)
            position = next((i for i, s in enumerate(body or ()) if s is child), None)
            if body is None or position is None:
                below, child = child, ancestor
                continue
            # A statement's own bindings reach a use in its body (or a `while`
            # test), not one in what it reads first (`lr = lr * scale`, an
            # `if`'s test, a `for`'s iterable).
            in_body = isinstance(below, _SUITES) or isinstance(child, cst.While)
            end = position + 1 if in_body else position
            # A `for` binds its target before every run of its body (TFT's
            # `for batch in valid_loader:` after `for batch in loader:`).
            own = isinstance(child, cst.For) and (
                in_body
                and any(index.key(n) == key for n in findall(child.target, m.Name()))
            )
            for start in range(position - (0 if own else 1), -1, -1):
                if start == position or _rebinds(index, body[start], key):
                    window = body[start:end]
                    function = index.enclosing_function(use)
                    return [
                        d
                        for d in definitions
                        if _inside(index, d[2], window)
                        # set in another function (`global`), which a call may run
                        or (
                            not isinstance(d[2], cst.FunctionDef)
                            and index.enclosing_function(d[2]) is not function
                        )
                    ]
            below, child = child, ancestor
        return definitions

    def _conditions(self, node: cst.CSTNode) -> list[tuple[str, cst.CSTNode]]:
        """The tests of the rank-dependent branches ``node`` is set under (in its
        function), and the ``except`` handlers it is in."""
        divergent = self.index.divergence.divergent
        found: list[tuple[str, cst.CSTNode]] = []
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            if isinstance(ancestor, cst.ExceptHandler):
                found.append(("exception", ancestor))
            elif ancestor in divergent:
                owner = self.index.parent(ancestor)
                if isinstance(owner, cst.Else):
                    owner = self.index.parent(owner)
                test = getattr(owner, "test", None) or getattr(owner, "iter", None)
                if test is not None:
                    found.append(("value", test))
        return found
