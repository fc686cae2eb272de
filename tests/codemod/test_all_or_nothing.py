"""All or nothing: a training setup whose trained model cannot be shown prepared
leaves the whole file unchanged, with the reason at the model's place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel_migrate.cli import main as cli_main
from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.findings import Finding
from accel_migrate.codemod.rule import RuleContext

IMPORTED = """\
import torch
from torch.utils.data import DataLoader

from models import net

optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
loader = DataLoader(list(range(8)), batch_size=2, shuffle=True)
for x in loader:
    optimizer.zero_grad()
    net(x).sum().backward()
    optimizer.step()
    print("step")
"""


def test_an_unprepared_trained_model_leaves_the_file_unchanged() -> None:
    result = migrate_source(IMPORTED, "train.py")
    assert result.output == IMPORTED
    assert result.status == "unchanged"
    # Nothing was fixed, so no `fixed` finding may claim otherwise.
    assert [f.status for f in result.findings] == ["needs-review"]
    (finding,) = result.findings
    assert (finding.line, finding.code) == (4, "AM004")
    assert "`from models import net`" in finding.message
    assert "Nothing in this file was migrated" in finding.message


def test_the_same_setup_with_the_model_built_here_is_migrated() -> None:
    built = IMPORTED.replace(
        "from models import net\n", "from models import Net\n\nnet = Net()\n"
    )
    result = migrate_source(built, "train.py")
    assert "accel.prepare_model(Net())" in result.output
    assert "accel.prepare_dataloader(" in result.output
    assert "accel.backward(" in result.output
    assert not result.needs_review


def test_other_needs_review_findings_are_kept_claims_on_processes_are_not() -> None:
    """What a rule could not fix and that is true of the original is kept (a
    ``backward(*args)`` left alone); a claim about what the processes of the
    migrated run would do (AM020's "each process draws its own numbers") is not
    true of a file left whole, and is dropped (``report(..., if_migrated=True)``)."""
    source = IMPORTED.replace(
        "    net(x).sum().backward()\n",
        "    noise = torch.randn(2)\n    (net(x) + noise).sum().backward(*extra)\n",
    ).replace("for x in loader:", "extra = ()\nfor x in loader:")
    result = migrate_source(source, "train.py")
    assert result.output == source
    assert {f.code for f in result.findings} == {"AM004", "AM007"}
    assert all(f.status == "needs-review" for f in result.findings)
    built = source.replace(
        "from models import net\n", "from models import Net\n\nnet = Net()\n"
    )
    migrated = migrate_source(built, "train.py")
    assert migrated.output != built
    assert {f.code for f in migrated.needs_review} == {"AM007", "AM020"}


def test_a_skip_marker_on_the_models_line_lifts_the_block() -> None:
    # The user has taken that statement over (the model is prepared elsewhere).
    source = IMPORTED.replace(
        "from models import net\n", "from models import net  # accel-migrate: skip\n"
    )
    result = migrate_source(source, "train.py")
    assert "accel.prepare_dataloader(" in result.output
    assert not any(f.code == "AM004" for f in result.findings)


def test_a_blocking_finding_is_a_needs_review_finding() -> None:
    context = RuleContext(alias="accel", original_code="")
    with pytest.raises(ValueError):
        context.block(Finding(1, 1, "AM004", "fixed", "model -> prepared"))
    context.block(Finding(1, 1, "AM004", "needs-review", "why"))
    assert (
        context.blocking
        == context.findings
        == [Finding(1, 1, "AM004", "needs-review", "why")]
    )


def test_a_file_left_whole_gets_no_claim_about_its_prints() -> None:
    """``print(x)`` of the batch would show this process's share once migrated
    (AM033); in a file left unchanged nothing is split, so only the reason the
    file is left whole is reported."""
    printing = IMPORTED.replace('print("step")', "print(x)")
    result = migrate_source(printing, "train.py")
    assert result.output == printing
    assert [f.code for f in result.findings if f.status == "needs-review"] == ["AM004"]
    built = printing.replace(
        "from models import net\n", "from models import Net\n\nnet = Net()\n"
    )
    migrated = migrate_source(built, "train.py")
    assert [f.code for f in migrated.needs_review] == ["AM033"]


STORED_LOSS = """\
import torch
from torch.utils.data import DataLoader

from models import net


class Trainer:
    def __init__(self):
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def step(self, x):
        self.opt.zero_grad()
        self.loss_main = net(x).sum()
        self.loss_main.backward()
        self.opt.step()

    def report(self, name):
        return getattr(self, "loss_" + name).item()


trainer = Trainer()
for x in DataLoader(list(range(8)), batch_size=2):
    trainer.step(x)
    print(trainer.report("main"))
"""


@pytest.mark.parametrize(
    ("source", "codes"),
    [
        (STORED_LOSS, ["AM004"]),  # left whole: nothing is any process's share
        (
            STORED_LOSS.replace(
                "from models import net", "net = torch.nn.Linear(1, 1)"
            ),
            ["AM004", "AM005", "AM007", "AM008", "AM006", "AM008"],
        ),
    ],
    ids=["left-whole", "migrated"],
)
def test_a_stored_loss_read_by_name_is_a_claim_of_the_migrated_file(
    source: str, codes: list[str]
) -> None:
    result = migrate_source(source, "train.py")
    assert [f.code for f in result.findings] == codes
    reads = [f for f in result.findings if "by a name computed" in f.message]
    assert len(reads) == (0 if result.output == source else 1)


REBOUND_AFTER_WITH = """\
import json

import torch
from torch.utils.data import DataLoader

from models import build


def main():
    with open("params.txt", "w") as f:
        json.dump({}, f)
    with open("log.txt", "w") as f:
        f.write("start")
    f, buffer = build()
    optim = torch.optim.SGD(f.parameters(), lr=0.1)
    loader = DataLoader(list(range(8)), batch_size=2, shuffle=True)
    for x in loader:
        optim.zero_grad()
        f(x).sum().backward()
        optim.step()
        print("step")


main()
"""


def test_the_story_names_the_models_binding_not_an_earlier_with_item() -> None:
    """wgrathwohl/JEM's main(): `f` is a file handle (`with open(...) as f`)
    before it is the model (`f, replay_buffer = get_model_and_buffer(...)`); the
    reason points at the model's binding, not at a `with` (the scope's bindings
    are a set, so which one was named depended on its order before)."""
    result = migrate_source(REBOUND_AFTER_WITH, "train.py")
    assert result.output == REBOUND_AFTER_WITH
    (finding,) = [f for f in result.findings if f.status == "needs-review"]
    assert (finding.line, finding.code) == (14, "AM004")
    assert "`f, buffer = build()`" in finding.message
    assert "open(" not in finding.message


def test_the_cli_names_the_same_binding(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Through the CLI the scope's set of bindings came in another order (the
    `with` at line 10 was named before the fix)."""
    (tmp_path / "train.py").write_text(REBOUND_AFTER_WITH)
    monkeypatch.chdir(tmp_path)
    cli_main(["--no-cache", "--output-format", "json", "train.py"])
    report = json.loads(capsys.readouterr().out)
    (found,) = [
        f for f in report["files"][0]["findings"] if f["status"] == "needs-review"
    ]
    assert (found["line"], found["code"]) == (14, "AM004")
    assert "`f, buffer = build()`" in found["message"]


ENSEMBLE_HELPER = """\
import torch.nn.functional as F


def train_single_epoch(epoch, model, train_loader, optimizer):
    model.train()
    for data, labels in train_loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), labels)
        loss.backward()
        optimizer.step()
        print("step loss", loss.item())
"""

ENSEMBLE_MAIN = """\
import torch
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

from train_utils import train_single_epoch

models = {"mlp": lambda: nn.Linear(4, 3)}
data = TensorDataset(torch.randn(32, 4), torch.randint(0, 3, (32,)))

net_ensemble = [models["mlp"]() for _ in range(2)]
optimizers = []
for i, model in enumerate(net_ensemble):
    opt_params = model.parameters()
    optimizers.append(optim.SGD(opt_params, lr=0.1))
train_loader = DataLoader(data, batch_size=8, shuffle=True)

for epoch in range(2):
    for i, model in enumerate(net_ensemble):
        train_single_epoch(epoch, model, train_loader, optimizers[i])
"""


def test_an_ensemble_member_optimized_here_is_not_said_to_have_no_optimizer(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """omegafragger/DDU's train_ensemble.py in batch mode: each member of
    `net_ensemble` gets its optimizer here (`for i, model in enumerate(...)`,
    `optim.SGD(model.parameters())`) and is handed to a helper that trains it.
    The list cannot be wrapped item by item, which is the one reason given; the
    claim that no optimizer of this file receives the member's parameters was
    false (the optimizer is recorded on the list, not on its loop variable)."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "train_utils.py").write_text(ENSEMBLE_HELPER)
    (tmp_path / "proj" / "main.py").write_text(ENSEMBLE_MAIN)
    monkeypatch.chdir(tmp_path)
    cli_main(["--no-cache", "--output-format", "json", "proj"])
    report = json.loads(capsys.readouterr().out)
    files = {f["path"]: f for f in report["files"]}
    found = [
        f for f in files["proj/main.py"]["findings"] if f["status"] == "needs-review"
    ]
    assert [(f["line"], f["code"]) for f in found] == [(10, "AM004")]
    assert "cannot wrap item by item" in found[0]["message"]
    assert "no optimizer built in this file receives" not in json.dumps(report)


UNPACKED_ALIAS = """\
import torch
from torch.utils.data import DataLoader


def build_model():
    return torch.nn.Linear(4, 1), torch.nn.MSELoss()


model, criterion = build_model()
model_without_ddp = model
optimizer = torch.optim.AdamW(
    [p for n, p in model_without_ddp.named_parameters() if p.requires_grad], lr=0.1
)
loader = DataLoader(torch.randn(8, 4), batch_size=2, shuffle=True)
for x in loader:
    optimizer.zero_grad()
    model(x).sum().backward()
    optimizer.step()
"""


def test_an_alias_of_an_unwrappable_model_tells_the_models_story() -> None:
    """DETR's main.py: `model, criterion, postprocessors = build_model(args)`,
    then `model_without_ddp = model`, whose parameters the optimizer gets. The
    reason named the alias's value (`model`) as the form that cannot be
    wrapped; it is the tuple unpacking where `model` is bound."""
    result = migrate_source(UNPACKED_ALIAS, "train.py")
    assert result.status == "unchanged"
    (finding,) = [f for f in result.findings if f.status == "needs-review"]
    assert (finding.line, finding.code) == (9, "AM004")
    assert finding.message.startswith("`model_without_ddp` is `model` (line 10), and ")
    assert "`model, criterion = build_model()`" in finding.message


_STORY_HEAD = """\
import torch
from torch.utils.data import DataLoader

from models import build, get_opt, pretrained


def main():
"""
_STORY_LOOP = """\
    loader = DataLoader(list(range(8)), batch_size=2, shuffle=True)
    for x in loader:
        optim.zero_grad()
        model(x).sum().backward()
        optim.step()


main()
"""


@pytest.mark.parametrize(
    ("binds", "line", "quoted"),
    [
        # a placeholder above the model's own binding (the loop's model evidence)
        (
            "    model = None\n    model = build()\n    optim = get_opt(model)\n"
            "    model.train()\n",
            9,
            None,
        ),
        # a placeholder above an unpacking AM004 cannot wrap
        (
            "    model = None\n    model, buffer = build()\n"
            "    optim = torch.optim.SGD(model.parameters(), lr=0.1)\n",
            9,
            "`model, buffer = build()`",
        ),
        # an earlier loop over other things
        (
            "    for model in pretrained():\n        print(model)\n"
            "    model, buffer = build()\n"
            "    optim = torch.optim.SGD(model.parameters(), lr=0.1)\n",
            10,
            "`model, buffer = build()`",
        ),
    ],
)
def test_the_story_names_the_binding_that_reaches_training(
    binds: str, line: int, quoted: str | None
) -> None:
    """t11 trials: the reason named `model = None` (a placeholder) or `for model
    in ...` (a loop over other things) instead of the binding the training
    loop uses."""
    source = _STORY_HEAD + binds + _STORY_LOOP
    result = migrate_source(source, "train.py")
    assert result.output == source
    (finding,) = [f for f in result.findings if f.status == "needs-review"]
    assert (finding.line, finding.code) == (line, "AM004")
    assert f"line {line}" in finding.message
    assert "None" not in finding.message and "pretrained" not in finding.message
    if quoted is not None:
        assert quoted in finding.message


def test_a_loop_over_models_that_holds_the_training_is_the_story() -> None:
    """A `for model in ...` whose body trains the model is the binding that
    reaches training, even after another binding of the name."""
    source = _STORY_HEAD + (
        "    model, buffer = build()\n"
        "    for model in pretrained():\n"
        "        optim = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "        loader = DataLoader(list(range(8)), batch_size=2, shuffle=True)\n"
        "        for x in loader:\n"
        "            optim.zero_grad()\n"
        "            model(x).sum().backward()\n"
        "            optim.step()\n"
        "\n\nmain()\n"
    )
    result = migrate_source(source, "train.py")
    assert result.output == source
    (finding,) = [f for f in result.findings if f.status == "needs-review"]
    assert finding.code == "AM004"
    assert "`for model in pretrained()`" in finding.message, finding.message
