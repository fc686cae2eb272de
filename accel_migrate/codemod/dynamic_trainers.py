"""Trainer classes picked by name from a local module: FeatureLearningRotNet's
``algorithm = getattr(alg, config['algorithm_type'])(config)`` then
``algorithm.solve(dloader_train, dloader_test)``, where ``alg`` is the local
package ``algorithms`` whose classes (``ClassificationModel``,
``FeatureClassificationModel``) train models their base builds; or a module of
a local package imported by a computed name: GradientEpisodicMemory's
``Model = importlib.import_module('model.' + args.model)`` then
``model = Model.Net(...)`` and ``model.observe(x, t, y)``, where each module of
the package ``model`` defines a ``Net`` that owns its optimizer and steps it
(``named_packages`` tells the project view which packages to read).

The script has no loop of its own and names no class, so AM004's reading of
library trainers (a call of a class it can name) does not see one; yet the
script trains through whichever class the name picks. ``picked_trainers``
finds such calls: the classes of that module that train (``HelperFact.trains``
or ``trains_own``, or models that train themselves: ``training_methods``), so that AM004 leaves the script whole with a finding that
names them, instead of skipping it as "not a training entry point".

Static only: reads the analysis's qualified names, nothing runs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from . import python_ast
from .project_facts import HelperFact
from .project_file_facts import ProjectFacts

if TYPE_CHECKING:
    # the project view imports this module on a run the cache answers whole,
    # which must not import libcst (tests/cli/test_cache.py)
    import libcst as cst

#: The builtin that picks a class by name.
_GETATTR = "builtins.getattr"
#: The call that imports a module by name.
_IMPORT_MODULE = "importlib.import_module"


def named_package(argument: ast.expr) -> str:
    """The package a computed module name starts in: ``model`` of
    ``'model.' + args.model``, ``f'model.{name}'``, ``'model.%s' % name`` or
    ``'model.{}'.format(name)``; "" when the name has no constant dotted head."""
    head: object = None
    if isinstance(argument, ast.BinOp) and isinstance(argument.op, (ast.Add, ast.Mod)):
        head = argument.left.value if isinstance(argument.left, ast.Constant) else None
    elif isinstance(argument, ast.JoinedStr) and argument.values:
        first = argument.values[0]
        head = first.value if isinstance(first, ast.Constant) else None
    elif (
        isinstance(argument, ast.Call)
        and isinstance(argument.func, ast.Attribute)
        and argument.func.attr == "format"
        and isinstance(argument.func.value, ast.Constant)
    ):
        head = argument.func.value.value
    if not isinstance(head, str) or "." not in head:
        return ""
    package = head[: head.rindex(".")]
    return package if all(p.isidentifier() for p in package.split(".")) else ""


def named_packages(tree: ast.Module) -> list[str]:
    """The packages whose modules ``tree`` imports by a computed name
    (``importlib.import_module('model.' + args.model)``, or ``import_module``
    imported from importlib)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "import_module"
            and isinstance(func.value, ast.Name)
            and func.value.id == "importlib"
        ) or (isinstance(func, ast.Name) and func.id == "import_module"):
            package = named_package(node.args[0])
            if package and package not in found:
                found.append(package)
    return found


def picked_trainers(
    calls: list[cst.Call], qualnames, project: ProjectFacts | None
) -> Iterator[tuple[cst.Call, str, tuple[HelperFact, ...]]]:
    """Each call ``getattr(M, name)(...)`` whose ``M`` is a local module with
    classes that train and call no collective themselves: (the call, the
    module's qualified name, those classes' facts)."""
    if project is None:
        return
    trainers = [
        (name, fact)
        for name, fact in project.helpers
        if fact.kind == "class"
        and (fact.trains or fact.trains_own or fact.training_methods)
        and not fact.collectives
    ]
    if not trainers:
        return
    import libcst as cst  # only where a pass runs (see the import above)

    for call in calls:
        if _IMPORT_MODULE in qualnames(call.func) and call.args:
            # `importlib.import_module('model.' + args.model)`: a module of the
            # package, picked by name
            code = cst.Module([]).code_for_node(call.args[0].value)
            try:
                package = named_package(python_ast.parse(code, mode="eval").body)
            except SyntaxError:
                package = ""
            found = tuple(
                fact for name, fact in trainers if name.startswith(package + ".")
            )
            if package and found:
                yield call, package, found
            continue
        inner = call.func
        if not (
            isinstance(inner, cst.Call)
            and _GETATTR in qualnames(inner.func)
            and inner.args
        ):
            continue
        for module in sorted(qualnames(inner.args[0].value)):
            found = tuple(
                fact for name, fact in trainers if name.startswith(module + ".")
            )
            if found:
                yield call, module, found
                break
