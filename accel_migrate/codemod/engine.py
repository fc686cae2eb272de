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
from collections.abc import Iterable
from dataclasses import dataclass, field

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider, ScopeProvider

from .analysis import LazyQualifiedNames
from .findings import (
    SKIP_DISTRIBUTED,
    SKIP_GENERATED,
    SKIP_NOT_TRAINING,
    SKIP_SUPPRESSED,
    Finding,
    MigrationError,
    MigrationResult,
)
from .patterns import (
    DATALOADER_CALLS,
    DISTRIBUTED_PREFIXES,
    OPTIMIZER_PREFIXES,
    is_optimizer_class,
)
from .rule import RUNTIME_MODULE, RuleContext, registered_rules
from .source import check_decodable, syntax_error_place

DEFAULT_ALIAS = "accel"
SCREEN_CODE = "AM100"


@dataclass(frozen=True)
class MigrateOptions:
    #: Rule codes to run (None: all); ``ignore`` removes codes from that set.
    select: frozenset[str] | None = None
    ignore: frozenset[str] = field(default_factory=frozenset)
    alias: str = DEFAULT_ALIAS
    #: Decide files that are plainly not training entry points without libcst.
    #: Off, every file takes the full libcst pass (same results, slower).
    prescreen: bool = True

    def selected(self, code: str) -> bool:
        chosen = self.select is None or any(code.startswith(s) for s in self.select)
        return chosen and not any(code.startswith(i) for i in self.ignore)


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
    options = options or MigrateOptions()
    text = _decode(source, path)
    if SKIP_FILE.search(text) and _has_comment(text, SKIP_FILE):
        return MigrationResult(path, source, source, skip_reason=SKIP_SUPPRESSED)
    if is_generated(text):
        return MigrationResult(path, source, source, skip_reason=SKIP_GENERATED)
    tree = _parse_ast(text, path)
    if options.prescreen:
        verdict = prescreen(text, tree)
        if verdict is not None:
            return MigrationResult(
                path, source, source, verdict.findings, skip_reason=verdict.skip_reason
            )
    del tree
    try:
        return _full_pass(source, path, options)
    except RecursionError:
        raise MigrationError(
            path, 1, 1, "cannot migrate: the code is nested too deeply"
        ) from None


def _full_pass(
    source: str | bytes, path: str, options: MigrateOptions
) -> MigrationResult:
    module = parse(source, path)
    # One metadata wrapper (scopes, qualified names, positions) serves the screen
    # and every rule, until a rule changes the tree; rules that change nothing hand
    # back an equal tree, which is dropped.
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    screen = _Screen.of(wrapper)
    if screen.distributed is not None:
        line, column, name = screen.distributed
        return MigrationResult(
            path,
            source,
            source,
            (_distributed_finding(line, column, name),),
            skip_reason=SKIP_DISTRIBUTED,
        )
    if not screen.training:
        return MigrationResult(path, source, source, skip_reason=SKIP_NOT_TRAINING)

    alias = screen.runtime_alias or _free_alias(module, options.alias)
    context = RuleContext(alias=alias, original_code=module.code)
    for rule in registered_rules():
        if options.selected(rule.code):
            changed, modified = rule.run(wrapper, context)
            if modified:
                wrapper = MetadataWrapper(changed, unsafe_skip_copy=True)
    module = wrapper.module
    findings = tuple(sorted(context.kept_findings()))
    suppressed = tuple(sorted({start for start, _ in context.suppressed}))
    if not context.changed:
        return MigrationResult(path, source, source, findings, suppressed=suppressed)
    if screen.runtime_alias is None:
        module = _add_runtime_import(module, alias)
    output: str | bytes = module.bytes if isinstance(source, bytes) else module.code
    try:
        ast.parse(module.code)
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


def _distributed_finding(line: int, column: int, name: str) -> Finding:
    return Finding(
        line,
        column,
        SCREEN_CODE,
        "info",
        f"already distributed (uses {name}); left unchanged",
    )


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
        return ast.parse(text)
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


# -- pre-screen ----------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What the pre-screen decided: the same result the full pass would give."""

    skip_reason: str
    findings: tuple[Finding, ...] = ()


#: Module prefixes of distributed training, matched at a dot: ``accelerate.x``, not
#: a user's own ``accelerated_step``. torch's elastic launcher API is listed here
#: because ``torch.distributed.launch`` no longer matches it by accident.
_DISTRIBUTED = (*DISTRIBUTED_PREFIXES, "torch.distributed.launcher")


def is_distributed_name(name: str) -> bool:
    """``name`` is one of the distributed prefixes or inside one (at a dot)."""
    return any(
        name == prefix or name.startswith(prefix + ".") for prefix in _DISTRIBUTED
    )


def _components(names: Iterable[str]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(part for part in name.split(".") if part) for name in names)


# Every part of a qualified name that libcst resolves is spelled in the source
# (import statements, attribute chains, class and function names), so a source
# lacking one of these words cannot contain a call that the full screen matches.
# Derived from the same tables the full screen uses: a new pattern there is a new
# keyword here.
#: A training entry point imports torch and has one of these (all words of a group).
TRAINING_WORDS = (
    ("backward",),
    (*RUNTIME_MODULE.split("."),),
    *_components(DATALOADER_CALLS),
    *_components(OPTIMIZER_PREFIXES),
)
#: A distributed script uses one of these (all words of a group).
DISTRIBUTED_WORDS = _components(_DISTRIBUTED)
#: Leading words of the qualified names both screens look for. A class or function
#: with one of these names makes libcst's scope-qualified names (``Class.attr``)
#: look like them: such a file goes to the full pass.
_LEADING_WORDS = frozenset(
    words[0] for words in (*TRAINING_WORDS[1:], *DISTRIBUTED_WORDS)
)


def _any_group(text: str, groups: tuple[tuple[str, ...], ...]) -> bool:
    return any(all(word in text for word in group) for group in groups)


def prescreen(text: str, tree: ast.Module | None = None) -> Verdict | None:
    """The full screen's verdict for a file it would leave alone, decided cheaply;
    None when only the full pass can tell (then it runs).

    Never answers for a file the full pass would change: it answers "not a training
    entry point" only when no import, call or ``.backward()`` that the full screen
    counts can be present, and "already distributed" only at the import the full
    screen would name first.
    """
    maybe_training = "torch" in text and _any_group(text, TRAINING_WORDS)
    maybe_distributed = _any_group(text, DISTRIBUTED_WORDS)
    if not maybe_training and not maybe_distributed:
        return Verdict(SKIP_NOT_TRAINING)
    if tree is None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    return _AstScreen(tree).verdict(text)


def _chain(node: ast.expr) -> str | None:
    """The dotted name libcst gives a call's function (``get_full_name_for_node``):
    names and attributes, through calls and subscripts."""
    parts: list[str] = []
    while True:
        kind = type(node)
        if kind is ast.Name:
            parts.append(node.id)  # type: ignore[attr-defined]
            return ".".join(reversed(parts))
        if kind is ast.Attribute:
            parts.append(node.attr)  # type: ignore[attr-defined]
            node = node.value  # type: ignore[attr-defined]
        elif kind is ast.Call:
            node = node.func  # type: ignore[attr-defined]
        elif kind is ast.Subscript:
            node = node.value  # type: ignore[attr-defined]
        else:
            return None


class _AstScreen:
    """One walk of the ``ast``: imports, calls, ``.backward()``, class/def names."""

    def __init__(self, tree: ast.Module) -> None:
        self.bindings: dict[str, set[str]] = {}
        self.uses_torch = False
        self.training = False
        self.defined: set[str] = set()
        #: (line, offset, flagged name, its dotted parts as written, statement)
        self.imports: list[tuple[int, int, str, tuple[str, ...], ast.stmt]] = []
        self.calls: list[tuple[int, int, str]] = []
        for node in ast.walk(tree):
            kind = type(node)
            if kind is ast.Call:
                func = node.func  # type: ignore[attr-defined]
                if type(func) is ast.Attribute and func.attr == "backward":
                    self.training = True  # super().backward() too: conservative
                name = _chain(func)
                if name is not None:
                    self.calls.append((node.lineno, node.col_offset, name))  # type: ignore[attr-defined]
            elif kind is ast.Import:
                self._import(node)  # type: ignore[arg-type]
            elif kind is ast.ImportFrom:
                self._import_from(node)  # type: ignore[arg-type]
            elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                self.defined.add(node.name)  # type: ignore[attr-defined]

    def _import(self, node: ast.Import) -> None:
        flagged = None
        for alias in node.names:
            name = alias.name
            self.uses_torch |= name == "torch" or name.startswith("torch.")
            if name == RUNTIME_MODULE:
                self.training = True
            if alias.asname:
                self.bindings.setdefault(alias.asname, set()).add(name)
            if flagged is None and is_distributed_name(name):
                flagged = (name, (name,))
        if flagged is not None:
            self.imports.append((node.lineno, node.col_offset, *flagged, node))

    def _import_from(self, node: ast.ImportFrom) -> None:
        if node.level or node.module is None:
            return
        module = node.module
        self.uses_torch |= module == "torch" or module.startswith("torch.")
        flagged = (module, (module,)) if is_distributed_name(module) else None
        for alias in node.names:
            if alias.name == "*":
                continue
            full = f"{module}.{alias.name}"
            self.bindings.setdefault(alias.asname or alias.name, set()).add(full)
            if flagged is None and is_distributed_name(full):
                flagged = (full, (module, alias.name))
        if flagged is not None:
            self.imports.append((node.lineno, node.col_offset, *flagged, node))

    def candidates(self, name: str) -> set[str]:
        """Every qualified name libcst may give ``name`` (and maybe more)."""
        head, dot, rest = name.partition(".")
        found = {name}
        for bound in self.bindings.get(head, ()):
            found.add(bound + dot + rest)
        return found

    def verdict(self, text: str) -> Verdict | None:
        if self.defined & _LEADING_WORDS:
            return None
        first_call = min(
            (
                (line, column)
                for line, column, name in self.calls
                if any(is_distributed_name(q) for q in self.candidates(name))
            ),
            default=None,
        )
        first_import = min(self.imports, default=None, key=lambda hit: hit[:2])
        if first_call is not None and (
            first_import is None or first_call < first_import[:2]
        ):
            return None  # a call may be what the full screen names first
        if first_import is not None:
            line, offset, name, spelled, statement = first_import
            if not _written_as(text, statement, spelled):
                return None  # ``torch . distributed``: libcst reads it differently
            return Verdict(
                SKIP_DISTRIBUTED,
                (_distributed_finding(line, _column(text, line, offset), name),),
            )
        if not self.uses_torch:
            return Verdict(SKIP_NOT_TRAINING)
        if self.training or any(
            q in DATALOADER_CALLS or is_optimizer_class(q)
            for _, _, name in self.calls
            for q in self.candidates(name)
        ):
            return None
        return Verdict(SKIP_NOT_TRAINING)


_NEWLINE = re.compile(r"\r\n|\r|\n")


def _written_as(text: str, statement: ast.stmt, names: tuple[str, ...]) -> bool:
    """Are the dotted ``names`` spelled without spaces in ``statement``'s lines?"""
    end = statement.end_lineno or statement.lineno
    lines = _NEWLINE.split(text, end)[statement.lineno - 1 : end]
    segment = "\n".join(lines)
    return all(name in segment for name in names)


def _column(text: str, line: int, utf8_offset: int) -> int:
    """libcst's 1-based column (in characters) for ``ast``'s UTF-8 byte offset."""
    lines = _NEWLINE.split(text, line)
    current = lines[line - 1] if line - 1 < len(lines) else ""
    return len(current.encode()[:utf8_offset].decode(errors="ignore")) + 1


def _add_runtime_import(module: cst.Module, alias: str) -> cst.Module:
    """``import accel_migrate.runtime as <alias>``, where libcst's AddImportsVisitor
    puts it (after the first block of imports).

    That visitor reads and changes only the statements up to the first one after
    the import block, but copies and visits the whole module: it is given those
    statements only (up to the first compound statement), which costs nothing on a
    large file and gives the same result.
    """
    body = module.body
    end = next(
        (
            i + 1
            for i, s in enumerate(body)
            if not isinstance(s, cst.SimpleStatementLine)
        ),
        len(body),
    )
    context = CodemodContext()
    AddImportsVisitor.add_needed_import(context, RUNTIME_MODULE, asname=alias)
    head = AddImportsVisitor(context).transform_module(
        module.with_changes(body=body[:end])
    )
    return module.with_changes(body=(*head.body, *body[end:]))


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


class _Screen(cst.CSTVisitor):
    """Is this a training entry point? Is it already distributed? Already migrated?"""

    METADATA_DEPENDENCIES = (ScopeProvider, PositionProvider)

    def __init__(self, qualnames: LazyQualifiedNames) -> None:
        super().__init__()
        self._qualnames = qualnames
        self.uses_torch = False
        self.training = False
        self.distributed: tuple[int, int, str] | None = None
        self.runtime_alias: str | None = None

    @classmethod
    def of(cls, wrapper: MetadataWrapper) -> _Screen:
        screen = cls(LazyQualifiedNames(wrapper.resolve(ScopeProvider)))
        wrapper.visit(screen)
        screen.training = screen.training and screen.uses_torch
        return screen

    def _flag(self, node: cst.CSTNode, name: str) -> None:
        if self.distributed is None and is_distributed_name(name):
            start = self.get_metadata(PositionProvider, node).start
            self.distributed = (start.line, start.column + 1, name)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = cst.Module([]).code_for_node(alias.name)
            self.uses_torch |= name == "torch" or name.startswith("torch.")
            self._flag(node, name)
            if name == RUNTIME_MODULE and alias.asname is not None:
                self.runtime_alias = cst.ensure_type(alias.asname.name, cst.Name).value
            if name == RUNTIME_MODULE:
                self.training = True

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is None or node.relative:
            return
        name = cst.Module([]).code_for_node(node.module)
        self.uses_torch |= name == "torch" or name.startswith("torch.")
        self._flag(node, name)
        if not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                self._flag(node, f"{name}.{cst.Module([]).code_for_node(alias.name)}")

    def visit_Call(self, node: cst.Call) -> None:
        qualnames = {q.name for q in self._qualnames.get(node.func, set())}
        for name in qualnames:
            self._flag(node, name)
        if qualnames & DATALOADER_CALLS or any(
            is_optimizer_class(q) for q in qualnames
        ):
            self.training = True
        if (
            isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "backward"
            and cst.Module([]).code_for_node(node.func.value) != "super()"
        ):
            self.training = True
