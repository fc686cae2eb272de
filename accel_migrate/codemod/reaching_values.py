"""The value a returned name holds where it is returned, in a helper function of
the project view (``ast``): a name bound several times in a row to different
kinds of object reaches its return with its last value only. The Diffusion-
Models-pytorch ``get_data`` binds ``val_dataset`` to an ImageFolder, a Subset
(under an ``if``), then ``val_dataset = DataLoader(val_dataset, ...)``, and
returns ``train_dataloader, val_dataset``: a tuple of two loaders, though the
name also held datasets."""

from __future__ import annotations

import ast


def reaching_value(function: ast.AST, name: ast.Name) -> ast.expr | None:
    """The one value ``name`` holds where it is read, when that read is in a
    statement of ``function``'s own body (not nested) and the nearest earlier
    statement of that body that binds the name is a plain ``name = value``;
    None when that cannot be told (the caller then weighs every value)."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    body = function.body
    index = next(
        (
            i
            for i, statement in enumerate(body)
            if statement.lineno <= name.lineno <= (statement.end_lineno or 0)
        ),
        None,
    )
    if index is None or not isinstance(body[index], (ast.Return, ast.Assign)):
        return None
    for statement in reversed(body[:index]):
        if not _binds(statement, name.id):
            continue
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and statement.targets[0].id == name.id
        ):
            return statement.value
        return None
    return None


def _binds(statement: ast.stmt, name: str) -> bool:
    """Does ``statement`` (or anything nested in it, outside inner functions and
    classes) bind ``name``?"""
    stack: list[ast.AST] = [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and node.id == name:
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                return True
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return True
        elif isinstance(node, ast.alias) and (node.asname or node.name) == name:
            return True
        if node is not statement and isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
        ):
            if getattr(node, "name", None) == name:
                return True
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False
