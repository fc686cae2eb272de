"""Parameters of a local function that receive a process's rank.

A script half-written for DDP hands its rank on as a plain value::

    def train(model, loader, optimizer, epochs, rank):
        ...
        if rank in (-1, 0):
            torch.save(model.state_dict(), "ck.pt")

    train(model, loader, optimizer, args.epochs, args.local_rank)

``rank`` is as rank-local as ``args.local_rank``: a parameter of a local
function (of the same file) is rank-local at the function's entry where a call
of the file, at any of its call sites, hands it (by position or by keyword) a
value that is rank-local in the divergence walk *and* reads a rank variable
(an ``os.environ["LOCAL_RANK"]``-like read, a rank-local command-line option
``args.local_rank`` (``rank_local_options``), a name computed from them in the
calling function, a parameter that is itself such a rank), or a value that
asks ``torch.distributed.get_rank()`` (itself, through the names it reads or
the local functions it calls: ``rank = dist.get_rank() if
dist.is_initialized() else 0``), or where its default reads one. The calls asked are those of
every statement, a compound statement's header too (``if
train(args.local_rank):``, a ``for``'s iterable, a ``with`` item). A value that is rank-local for another reason (a batch, a
loss, the clock) does not make the parameter rank-local here: a helper handed
this process's batch is the data's business, not the rank's. A parameter
handed a value the same on every process stays the same on every process.

The walk asks ``call_arguments`` at each statement; what it adds
(``Divergence.tainted_parameters``) is part of the function walk's entry set,
and so of the memo's key (``divergence_memo``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from . import divergence_memo as memo
from .analysis import attr_chain
from .index_syntax import _all_params, assigned_targets, bind_arguments
from .subtrees import findall

if TYPE_CHECKING:
    from .divergence import Divergence


def handed_parameters(
    divergence: Divergence, function: cst.FunctionDef
) -> frozenset[str]:
    """The parameters of ``function`` that are rank-local at its entry: handed a
    rank by a call of the file, or defaulting to one."""
    found = {name for f, name in divergence.tainted_parameters if f is function}
    for param in _all_params(function.params):
        default = param.default
        if default is not None and divergence.index.rank_local_options._rank_local(
            default
        ):
            found.add(param.name.value)
    return frozenset(found)


def call_arguments(
    divergence: Divergence, node: cst.CSTNode, tainted: set[str]
) -> None:
    """Record the parameters of the local functions that the calls in ``node``
    (a small statement) hand a rank."""
    for call in findall(node, m.Call()):
        assert isinstance(call, cst.Call)
        if not call.args:
            continue
        callee = divergence.index.callee(call)
        if callee is None:
            continue
        function, bound = callee
        answers = []
        options = divergence.index.rank_local_options
        for name, value in bind_arguments(function, bound, call):
            local = divergence._tainted(value, tainted)
            # `train(dist.get_rank())`, `r = dist.get_rank()` ... `train(r)`:
            # rank-local in the walk, and a read of the rank too
            rank = (local and _reads_rank(divergence, value)) or options._rank_local(
                value, environment=False
            )
            answers.append((name, value, rank))
        divergence._record(memo.HANDED, call, function, tuple(answers))
        for name, _, rank in answers:
            if rank and (function, name) not in divergence.tainted_parameters:
                divergence.tainted_parameters.add((function, name))
                divergence._record(memo.PARAMETER, function, name)


def replay_handed(divergence: Divergence, event: tuple[object, ...]) -> bool:
    """Does the recorded question (``memo.HANDED``) get the same answer? (Whether
    each argument is rank-local was recorded by the walk's own questions.)"""
    _, call, function, answers = event
    assert isinstance(call, cst.Call)
    callee = divergence.index.callee(call)
    if callee is None or callee[0] is not function:
        return False
    return all(
        not rank or _reads_rank(divergence, value)
        for _, value, rank in answers  # type: ignore[attr-defined]
    )


def _reads_rank(divergence: Divergence, value: cst.BaseExpression) -> bool:
    """Does ``value`` read a rank variable, directly, through the local names
    and functions it reads, or through a name of its function that holds one?"""
    if divergence.index.rank_local_options._rank_local(value):
        return True
    chains = _chains(value)
    if not chains:
        return False
    function = divergence.index.enclosing_function(value)
    handed = None if function is None else handed_parameters(divergence, function)
    key = (function, handed)
    identity = divergence._identities.get(key)
    if identity is None:
        identity = divergence._identities[key] = _identity(divergence, function)
    return any(chain in identity for chain in chains)


def _chains(value: cst.BaseExpression) -> list[str]:
    """The variables and attribute chains ``value`` reads (outside lambdas)."""
    found = []
    for node in findall(value, m.Name() | m.Attribute()):
        chain = attr_chain(node)  # type: ignore[arg-type]
        if chain is not None:
            found.append(chain)
    return found


def _identity(
    divergence: Divergence, function: cst.FunctionDef | None
) -> frozenset[str]:
    """The names (and ``args.local_rank``-like chains) of ``function`` (or the
    module) that hold a rank: the namespaces' rank-local options, its handed
    parameters, and what it assigns from them (flow-insensitive, a few hops)."""
    options = divergence.index.rank_local_options
    scope: cst.CSTNode = divergence.index.module if function is None else function
    found: set[str] = set()
    if function is not None:
        found |= options.parameters(function) | handed_parameters(divergence, function)
    assignments = [
        s
        for s in findall(scope, m.Assign() | m.AnnAssign())
        if divergence.index.enclosing_function(s) is function
    ]
    for statement in assignments:
        found |= options.bound(statement)
    for _ in range(len(assignments) + 1):  # a fixpoint: each round adds one
        before = len(found)
        for statement in assignments:
            value = getattr(statement, "value", None)
            if value is None or not (
                options._rank_local(value) or any(c in found for c in _chains(value))
            ):
                continue
            targets = assigned_targets(statement)
            for target in targets:
                chain = attr_chain(target)
                if chain is not None:
                    found.add(chain)
        if len(found) == before:
            break
    return frozenset(found)
