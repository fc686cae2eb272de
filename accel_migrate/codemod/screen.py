"""What is a training entry point, and what is already distributed: the two screens.

``prescreen`` decides most files of a repository with substring tests and one walk
of Python's own ``ast``; ``FullScreen`` is the libcst pass that decides the rest. The
pre-screen answers only when the full screen would answer the same (a test checks
that on every fixture, the benchmark tree and the torch source).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from . import python_ast
from .analysis import LazyQualifiedNames
from .findings import SKIP_DISTRIBUTED, SKIP_NOT_TRAINING, Finding
from .names import (
    DATALOADER_CALLS,
    DISTRIBUTED_PREFIXES,
    OPTIMIZER_PREFIXES,
    is_optimizer_class,
)
from .options import RUNTIME_MODULE
from .scopes import ScopeProvider
from .source import NEWLINE

SCREEN_CODE = "AM100"
BACKWARD = "backward"
#: Method calls that, with a ``.backward()`` in the same file, make a training step:
#: an optimizer's (or a GradScaler's, or a scheduler's beside one) step.
STEP_METHODS = ("step", "zero_grad")
#: ``model.share_memory()``: a model put in shared memory for worker processes that
#: train it together (Hogwild). A method, so it has no qualified name: matched by
#: its name with no arguments (``nn.Module.share_memory``; tensors and storages
#: have ``share_memory_``).
SHARED_MODEL_METHOD = "share_memory"
SHARED_MODEL = "share_memory(), a model shared with worker processes"


def distributed_finding(line: int, column: int, name: str) -> Finding:
    return Finding(
        line,
        column,
        SCREEN_CODE,
        "info",
        f"already distributed (uses {name}); left unchanged",
    )


# -- the pre-screen: text and ast -----------------------------------------------------


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
#: A ``.backward()`` alone is not training (gradient checks, autograd utilities, a
#: library's helpers): it takes a ``.step()`` or ``.zero_grad()`` call beside it.
TRAINING_WORDS = (
    *((BACKWARD, step) for step in STEP_METHODS),
    (*RUNTIME_MODULE.split("."),),
    *_components(DATALOADER_CALLS),
    *_components(OPTIMIZER_PREFIXES),
)
#: A distributed script uses one of these (all words of a group).
DISTRIBUTED_WORDS = (*_components(_DISTRIBUTED), (SHARED_MODEL_METHOD,))
#: Leading words of the qualified names both screens look for. A class or function
#: with one of these names makes libcst's scope-qualified names (``Class.attr``)
#: look like them: such a file goes to the full pass.
_LEADING_WORDS = frozenset(
    words[0] for words in (*TRAINING_WORDS[len(STEP_METHODS) :], *DISTRIBUTED_WORDS)
)


def _any_group(text: str, groups: tuple[tuple[str, ...], ...]) -> bool:
    # Many groups share their first words (torch, distributed): each word is looked
    # for once.
    seen: dict[str, bool] = {}

    def has(word: str) -> bool:
        found = seen.get(word)
        if found is None:
            found = seen[word] = word in text
        return found

    return any(all(has(word) for word in group) for group in groups)


def may_be_distributed(text: str) -> bool:
    """False when no name or call that the screens take for distributed training
    can be in ``text``."""
    return _any_group(text, DISTRIBUTED_WORDS)


def prescreen(text: str, tree: ast.Module | None = None) -> Verdict | None:
    """The full screen's verdict for a file it would leave alone, decided cheaply;
    None when only the full pass can tell (then it runs).

    Never answers for a file the full pass would change: it answers "not a training
    entry point" only when no import, call or ``.backward()`` that the full screen
    counts can be present, and "already distributed" only at the import the full
    screen would name first.
    """
    maybe_training = "torch" in text and _any_group(text, TRAINING_WORDS)
    maybe_distributed = may_be_distributed(text)
    if not maybe_training and not maybe_distributed:
        return Verdict(SKIP_NOT_TRAINING)
    if tree is None:
        try:
            tree = python_ast.parse(text)
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
        self.tree = tree
        self.bindings: dict[str, set[str]] = {}
        self.uses_torch = False
        self.training = False
        self.backward = False
        self.steps = False
        self.defined: set[str] = set()
        #: (line, offset, flagged name, its dotted parts as written, statement)
        self.imports: list[tuple[int, int, str, tuple[str, ...], ast.stmt]] = []
        self.calls: list[tuple[int, int, str]] = []
        self.shared: list[tuple[int, int]] = []
        for node in ast.walk(tree):
            kind = type(node)
            if kind is ast.Call:
                func = node.func  # type: ignore[attr-defined]
                if type(func) is ast.Attribute:
                    # super().backward() too: conservative
                    self.backward |= func.attr == BACKWARD
                    self.steps |= func.attr in STEP_METHODS
                    if func.attr == SHARED_MODEL_METHOD and not (
                        node.args or node.keywords  # type: ignore[attr-defined]
                    ):
                        self.shared.append((node.lineno, node.col_offset))  # type: ignore[attr-defined]
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
        # By position only: in ``X(...).m()`` both calls start at the same place,
        # and libcst names the outer one, which ``ast.walk`` (breadth first) also
        # meets first.
        first_call = min(
            (
                hit
                for hit in self.calls
                if any(is_distributed_name(q) for q in self.candidates(hit[2]))
            ),
            default=None,
            key=lambda hit: hit[:2],
        )
        first_import = min(self.imports, default=None, key=lambda hit: hit[:2])
        first_shared = min(self.shared, default=None)
        if first_shared is not None and all(
            # at the same place, the full screen names the call's qualified name
            other is None or first_shared < other[:2]
            for other in (first_call, first_import)
        ):
            line, offset = first_shared
            return Verdict(
                SKIP_DISTRIBUTED,
                (distributed_finding(line, _column(text, line, offset), SHARED_MODEL),),
            )
        if first_call is not None and (
            first_import is None or first_call[:2] < first_import[:2]
        ):
            # The full screen names this call first, if it reads it as we do.
            line, offset, written = first_call
            name = _imported_name(self.tree, written)
            if name is None or not is_distributed_name(name):
                return None
            return Verdict(
                SKIP_DISTRIBUTED,
                (distributed_finding(line, _column(text, line, offset), name),),
            )
        if first_import is not None:
            line, offset, name, spelled, statement = first_import
            if not _written_as(text, statement, spelled):
                return None  # ``torch . distributed``: libcst reads it differently
            return Verdict(
                SKIP_DISTRIBUTED,
                (distributed_finding(line, _column(text, line, offset), name),),
            )
        if not self.uses_torch:
            return Verdict(SKIP_NOT_TRAINING)
        if (
            self.training
            or (self.backward and self.steps)
            or any(
                q in DATALOADER_CALLS or is_optimizer_class(q)
                for _, _, name in self.calls
                for q in self.candidates(name)
            )
        ):
            return None
        return Verdict(SKIP_NOT_TRAINING)


def _imported_name(tree: ast.Module, written: str) -> str | None:
    """The one qualified name libcst's scopes give the dotted call name ``written``,
    when its first name is bound by imports only and they agree; None when anything
    else could bind it (an assignment, a parameter, an aliased import inside a
    function, a class or def of that name, ``global``, a ``match`` capture, a star
    import...) or when libcst's answer would depend on where the call is (the
    call's own name imported: an access before the import has no qualified name)."""
    head, dot, rest = written.partition(".")
    if not dot:
        return None  # a bare name is an access: see above
    module_level = {id(s) for s in _module_level_imports(tree.body)}
    names: set[str] = set()
    seen_at_module_level = False
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Import:
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.asname is None and (
                    alias.name == written or alias.name.startswith(written + ".")
                ):
                    return None
                if alias.asname == head:
                    if id(node) not in module_level:
                        return None
                    names.add(alias.name + dot + rest)
                    seen_at_module_level = True
                elif alias.asname is None and alias.name.partition(".")[0] == head:
                    # ``import a.b``, here or in a function: ``a.x`` is ``a.x``
                    names.add(written)
                    seen_at_module_level |= id(node) in module_level
        elif kind is ast.ImportFrom:
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.name == "*":
                    return None
                if (alias.asname or alias.name) == head:
                    if (
                        id(node) not in module_level
                        or node.level  # type: ignore[attr-defined]
                        or node.module is None  # type: ignore[attr-defined]
                    ):
                        return None
                    names.add(f"{node.module}.{alias.name}{dot}{rest}")  # type: ignore[attr-defined]
                    seen_at_module_level = True
    # An import inside a function or class is not seen from the module's code:
    # without a module-level one, a call outside that scope has no qualified name.
    if not seen_at_module_level or len(names) != 1 or _bound_otherwise(tree, head):
        return None
    return names.pop()


_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _module_level_imports(
    body: list[ast.stmt],
) -> Iterable[ast.Import | ast.ImportFrom]:
    """Import statements in the module's scope (also under ``if``/``try``/...)."""
    for statement in body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            yield statement
        elif not isinstance(statement, _NESTED_SCOPES):
            for block in _blocks(statement):
                yield from _module_level_imports(block)


def _blocks(statement: ast.stmt) -> Iterable[list[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        value = getattr(statement, field, None)
        if isinstance(value, list):
            yield value
    for clause in (
        *getattr(statement, "handlers", ()),
        *getattr(statement, "cases", ()),
    ):
        yield clause.body


def _bound_otherwise(tree: ast.Module, name: str) -> bool:
    """Is ``name`` bound by anything but an import?"""
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Name:
            if node.id == name and type(node.ctx) is not ast.Load:  # type: ignore[attr-defined]
                return True
        elif kind is ast.arg:
            if node.arg == name:  # type: ignore[attr-defined]
                return True
        elif kind in (ast.Global, ast.Nonlocal):
            if name in node.names:  # type: ignore[attr-defined]
                return True
        elif kind is not ast.alias and (
            getattr(node, "name", None) == name or getattr(node, "rest", None) == name
        ):  # def, class, except ... as, match captures, type parameters
            return True
    return False


def _written_as(text: str, statement: ast.stmt, names: tuple[str, ...]) -> bool:
    """Are the dotted ``names`` spelled without spaces in ``statement``'s lines?"""
    end = statement.end_lineno or statement.lineno
    lines = NEWLINE.split(text, end)[statement.lineno - 1 : end]
    segment = "\n".join(lines)
    return all(name in segment for name in names)


def _column(text: str, line: int, utf8_offset: int) -> int:
    """libcst's 1-based column (in characters) for ``ast``'s UTF-8 byte offset."""
    lines = NEWLINE.split(text, line)
    current = lines[line - 1] if line - 1 < len(lines) else ""
    return len(current.encode()[:utf8_offset].decode(errors="ignore")) + 1


# -- the full screen: libcst ------------------------------------------------------------


class FullScreen(cst.CSTVisitor):
    """Is this a training entry point? Is it already distributed? Already migrated?"""

    METADATA_DEPENDENCIES = (ScopeProvider, PositionProvider)

    def __init__(self, qualnames: LazyQualifiedNames) -> None:
        super().__init__()
        self._qualnames = qualnames
        self.uses_torch = False
        self.training = False
        self.backward = False
        self.steps = False
        self.distributed: tuple[int, int, str] | None = None
        self.runtime_alias: str | None = None

    @classmethod
    def of(cls, wrapper: MetadataWrapper) -> FullScreen:
        screen = cls(LazyQualifiedNames(wrapper.resolve(ScopeProvider)))
        wrapper.visit(screen)
        screen.training = screen.uses_torch and (
            screen.training or (screen.backward and screen.steps)
        )
        return screen

    def _flag(self, node: cst.CSTNode, name: str) -> None:
        if self.distributed is None and (
            name == SHARED_MODEL or is_distributed_name(name)
        ):
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
        if isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            self.steps |= method in STEP_METHODS
            if method == SHARED_MODEL_METHOD and not node.args:
                self._flag(node, SHARED_MODEL)
            if (
                method == BACKWARD
                and cst.Module([]).code_for_node(node.func.value) != "super()"
            ):
                self.backward = True
