"""A batch taken once out of a sharded loader (AM006's part of the analysis):
``fixed_images, _ = next(iter(test_loader))`` before training, to reconstruct or
sample from the same images every epoch (VQ-VAE, GAN and segmentation repos),
``x_fixed, c_org = next(data_iter)`` after ``data_iter = iter(data_loader)``
(StarGAN's fixed translation batch), a probe batch for a monitoring loss.

Once ``accel.prepare_dataloader`` wraps the loader, such a batch is this
process's share of the loader's first batch: what is computed from it (sampled
or reconstructed images, a probe loss, a data-dependent initialisation) is the
main process's share's where the original used the whole batch. A batch taken in
a loop that runs a backward (``next(it)`` in the step, also through a function
the step calls) is training data, rightly a share, and is not one of these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .reduction.placement import code

if TYPE_CHECKING:
    from .analysis import ModuleIndex


def fixed_batch_taken(index: ModuleIndex, call: cst.Call) -> str | None:
    """The needs-review message for ``call`` when it is ``next(...)`` of an
    iterator over a loader of the file, outside the training step; else None."""
    if "builtins.next" not in index.qualnames(call.func) or len(call.args) != 1:
        return None
    loader = _iterated_loader(index, call.args[0].value)
    if (
        loader is None
        or _in_training_step(index, call, set())
        or _trained_after(index, call)
    ):
        return None
    statement = index.parent(call)
    if _gathered(index, statement):
        return None
    taken = "a batch"
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
        taken = f"`{code(statement.targets[0].target)}`"
    return (
        f"{taken} is taken once with `{code(call)}` from `{code(loader)}`, which "
        "accel.prepare_dataloader shards: it holds this process's share of that "
        "batch, so what is computed from it (sampled or reconstructed images, a "
        "probe loss, a data-dependent initialisation) is the main process's "
        "share's where the original used the whole batch; take it from a "
        "DataLoader over the same dataset that is not prepared, or combine what "
        "it yields across processes"
    )


def _gathered(index: ModuleIndex, statement: cst.CSTNode | None) -> bool:
    """Is a variable the batch is taken into set again from the runtime's
    gather (``fixed_x = accel.gather(fixed_x)``): the whole batch again?"""
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1):
        return False
    target = statement.targets[0].target
    names = (
        [e.value for e in target.elements]
        if isinstance(target, (cst.Tuple, cst.List))
        else [target]
    )
    for name in names:
        key = index.key(name)
        values = index.values.get(key, []) if key is not None else []
        if any(
            isinstance(v, cst.Call) and index.is_runtime_call(v, "gather")
            for v in values
        ):
            return True
    return False


def _iterated_loader(
    index: ModuleIndex, arg: cst.BaseExpression
) -> cst.BaseExpression | None:
    """The loader ``arg`` iterates: ``iter(loader)``, or a name every value of
    which is one (``data_iter = iter(data_loader)``)."""
    if isinstance(arg, cst.Call):
        if (
            "builtins.iter" in index.qualnames(arg.func)
            and len(arg.args) == 1
            and index.holds_tagged(arg.args[0].value, index.loaders)
        ):
            return arg.args[0].value
        return None
    key = index.key(arg)
    values = index.values.get(key, []) if key is not None else []
    loaders = [
        _iterated_loader(index, value) if isinstance(value, cst.Call) else None
        for value in values
    ]
    if not loaders or any(loader is None for loader in loaders):
        return None
    return loaders[0]


def _trained_after(index: ModuleIndex, call: cst.Call) -> bool:
    """Is a backward run by a statement after the one of ``call`` in its block,
    outside a loop (``x, y = next(iter(loader))``; ``model(x).sum().backward()``):
    a step on that one batch, which is training data, rightly a share."""
    statement: cst.CSTNode | None = call
    while statement is not None and not isinstance(
        statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
    ):
        statement = index.parent(statement)
    block = index.parent(statement) if statement is not None else None
    body = getattr(block, "body", None)
    if not isinstance(body, (list, tuple)) or statement not in body:
        return False
    after = list(body)[list(body).index(statement) + 1 :]
    return any(
        not isinstance(s, (cst.For, cst.While)) and index.runs_backward(s)
        for s in after
    )


def _in_training_step(
    index: ModuleIndex, node: cst.CSTNode, seen: set[cst.FunctionDef]
) -> bool:
    """Is ``node`` run by a loop that runs a backward: in its body, or in a
    function of the file that such a loop calls (or that is called from one)?"""
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.For, cst.While)) and index.runs_backward(
            ancestor.body
        ):
            return True
        if isinstance(ancestor, cst.Lambda):
            return True  # called from where the analysis does not follow
        if isinstance(ancestor, cst.FunctionDef):
            if ancestor in seen:
                return False
            seen.add(ancestor)
            sites = index.call_sites(ancestor)
            return any(_in_training_step(index, site, seen) for site in sites)
    return False
