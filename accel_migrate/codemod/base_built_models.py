"""Models a base class's constructor builds through a method its subclass
overrides (Informer2020's ``Exp_Basic.__init__``: ``self.model =
self._build_model().to(self.device)``, with ``Exp_Informer._build_model``
returning the network): AM004's story of such a ``self.model``.

The subclass trains ``self.model`` (``optim.Adam(self.model.parameters())``),
but no assignment of it is in the subclass's file: the base's constructor, in
another file, stores what the override returns. accel-migrate does not follow a
model through a base class's constructor, so it does not prepare it, and the
blocking finding must say where the model is really built and why, not that it
cannot be found.

- ``init_built`` (project view, ``ast``; in ``base_init_assignments``, which
  imports no libcst): a class's ``__init__`` assignments
  ``self.<attr> = self.<method>(...)`` (also under ``.to(...)``, ``.float()``,
  ``.cuda()``), as (attribute, method, line, code).
- ``base_built_story`` (the migrated file, libcst): the sentence for
  ``self.<attr>`` of a method of a class whose base (a helper class of the
  project, or a class of this file) sets it so, naming the override.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from . import python_ast
from .base_init_assignments import _built_by_method
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex


def base_built_story(
    index: ModuleIndex,
    name: str,
    at: cst.CSTNode,
    line: Callable[[cst.CSTNode], int],
) -> str:
    """For ``self.<attr>`` (``name``) read in a method of a class (``at``) that
    does not assign it, and whose base sets it in ``__init__`` from a method:
    where and how the model is built, and what to wrap; "" otherwise."""
    if not name.startswith("self.") or name.count(".") != 1:
        return ""
    attribute = name.split(".", 1)[1]
    cls = index.enclosing_class(at)
    if cls is None:
        return ""
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    for base in cls.bases:
        found = _base_sets(index, base.value, attribute, line)
        if found is None:
            continue
        base_name, where, method, base_line, code = found
        override = methods.get(method)
        if override is not None:
            built = (
                f"which `{cls.name.value}` overrides (`{cls.name.value}.{method}`, "
                f"line {line(override)} of this file, builds the model)"
            )
        else:
            built = f"a method of `{base_name}` or of another class in its lineage"
        return (
            f"`{name}` is set by the constructor of the base class `{base_name}` "
            f"({where}, line {base_line}: `{code}`) from `self.{method}()`, "
            f"{built}; accel-migrate does not follow a model built through a base "
            "class's constructor, so it does not prepare it here; wrap it with "
            "accel.prepare_model(...) where the base class stores it (`self."
            f"{attribute} = accel.prepare_model(...)` in `{base_name}.__init__`) "
            "and its optimizer with accel.prepare_optimizer(...)"
        )
    return ""


def _base_sets(
    index: ModuleIndex,
    base: cst.BaseExpression,
    attribute: str,
    line: Callable[[cst.CSTNode], int],
) -> tuple[str, str, str, int, str] | None:
    """(class name, file, method, line, code) where the base ``base`` names sets
    ``self.<attribute>`` from one of its methods in ``__init__``: a helper class
    of the project view, or a class of this file."""
    fact = index.helper(base)
    if fact is not None and fact.kind == "class":
        for attr, method, at_line, code in fact.init_built:
            if attr == attribute:
                return fact.name, fact.file, method, at_line, code
        return None
    local = index.local_class(base)
    if local is None:
        return None
    module = cst.Module([])
    for statement in local.body.body:
        if not (
            isinstance(statement, cst.FunctionDef)
            and statement.name.value == "__init__"
        ):
            continue
        for assign in findall(statement.body, m.Assign()):
            tree = python_ast.parse(module.code_for_node(assign).strip())
            built = _built_by_method(tree.body[0]) if tree.body else None
            if built is not None and built[0] == attribute:
                _, method, code = built
                return local.name.value, "this file", method, line(assign), code
    return None
