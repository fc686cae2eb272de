"""Reads of values that AM008 must not take for a share of the training batch.

yenchenlin/nerf-pytorch's ``train()`` builds no DataLoader: it slices its
batch of rays out of a tensor made before the loop (``rays_rgb[i_batch:i_batch
+ N_rand]``, which AM019 reports), and renders a held-out view whole. After
migration every process computes the same batch, the same loss and the same
PSNR; a value printed there (``psnr.item()``, ``test_psnr.item()``) is not "this
process's share of the batch", and AM008 must not say so.

A read is such a value when the file holds no data loader at all (neither one
it builds, nor one a local module returns, nor one its callers hand it:
``ModuleIndex.loaders``) and every loop around it provably reads no data
(``reads_no_data``: a ``for`` over ``range(...)``, a ``while`` without
``next(...)``). Static only.

And a read of a name bound again in a loop over another loader, inside a value
that loop collects per batch (``err_te.append(loss.item())`` after the training
loop): AM009 combines it, and AM008's "read outside the loop of its backward"
would be false (``collected_in_loader_loop``).
"""

from __future__ import annotations

import libcst as cst

from .analysis import ModuleIndex


def same_on_every_process(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """Is ``node`` computed where no process can hold a share of the data?"""
    if index.loaders:
        return False
    return all(
        all(index.reads_no_data(loop) for loop in path)
        for path in index.loop_paths(node)
    )


def collected_in_loader_loop(index: ModuleIndex, read: cst.CSTNode) -> bool:
    """Is ``read`` (``loss.item()``) inside a value that a loop over a data loader
    collects per batch (``err_te.append(loss.item())`` in jzbontar/pixelcnn's
    test loop, where ``loss`` is bound again to the test batch's loss)? AM009
    combines those values across processes (``metrics.accumulators``), so AM008
    has nothing to say of the read as a training loss read after its loop."""
    from .metrics.accumulators import collected_values

    for ancestor in index.ancestors(read):
        if not isinstance(ancestor, cst.For) or not index.loader_loop(ancestor.iter)[0]:
            continue
        for _, values, _ in collected_values(index, ancestor):
            if any(node is read for value in values for node in _subtree(value)):
                return True
    return False


def _subtree(node: cst.CSTNode) -> list[cst.CSTNode]:
    found = [node]
    for child in node.children:
        found.extend(_subtree(child))
    return found
