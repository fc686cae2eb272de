"""Hand-written batch iterators of a project, and the functions that build them
(the project view's side of ``batch_iterators``, read with ``ast``).

Chinese-Text-Classification-Pytorch's utils.py writes ``class DatasetIterater``
(``__next__`` slices ``self.batches[self.index * self.batch_size: ...]``,
``__iter__`` returns ``self``, ``__len__`` counts the batches, a residue batch
last) and ``build_iterator(dataset, config)`` returning one; the script binds
``train_iter = build_iterator(train_data, config)`` and hands it to
``train(config, model, train_iter, ...)`` of train_eval.py, whose loop runs the
backward. ``accel.prepare_dataloader`` cannot split such an iterator: every
process trains on every batch. AM019 must say so where the loop is, naming the
class and its file, also when the loop is over a function's result or over a
parameter every caller of the batch hands one.

- ``iterator_class``: for a class (not a model) that defines ``__next__`` or
  ``__iter__``, the phrase that names it (``HelperFact.batch_iterator``).
- ``returned_iterator``: for a function whose every return builds an instance of
  one such class (directly or through a local variable), the same phrase, said
  of the function.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .reaching_values import reaching_value

if TYPE_CHECKING:
    from .project_helpers import HelperFacts

_PROTOCOL = ("__next__", "__iter__")


def iterator_class(cls: ast.ClassDef, file: str) -> str:
    """ "`DatasetIterater` of utils.py, a hand-written batch iterator
    (`__next__`)" when ``cls`` defines the iterator protocol; "" otherwise."""
    methods = [
        s.name
        for s in cls.body
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
        and s.name in _PROTOCOL
    ]
    if not methods:
        return ""
    shown = "`, `".join(sorted(methods, reverse=True))
    return f"`{cls.name}` of {file}, a hand-written batch iterator (`{shown}`)"


def returned_iterator(
    facts: HelperFacts,
    returns: list[ast.Return],
    function: ast.FunctionDef | ast.AsyncFunctionDef,
) -> str:
    """The ``iterator_class`` phrase of the class every return of ``function``
    builds an instance of, said of the function (``build_iterator`` returning
    ``DatasetIterater(dataset, config.batch_size, config.device)``); ""
    where a return builds something else or nothing known."""
    if not returns or any(r.value is None for r in returns):
        return ""
    found = {_built(facts, r.value, function) for r in returns}  # type: ignore[arg-type]
    if len(found) != 1:
        return ""
    phrase = found.pop()
    return f"which returns an instance of {phrase}" if phrase else ""


def _built(facts: HelperFacts, expr: ast.expr, function: ast.AST) -> str:
    if isinstance(expr, ast.Name):
        value = reaching_value(function, expr)
        if value is None:
            return ""
        expr = value
    if not isinstance(expr, ast.Call):
        return ""
    target = facts.resolve(expr.func)
    if not isinstance(target, tuple):
        return ""
    fact = facts._follow(target)
    if fact is None or fact.kind != "class" or fact.returns:
        return ""
    return fact.batch_iterator


def handed_iterator(reader: HelperFacts, function: ast.AST, arg: ast.expr) -> str:
    """What a caller of the batch hands a parameter, where that is a batch
    iterator of the project: ``build_iterator(train_data, config)``, also
    through the variable it is bound to (every binding one), as a phrase
    naming the call and the class; "" otherwise."""
    from .project_callers import _bound_values

    values = _bound_values(function, arg.id) if isinstance(arg, ast.Name) else [arg]
    found = set()
    for value in values:
        if not isinstance(value, ast.Call) or any(
            reader.kind_of(a, function, 0)[0] == "loader"
            for a in [*value.args, *(k.value for k in value.keywords)]
        ):
            return ""  # a wrapper of a loader (a prefetcher) reads the loader
        target = reader.resolve(value.func)
        fact = reader._follow(target) if isinstance(target, tuple) else None
        if fact is None or not fact.batch_iterator or fact.returns:
            return ""
        if fact.kind == "class":
            found.add(f"an instance of {fact.batch_iterator}")
        else:
            found.add(f"`{fact.name}(...)` of {fact.file}, {fact.batch_iterator}")
    return found.pop() if len(found) == 1 else ""
