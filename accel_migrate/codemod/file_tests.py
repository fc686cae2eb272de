"""Places that only the processes whose test of the file system came out one way
reach (``if not os.path.exists(path):``), directly or through the call sites of
the function they are in.

Every process tests the file system for itself, at its own moment. Where the
script itself writes the file (on the main process only, once migrated), a
process that tests after the main process has written finds the file and skips
the branch: ``accel.barrier()`` (or any collective) placed there waits forever
for it. ``Divergence.uniform`` does not count such tests (every process sees the
same files when the script starts, so a resume branch is reached by all):
``ModuleIndex.uniform``, which every rule asks before it places a collective
(``accel.reduce``, ``accel.gather``, ``accel.global_loss``, ``accel.state_dict``
under FSDP, ``accel.barrier``), asks this too (``racy_file_test``), except
for a test that cannot see a file the run itself writes: one made where the
script starts, before anything trains, whose branch writes nothing (a resume
branch ``if os.path.isfile(args.resume): model.load_state_dict(...)``); every
process sees there the files the script started with. A download or cache
branch (``if not os.path.exists(root): download(root)``) writes what it tests:
the main process may have written it before another tests. A test of a path
made from a value each process has its own of (``tempfile.mkdtemp()``,
``os.getpid()``) is not counted either: each process writes and tests its own
file (AM010 leaves such a save as it is).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .file_reads import looks_at_files, tests_files
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex
    from .rule import Rule

_EXITS = (cst.Return, cst.Continue, cst.Break)


def file_test(rule: Rule, node: cst.CSTNode) -> cst.CSTNode | None:
    """The branch (``if``, ``while``, ``x if test else y``) whose test looks at the
    file system and that decides whether ``node`` runs: one around it, an earlier
    ``if os.path.exists(p): return`` in a block around it, or either of those
    around a call of the function ``node`` is in (transitively). None when there
    is none."""
    return index_file_test(rule.index, node)


def index_file_test(index: ModuleIndex, node: cst.CSTNode) -> cst.CSTNode | None:
    """``file_test`` from the module's index alone."""
    memo: dict[cst.FunctionDef, cst.CSTNode | None] = index.__dict__.setdefault(
        "_file_test_memo", {}
    )
    return _test_of(index, node, memo, _any_test)


def racy_file_test(index: ModuleIndex, node: cst.CSTNode) -> cst.CSTNode | None:
    """``index_file_test``, leaving out the tests every process makes on the
    files the script started with (``_sees_start_files``): what
    ``ModuleIndex.uniform`` asks before a rule places a collective."""
    memo: dict[cst.FunctionDef, cst.CSTNode | None] = index.__dict__.setdefault(
        "_racy_file_test_memo", {}
    )
    return _test_of(
        index,
        node,
        memo,
        lambda test: not _sees_start_files(index, test) and not _own_paths(index, test),
    )


def every_call_file_test(
    index: ModuleIndex, node: cst.CSTNode, depth: int = 0
) -> cst.CSTNode | None:
    """A test of the file system that ``node`` runs only after passing, on every
    way to it: one around it in its function, or one around every call of that
    function (which has one at least); None otherwise. (``file_test`` takes any
    call: one way to it under a test is enough for a barrier to hang.)"""
    child = node
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.If, cst.While, cst.IfExp)):
            if child is not ancestor.test and tests_files(index, ancestor.test):
                return ancestor
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
            for statement in ancestor.body:
                if statement is child:
                    break
                if _exits_on_test(index, statement):
                    return statement
        if isinstance(ancestor, cst.FunctionDef):
            sites = index.call_sites(ancestor)
            if not sites or depth > 3:
                return None
            found = [every_call_file_test(index, s, depth + 1) for s in sites]
            return found[0] if all(t is not None for t in found) else None
        if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
            return None
        child = ancestor
    return None


def _any_test(test: cst.CSTNode) -> bool:
    return True


def _sees_start_files(index: ModuleIndex, test: cst.CSTNode) -> bool:
    """Is ``test`` (a branch on the file system) made where the script starts,
    before anything trains (``Divergence.setup_position``), with nothing in its
    branch (or a local function that branch calls) that may write a file? Every
    process then sees the files the run started with: the main process writes
    none of them first."""
    if not isinstance(test, cst.If) or not index.divergence.setup_position(test):
        return False
    return not _may_write(index, test, 0)


def _own_paths(index: ModuleIndex, test: cst.CSTNode) -> bool:
    """Does ``test`` look only at paths made from a value each process has its own
    of (a folder from ``tempfile.mkdtemp()``, ``os.getpid()``)? AM010 leaves a
    save into such a path as it is: each process writes its own file and tests
    its own, which no other process writes, so there is no main process to
    test before or after."""
    from .file_changes import per_process

    calls = [
        c
        for c in findall(getattr(test, "test", test), m.Call())
        if looks_at_files(index, c)
    ]
    return bool(calls) and all(
        c.args and per_process(index, c.args[0].value) for c in calls
    )


#: Parts of a callee's name that may write, make or remove files
#: (``torch.save``, ``os.makedirs``, ``download_url``, ``extractall``).
_WRITING_WORDS = (
    "save",
    "write",
    "dump",
    "download",
    "retrieve",
    "extract",
    "mkdir",
    "makedirs",
    "copy",
    "move",
    "remove",
    "unlink",
    "rename",
    "replace",
    "touch",
    "rmtree",
    "system",
    "popen",
    "run",
    "call",
)


def _may_write(index: ModuleIndex, node: cst.CSTNode, depth: int) -> bool:
    from .save_calls import OPEN_CALLS, write_mode

    for call in findall(node, m.Call()):
        if index.is_call_to(call, OPEN_CALLS):
            if write_mode(call) is not None:
                return True
            continue
        func = call.func
        name = (
            func.attr.value
            if isinstance(func, cst.Attribute)
            else func.value if isinstance(func, cst.Name) else ""
        ).lower()
        if not name or any(word in name for word in _WRITING_WORDS):
            return True
        if any(
            arg.keyword is not None and arg.keyword.value == "download"
            for arg in call.args
        ):
            return True
        callee = index.callee(call)
        if callee is not None and (
            depth >= 2 or _may_write(index, callee[0], depth + 1)
        ):
            return True
    return False


def _test_of(
    index: ModuleIndex,
    node: cst.CSTNode,
    memo: dict[cst.FunctionDef, cst.CSTNode | None],
    counts: Callable[[cst.CSTNode], bool],
) -> cst.CSTNode | None:
    child = node
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.If, cst.While)) and child is not ancestor.test:
            if tests_files(index, ancestor.test) and counts(ancestor):
                return ancestor
        if isinstance(ancestor, cst.IfExp) and child is not ancestor.test:
            if tests_files(index, ancestor.test) and counts(ancestor):
                return ancestor
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
            for statement in ancestor.body:
                if statement is child:
                    break
                if _exits_on_test(index, statement) and counts(statement):
                    return statement
        if isinstance(ancestor, cst.FunctionDef):
            return _function_test(index, ancestor, memo, counts)
        if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
            return None
        child = ancestor
    return None


def _function_test(
    index: ModuleIndex,
    function: cst.FunctionDef,
    memo: dict[cst.FunctionDef, cst.CSTNode | None],
    counts: Callable[[cst.CSTNode], bool],
) -> cst.CSTNode | None:
    if function in memo:
        return memo[function]
    memo[function] = None  # recursion: what the other call sites show
    found = None
    for site in index.call_sites(function):
        found = _test_of(index, site, memo, counts)
        if found is not None:
            break
    memo[function] = found
    return found


def _exits_on_test(index: ModuleIndex, statement: cst.CSTNode) -> bool:
    """``if os.path.exists(cache): return ...`` (or ``continue``/``break``): what
    follows it runs only where the test came out the other way."""
    if not isinstance(statement, cst.If) or not tests_files(index, statement.test):
        return False
    body = statement.body
    lines = body.body if isinstance(body, cst.IndentedBlock) else [body]
    return any(
        isinstance(small, _EXITS)
        for line in lines
        if isinstance(line, cst.SimpleStatementLine)
        for small in line.body
    )


def describe(rule: Rule, test: cst.CSTNode) -> str:
    """``the test of the file system at line 54 (`if not os.path.exists(p)`)``."""
    line = rule.original_line(test)
    code = cst.Module([]).code_for_node
    if isinstance(test, (cst.If, cst.While)):
        keyword = "while" if isinstance(test, cst.While) else "if"
        shown = f"{keyword} {code(test.test)}"
    elif isinstance(test, cst.IfExp):
        shown = f"... if {code(test.test)} else ..."
    else:
        shown = code(test).strip().splitlines()[0]
    return f"the test of the file system at line {line} (`{shown}`)"


def file_test_note(rule: Rule, test: cst.CSTNode, what: str = "it") -> str:
    """Why no barrier goes under ``test`` (after ``what``), and where it should go
    instead."""
    return (
        f"{what} runs only on the processes that pass {describe(rule, test)}: a "
        "process that tests after the main process has written the file skips it, "
        "so accel.barrier() there would wait for it forever; put accel.barrier() "
        "where every process passes, before that test"
    )


def collective_note(rule: Rule, node: cst.CSTNode) -> str:
    """Where a test of the file system decides whether ``node`` runs (which makes
    ``ModuleIndex.uniform`` false there): ``" (it runs only on the processes that
    pass ...)"``, for the finding of a rule that places no collective there; empty
    otherwise."""
    test = racy_file_test(rule.index, node)
    if test is None:
        return ""
    return (
        f" (it runs only on the processes that pass {describe(rule, test)}: each "
        "process tests the file system at its own moment, and one that tests "
        "after the main process has written the file goes the other way)"
    )
