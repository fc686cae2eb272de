"""Calls of ``torch.ao.quantization`` that swap a model's modules in place,
for AM004 (prepare-model): ``prepare_qat(model, inplace=True)``, ``prepare``,
``fuse_modules`` and ``fuse_modules_qat`` (the PyTorch static quantization
tutorial's QAT section: load the float model, fuse, build the optimizer, set
the qconfig, ``prepare_qat``, train, ``apply(disable_observer)`` and
``apply(freeze_bn_stats)``, ``convert`` a copy to evaluate).

Quantization-aware training under the runtime's data parallelism is not the
original's: ``prepare_qat`` inserts fake-quantize modules whose observers keep
the running min/max of each activation as buffers, updated by every forward
from the batch the process sees. Each process observes only its share, so the
scales and zero points it quantizes with differ from those the original
computed over the whole batch, and from the other processes' (a wrapper made
before the swap does not even know the observers' buffers). The losses differ
from the first steps on, with no error.

Static only: libcst, nothing runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from .rule import Rule

#: The module swaps, by their last name, under the quantization packages.
SWAPS = frozenset({"prepare_qat", "prepare", "fuse_modules", "fuse_modules_qat"})
_PACKAGES = ("torch.ao.quantization", "torch.quantization")


def quantization_swap(rule: Rule, call: cst.Call) -> str:
    """The qualified name of the ``torch.ao.quantization`` swap ``call`` makes
    (``torch.ao.quantization.prepare_qat``); "" when it is none."""
    for name in sorted(rule.qualnames(call.func)):
        package, _, last = name.rpartition(".")
        if last in SWAPS and package.startswith(_PACKAGES):
            return name
    return ""


def swap_message(name: str) -> str:
    """AM004's reason for leaving a file with such a call whole."""
    return (
        f"`{name}` swaps the model's modules for quantization-aware ones whose "
        "observers keep the running min/max of each activation (buffers updated "
        "by every forward): on N processes each observes only its own share of "
        "the batch, so the scales and zero points it fake-quantizes with are "
        "not the original's (computed over the whole batch) nor the other "
        "processes', and a wrapper made before the swap does not know the "
        "observers; the losses differ from the first steps. accel-migrate "
        "cannot make them agree; train the quantization-aware model on one "
        "process, or synchronise the observers by hand"
    )
