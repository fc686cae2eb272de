"""Places that only the processes whose test of the file system came out one way
reach (``if not os.path.exists(path):``), directly or through the call sites of
the function they are in.

Every process tests the file system for itself, at its own moment. Where the
script itself writes the file (on the main process only, once migrated), a
process that tests after the main process has written finds the file and skips
the branch: ``accel.barrier()`` (or any collective) placed there waits forever
for it. ``Divergence.uniform`` does not count such tests (every process sees the
same files when the script starts, so a resume branch is reached by all), so the
rules that place a barrier, or a collective next to a write, ask this too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .file_reads import tests_files

if TYPE_CHECKING:
    from .rule import Rule

_EXITS = (cst.Return, cst.Continue, cst.Break)


def file_test(rule: Rule, node: cst.CSTNode) -> cst.CSTNode | None:
    """The branch (``if``, ``while``, ``x if test else y``) whose test looks at the
    file system and that decides whether ``node`` runs: one around it, an earlier
    ``if os.path.exists(p): return`` in a block around it, or either of those
    around a call of the function ``node`` is in (transitively). None when there
    is none."""
    memo: dict[cst.FunctionDef, cst.CSTNode | None] = rule.__dict__.setdefault(
        "_file_test_memo", {}
    )
    return _test_of(rule, node, memo)


def _test_of(
    rule: Rule, node: cst.CSTNode, memo: dict[cst.FunctionDef, cst.CSTNode | None]
) -> cst.CSTNode | None:
    index = rule.index
    child = node
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.If, cst.While)) and child is not ancestor.test:
            if tests_files(rule, ancestor.test):
                return ancestor
        if isinstance(ancestor, cst.IfExp) and child is not ancestor.test:
            if tests_files(rule, ancestor.test):
                return ancestor
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
            for statement in ancestor.body:
                if statement is child:
                    break
                if _exits_on_test(rule, statement):
                    return statement
        if isinstance(ancestor, cst.FunctionDef):
            return _function_test(rule, ancestor, memo)
        if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
            return None
        child = ancestor
    return None


def _function_test(
    rule: Rule,
    function: cst.FunctionDef,
    memo: dict[cst.FunctionDef, cst.CSTNode | None],
) -> cst.CSTNode | None:
    if function in memo:
        return memo[function]
    memo[function] = None  # recursion: what the other call sites show
    found = None
    for site in rule.index.call_sites(function):
        found = _test_of(rule, site, memo)
        if found is not None:
            break
    memo[function] = found
    return found


def _exits_on_test(rule: Rule, statement: cst.CSTNode) -> bool:
    """``if os.path.exists(cache): return ...`` (or ``continue``/``break``): what
    follows it runs only where the test came out the other way."""
    if not isinstance(statement, cst.If) or not tests_files(rule, statement.test):
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
