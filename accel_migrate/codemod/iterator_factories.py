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
- ``generated_batches``: for a generator function that yields batches it
  slices out of the data it is handed (``get_batches(x, y, batch_size)``), a
  phrase that says so.
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
    from .caller_arguments import bound_values

    values = bound_values(function, arg.id) if isinstance(arg, ast.Name) else [arg]
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


def generated_batches(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """For a generator function that yields batches it slices or indexes out of
    the data it is handed (``def get_batches(x, y, n): ... yield x[idx],
    y[idx]``), the phrase that names it (said of the function, as
    ``returned_iterator``'s); "" otherwise. A generator that loops over one of
    its parameters (``for b in loader: yield b``), or over a DataLoader, may
    hand on a loader's batches: not counted."""
    from .project_nodes import _own_nodes

    nodes = list(_own_nodes(function))
    yields = [n for n in nodes if isinstance(n, ast.Yield) and n.value is not None]
    if not yields or any(isinstance(n, ast.YieldFrom) for n in nodes):
        return ""
    arguments = function.args
    handed = {
        a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs
    }
    cut = _cut_names(nodes, handed)
    if not all(
        any(
            isinstance(v, ast.Subscript) or (isinstance(v, ast.Name) and v.id in cut)
            for v in ast.walk(y.value)  # type: ignore[arg-type]
        )
        for y in yields
    ):
        return ""
    for loop in nodes:
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        read = loop.iter
        while isinstance(read, ast.Call) and read.args:  # enumerate(x), iter(x)
            if isinstance(read.func, ast.Name) and read.func.id in (
                "enumerate",
                "iter",
                "zip",
                "tqdm",
            ):
                read = read.args[0]
                continue
            if "DataLoader" in ast.unparse(read.func):
                return ""
            break
        if isinstance(read, ast.Name) and read.id in handed:
            return ""
    return "a generator that yields batches it slices out of the data it is handed"


def _cut_names(nodes: list[ast.AST], handed: set[str]) -> set[str]:
    """Local names bound to items indexed out of a parameter, directly or
    through each other (pytorch_nmt's ``batch = [data[i] for i in
    item_indices]``, then ``src_sents, tgt_sents = zip(*batch)``)."""
    assigns = [n for n in nodes if isinstance(n, ast.Assign)]
    cut: set[str] = set()
    changed = True
    while changed:
        changed = False
        for assign in assigns:
            if not any(
                (
                    isinstance(v, ast.Subscript)
                    and isinstance(v.value, ast.Name)
                    and v.value.id in handed
                )
                or (isinstance(v, ast.Name) and v.id in cut)
                for v in ast.walk(assign.value)
            ):
                continue
            for target in assign.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and name.id not in cut:
                        cut.add(name.id)
                        changed = True
    return cut
