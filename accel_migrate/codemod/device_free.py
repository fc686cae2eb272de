"""A script with no device code at all keeps every process on the CPU.

A training script that never names a device (no ``.cuda()``, no ``.to(...)``,
no ``device=``, no ``torch.device``) runs on the CPU: its model, its batches
and every tensor it makes stay there. ``accel.prepare_model`` moves a model to
this process's device, ``cuda:LOCAL_RANK`` on a machine with GPUs, while the
script's batches stay on the CPU: the migrated script would stop at its first
forward with a device mismatch where the original ran. The runtime cannot move
every tensor the script makes, and cannot tell at ``prepare_model`` whether
the script will ask for the device later, so the codemod decides from the
source: such a script gets ``accel.device(accelerator=False)`` after its
imports, before any other runtime call, and every process runs on the CPU as
the original did (gloo under the launcher). A script that wants the GPUs says
so with device code (``device = torch.device("cuda")``, ``.to(device)``) and
is migrated to ``accel.device()``.

Read with ``ast``, conservatively: any attribute, keyword, name or string that
may name a device (``cuda``, ``to``, ``device``, ``map_location``,
``DataParallel``, ``autocast``, ``"cuda:0"``, ...) counts as device code
(``.cpu()`` and ``map_location="cpu"`` do not: they keep tensors on the CPU), in
the file and in every local module it imports, directly or through other local
modules (``ProjectView`` reads them by their real paths, whatever the working
folder, into ``ProjectFacts.device_imports``, so the cache key holds them). A
script that imports a package the codemod cannot read and does not know (an
installed ``mylib`` whose ``build_model`` may call ``.cuda()``, or a
``models.py`` that is not found) is not taken for device-free either. A module
that other files of the batch call (a helper migrated for its callers) is not
an entry point and gets nothing: its callers decide the device.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable

import libcst as cst

from . import python_ast
from .device_code import KNOWN_PACKAGES, has_device_code
from .project_file_facts import ProjectFacts


def unknown_imports(tree: ast.AST, local: Iterable[str] = ()) -> list[str]:
    """The top-level packages ``tree`` imports that are neither the standard
    library, nor one of ``KNOWN_PACKAGES``, nor a local module (``local``: the
    project view's ``local_imports``; a relative import that resolved is "."):
    such a package may move what it builds to a device unseen."""
    known = set(local)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if not node.level else ["."]
        else:
            continue
        for name in names:
            top = name.split(".", 1)[0] if name != "." else "."
            if not (
                top in sys.stdlib_module_names or top in KNOWN_PACKAGES or top in known
            ):
                found.append(top)
    return found


def device_free(source: str, project: ProjectFacts | None = None) -> bool:
    """The script ``source`` names no device, no local module it imports does
    (``project.device_imports``, read by the project view), and it imports no
    other package that might place its tensors unseen."""
    project = project or ProjectFacts()
    try:
        tree = python_ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return not (
        has_device_code(tree)
        or project.device_imports
        or unknown_imports(tree, project.local_imports)
    )


def keep_on_cpu(module: cst.Module, alias: str, runtime_import: int) -> cst.Module:
    """``module`` with ``alias.device(accelerator=False)`` after the block of
    imports that holds the runtime's import (its index in the body)."""
    body = list(module.body)
    end = runtime_import + 1
    while end < len(body) and _import_line(body[end]):
        end += 1
    call = cst.parse_statement(
        f"{alias}.device(accelerator=False)  # no device code: every process on the CPU\n"
    )
    following = body[end] if end < len(body) else None
    call = call.with_changes(leading_lines=[cst.EmptyLine()])
    if following is not None and not following.leading_lines:  # type: ignore[union-attr]
        body[end] = following.with_changes(  # type: ignore[union-attr]
            leading_lines=[cst.EmptyLine()]
        )
    body.insert(end, call)
    return module.with_changes(body=body)


def _import_line(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(part, (cst.Import, cst.ImportFrom)) for part in statement.body
    )


def for_entry_point(
    module: cst.Module, alias: str, original: str, project: ProjectFacts
) -> cst.Module:
    """``keep_on_cpu`` for a device-free entry point (not a module the batch's
    other files call, nor one migrated for its callers), where its runtime
    import was added; ``module`` as it is otherwise."""
    from .formatting import _is_runtime_import

    if project.callers or project.library_for:
        return module
    at = next(
        (i for i, s in enumerate(module.body) if _is_runtime_import(s, alias)), None
    )
    if at is None or not device_free(original, project):
        return module
    return keep_on_cpu(module, alias, at)
