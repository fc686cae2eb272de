"""Calls that copy, move, remove or fill files by their path (``shutil.copyfile``,
``shutil.move``, ``os.remove``, ``Path.rename``, ``Path.touch``...), for AM017
(``rules/main_process_writes``): which call is one, and its rewrite to the main
process only, where ``accel.save`` and the other writes go, in order, with an
``accel.barrier()`` after it where the path it makes is read or used again later.
Left on every process, with a needs-review finding, where that is not safe: its
result is used, a path each process makes for itself, a file test around it, a
call that only some processes reach.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
from libcst.metadata import PositionProvider

from .array_writes import array_write
from .file_changes import PATH_CHANGERS, PATH_WRITERS, argument, per_process
from .file_reads import loops
from .file_tests import file_test, file_test_note
from .names import FILE_CHANGERS, SAVES

if TYPE_CHECKING:
    from .rules.main_process_writes import MainProcessWrites


def file_change(
    rule: MainProcessWrites, call: cst.Call
) -> tuple[str, cst.BaseExpression | None, list[cst.BaseExpression]] | None:
    """For a call that copies, moves, removes or fills a file by its path: its
    name, the path it makes (None when it only removes) and every path it
    touches."""
    from .rules.output_folders import is_path  # the rules import this module

    made: cst.BaseExpression | None = None
    names = rule.qualnames(call.func) & FILE_CHANGERS.keys()
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if names:
        name = sorted(names)[0]
        where = FILE_CHANGERS[name]
        if where is not None:
            made = argument(call, *where)
        return name, made, positional
    func = call.func
    if not (
        isinstance(func, cst.Attribute)
        and func.attr.value in PATH_CHANGERS
        and is_path(rule, func.value)
    ):
        return None
    method = PATH_CHANGERS[func.attr.value]
    if method == "self":
        made = func.value
    elif isinstance(method, tuple):
        made = argument(call, *method)
    return f"Path.{func.attr.value}", made, [func.value, *positional]


def change_files(
    rule: MainProcessWrites,
    original: cst.Call,
    updated: cst.Call,
    name: str,
    made: cst.BaseExpression | None,
    paths: list[cst.BaseExpression],
) -> cst.BaseExpression:
    """``updated`` (the call ``original``, which ``file_change`` names ``name``,
    making ``made`` and touching ``paths``) on the main process only, with a
    barrier after it where what it makes is used again; unchanged, with a
    needs-review finding, where that is not safe."""
    if any(arg.star for arg in original.args):
        return updated
    if not isinstance(rule.parent(original), cst.Expr):
        rule.report(
            original,
            "needs-review",
            f"{name}(...) changes files on every process, racing with the others, "
            "and its result is used: on the main process only "
            "(accel.on_main_process) the others would get no result",
            if_migrated=True,
        )
        return updated
    if any(per_process(rule.index, path) for path in paths):
        if made is not None:
            rule.report(
                original,
                "needs-review",
                f"{name}(...) with a path each process makes for itself "
                "(tempfile, os.getpid): left on every process; check that what it "
                "copies or moves is written by every process",
                if_migrated=True,
            )
        return updated  # each process removes its own temporary file
    if made is not None and (
        rule._file_reads.read_again(original, made) or _used_again(rule, original, made)
    ):
        line = rule.parent(rule.parent(original))
        test = file_test(rule, original)
        if test is not None:
            rule.report(
                original,
                "needs-review",
                f"{name}(...) makes a file that the script uses again, and "
                f"{file_test_note(rule, test)}; run it on the main process only "
                "(accel.on_main_process)",
                if_migrated=True,
            )
            return updated
        if not (
            isinstance(line, cst.SimpleStatementLine) and rule.index.uniform(original)
        ):
            rule.report(
                original,
                "needs-review",
                f"{name}(...) makes a file that the script uses again, where only "
                "some processes go: run it on the main process only "
                "(accel.on_main_process) and add accel.barrier() where every "
                "process passes, before it is read",
                if_migrated=True,
            )
            return updated
        rule.barrier_after(original)
        rule.report(
            original,
            "fixed",
            "the path it makes is used again later -> accel.barrier() after it, "
            "so that no process reads or tests it before the main process has "
            "made it",
        )
    rule.report(
        original,
        "fixed",
        f"{name}(...) changes files on the main process only, where accel.save "
        "and the other writes go, in order -> accel.on_main_process(...)",
    )
    return rule.on_main_process(updated)


def _used_again(
    rule: MainProcessWrites, call: cst.Call, made: cst.BaseExpression
) -> bool:
    """Is the path ``call`` makes passed to another call later (or anywhere in
    a loop around it), other than one that runs on the main process only (a
    save, a write or another file operation): ``ImageFolder(dst)``,
    ``os.path.exists(dst)``?"""
    code = cst.Module([]).code_for_node
    wanted = code(made)
    key = rule.index.key(made) if isinstance(made, cst.Name) else None
    line = rule.get_metadata(PositionProvider, call).start.line
    around = loops(rule.index, call)
    for other in rule.index.calls:
        if other is call or any(
            isinstance(c, cst.Call) and _main_only(rule, c)
            for c in (other, *rule.index.ancestors(other))
        ):
            continue  # a path built in a main-only call's arguments
        for arg in other.args:
            if code(arg.value) != wanted or (
                key is not None and rule.index.key(arg.value) != key
            ):
                continue
            later = rule.get_metadata(PositionProvider, other).start.line
            if later > line or loops(rule.index, other) & around:
                return True
    return False


def _main_only(rule: MainProcessWrites, call: cst.Call) -> bool:
    """A call that this rule or AM010 puts on the main process only."""
    if isinstance(rule.parent(call), cst.Expr) and (
        file_change(rule, call) is not None
    ):
        return True
    if array_write(rule, call) is not None:
        return True
    return rule.is_call_to(call, SAVES | PATH_WRITERS.keys()) or (
        rule.index.is_runtime_call(call, "save", "on_main_process")
    )
