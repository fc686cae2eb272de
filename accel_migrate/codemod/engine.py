"""Migrate one source: screen it, run every selected rule in code order, check the output.

Static only: nothing here imports or runs the user's code.

Most files of a repository are not training entry points. A cheap pre-screen
(``prescreen``: substring tests, then one walk of Python's own ``ast``) decides those
without libcst; it answers only when the full libcst screen would answer the same,
and otherwise leaves the file to the full pass.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import replace

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import MetadataWrapper

from . import (
    class_checks,
    collector,
    device_free,
    fastvisit,
    identity_hash,
    matcher_hooks,
    node_kinds,
    positions,
    python_ast,
    suppression,
)
from .findings import (
    SKIP_DISTRIBUTED,
    SKIP_GENERATED,
    SKIP_NOT_TRAINING,
    SKIP_SUPPRESSED,
    MigrationError,
    MigrationResult,
)
from .formatting import black_like_input, place_runtime_import
from .options import RUNTIME_MODULE, MigrateOptions
from .project_file_facts import ProjectFacts
from .project_view import read_project
from .rule import RuleContext, registered_rules
from .screen import (
    FullScreen,
    Verdict,
    distributed_finding,
    prescreen,
)
from .source import check_decodable, syntax_error_place
from .test_files import is_test_module

# Every analysis here is a libcst visitor: visit without building copies.
fastvisit.install()
identity_hash.install()
class_checks.install()
matcher_hooks.install()


def parse(source: str | bytes, path: str) -> cst.Module:
    if isinstance(source, bytes):
        check_decodable(path, source)
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        place = syntax_error_place(source)
        if place is None:
            message = (
                str(exc.message).splitlines()[0] if exc.message else "invalid syntax"
            )
            place = (exc.raw_line, exc.raw_column + 1, message)
        line, column, message = place
        raise MigrationError(path, line, column, f"cannot parse: {message}") from None
    except RecursionError:
        raise MigrationError(
            path, 1, 1, "cannot parse: the code is nested too deeply"
        ) from None


def migrate_source(
    source: str | bytes, path: str = "<string>", options: MigrateOptions | None = None
) -> MigrationResult:
    """Migrate ``source``. Raises MigrationError for a file that cannot be migrated."""
    # A pass allocates hundreds of thousands of containers: the collector's
    # default pace walked every live one again and again (``collector``).
    with collector.held_back():
        return _migrate_held(source, path, options)


def _migrate_held(
    source: str | bytes, path: str, options: MigrateOptions | None
) -> MigrationResult:
    options = options or MigrateOptions()
    text = _decode(source, path)
    verdict, project = _early(text, path, options.prescreen, options.project)
    if verdict is not None:
        return MigrationResult(
            path, source, source, verdict.findings, skip_reason=verdict.skip_reason
        )
    if project is not None and options.project is None:
        options = replace(options, project=project)
    try:
        with node_kinds.keep():  # the trees of the rules' passes share subtrees
            return _migrate(source, text, path, options)
    except RecursionError:
        raise MigrationError(
            path, 1, 1, "cannot migrate: the code is nested too deeply"
        ) from None


def _migrate(
    source: str | bytes, text: str, path: str, options: MigrateOptions
) -> MigrationResult:
    result = _full_pass(source, path, options)
    if options.honour_suppressions and suppression.SKIP_COMMENT.search(text):
        result = suppression.review(
            result,
            text,
            options,
            module=lambda: parse(source, path),
            migrate=lambda again: _full_pass(source, path, again),
        )
    return result


def early_verdict(
    text: str, path: str, screen: bool = True, project: ProjectFacts | None = None
) -> Verdict | None:
    """What decides ``text`` before the full pass, in migrate_source's order: a
    ``# accel-migrate: skip-file`` comment, a generated header, Python's parse (a
    MigrationError when it fails), a test module, then the pre-screen (``screen``:
    ``MigrateOptions.prescreen``). None: only the full pass can tell."""
    return _early(text, path, screen, project)[0]


def _early(
    text: str, path: str, screen: bool, project: ProjectFacts | None
) -> tuple[Verdict | None, ProjectFacts | None]:
    """early_verdict, and the project facts it read (if it read them)."""
    if SKIP_FILE.search(text) and _has_comment(text, SKIP_FILE):
        return Verdict(SKIP_SUPPRESSED), project
    if is_generated(text):
        return Verdict(SKIP_GENERATED), project
    tree = _parse_ast(text, path)
    if is_test_module(path, tree):
        return Verdict(SKIP_NOT_TRAINING), project
    verdict = prescreen(text, tree) if screen else None
    if verdict is not None and verdict.skip_reason == SKIP_NOT_TRAINING:
        # No loop of its own, but it may train through a library class (minGPT's
        # `Trainer(config, model, dataset).run()`): the full pass, where AM004
        # says so.
        if project is None:
            project = read_project(path)
        if (
            project.library_trainers
            or project.library_for
            or project.handed_torch
            or project.drives_trainer
            or project.builds_local_optimizer
            or project.self_training_models
            or project.training_functions
            or project.unfollowed_trainers
        ):
            verdict = None
    return verdict, project


def _full_pass(
    source: str | bytes, path: str, options: MigrateOptions
) -> MigrationResult:
    chunks = positions.Chunks()
    wrappers: list[MetadataWrapper] = []
    try:
        return _pass(source, path, options, chunks, wrappers)
    finally:
        if collector.RELEASE:
            # What the pass's trees held, freed now by reference counts rather
            # than left in its cycles for the collector (``collector``).
            chunks.release()
        if collector.RELEASE_SCOPES:
            collector.release_scopes(wrappers)


def _pass(
    source: str | bytes,
    path: str,
    options: MigrateOptions,
    chunks: positions.Chunks,
    wrappers: list[MetadataWrapper],
) -> MigrationResult:
    """The full pass; every tree's wrapper it makes is added to ``wrappers``."""
    module = parse(source, path)
    # One metadata wrapper (scopes, qualified names, positions) serves the screen
    # and every rule, until a rule changes the tree; rules that change nothing hand
    # back an equal tree, which is dropped.
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    wrappers.append(wrapper)
    # The parsed tree's positions (the screen asks for them) seed the statements
    # that a changed tree's positions replay.
    # Its code is that generation's too (the same string as ``module.code``).
    original_positions, original_code = positions.compute(wrapper, chunks)
    screen = FullScreen.of(wrapper)
    if screen.distributed is not None:
        line, column, name = screen.distributed
        return MigrationResult(
            path,
            source,
            source,
            (distributed_finding(line, column, name),),
            skip_reason=SKIP_DISTRIBUTED,
        )
    project = options.project if options.project is not None else read_project(path)
    if (
        not screen.training
        and screen.backward
        and (project.handed_torch or project.builds_local_optimizer)
    ):
        # A backward on what the batch's other files hand it (their torch
        # objects), with no torch import (an engine.py whose step only calls
        # them) or with the optimizer step left to the caller
        # (`forward_backward(model, x, y)` returning `loss.item()`); or on what
        # a local torch.optim.Optimizer subclass steps with methods of its own
        # (SAM's `optimizer.first_step()` / `second_step()`).
        screen.training = True
    # A helper module of the batch (no backward of its own) migrated for its
    # callers: its writes and prints, and its sums over the loaders they hand
    # it, even where the screen takes it for a training file. What its helpers
    # build (loaders, models, optimizers) is prepared where they are called
    # (AM102), so the rules that prepare do not run.
    library = bool(project.library_for)
    drives = project.drives_trainer  # it runs a migrated class's training
    # a model class that trains itself (`model.train_model(...)`): AM042 names it
    trains_itself = bool(project.self_training_models)
    if not (
        screen.training
        or project.library_trainers
        or library
        or drives
        or trains_itself
        or project.training_functions  # `train.main(args)`: AM004 names it
        or project.unfollowed_trainers  # `Runner().fit(epochs, learn)`: AM004
    ):
        return MigrationResult(path, source, source, skip_reason=SKIP_NOT_TRAINING)

    alias = screen.runtime_alias or _free_alias(module, options.alias)
    rules = [
        rule
        for rule in registered_rules()
        if options.selected(rule.code) and not (library and rule.prepares)
    ]
    context = RuleContext(
        alias=alias,
        original_code=original_code if positions.SHARED_CODE else module.code,
        original_module=module,
        project=project,
        honour_suppressions=options.honour_suppressions,
        running=frozenset(rule.code for rule in rules),
        position_chunks=chunks,
        original_positions=original_positions,
        original_wrapper=wrapper,
    )
    for rule in rules:
        changed, modified = rule.run(wrapper, context)
        if modified:
            wrapper = MetadataWrapper(changed, unsafe_skip_copy=True)
            wrappers.append(wrapper)
    module = wrapper.module
    findings = tuple(sorted(context.kept_findings()))
    suppressed = tuple(sorted({start for start, _ in context.suppressed}))
    if any(f in findings for f in context.blocking):
        # All or nothing: a file is never half-migrated. What the rules fixed was
        # not kept; what they could not fix is still true of the original. (A
        # blocking finding inside a `# accel-migrate: skip` statement is dropped
        # with it: the user has taken that statement over.)
        # Claims about the migrated file (``report(..., if_migrated=True)``) are
        # not true of the original the user gets back: dropped.
        review = tuple(
            f
            for f in findings
            if f.status == "needs-review" and f not in context.if_migrated
        )
        return MigrationResult(path, source, source, review, suppressed=suppressed)
    if (
        not screen.training
        and not library
        and not (
            # it trains through a class of this batch that counts on it to prepare
            # the model it hands over (``Trainer(config, model, dataset).run()``)
            context.changed
            and any(f.trains and f.batch_migrated for f in project.library_trainers)
        )
        and not (context.changed and drives)
    ):  # it imports a library trainer but hands it nothing
        return MigrationResult(path, source, source, skip_reason=SKIP_NOT_TRAINING)
    if not context.changed:
        return MigrationResult(path, source, source, findings, suppressed=suppressed)
    if screen.runtime_alias is None:
        module = place_runtime_import(_add_runtime_import(module, alias), alias)
        # A script that names no device keeps every process on the CPU.
        module = device_free.for_entry_point(
            module, alias, context.original_code, project
        )
        # Its statements but the imports were generated for the rules' trees.
        migrated = positions.code_of(module, context.position_chunks)
    else:
        migrated = context.code_of(wrapper)
    code = black_like_input(context.original_code, migrated, path)
    output: str | bytes = (
        code.encode(module.encoding) if isinstance(source, bytes) else code
    )
    try:
        python_ast.parse(code)
    except (
        SyntaxError
    ) as exc:  # a bug in a rule: never hand out code that does not parse
        raise MigrationError(
            path,
            exc.lineno or 1,
            exc.offset or 1,
            f"internal error: the migrated code does not parse ({exc.msg}); file left unchanged",
        ) from None
    return MigrationResult(path, source, output, findings, suppressed=suppressed)


# -- reading -----------------------------------------------------------------------

#: ``# accel-migrate: skip-file`` anywhere in a comment leaves the whole file alone.
SKIP_FILE = re.compile(r"accel-migrate:[ \t]*skip-file\b")
#: ``@generated`` in the first lines marks a generated file (Meta/Phabricator style).
GENERATED = re.compile(r"@generated\b")
GENERATED_LINES = 10

_PYTHON2 = re.compile(
    r"Missing parentheses in call to '(print|exec)'"
    r"|multiple exception types must be parenthesized"
    r"|leading zeros in decimal integer literals"
)


def _decode(source: str | bytes, path: str) -> str:
    nul = source.find(b"\0" if isinstance(source, bytes) else "\0")  # type: ignore[arg-type]
    if nul >= 0:
        newline = b"\n" if isinstance(source, bytes) else "\n"
        line = source.count(newline, 0, nul) + 1  # type: ignore[arg-type]
        column = nul - (source.rfind(newline, 0, nul) + 1) + 1  # type: ignore[arg-type]
        raise MigrationError(
            path, line, column, "cannot parse: a binary file (it contains NUL bytes)"
        )
    if isinstance(source, str):
        return source
    return source.decode(check_decodable(path, source))


def is_generated(text: str) -> bool:
    """``@generated`` in the first ``GENERATED_LINES`` lines."""
    if "@generated" not in text:
        return False
    head = text.split("\n", GENERATED_LINES)[:GENERATED_LINES]
    return any(GENERATED.search(line) for line in head)


def _has_comment(text: str, pattern: re.Pattern[str]) -> bool:
    """Is there a comment (not a string) that ``pattern`` matches?"""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and pattern.search(token.string):
                return True
    except (tokenize.TokenError, SyntaxError):
        # Not tokenizable: a comment-like line is taken at its word.
        return any(
            line.lstrip().startswith("#") and pattern.search(line)
            for line in text.splitlines()
        )
    return False


def _parse_ast(text: str, path: str) -> ast.Module:
    """Python's own parse of ``text``: the judge of what is valid Python here."""
    try:
        return python_ast.parse(text)
    except SyntaxError as exc:
        message = exc.msg or "invalid syntax"
        if _PYTHON2.search(message):
            message += " (this looks like Python 2 code; accel-migrate reads Python 3)"
        raise MigrationError(
            path,
            exc.lineno or 1,
            exc.offset or 1,
            "cannot parse: " + message.splitlines()[0],
        ) from None
    except (RecursionError, MemoryError):
        raise MigrationError(
            path, 1, 1, "cannot parse: the code is nested too deeply"
        ) from None
    except ValueError as exc:  # NUL bytes and the like
        raise MigrationError(path, 1, 1, f"cannot parse: {exc}") from None


def _add_runtime_import(module: cst.Module, alias: str) -> cst.Module:
    """``import accel_migrate.runtime as <alias>``, where libcst's AddImportsVisitor
    puts it (after the first block of imports).

    That visitor reads and changes only the statements up to the first one after
    the module's first block of imports (behind a docstring or ``__strict__``
    flag), but copies and visits the whole module: it is given those statements
    only, which costs nothing on a large file and gives the same result.
    """
    body = module.body
    # A first simple statement may be the docstring the visitor keeps in front;
    # any other is a prefix it reads no further than, so keeping it is harmless.
    end = 1 if body and isinstance(body[0], cst.SimpleStatementLine) else 0
    while end < len(body) and _single_import(body[end]):
        end += 1
    end = min(end + 1, len(body))  # the statement it gives a blank line above
    head_body = list(body[:end])
    # Of that statement it reads only that it is not an import, and its leading
    # lines: a compound one (a whole class or function) is handed over as a
    # one-line stand-in, and gets the stand-in's leading lines back.
    last = head_body[-1] if head_body else None
    if isinstance(last, cst.BaseCompoundStatement):
        head_body[-1] = cst.SimpleStatementLine(
            body=(cst.Pass(),), leading_lines=last.leading_lines
        )
    context = CodemodContext()
    AddImportsVisitor.add_needed_import(context, RUNTIME_MODULE, asname=alias)
    head = list(
        AddImportsVisitor(context)
        .transform_module(module.with_changes(body=head_body))
        .body
    )
    if isinstance(last, cst.BaseCompoundStatement):
        head[-1] = last.with_changes(leading_lines=head[-1].leading_lines)
    return module.with_changes(body=(*head, *body[end:]))


def _single_import(statement: cst.BaseStatement) -> bool:
    """A line of one import: what AddImportsVisitor counts in an import block."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], (cst.Import, cst.ImportFrom))
    )


def _free_alias(module: cst.Module, preferred: str) -> str:
    """``preferred`` unless the module uses that name anywhere, then a variant."""
    used = _Names.of(module)
    for candidate in (preferred, f"{preferred}_rt", f"{preferred}_runtime", "_accel"):
        if candidate not in used:
            return candidate
    suffix = 2
    while f"{preferred}{suffix}" in used:
        suffix += 1
    return f"{preferred}{suffix}"


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    @classmethod
    def of(cls, module: cst.Module) -> set[str]:
        visitor = cls()
        module.visit(visitor)
        return visitor.names

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)
