"""The questions the divergence analysis's walk asks about the rest of the tree.

Walking a statement (``Divergence._statement``), the analysis asks what a call is
(the same on every rank, rank-local by itself, which local function it runs),
whether a subscript reads a per-process environment variable, whether an
iterable is a data loader or a name holds one, and whether a test is the
runtime's choice of a process. Each answer is recorded in the statement's trace
(``divergence_memo``), so that the walk can be reused on a later tree where the
same questions get the same answers. ``Divergence`` inherits them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from . import divergence_memo as memo
from .divergence_finders import _next_batch
from .divergence_queries import DivergenceQueries
from .random_names import is_random_draw
from .rank_local_calls import (
    _RANK_LOCAL_CALL_PREFIXES,
    _UNIFORM_RUNTIME_CALLS,
    rank_environment_read,
    rank_query,
)
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: The runtime's tests of which process this is.
MAIN_PROCESS_TESTS = ("is_main_process", "is_local_main_process")


class DivergenceQuestions(DivergenceQueries):
    """The recorded questions of ``Divergence``'s walk."""

    index: ModuleIndex
    uniform_calls: frozenset[cst.Call]
    tainted_returns: set[cst.FunctionDef]
    _events: list[tuple[object, ...]] | None
    _static_calls: dict[cst.Call, tuple[bool, bool, cst.FunctionDef | None]]

    def _record(self, *event: object) -> None:
        if self._events is not None:
            self._events.append(event)

    def static_call(self, node: cst.Call) -> tuple[bool, bool, cst.FunctionDef | None]:
        """What ``node`` is, whatever the rank-local names: the same on every rank
        (stop: its arguments do not matter), rank-local by itself (a batch size, a
        random draw during training, the clock, a rank variable's read,
        ``torch.distributed.get_rank()``: the migrated script's runtime starts a
        process group, so ``if dist.get_rank() == 0:`` is one process's branch),
        and the local function it runs."""
        found = self._static_calls.get(node)
        if found is not None:
            return found
        index = self.index
        if node in self.uniform_calls or index.is_runtime_call(
            node, *_UNIFORM_RUNTIME_CALLS
        ):
            found = (True, False, None)
        else:
            qualnames = index.qualnames(node.func)
            hit = (
                any(q.startswith(_RANK_LOCAL_CALL_PREFIXES) for q in qualnames)
                or (
                    any(is_random_draw(q) for q in qualnames)
                    and self.random_is_local(node)
                )
                or rank_environment_read(index, node)
                # `dist.get_rank()`: this process's rank in the runtime's group
                or rank_query(index, node)
                # `opt.get("local_rank", -1)` of `opt = vars(args)`
                or index.rank_local_options.item(node) is not None
            )
            callee = index.callee(node)
            if "builtins.next" in qualnames and _next_batch(index, node):
                hit = True  # a batch of this process's share of a sharded loader
            found = (False, hit, callee[0] if callee is not None else None)
        self._static_calls[node] = found
        return found

    def call_taint(self, node: cst.Call) -> tuple[bool, bool]:
        """(stop, rank-local) for a call met in an expression: ``static_call``, and
        a local function whose return value is rank-local."""
        stop, hit, callee = self.static_call(node)
        returns = None if callee is None else callee in self.tainted_returns
        self._record(memo.CALL, node, stop, hit, returns)
        return stop, hit or bool(returns)

    def environment_read(self, node: cst.Subscript | cst.Attribute) -> bool:
        """``os.environ["RANK"]``: a variable the launcher sets per process; or
        a namespace's dict read by a rank-local option's name
        (``vars(args)["local_rank"]``, ``rank_local_options``), or a
        namespace no variable names read by it (``cfg["args"].local_rank``)."""
        answer = rank_environment_read(self.index, node) or (
            self.index.rank_local_options.item(node) is not None
        )
        self._record(memo.ENVIRON, node, answer)
        return answer

    def loader_loop(self, iterable: cst.BaseExpression) -> tuple[bool, bool]:
        answer = self.index.loader_loop(iterable)
        self._record(memo.LOOP, iterable, answer)
        return answer

    def holds_loader(self, target: cst.BaseExpression) -> bool:
        key = self.index.key(target)
        answer = key is not None and (
            key in self.index.loaders or key in self.index.loader_containers
        )
        self._record(memo.HOLDS, target, answer)
        return answer

    def _main_process_test(self, test: cst.BaseExpression) -> bool:
        """Does ``test`` call the runtime's ``is_main_process()`` or
        ``is_local_main_process()``? (A question about the statement's own
        subtree and the file's runtime alias: the memo needs no record.)"""
        return any(
            self.index.is_runtime_call(call, *MAIN_PROCESS_TESTS)
            for call in findall(test, m.Call())
        )
