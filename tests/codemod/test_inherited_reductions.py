"""A loss class with no call of its own reduces as its base's call, with the
settings its ``__init__`` hands the base (rev17 item 7: ``class MyLp(LpLoss)``
calling ``super().__init__(size_average=False)`` read as a class with no call,
and the caller's mean held: a sum weighed as a mean, "fixed", half the
gradient at world 2), and a copy of a criterion whose settings the file then
writes is read with the write (rev17 item 8)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.inherited_reductions import (
    PLAIN,
    class_call_reductions,
    library_base,
)
from accel_migrate.codemod.reduction_settings import call_reductions

LP_LOSS = """\
import torch


class LpLoss(object):
    def __init__(self, d=2, p=2, size_average=True, reduction=True):
        self.d = d
        self.p = p
        self.reduction = reduction
        self.size_average = size_average

    def rel(self, x, y):
        n = x.size()[0]
        diff = torch.norm(x.reshape(n, -1) - y.reshape(n, -1), self.p, 1)
        if self.reduction:
            if self.size_average:
                return torch.mean(diff)
            else:
                return torch.sum(diff)
        return diff

    def __call__(self, x, y):
        return self.rel(x, y)
"""

MAIN = """\
import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
IMPORTS
CLASS
model = nn.Linear(8, 8)
loader = DataLoader(TensorDataset(torch.randn(32, 8), torch.randn(32, 8)), batch_size=8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
BUILD
for x, y in loader:
    optimizer.zero_grad()
    loss = myloss(model(x), y)
    loss.backward()
    optimizer.step()
"""


def _am007(
    tmp_path: Path, imports: str, cls: str, build: str, losses: str = ""
) -> tuple[str, list[tuple[str, str]]]:
    (tmp_path / "utilities3.py").write_text(LP_LOSS)
    if losses:
        (tmp_path / "losses.py").write_text(losses)
    source = (
        MAIN.replace("IMPORTS", imports).replace("CLASS", cls).replace("BUILD", build)
    )
    script = tmp_path / "main.py"
    script.write_text(source)
    migrated = migrate_source(source, str(script), MigrateOptions())
    found = [(f.status, f.message) for f in migrated.findings if f.code == "AM007"]
    return str(migrated.output), found


SUBCLASS = """
class RelL2(LpLoss):
    def __init__(self, p=2):
        super().__init__(d=2, p=p, size_average=False)
        self.name = "rel_l2"

"""


def test_a_subclass_of_the_script_takes_its_base_call_with_its_settings(
    tmp_path: Path,
) -> None:
    """rev17's rs5_subclass: the subclass in main.py sums (it was a mean,
    "fixed")."""
    output, found = _am007(
        tmp_path, "from utilities3 import LpLoss", SUBCLASS, "myloss = RelL2()"
    )
    assert 'accel.backward(loss, reduction="sum")' in output
    assert [status for status, _ in found] == ["fixed"]


def test_the_subclass_writing_the_setting_after_the_base_init_wins(
    tmp_path: Path,
) -> None:
    cls = SUBCLASS.replace('self.name = "rel_l2"', "self.size_average = True")
    output, found = _am007(
        tmp_path, "from utilities3 import LpLoss", cls, "myloss = RelL2()"
    )
    assert 'reduction="sum"' not in output
    assert [status for status, _ in found] == ["fixed"]


MODULE_SUBCLASS = """\
from utilities3 import LpLoss


class SummedLp(LpLoss):
    def __init__(self, summed=False, p=2):
        super(SummedLp, self).__init__(p=p, size_average=not summed)
"""


@pytest.mark.parametrize(
    ("build", "summed"),
    [
        ("myloss = SummedLp(summed=True)", True),
        ("myloss = SummedLp(True)", True),
        ("myloss = SummedLp()", False),
    ],
)
def test_a_subclass_of_another_module_inverting_the_flag(
    tmp_path: Path, build: str, summed: bool
) -> None:
    """rev17's rs9_subclass_file: losses.py's subclass hands the base ``not``
    of its own parameter."""
    output, found = _am007(
        tmp_path, "from losses import SummedLp", "", build, MODULE_SUBCLASS
    )
    assert ('accel.backward(loss, reduction="sum")' in output) is summed
    assert [status for status, _ in found] == ["fixed"]


def test_a_subclass_with_no_init_is_built_as_its_base(tmp_path: Path) -> None:
    cls = "\nclass MyLp(LpLoss):\n    pass\n\n"
    output, found = _am007(
        tmp_path,
        "from utilities3 import LpLoss",
        cls,
        "myloss = MyLp(size_average=False)",
    )
    assert 'accel.backward(loss, reduction="sum")' in output
    assert [status for status, _ in found] == ["fixed"]


@pytest.mark.parametrize(
    ("cls", "said"),
    [
        (
            SUBCLASS.replace(
                '        self.name = "rel_l2"\n',
                '        self.name = "rel_l2"\n\n    def rel(self, x, y):\n'
                "        return (x - y).abs().sum()\n",
            ),
            "defines methods of its own (`rel`)",
        ),
        (
            "\nclass RelL2(LpLoss):\n    def __init__(self, *args, **kwargs):\n"
            "        super().__init__(*args, **kwargs)\n\n",
            "`RelL2` in this file: `LpLoss.__call__` returns a sum",
        ),
        (
            "\nclass RelL2(LpLoss):\n    def __init__(self, mode):\n"
            "        super().__init__(size_average=mode == 'mean')\n\n",
            "`RelL2` in this file: `LpLoss.__call__` returns a sum",
        ),
    ],
)
def test_a_subclass_whose_call_or_settings_cannot_be_read_is_unknown(
    tmp_path: Path, cls: str, said: str
) -> None:
    """An override the base's call may run, a pass-through of ``*args``, a
    setting computed from a parameter: needs-review, not the caller's mean."""
    build = "myloss = RelL2('sum')" if "mode" in cls else "myloss = RelL2()"
    output, found = _am007(tmp_path, "from utilities3 import LpLoss", cls, build)
    assert 'reduction="sum"' not in output
    assert [status for status, _ in found] == ["needs-review"], found
    assert said in found[0][1]


def test_a_subclass_of_a_library_loss_is_unknown(tmp_path: Path) -> None:
    """``class SumLoss(nn.L1Loss)`` with ``super().__init__(reduction="sum")``
    and no forward: its call is torch's, not read here (it was a mean)."""
    losses = (
        "from torch import nn\n\n\nclass SumLoss(nn.L1Loss):\n"
        "    def __init__(self):\n        super().__init__(reduction='sum')\n"
    )
    output, found = _am007(
        tmp_path, "from losses import SumLoss", "", "myloss = SumLoss()", losses
    )
    assert 'reduction="sum"' not in output
    assert [status for status, _ in found] == ["needs-review"], found
    assert "`SumLoss` has no call of its own" in found[0][1]


def _class(source: str) -> ast.ClassDef:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ClassDef)
    return node


def test_a_model_subclass_of_a_model_returning_logits_says_nothing() -> None:
    """The control the brief asks for: a model class with no forward of its own
    over a base whose forward returns logits reads as before, and a library
    base of a model (or a plain base) says nothing."""
    base = _class(
        "class Net(nn.Module):\n    def forward(self, x):\n        return self.fc(x)\n"
    )
    sub = _class(
        "class Net2(Net):\n    def __init__(self):\n        super().__init__()\n"
    )
    reading = call_reductions(base)
    assert reading == {"call_reduction": ("", ""), "setting_reductions": None}
    found = class_call_reductions(
        sub, None, [("Net", (reading["call_reduction"], None))]  # type: ignore[list-item]
    )
    assert found == {"call_reduction": ("", ""), "setting_reductions": None}
    plain = class_call_reductions(sub, None, [("nn.Module", PLAIN)])
    assert plain == {"call_reduction": ("", ""), "setting_reductions": None}
    assert library_base("torch.nn.Module") == PLAIN
    assert library_base("torchvision.models.ResNet") == PLAIN
    assert library_base("torch.nn.MSELoss") is None


def test_a_copy_whose_setting_is_written_after_is_unknown(tmp_path: Path) -> None:
    """rev17's rs8_copy_kw: ``copy.copy(base)`` then
    ``myloss.__dict__.update(size_average=False)`` was a mean, "fixed"."""
    build = (
        "base = LpLoss()\nmyloss = copy.copy(base)\n"
        "myloss.__dict__.update(size_average=False)"
    )
    output, found = _am007(tmp_path, "from utilities3 import LpLoss", "", build)
    assert 'reduction="sum"' not in output
    assert [status for status, _ in found] == ["needs-review"], found
    assert "size_average" in found[0][1]


def test_a_copy_is_read_as_what_it_copies(tmp_path: Path) -> None:
    build = "myloss = copy.deepcopy(LpLoss(size_average=False))"
    output, found = _am007(tmp_path, "from utilities3 import LpLoss", "", build)
    assert 'accel.backward(loss, reduction="sum")' in output
    assert [status for status, _ in found] == ["fixed"]


def test_a_copy_of_what_cannot_be_traced_in_a_file_writing_a_setting_is_unknown(
    tmp_path: Path,
) -> None:
    build = (
        "myloss = copy.copy(torch.load('loss.pt'))\n"
        "setattr(myloss, 'size_average', False)"
    )
    output, found = _am007(tmp_path, "from utilities3 import LpLoss", "", build)
    assert 'reduction="sum"' not in output
    assert [status for status, _ in found] == ["needs-review"], found
    assert "a copy of" in found[0][1]


def test_a_subclass_of_a_loss_class_of_the_same_script_sums_as_it(
    tmp_path: Path,
) -> None:
    """Both classes in main.py: ``Scaled(SqErr)`` with no forward of its own
    runs ``SqErr.forward``, a sum (it was a mean, "fixed", before)."""
    cls = (
        "\nclass SqErr(nn.Module):\n    def forward(self, x, y):\n"
        "        return ((x - y) ** 2).sum()\n\n\nclass Scaled(SqErr):\n"
        "    def __init__(self):\n        super().__init__()\n\n"
    )
    output, found = _am007(tmp_path, "", cls, "myloss = Scaled()")
    assert 'accel.backward(loss, reduction="sum")' in output
    assert [status for status, _ in found] == ["fixed"]
