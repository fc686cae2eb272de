"""A metric helper of a local module that builds constant tensors from a list
(TransE-PyTorch's metric.hit_at_k: ``torch.where(indices == target, one,
zero).sum().item()`` with ``one = torch.tensor([1], device=device)``) still
returns a sum over what it is handed (``project_batch_kinds``): before, the
list made it "reads something else", and AM009 reported `hits_at_1 +=
metric.hit_at_k(...)` as unknown, leaving it per-process."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod.project_view import read_project

METRIC = """\
import torch


def hit_at_k(predictions, ground_truth_idx, device, k=10):
    zero_tensor = torch.tensor([0], device=device)
    one_tensor = torch.tensor([1], device=device)
    _, indices = predictions.topk(k=k, largest=False)
    return torch.where(indices == ground_truth_idx, one_tensor, zero_tensor).sum().item()


def hit_with_global(predictions, ground_truth_idx):
    _, indices = predictions.topk(k=K, largest=False)
    return torch.where(indices == ground_truth_idx, ONES, ZEROS).sum().item()


def scaled_by_list(predictions):
    return (predictions * torch.tensor([SCALE])).sum()
"""


def test_a_list_of_constants_is_built_from_the_parameters(tmp_path: Path) -> None:
    (tmp_path / "metric.py").write_text(METRIC)
    probe = tmp_path / "probe.py"
    probe.write_text("import metric\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["metric.hit_at_k"].batch_kind == "sum"
    # globals, also inside a list, still give no kind
    assert table["metric.hit_with_global"].batch_kind == ""
    assert table["metric.scaled_by_list"].batch_kind == ""
