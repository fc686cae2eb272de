"""The methods of a class that print or write, when nothing in the project names
them (``HelperFact.uncalled_effects``): LSTNet's ``Optim`` wrapper prints
"Decaying learning rate" in ``updateLearningRate``, which its ``main.py``
never calls. Building an instance of it prints nothing, so AM017 has nothing to
move to the main process at ``Optim.Optim(model.parameters(), ...)``, and a
needs-review finding there would be noise.

Conservative by construction:

- the class derives from nothing (or ``object``): a base of another library
  may call an overridden method by its name (a callback's ``on_epoch_end``);
- a method is counted as printing when its own statements print or write, or
  when it calls ``self.m(...)`` with ``m`` one that does;
- no such method may be a dunder (``__init__``, ``__call__``, ``__del__``,
  ``__enter__``: Python calls them) or a name that code outside the project
  calls on objects handed to it (``write`` and ``flush`` for a stream,
  ``step``, ``forward``, ``state_dict``);
- the method's name appears nowhere in the project's Python files (a word
  search of the text, strings and comments included: ``getattr(o, "m")``,
  ``o.m``, ``callback=o.m``), but for its own ``def`` and ``self.m(...)``
  calls in its class; the project is the folder of the topmost root the
  imports are resolved from, and a project of more than ``_MAX_FILES`` files is
  not searched (nothing is taken as uncalled there).
"""

from __future__ import annotations

import ast
import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .project_helpers import HelperFacts

#: Names that code outside the project calls on an object handed to it.
_PROTOCOL = frozenset(
    {
        "write",
        "flush",
        "close",
        "read",
        "readline",
        "fileno",
        "isatty",
        "step",
        "zero_grad",
        "forward",
        "state_dict",
        "load_state_dict",
        "add_param_group",
        "emit",
        "handle",
        "run",
        "start",
        "join",
    }
)
_MAX_FILES = 400
_MAX_BYTES = 2_000_000
_SKIPPED = frozenset({"__pycache__", "node_modules", "site-packages", "venv"})


def uncalled_effects(facts: HelperFacts, cls: ast.ClassDef) -> tuple[str, ...]:
    """The methods of ``cls`` that print or write, when none of them is named
    anywhere in the project (sorted); () when any is, or where that cannot be
    told."""
    if any(not _object(base) for base in cls.bases) or cls.keywords:
        return ()
    effects = _effect_methods(facts, cls)
    if not effects or any(_called_anyway(name) for name in effects):
        return ()
    own = _own_mentions(facts, cls, effects)
    if own is None:
        return ()
    texts = _project_texts(facts)
    if texts is None:
        return ()
    for name in effects:
        word = re.compile(rb"\b" + re.escape(name.encode()) + rb"\b")
        count = sum(len(word.findall(text)) for text in texts)
        if count > own[name]:
            return ()
    return tuple(sorted(effects))


def construction_quiet_effects(
    facts: HelperFacts, cls: ast.ClassDef
) -> tuple[str, ...]:
    """The methods of ``cls`` that print or write (sorted), when building an
    instance runs none of them (GLUE's ``BertConfig``, whose ``to_json_file``
    alone opens a file for writing): the class derives from nothing, and no
    such method is a dunder (``__init__`` or one it calls on ``self`` counts as
    one) or a name code outside the project calls on an object handed to it;
    () otherwise. AM017 then reports the calls of those methods, where the
    writes run, not the construction."""
    if any(not _object(base) for base in cls.bases) or cls.keywords:
        return ()
    effects = _effect_methods(facts, cls)
    if not effects or any(_called_anyway(name) for name in effects):
        return ()
    return tuple(sorted(effects))


def _object(base: ast.expr) -> bool:
    return isinstance(base, ast.Name) and base.id == "object"


def _called_anyway(name: str) -> bool:
    return (name.startswith("__") and name.endswith("__")) or name in _PROTOCOL


def _effect_methods(facts: HelperFacts, cls: ast.ClassDef) -> set[str]:
    """The methods that print, write or call collectives, in their own
    statements or through ``self.m(...)`` of one that does."""
    from .project_draws import class_methods, self_calls
    from .project_effects import _Effects

    methods = class_methods(cls)
    found: set[str] = set()
    for name, method in methods.items():
        effects = _Effects(facts, in_class=True)
        effects.body(method.body)
        if effects.writes or effects.prints or effects.collectives:
            found.add(name)
    changed = True
    while changed:
        changed = False
        for name, method in methods.items():
            if name not in found and set(self_calls(method)) & found:
                found.add(name)
                changed = True
    return found


def _own_mentions(
    facts: HelperFacts, cls: ast.ClassDef, names: set[str]
) -> dict[str, int] | None:
    """How often each of ``names`` is written in ``cls``'s own file as its
    ``def`` or a ``self.name(...)`` call in the class; None where the class
    names one in another way (``callback=self.name``, a string)."""
    counts = dict.fromkeys(names, 0)
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node in cls.body and node.name in counts:
                counts[node.name] += 1
        elif isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
                and func.attr in counts
            ):
                counts[func.attr] += 1
    calls = {
        id(node.func)
        for node in ast.walk(cls)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in counts
            and id(node) not in calls
        ) or (isinstance(node, ast.Constant) and node.value in counts):
            return None
    return counts


def _project_texts(facts: HelperFacts) -> tuple[bytes, ...] | None:
    """The text of every Python file under the topmost root (read once per
    view); None where there are too many to search."""
    top = min(facts.roots, key=len) if facts.roots else ""
    cache = facts.view._project_texts
    if top not in cache:
        cache[top] = _read_tree(top) if top else None
    return cache[top]


def _read_tree(top: str) -> tuple[bytes, ...] | None:
    texts: list[bytes] = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED)
        for name in files:
            if not name.endswith(".py"):
                continue
            if len(texts) >= _MAX_FILES:
                return None
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as handle:
                    text = handle.read(_MAX_BYTES + 1)
            except OSError:
                return None
            if len(text) > _MAX_BYTES:
                return None
            texts.append(text)
    return tuple(texts)
