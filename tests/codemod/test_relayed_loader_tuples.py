"""Tuples of loaders a project function hands back (``project_return_kinds``):
followed through the functions that return another's result (capsule-net-pytorch's
``utils.load_data`` -> ``load_mnist``), and kept as tuples of loaders where the
other items are ``None`` or numbers (pytorch-deeplab-xception's
``make_data_loader``: ``train_loader, val_loader, None, num_class``), so that AM006
prepares the loaders where they are taken out."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod.project_view import read_project

UTILS = """\
from torch.utils.data import DataLoader


class Digits:
    NUM_CLASSES = 10


def load_mnist(args):
    train = DataLoader(Digits(), batch_size=args.batch_size, shuffle=True)
    test = DataLoader(Digits(), batch_size=args.batch_size)
    return train, test


def load_data(args):
    if args.dataset == "mnist":
        return load_mnist(args)
    else:
        raise Exception("no such dataset")


def relay_twice(args):
    return load_data(args)


def make_data_loader(args):
    train_set = Digits()
    num_class = train_set.NUM_CLASSES
    train = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    test_loader = None
    return train, DataLoader(Digits(), batch_size=8), test_loader, num_class


def loader_and_set(args):
    train_set = Digits()
    return DataLoader(train_set, batch_size=8), train_set


def relay_either(args):
    if args.mixed:
        return make_data_loader(args)
    return load_mnist(args)
"""


def _table(tmp_path: Path) -> dict:
    (tmp_path / "utils.py").write_text(UTILS)
    probe = tmp_path / "probe.py"
    probe.write_text("import utils\n")
    return dict(read_project(str(probe)).helpers)


def test_a_tuple_of_loaders_is_followed_through_the_functions_that_relay_it(
    tmp_path: Path,
) -> None:
    table = _table(tmp_path)
    for name in ("load_mnist", "load_data", "relay_twice"):
        fact = table[f"utils.{name}"]
        assert (fact.container, fact.items) == ("tuple", ("loader", "loader")), name
    assert "tuple of DataLoaders" in table["utils.load_data"].describe()


def test_none_and_numbers_beside_loaders_are_known_as_such(tmp_path: Path) -> None:
    table = _table(tmp_path)
    fact = table["utils.make_data_loader"]
    assert fact.items == ("loader", "loader", "none", "number")
    assert "DataLoaders and None or numbers" in fact.describe()
    # a dataset beside the loader is not a number: still "something else"
    assert table["utils.loader_and_set"].items == ("loader", "")
    # relayed functions that hand back tuples of different shapes: not followed
    assert table["utils.relay_either"].container == ""
