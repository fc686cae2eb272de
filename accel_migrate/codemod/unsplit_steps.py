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

(A read of a name bound again in a loop over another loader, inside a value that
loop collects per batch, ``err_te.append(loss.item())`` after the training loop,
is AM009's: ``logged_losses._placement`` does not take it for a read after the
backward's loop.)
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
