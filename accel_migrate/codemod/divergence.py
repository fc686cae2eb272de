"""Where ranks may take different paths, so that no collective may be placed there.

Each rank sees different samples. A value computed from its batch (``loss.item()``,
``len(data)``), from its RNG or from the clock differs between ranks, and so does
any branch, loop or early exit that depends on it. A collective placed where only
some ranks go hangs the job. This module walks every function in statement order,
tracking which names hold rank-local values, and marks the blocks whose execution
is rank-dependent. An attribute ``self.x`` that a method sets from a rank-local
value is rank-local in every method of its class (a Trainer's
``self.samples_seen += x.size(0)`` read by its ``adjust_lr``). Values that come back from ``accel.reduce``, ``accel.global_loss``
or ``accel.gather`` are the same on every rank.

The analysis errs towards "divergent": a rule that cannot prove a place uniform
leaves the code alone and says why. The questions rules ask of its results
(``uniform``, ``trains``, ``setup_position``...) are in ``divergence_queries``;
those the walk asks about the rest of the tree (what a call is, whether an
iterable is a loader), recorded for reuse, in ``divergence_questions``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import libcst as cst
import libcst.matchers as m

from . import divergence_memo as memo
from .analysis import attr_chain
from .divergence_finders import (
    _declared_globals,
    _ExitFinder,
    _TaintedLeaves,
    _TaintFinder,
)
from .divergence_parameters import call_arguments, handed_parameters
from .divergence_questions import MAIN_PROCESS_TESTS, DivergenceQuestions
from .in_place_changes import statement_changes
from .index_syntax import assigned_targets
from .random_names import RANDOM_CALL_PREFIXES, is_random_draw
from .rank_local_calls import (
    CLOCK_PREFIXES,
    DISTRIBUTION_DRAWS,
    DISTRIBUTIONS,
    DRAW_METHODS,
    TENSOR_READ,
    _read_tensor,
    distribution_values,
    method_draw,
)
from .subtrees import findall
from .uniform_lengths import drawn_count, zipped_parts

if TYPE_CHECKING:
    from .analysis import ModuleIndex

__all__ = [
    "CLOCK_PREFIXES",
    "DISTRIBUTIONS",
    "DISTRIBUTION_DRAWS",
    "DRAW_METHODS",
    "MAIN_PROCESS_TESTS",
    "RANDOM_CALL_PREFIXES",
    "TENSOR_READ",
    "Divergence",
    "distribution_values",
    "is_random_draw",
    "method_draw",
]


#: The most rounds of the walk over the file: a rank handed through more
#: local functions than this, each defined above its caller, is cut there.
_ROUNDS = 16
_MUTATORS = {"append", "extend", "update", "add", "add_", "insert", "copy_", "fill_"}


class Divergence(DivergenceQuestions):
    def __init__(
        self, index: ModuleIndex, uniform_calls: frozenset[cst.Call] = frozenset()
    ) -> None:
        self.index = index
        #: Calls a rule is about to make the same on every rank (a loss read that
        #: becomes ``accel.global_loss(loss).item()``): read as they will be.
        self.uniform_calls = uniform_calls
        self.divergent: set[cst.CSTNode] = set()
        #: ``x += value`` statements whose value differs between ranks.
        self.local_increments: set[cst.AugAssign] = set()
        #: ``x.append(value)``-like calls and ``x[i] = value`` statements whose value
        #: differs between ranks.
        self.local_mutations: set[cst.Call] = set()
        self.local_stores: set[cst.Assign] = set()
        #: Calls made as statements with an argument that differs between ranks
        #: (``scheduler.step(val_loss)``).
        self.local_calls: set[cst.Call] = set()
        #: ``x.item()`` / ``float(x)`` reads, in the arguments of such a call
        #: (``print(f"acc {acc.item()}")``), of a tensor that differs between ranks.
        self.local_reads: set[cst.Call] = set()
        #: For each such call, the variables in its arguments that hold rank-local
        #: values there (``n`` of ``print(f"{n} samples")``, ``n = len(x)``).
        self.local_values: dict[cst.Call, list[cst.Name | cst.Attribute]] = {}
        self._current_globals: frozenset[str] = frozenset()
        #: Walking the module's own statements: a name they make rank-local is a
        #: global a function of the file may read (``hard_samples()`` reading
        #: the batch ``x`` of a module-level loop over a loader).
        self._module_walk = False
        self.tainted_returns: set[cst.FunctionDef] = set()
        self.tainted_globals: set[str] = set()
        #: ``self.x`` attributes that a method of a class sets from a rank-local
        #: value (``self.samples_seen += x.size(0)``): rank-local in every method
        #: of that class (state an object keeps across calls).
        self.tainted_attributes: set[tuple[cst.ClassDef, str]] = set()
        #: Parameters of local functions that a call of the file hands a value
        #: read from a rank variable (``train(model, args.local_rank)``), or
        #: whose default reads one: rank-local at the function's entry
        #: (``divergence_parameters``).
        self.tainted_parameters: set[tuple[cst.FunctionDef, str]] = set()
        self._identities: dict[object, frozenset[str]] = {}
        self.current_class: cst.ClassDef | None = None
        #: The statement walks of this file's trees (``divergence_memo``).
        shared = index.divergence_memo
        self._memo: memo.DivergenceMemo = shared or memo.DivergenceMemo()
        #: What the top-level statement being walked asked and added (a Trace's).
        self._events: list[tuple[object, ...]] | None = None
        self._static_calls: dict[
            cst.Call, tuple[bool, bool, cst.FunctionDef | None]
        ] = {}
        self._function_uniform: dict[cst.FunctionDef, bool] = {}
        self._setup_functions: dict[cst.FunctionDef, bool] = {}
        self._trains: dict[cst.CSTNode, bool] = {}
        # Return values feed callers, parameters callees: repeat until the
        # function summaries settle (each round follows one more hop, and the
        # summaries only grow), at most _ROUNDS times.
        for _ in range(_ROUNDS):
            before = self._summary_sizes()
            self._analyse_all()
            if self._summary_sizes() == before:
                break

    def _summary_sizes(self) -> tuple[int, int, int, int]:
        return (
            len(self.tainted_returns),
            len(self.tainted_globals),
            len(self.tainted_attributes),
            len(self.tainted_parameters),
        )

    # -- the walk --------------------------------------------------------------------------
    def _analyse_all(self) -> None:
        self.divergent.clear()
        self.local_increments.clear()
        self.local_mutations.clear()
        self.local_stores.clear()
        self.local_calls.clear()
        self.local_reads.clear()
        self.local_values.clear()
        self._module_walk = True
        try:
            self._walk_top(self.index.module.body, set(self.tainted_globals))
        finally:
            self._module_walk = False
        for function in self.index.functions:
            body = (
                function.body.body
                if isinstance(function.body, cst.IndentedBlock)
                else ()
            )
            self._current_globals = self._declared_globals(function)
            cls = self.index.enclosing_class(function.name)
            self.current_class = cls
            attributes = {name for c, name in self.tainted_attributes if c is cls}
            # (a parameter of the same name is not the global)
            globals_read = set(self.tainted_globals) - _parameters(function)
            # `def main(args)` handed `parser.parse_args()`: `args.local_rank`
            options = self.index.rank_local_options.parameters(function)
            # `def train(..., rank)` called as `train(..., args.local_rank)`
            handed = handed_parameters(self, function)
            self._walk_top(body, globals_read | attributes | options | handed)
            self._current_globals = frozenset()
            self.current_class = None

    def _declared_globals(self, function: cst.FunctionDef) -> frozenset[str]:
        found = self._memo.declared_globals.get(function)
        if found is None:
            found = frozenset(_declared_globals(function))
            self._memo.declared_globals[function] = found
        return found

    def _walk_top(self, body: Sequence[cst.CSTNode], tainted: set[str]) -> set[str]:
        """``_walk`` of a function's (or the module's) body, each statement's walk
        reused where an earlier tree's (or round's) holds here (``divergence_memo``)."""
        for position, statement in enumerate(body):
            key = self._key(statement, tainted)
            trace = self._memo.find(self, statement, key) if memo.REUSE else None
            if trace is not None:
                tainted = set(trace.tainted_after)
            else:
                self._events = []
                try:
                    tainted = self._statement(statement, tainted)
                    events = tuple(self._events)
                finally:
                    self._events = None
                self._memo.keep(statement, memo.Trace(key, events, frozenset(tainted)))
            if self._exits_divergently(statement):
                self.divergent.update(body[position + 1 :])
        return tainted

    def _key(
        self, statement: cst.CSTNode, tainted: set[str], nested: bool = False
    ) -> memo.Key:
        """The walk's state where ``statement`` starts (``Trace.key``): the
        rank-local names, whether it or a block around it in its function is
        divergent (what ``runs_divergently`` reads above it), the function's
        ``global`` names, whether it is a method, a walk of the module's code,
        and the blocks in it already divergent (a loop's body walked again)."""
        return (
            frozenset(tainted),
            statement in self.divergent or self.runs_divergently(statement),
            self._current_globals,
            self.current_class is None,
            self._module_walk,
            memo.inside(statement, self.divergent) if nested else frozenset(),
        )

    def _walk(self, body: Sequence[cst.CSTNode], tainted: set[str]) -> set[str]:
        for position, statement in enumerate(body):
            tainted = memo.walk_nested(self, statement, tainted)
            if self._exits_divergently(statement):
                self._add(
                    memo.DIVERGENT_ALL, self.divergent, tuple(body[position + 1 :])
                )
        return tainted

    def _add(self, kind: int, results: set[Any], item: Any) -> None:
        """Add ``item`` to one of the analysis's results, recorded for reuse."""
        if kind == memo.DIVERGENT_ALL:
            results.update(item)
        else:
            results.add(item)
        if self._events is not None:
            self._events.append((kind, item))

    def _statement(self, node: cst.CSTNode, tainted: set[str]) -> set[str]:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                tainted = self._small(small, tainted)
            return tainted
        for header in _headers(node):
            # `if train(args.local_rank):`: its calls hand ranks on too
            call_arguments(self, header, tainted)
        if isinstance(node, cst.If):
            # A test of the runtime's choice of a process (``if
            # accel.is_main_process():``, AM047's or a second run's) is no
            # rank-local value of the script's (a progress bar's ``disable=``
            # is not), but its branch runs on one process only.
            one_process = self._main_process_test(node.test)
            if one_process or self._tainted(node.test, tainted):
                self._add(memo.DIVERGENT, self.divergent, node.body)
                if node.orelse is not None:
                    self._add(memo.DIVERGENT, self.divergent, node.orelse)
            after_body = self._block(node.body, set(tainted))
            after_else = (
                self._block(node.orelse, set(tainted)) if node.orelse else tainted
            )
            result = after_body | after_else
            if one_process or self._tainted(node.test, tainted):
                # Set on some ranks only (`patience = 0` / `patience += 1`).
                self._bind_all(node, result)
            return result
        if isinstance(node, cst.Else):
            return self._block(node.body, tainted)
        if isinstance(node, cst.For):
            return self._for(node, tainted)
        if isinstance(node, cst.While):
            if self._tainted(node.test, tainted):
                self._add(memo.DIVERGENT, self.divergent, node.body)
            once = self._block(node.body, set(tainted))
            return self._block(node.body, once) | once
        if isinstance(node, cst.With):
            for item in node.items:
                if item.asname is not None and self._tainted(item.item, tainted):
                    self._bind(item.asname.name, True, tainted)
            return self._block(node.body, tainted)
        if isinstance(node, cst.Try):
            tainted = self._block(node.body, tainted)
            for handler in node.handlers:
                # An exception is usually raised on one rank only.
                self._add(memo.DIVERGENT, self.divergent, handler)
                tainted |= self._block(handler.body, set(tainted))
            if node.orelse is not None:
                tainted = self._block(node.orelse.body, tainted)
            if node.finalbody is not None:
                tainted = self._block(node.finalbody.body, tainted)
            return tainted
        if isinstance(node, cst.Match) and self._tainted(node.subject, tainted):
            self._add(memo.DIVERGENT, self.divergent, node)
        return tainted

    def _block(self, block: cst.CSTNode | None, tainted: set[str]) -> set[str]:
        if block is None:
            return tainted
        if isinstance(block, (cst.If, cst.Else)):
            return self._statement(block, tainted)
        if isinstance(block, cst.IndentedBlock):
            return self._walk(block.body, tainted)
        if isinstance(block, cst.SimpleStatementSuite):
            for small in block.body:
                tainted = self._small(small, tainted)
            return tainted
        return tainted

    def _for(self, node: cst.For, tainted: set[str]) -> set[str]:
        over_loader, index_target = self.loader_loop(node.iter)
        if over_loader and any(
            self._tainted(part, tainted)
            for part in zipped_parts(
                self.index, node.iter, lambda part: self.loader_loop(part)[0]
            )
        ):
            # `zip(loader, weights)` with `weights` grown from this process's
            # share: the loop stops at the shorter, so its count may differ
            self._add(memo.DIVERGENT, self.divergent, node.body)
        if over_loader:
            targets = node.target
            if index_target and isinstance(targets, cst.Tuple) and targets.elements:
                # enumerate(loader): the step counter is the same on every rank.
                for element in targets.elements[1:]:
                    self._bind(element.value, True, tainted)
                self._bind(targets.elements[0].value, False, tainted)
            else:
                self._bind(targets, True, tainted)
        else:
            iter_tainted = self._tainted(node.iter, tainted)
            if iter_tainted and not drawn_count(
                self.index, node.iter, lambda part: self._tainted(part, tainted)
            ):
                # the number of iterations differs (not that of a draw of a
                # fixed size: `for i in random.sample(range(n), k)`)
                self._add(memo.DIVERGENT, self.divergent, node.body)
            self._bind(node.target, iter_tainted, tainted)
        once = self._block(node.body, set(tainted))
        again = self._block(node.body, set(once))
        result = once | again
        if node.orelse is not None:
            result = self._block(node.orelse.body, result)
        return result

    def _small(self, node: cst.BaseSmallStatement, tainted: set[str]) -> set[str]:
        call_arguments(self, node, tainted)
        if isinstance(node, cst.Assign):
            value_tainted = self._tainted(node.value, tainted)
            for target in node.targets:
                if value_tainted and isinstance(target.target, cst.Subscript):
                    self._add(memo.STORE, self.local_stores, node)
                self._bind(target.target, value_tainted, tainted)
                if (
                    not value_tainted
                    and isinstance(target.target, cst.Subscript)
                    and self.runs_divergently(node)
                ):
                    # `seen[k] = 1` where only some ranks go: its keys differ
                    self._bind(target.target.value, True, tainted)
            self._parsed_options(node, tainted)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self._bind(node.target, self._tainted(node.value, tainted), tainted)
            self._parsed_options(node, tainted)
        elif isinstance(node, cst.AugAssign):
            if (
                self._tainted(node.value, tainted)
                or self._tainted_index(node.target, tainted)
                or self.runs_divergently(node)
            ):
                # A rank-local value, a rank-local cell (`class_total[label] += 1`)
                # or a rank-dependent number of runs (`+= 1` in a loop over this
                # process's samples, or under a test of them).
                self._add(memo.INCREMENT, self.local_increments, node)
                self._bind(node.target, True, tainted)
        elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
            call = node.value
            if any(self._tainted(arg.value, tainted) for arg in call.args):
                self._add(memo.LOCAL_CALL, self.local_calls, call)
                leaves = _TaintedLeaves(self, tainted)
                for arg in call.args:
                    arg.value.visit(leaves)
                    for read in findall(arg.value, TENSOR_READ):
                        assert isinstance(read, cst.Call)
                        if self._tainted(_read_tensor(read), tainted):
                            self._add(memo.READ, self.local_reads, read)
                self.local_values[call] = leaves.leaves
                self._record(memo.VALUES, call, tuple(leaves.leaves))
            if (
                isinstance(call.func, cst.Attribute)
                and call.func.attr.value in _MUTATORS
                and any(self._tainted(arg.value, tainted) for arg in call.args)
            ):
                self._add(memo.MUTATION, self.local_mutations, call)
                self._bind(call.func.value, True, tainted)
        elif isinstance(node, cst.Return) and node.value is not None:
            function = self.index.enclosing_function(node)
            self._record(memo.ENCLOSING, node, function is not None)
            if function is not None and self._tainted(node.value, tainted):
                self.tainted_returns.add(function)
                self._record(memo.RETURN, node)
        self._changed_in_place(node, tainted)
        return tainted

    def _changed_in_place(self, node: cst.CSTNode, tainted: set[str]) -> None:
        """A container grown or shrunk, a tensor written in place
        (``in_place_changes``: ``hard.append(1.0)``, ``queue.pop()``, ``del
        d[k]``, ``buf.zero_()``) where only some ranks go, or by an argument
        that differs between them: its length or values differ between ranks,
        even when what is added or written is the same on every rank."""
        changes = statement_changes(self.index, node)
        if not changes:
            return
        divergently = self.runs_divergently(node)
        for receiver, arguments in changes:
            if divergently or any(self._tainted(a, tainted) for a in arguments):
                self._bind(receiver, True, tainted)

    def _parsed_options(
        self, node: cst.Assign | cst.AnnAssign, tainted: set[str]
    ) -> None:
        """``args = parser.parse_args()``: ``args.local_rank`` is rank-local
        where an option's default reads a rank variable (``rank_local_options``)."""
        bound = self.index.rank_local_options.bound(node)
        self._record(memo.OPTIONS, node, bound)
        for name in sorted(bound):
            self._bind_name(name, True, tainted)

    def _bind_all(self, node: cst.CSTNode, tainted: set[str]) -> None:
        """Every variable that a statement under ``node`` sets is rank-local."""
        for statement in findall(node, m.Assign() | m.AugAssign() | m.AnnAssign()):
            targets = assigned_targets(statement)
            for target in targets:
                if isinstance(target, (cst.Name, cst.Attribute, cst.Tuple, cst.List)):
                    self._bind(target, True, tainted)

    def _bind(
        self, target: cst.BaseExpression, is_tainted: bool, tainted: set[str]
    ) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value, is_tainted, tainted)
            return
        if isinstance(target, cst.StarredElement):
            self._bind(target.value, is_tainted, tainted)
            return
        name = attr_chain(target)
        if name is None:
            if isinstance(target, cst.Subscript) and is_tainted:
                self._bind(target.value, True, tainted)
            return
        if is_tainted and self.holds_loader(target):
            # A sharded loader has the same length and the same number of batches
            # on every rank, whatever data it was built from.
            is_tainted = False
        self._bind_name(name, is_tainted, tainted)

    def _bind_name(self, name: str, is_tainted: bool, tainted: set[str]) -> None:
        """Mark the variable (or ``self.x``-like chain) ``name`` rank-local or not."""
        if is_tainted:
            tainted.add(name)
            if name in self._current_globals or self._module_walk:
                self._add(memo.GLOBAL, self.tainted_globals, name)
            if self.current_class is not None and name.startswith("self."):
                self.tainted_attributes.add((self.current_class, name))
                self._record(memo.ATTRIBUTE, name)
        else:
            tainted.discard(name)

    def _tainted(self, expr: cst.CSTNode, tainted: set[str]) -> bool:
        return _TaintFinder(self, tainted).found(expr)

    def _tainted_index(self, target: cst.BaseExpression, tainted: set[str]) -> bool:
        """``counts[label]``: a cell chosen by a rank-local value."""
        return isinstance(target, cst.Subscript) and any(
            self._tainted(element.slice, tainted) for element in target.slice
        )

    def _exits_divergently(self, statement: cst.CSTNode) -> bool:
        """A rank-dependent branch that leaves the block early (break, continue, return)."""
        if not isinstance(statement, cst.If):
            return False
        blocks = [statement.body, statement.orelse]
        if not any(b is not None and b in self.divergent for b in blocks):
            return False
        finder = _ExitFinder()
        statement.visit(finder)
        return finder.found


def _headers(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The expressions a compound statement evaluates before its body: an
    ``if``'s or ``while``'s test, a ``for``'s iterable, ``with`` items, a
    ``match``'s subject."""
    if isinstance(node, (cst.If, cst.While)):
        return [node.test]
    if isinstance(node, cst.For):
        return [node.iter]
    if isinstance(node, cst.With):
        return [item.item for item in node.items]
    if isinstance(node, cst.Match):
        return [node.subject]
    return []


def _parameters(function: cst.FunctionDef) -> set[str]:
    """The names ``function``'s parameters bind."""
    params = function.params
    found = [*params.posonly_params, *params.params, *params.kwonly_params]
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            found.append(star)
    return {p.name.value for p in found}
