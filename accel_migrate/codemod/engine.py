"""Migrate one source: screen it, run every selected rule in code order, check the output.

Static only: nothing here imports or runs the user's code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider

from .findings import Finding, MigrationError, MigrationResult
from .patterns import DATALOADER_CALLS, DISTRIBUTED_PREFIXES, is_optimizer_class
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
    options = options or MigrateOptions()
    module = parse(source, path)
    screen = _Screen.of(module)
    if screen.distributed is not None:
        line, column, name = screen.distributed
        finding = Finding(
            line,
            column,
            SCREEN_CODE,
            "info",
            f"already distributed (uses {name}); left unchanged",
        )
        return MigrationResult(
            path, source, source, (finding,), skip_reason="already distributed"
        )
    if not screen.training:
        return MigrationResult(
            path, source, source, skip_reason="not a training entry point"
        )

    alias = screen.runtime_alias or _free_alias(module, options.alias)
    context = RuleContext(alias=alias, original_code=module.code)
    if screen.runtime_alias is None:
        module = _add_runtime_import(module, alias)
    try:
        for rule in registered_rules():
            if options.selected(rule.code):
                module = rule.apply(module, context)
    except RecursionError:
        raise MigrationError(
            path, 1, 1, "cannot migrate: the code is nested too deeply"
        ) from None
    findings = tuple(sorted(context.findings))
    if not context.changed:
        return MigrationResult(path, source, source, findings)
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
    return MigrationResult(path, source, output, findings)


def _add_runtime_import(module: cst.Module, alias: str) -> cst.Module:
    context = CodemodContext()
    AddImportsVisitor.add_needed_import(context, RUNTIME_MODULE, asname=alias)
    return AddImportsVisitor(context).transform_module(module)


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

    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self) -> None:
        super().__init__()
        self.uses_torch = False
        self.training = False
        self.distributed: tuple[int, int, str] | None = None
        self.runtime_alias: str | None = None

    @classmethod
    def of(cls, module: cst.Module) -> _Screen:
        screen = cls()
        MetadataWrapper(module, unsafe_skip_copy=True).visit(screen)
        screen.training = screen.training and screen.uses_torch
        return screen

    def _flag(self, node: cst.CSTNode, name: str) -> None:
        if self.distributed is None and name.startswith(DISTRIBUTED_PREFIXES):
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
        qualnames = {
            q.name for q in self.get_metadata(QualifiedNameProvider, node.func, set())
        }
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
