"""The migrated file in the shape the project's formatter gives it.

Two steps after the rules, both for files that changed only:

- ``place_runtime_import``: the added ``import accel_migrate.runtime as accel`` goes
  where isort (ruff's ``I001``, default settings) puts it: in the third-party
  section of the import block that holds the file's first torch import, in order
  among the straight imports, which come before the ``from`` imports (never above
  code that the file runs before importing torch; with no top-level torch import
  it stays where it was added). The file's own imports are never reordered:
  where they are not isort-clean, the new line is still put by that rule among them.
- ``black_like_input``: when the input was black-clean under the project's black
  settings, the output is formatted by black with them, so that the rewritten
  statements (longer calls) are wrapped as black wraps them and the file stays
  black-clean. black leaves black-clean code as it is, so only the rewritten
  statements change. A file that was not black-clean is not formatted: its style
  is the user's. The settings are black's own: ``[tool.black]`` of the
  pyproject.toml that black finds for the file (``black_mode``), read once per
  folder.

black is optional (a development dependency; the pre-commit hook's environment
does not install it): without it, the second step does nothing.
"""

from __future__ import annotations

import ast
import sys
import threading
from collections.abc import Sequence

import libcst as cst

from . import python_ast
from .black_clean import surely_not_black_clean
from .black_config import black_mode
from .options import RUNTIME_MODULE

_FUTURE, _STDLIB, _OTHER, _LOCAL = "future", "stdlib", "other", "local"


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _imports(statement: cst.BaseStatement) -> list[cst.Import | cst.ImportFrom] | None:
    """The imports of an import line, or None for any other statement."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    parts = list(statement.body)
    if parts and all(isinstance(p, (cst.Import, cst.ImportFrom)) for p in parts):
        return parts  # type: ignore[return-value]
    return None


def _is_runtime_import(statement: cst.BaseStatement, alias: str) -> bool:
    parts = _imports(statement)
    if parts is None or len(parts) != 1 or not isinstance(parts[0], cst.Import):
        return False
    names = parts[0].names
    if isinstance(names, cst.ImportStar) or len(names) != 1:
        return False
    name = names[0]
    return (
        _dotted(name.name) == RUNTIME_MODULE
        and name.asname is not None
        and isinstance(name.asname.name, cst.Name)
        and name.asname.name.value == alias
    )


def _section(part: cst.Import | cst.ImportFrom) -> str:
    if isinstance(part, cst.ImportFrom):
        if part.relative:
            return _LOCAL
        module = _dotted(part.module) if part.module is not None else ""
    else:
        module = _dotted(part.names[0].name)
    top = module.split(".")[0]
    if top == "__future__":
        return _FUTURE
    if top in sys.stdlib_module_names:
        return _STDLIB
    return _OTHER


def _imports_torch(statement: cst.BaseStatement) -> bool:
    for part in _imports(statement) or ():
        if isinstance(part, cst.ImportFrom):
            modules = (
                [_dotted(part.module)] if part.module and not part.relative else []
            )
        elif isinstance(part.names, Sequence):
            modules = [_dotted(alias.name) for alias in part.names]
        else:
            modules = []
        if any(m.split(".")[0] == "torch" for m in modules):
            return True
    return False


def _starts_group(statement: cst.SimpleStatementLine) -> bool:
    """A blank line above an import separates isort sections."""
    return any(line.comment is None for line in statement.leading_lines)


def place_runtime_import(module: cst.Module, alias: str) -> cst.Module:
    """Move the added runtime import to isort's place in the first import block."""
    body = list(module.body)
    ours_at = next(
        (i for i, s in enumerate(body) if _is_runtime_import(s, alias)), None
    )
    if ours_at is None:
        return module
    ours = body.pop(ours_at)
    assert isinstance(ours, cst.SimpleStatementLine)
    # The runtime imports torch: it goes in the block of the file's first torch
    # import, so that no statement of the file (`os.environ[...] = ...` before
    # `import torch`) runs after it that ran before torch was imported.
    first_torch = next((i for i, s in enumerate(body) if _imports_torch(s)), None)
    if first_torch is None:
        return module
    start = first_torch
    while start > 0 and _imports(body[start - 1]) is not None:
        start -= 1
    end = first_torch
    while end < len(body) and _imports(body[end]) is not None:
        end += 1
    groups: list[list[int]] = []
    for index in range(start, end):
        line = body[index]
        assert isinstance(line, cst.SimpleStatementLine)
        if not groups or _starts_group(line):
            groups.append([])
        groups[-1].append(index)
    placed = _place(body, groups, ours)
    if placed is None:
        return module
    return module.with_changes(body=placed)


def _place(
    body: list[cst.BaseStatement],
    groups: Sequence[Sequence[int]],
    ours: cst.SimpleStatementLine,
) -> list[cst.BaseStatement] | None:
    def sections(index: int) -> set[str]:
        return {_section(p) for p in _imports(body[index]) or ()}

    key = RUNTIME_MODULE.lower()
    bare = ours.with_changes(leading_lines=())
    third_party = next(
        (g for g in groups if any(_OTHER in sections(i) for i in g)), None
    )
    if third_party is None:
        return None  # (the block holds a torch import: not reached)
    others = [i for i in third_party if _OTHER in sections(i)]
    for index in others:
        [first, *_] = _imports(body[index]) or [None]
        after_ours = isinstance(first, cst.ImportFrom) or (
            isinstance(first, cst.Import) and _dotted(first.names[0].name).lower() > key
        )
        if after_ours:
            return _insert_before(body, index, bare, index == third_party[0])
    at = others[-1] + 1
    return [*body[:at], bare, *body[at:]]


def _insert_before(
    body: list[cst.BaseStatement],
    index: int,
    ours: cst.SimpleStatementLine,
    first_of_group: bool,
) -> list[cst.BaseStatement]:
    target = body[index]
    assert isinstance(target, cst.SimpleStatementLine)
    if first_of_group:
        # The group's separating blank line (and a heading comment) stay above it.
        ours = ours.with_changes(leading_lines=target.leading_lines)
        target = target.with_changes(leading_lines=())
    return [*body[:index], ours, target, *body[index + 1 :]]


#: One first import of black at a time: a thread that imports it while another
#: is still doing so can get the half-initialised module (no ``black.Mode``), as
#: the soundness corpus's thread pool did.
_BLACK_IMPORT = threading.Lock()


def black_like_input(original: str, migrated: str, path: str = "<string>") -> str:
    """``migrated`` formatted by black when ``original`` was black-clean, both in
    the mode of the project that ``path`` belongs to."""
    with _BLACK_IMPORT:
        try:
            import black
        except ImportError:
            return migrated
    if "\r" in original:
        return migrated  # black's string API works on LF text only
    mode = black_mode(path)
    if mode is None:
        return migrated
    if surely_not_black_clean(original, mode):
        return migrated  # without a whole black run to learn it
    try:
        if black.format_str(original, mode=mode) != original:
            return migrated
        formatted = black.format_str(migrated, mode=mode)
    except Exception:  # black cannot format it (new syntax, an internal error)
        return migrated
    # black checks this itself only in its safe file mode; one more parse is cheap.
    try:
        same = ast.dump(python_ast.parse(formatted)) == ast.dump(
            python_ast.parse(migrated)
        )
    except SyntaxError:
        same = False
    return formatted if same else migrated
