"""Why an item of a returned tuple of loaders has no kind AM006 knows
(``HelperFact.item_reasons``, ``returned_items``): the finding names the item
and the reason, not "a tuple of other values" (issue 12, r28b)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod.project_view import ProjectView

DATA = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def handed_back(train_set):
    return DataLoader(train_set, batch_size=8), train_set


def built(n):
    stats = torch.randn(n).mean()
    return DataLoader(TensorDataset(torch.randn(n, 4)), batch_size=8), stats


def two_kinds(n, flag):
    loader = DataLoader(TensorDataset(torch.randn(n, 4)), batch_size=8)
    if flag:
        return loader, None
    return loader, loader


def plain(n):
    return DataLoader(TensorDataset(torch.randn(n, 4)), batch_size=8), None
"""


def _facts(tmp_path: Path):  # type: ignore[no-untyped-def]
    (tmp_path / "data.py").write_text(DATA)
    train = tmp_path / "train.py"
    train.write_text(
        "from data import handed_back, built, two_kinds, plain\n"
        "loader, x = handed_back(1)\n"
    )
    return ProjectView([str(train)]).facts_for(str(train))


def test_each_item_of_unknown_kind_is_named_with_its_reason(tmp_path: Path) -> None:
    facts = _facts(tmp_path)
    (parameter,) = facts.lookup(["data.handed_back"]).item_reasons  # type: ignore[union-attr]
    assert parameter.startswith(
        "item 2, `train_set`, is a parameter of `handed_back` handed back"
    )
    (value,) = facts.lookup(["data.built"]).item_reasons  # type: ignore[union-attr]
    assert value.startswith("item 2, `stats` (`torch.randn(n).mean()`), is not")
    (mixed,) = facts.lookup(["data.two_kinds"]).item_reasons  # type: ignore[union-attr]
    assert mixed == (
        "item 2 is a DataLoader in `return (loader, loader)`, None in `return "
        "(loader, None)`: not one kind in every return"
    )


def test_items_known_to_be_no_loader_need_no_reason(tmp_path: Path) -> None:
    fact = _facts(tmp_path).lookup(["data.plain"])
    assert fact is not None and fact.items == ("loader", "none")
    assert fact.item_reasons == ()
