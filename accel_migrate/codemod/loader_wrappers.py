"""Classes of a module that only pass a loader's batches on (prefetchers).

Lornatang's super-resolution repositories (``CPUPrefetcher``/``CUDAPrefetcher``
in dataset.py) and NVIDIA's ImageNet example (``data_prefetcher``) wrap the
training script's DataLoader in a class that keeps it, calls ``iter``/``next``/
``len`` on it and moves each batch to the device; the script walks the wrapper
(``batch = prefetcher.next()``) where it would walk the loader. In a batch, a
helper module that the script hands its sharded loaders and that comes back
unchanged leaves the script unchanged too (AM103): what the module computes over
those loaders might be this process's share only. A wrapper computes nothing
over them: its batches go back to the caller, whose own analysis reads what is
done with them. So the calls that hand a loader to such a class do not count as
handing the module a loader (``project_libraries.handed_loaders``), and a
script that hands one its sharded loader is not told that sums made over it
there are this process's (``helper_effects.loader_passed_to_helper``, through
``HelperFact.passes_batches_on``).

Recognised conservatively, from the module's syntax only: a class with no base
(or ``object``), whose methods make no arithmetic (no ``+=``, no binary
operator), no call other than ``iter``/``next``/``len``/``isinstance``/
``super``, the class's own methods, device moves and the CUDA stream calls a
prefetcher makes (``_METHODS``), and at least one ``iter(...)``. A class that
counts, sums, appends, prints, writes or touches the loader's sampler is not one.
"""

from __future__ import annotations

import ast

#: Functions a wrapper may call.
_CALLS = frozenset({"iter", "next", "len", "isinstance", "super"})
#: Methods a wrapper may call (on the batch, its tensors, torch.cuda, itself).
_METHODS = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "float",
        "half",
        "pin_memory",
        "items",
        "keys",
        "values",
        "is_tensor",
        "Stream",
        "stream",
        "current_stream",
        "wait_stream",
        "record_stream",
        "__init__",
    }
)


def loader_wrapper_classes(tree: ast.Module) -> frozenset[str]:
    """The names of the module's top-level classes that only pass a loader's
    batches on."""
    return frozenset(
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef) and passes_batches_on(node)
    )


def passes_batches_on(cls: ast.ClassDef) -> bool:
    """Does ``cls`` only keep a loader and pass its batches on?"""
    if any(not (isinstance(b, ast.Name) and b.id == "object") for b in cls.bases):
        return False
    if cls.keywords or cls.decorator_list:
        return False
    own = {s.name for s in cls.body if isinstance(s, ast.FunctionDef)}
    if not own or any(
        not isinstance(s, (ast.FunctionDef, ast.Expr, ast.Pass)) for s in cls.body
    ):
        return False
    iterates = False
    for node in ast.walk(cls):
        if isinstance(node, (ast.AugAssign, ast.BinOp, ast.Global, ast.Nonlocal)):
            return False
        if isinstance(node, (ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            if node is not cls:
                return False
        if isinstance(node, ast.FunctionDef) and node.decorator_list:
            return False
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                if func.id not in _CALLS:
                    return False
                iterates = iterates or func.id == "iter"
            elif isinstance(func, ast.Attribute):
                if func.attr in _METHODS:
                    continue
                if not (
                    isinstance(func.value, ast.Name)
                    and func.value.id == "self"
                    and func.attr in own
                ):
                    return False
            else:
                return False
    return iterates
