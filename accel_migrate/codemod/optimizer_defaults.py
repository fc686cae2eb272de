"""Optimizer classes a library class is handed as a constructor default: the
pytorch_tabnet ``TabModel(optimizer_fn=torch.optim.Adam, optimizer_params=...)``
stores ``self.optimizer_fn = optimizer_fn`` in ``__init__`` and builds its
optimizer later, in ``_set_optimizer``, as
``self.optimizer_fn(self.network.parameters(), **self.optimizer_params)``.

That call builds an optimizer as surely as ``torch.optim.Adam(...)`` does (the
caller may hand another ``torch.optim`` class, never something else that trains
nothing), so ``library_trainers.trains_own_models`` counts it: the class trains
models of its own, and a script that only calls its ``fit`` trains through it.

``optimizer_attributes`` names the ``self`` attributes of such a lineage that
hold an optimizer class; ``builds_optimizer_call`` is the predicate that accepts
``torch.optim`` calls and calls of those attributes. Static only: ``ast``,
nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable

from .names import is_optimizer_class
from .project_nodes import self_attribute


def optimizer_attributes(
    classes: Iterable[ast.ClassDef], dotted: Callable[[ast.expr], str]
) -> frozenset[str]:
    """The attributes ``self.NAME`` that an ``__init__`` of ``classes`` binds to
    a parameter whose default is a ``torch.optim`` class (``dotted`` reads the
    default's qualified name in the classes' module)."""
    found: set[str] = set()
    for cls in classes:
        init = next(
            (
                m
                for m in cls.body
                if isinstance(m, ast.FunctionDef) and m.name == "__init__"
            ),
            None,
        )
        if init is None:
            continue
        names = _optimizer_parameters(init.args, dotted)
        if not names:
            continue
        for node in ast.walk(init):
            if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Name):
                continue
            if node.value.id not in names:
                continue
            for target in node.targets:
                attribute = self_attribute(target)
                if attribute is not None:
                    found.add(attribute)
    return frozenset(found)


def builds_optimizer_call(
    dotted: Callable[[ast.expr], str], attributes: frozenset[str]
) -> Callable[[ast.Call], bool]:
    """A predicate: does the call build an optimizer (a ``torch.optim`` class,
    or ``self.NAME(...)`` for an attribute of ``attributes``)?"""

    def is_optimizer(call: ast.Call) -> bool:
        func = call.func
        if (
            attributes
            and isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
            and func.attr in attributes
        ):
            return True
        return is_optimizer_class(dotted(func))

    return is_optimizer


def _optimizer_parameters(
    args: ast.arguments, dotted: Callable[[ast.expr], str]
) -> set[str]:
    pairs = _defaulted(args)
    return {a.arg for a, default in pairs if is_optimizer_class(dotted(default))}


def optimizer_class_defaults(init: ast.FunctionDef) -> frozenset[str]:
    """The parameters of ``init`` whose default is spelled as a ``torch.optim``
    class (``torch.optim.Adam``, ``optim.SGD``): read without the module's
    names, for ``library_trainers``, whose handed values are models."""
    pairs = _defaulted(init.args)
    return frozenset(
        a.arg
        for a, default in pairs
        if isinstance(default, ast.Attribute)
        and default.attr[:1].isupper()
        and ast.unparse(default.value).split(".")[-1] == "optim"
    )


def _defaulted(args: ast.arguments) -> list[tuple[ast.arg, ast.expr]]:
    """The parameters that have a default, each with it."""
    positional = [*args.posonlyargs, *args.args]
    pairs = list(
        zip(
            positional[len(positional) - len(args.defaults) :],
            args.defaults,
            strict=True,
        )
    )
    pairs += [
        (a, d)
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
        if d is not None
    ]
    return pairs
