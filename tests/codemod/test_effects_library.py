"""Helper modules whose writes and prints the batch leaves to them (issue 12):
a helper that writes or prints and does more besides (returns a value, keeps
state) cannot be moved to the main process at its call, so in batch mode its
module is migrated by the rules that place writes and prints only
(``ProjectView.migrated_library``; not ``Rule.prepares``), and its callers keep the
call on every process, followed by a barrier when it writes files."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView
from accel_migrate.codemod.rule import registered_rules

CKPT = """\
import os

import torch
from torch.utils.data import DataLoader, TensorDataset


def get_loader(n):
    return DataLoader(TensorDataset(torch.randn(n, 4)), batch_size=4)


def save_snapshot(model, epoch):
    path = "snap_%d.pt" % epoch
    torch.save(model.state_dict(), path)
    return path
"""

TRAIN = """\
import torch

import ckpt

loader = ckpt.get_loader(16)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    for (x,) in loader:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    {call}
"""


def _batch(
    tmp_path: Path, ckpt: str = CKPT, call: str = "ckpt.save_snapshot(model, epoch)"
) -> tuple[ProjectView, Path, Path]:
    (tmp_path / "ckpt.py").write_text(ckpt)
    (tmp_path / "train.py").write_text(TRAIN.format(call=call))
    files = [tmp_path / "ckpt.py", tmp_path / "train.py"]
    return ProjectView([str(f) for f in files]), *files


def _migrate(view: ProjectView, path: Path):  # type: ignore[no-untyped-def]
    return migrate_source(
        path.read_text(), str(path), MigrateOptions(project=view.facts_for(str(path)))
    )


def test_a_helper_that_returns_what_it_wrote_makes_its_module_migrate_its_writes(
    tmp_path: Path,
) -> None:
    view, ckpt, train = _batch(tmp_path)
    facts = view.facts_for(str(ckpt))
    assert facts.library_for == ("train.py",)
    assert view.facts_for(str(train)).lookup(["ckpt.save_snapshot"]).batch_library  # type: ignore[union-attr]
    library = _migrate(view, ckpt)
    assert "accel.save(accel.state_dict(model), path)" in library.output
    # its loader is the caller's to prepare (AM102): not wrapped here too
    assert "prepare_dataloader" not in library.output
    assert {f.code for f in library.findings} <= {
        r.code for r in registered_rules() if not r.prepares
    }
    script = _migrate(view, train)
    assert "accel.prepare_dataloader(ckpt.get_loader(16))" in script.output
    assert (
        "    ckpt.save_snapshot(model, epoch)\n    accel.barrier()\n" in script.output
    )
    assert not script.needs_review


def test_a_call_only_some_processes_make_is_reported_not_followed_by_a_barrier(
    tmp_path: Path,
) -> None:
    # the last batch of each process's share decides: only some processes call it
    view, _, train = _batch(
        tmp_path, call="if x.sum() > 0:\n        ckpt.save_snapshot(model, epoch)"
    )
    script = _migrate(view, train)
    assert "accel.barrier()" not in script.output
    (finding,) = [f for f in script.needs_review if f.code == "AM017"]
    assert "not a statement that every process reaches together" in finding.message


def test_a_module_with_only_movable_helpers_stays_a_library(tmp_path: Path) -> None:
    # writes a line and does nothing else: moved to the main process at the
    # call, as before (save_snapshot's model.state_dict() is code the analysis
    # does not follow: a collective under FSDP, so that one is not movable)
    log_line = (
        "\n\ndef log_line(path, epoch):\n"
        '    with open(path, "a") as f:\n'
        '        f.write("epoch %d\\n" % epoch)\n'
    )
    head = CKPT[: CKPT.index("def save_snapshot")].rstrip() + "\n"
    view, ckpt, train = _batch(
        tmp_path, head + log_line, call='ckpt.log_line("log.txt", epoch)'
    )
    assert not view.facts_for(str(ckpt)).library_for
    fact = view.facts_for(str(train)).lookup(["ckpt.log_line"])
    assert fact is not None and fact.effects_only and not fact.batch_library
    assert "accel.on_main_process(ckpt.log_line" in _migrate(view, train).output


def test_a_module_with_collectives_is_left_to_its_callers(tmp_path: Path) -> None:
    view, ckpt, _ = _batch(
        tmp_path,
        CKPT + "\n\ndef sync():\n    torch.distributed.barrier()\n",
    )
    assert not view.facts_for(str(ckpt)).library_for


def test_one_file_argument_reads_the_module_and_never_migrates_it(
    tmp_path: Path,
) -> None:
    _, _, train = _batch(tmp_path)
    alone = ProjectView([str(train)])
    assert not alone.facts_for(str(train)).lookup(["ckpt.save_snapshot"]).batch_library  # type: ignore[union-attr]
    result = migrate_source(train.read_text(), str(train))
    assert [f.code for f in result.needs_review] == ["AM017"]
    assert "ckpt.py" in result.needs_review[0].message


def test_a_call_every_process_makes_under_a_shared_condition_gets_its_barrier(
    tmp_path: Path,
) -> None:
    view, _, train = _batch(
        tmp_path, call="if epoch > 0:\n        ckpt.save_snapshot(model, epoch)"
    )
    script = _migrate(view, train)
    assert "        ckpt.save_snapshot(model, epoch)\n        accel.barrier()\n" in (
        script.output
    )
    assert not script.needs_review


EVALUATION = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

calibration = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4)


def evaluate(model, loader):
    total = 0.0
    for (x,) in loader:
        total += model(x).sum().item()
    return total


def calibrate(model):
    seen = 0
    for (x,) in calibration:
        seen += x.size(0)
    return seen
"""


def test_sums_over_a_handed_loader_are_reduced_and_over_its_own_loaders_not(
    tmp_path: Path,
) -> None:
    # evaluate() is handed train.py's sharded loader; the module's own
    # `calibration` loader is nobody's to shard (AM102 prepares loaders where
    # a caller gets them from a helper), so what is summed over it stays
    (tmp_path / "evaluation.py").write_text(EVALUATION)
    call = "print(evaluation.evaluate(model, loader), evaluation.calibrate(model))"
    train = TRAIN.format(call=call).replace(
        "import ckpt\n", "import ckpt\nimport evaluation\n"
    )
    (tmp_path / "ckpt.py").write_text(CKPT)
    (tmp_path / "train.py").write_text(train)
    files = [tmp_path / "ckpt.py", tmp_path / "evaluation.py", tmp_path / "train.py"]
    view = ProjectView([str(f) for f in files])
    library = _migrate(view, tmp_path / "evaluation.py")
    assert "total = accel.reduce(total)" in library.output
    assert "seen = accel.reduce" not in library.output
    assert "prepare_dataloader" not in library.output
    script = _migrate(view, tmp_path / "train.py")
    # the sharded loader handed to evaluate() is reduced there: no finding here
    assert not [f for f in script.needs_review if f.code == "AM006"]


def test_a_write_in_a_method_of_a_class_the_batch_uses_leaves_the_module_whole(
    tmp_path: Path,
) -> None:
    keeper = CKPT + (
        "\n\nclass Keeper:\n"
        "    def __init__(self, path):\n"
        "        self.path = path\n\n"
        "    def keep(self, model):\n"
        "        torch.save(model.state_dict(), self.path)\n"
    )
    view, ckpt, _ = _batch(
        tmp_path,
        keeper,
        call='ckpt.save_snapshot(model, epoch)\n    ckpt.Keeper("k.pt").keep(model)',
    )
    library = _migrate(view, ckpt)
    assert library.output == ckpt.read_text()
    (finding,) = [f for f in library.needs_review if f.code == "AM036"]
    assert "`Keeper.keep` writes files" in finding.message


def test_a_helper_that_reads_the_folder_after_writing_it_leaves_the_module_whole(
    tmp_path: Path,
) -> None:
    globbing = CKPT.replace(
        "    return path\n",
        "    return sorted(os.listdir('.'))\n",
    )
    view, ckpt, _ = _batch(tmp_path, globbing)
    library = _migrate(view, ckpt)
    assert library.output == ckpt.read_text()
    (finding,) = [f for f in library.needs_review if f.code == "AM036"]
    assert "`os.listdir`" in finding.message


def test_a_write_and_a_listing_in_two_called_functions_leave_the_module_whole(
    tmp_path: Path,
) -> None:
    # save_and_prune() calls _write() (torch.save), then _prune() (os.listdir):
    # on the other processes the listing runs before the main process has saved
    pruning = CKPT + (
        "\n\ndef _write(model, path):\n"
        "    torch.save(model.state_dict(), path)\n\n\n"
        "def _prune():\n"
        "    return sorted(os.listdir('.'))\n\n\n"
        "def save_and_prune(model, epoch):\n"
        "    _write(model, 'snap_%d.pt' % epoch)\n"
        "    return _prune()\n"
    )
    view, ckpt, _ = _batch(tmp_path, pruning, call="ckpt.save_and_prune(model, epoch)")
    library = _migrate(view, ckpt)
    assert library.output == ckpt.read_text()
    assert any(
        "`save_and_prune`" in f.message and "`_prune`" in f.message
        for f in library.needs_review
    )


WRITES_ONLY = """\
import os
import shutil

import torch


def save_checkpoint(state, is_best, path="ckpt.pt"):
    torch.save(state, path)
    if is_best:
        shutil.copyfile(path, "best.pt")


def make_folder(path):
    os.makedirs(path)
"""


def test_a_helper_moved_to_the_main_process_that_writes_is_followed_by_a_barrier(
    tmp_path: Path,
) -> None:
    # the script reads best.pt back: without the barrier another process could
    # load the previous best (was SILENT: best_reload_helper_project)
    (tmp_path / "utils.py").write_text(WRITES_ONLY)
    call = (
        "utils.save_checkpoint({'m': model.state_dict()}, True)\n"
        "    if not os.path.isdir('out'):\n"
        "        utils.make_folder('out')"
    )
    view, _, train = _batch(tmp_path, call=call)
    train.write_text("import os\nimport utils\n" + train.read_text())
    view = ProjectView([str(tmp_path / n) for n in ("ckpt.py", "utils.py", "train.py")])
    assert not view.facts_for(str(tmp_path / "utils.py")).library_for
    script = _migrate(view, train)
    assert (
        "    accel.on_main_process(utils.save_checkpoint, {'m': accel.state_dict(model)}, True)\n"
        "    accel.barrier()\n"
    ) in script.output
    # a folder is made on the main process with no barrier after it
    assert "        accel.on_main_process(utils.make_folder, 'out')\n" in script.output
    assert script.output.count("accel.barrier()") == 1
    assert not script.needs_review


def test_a_batch_drawn_with_next_from_a_sharded_loader_is_this_process_s(
    tmp_path: Path,
) -> None:
    # a fixed probe batch: the branch on its loss differs between processes, so
    # no barrier follows the writing call under it (was a HANG)
    call = (
        "probe = model(next(iter(loader))[0]).sum().item()\n"
        "    if probe < 0.5:\n"
        "        ckpt.save_snapshot(model, epoch)"
    )
    view, _, train = _batch(tmp_path, call=call)
    script = _migrate(view, train)
    assert "accel.barrier()" not in script.output
    assert [f.code for f in script.needs_review] == ["AM017"]


def test_no_barrier_follows_a_write_under_a_test_of_the_file_system(
    tmp_path: Path,
) -> None:
    # whether 'best.pt' exists yet depends on how far the main process has got:
    # a barrier there would wait for processes that skipped the branch
    (tmp_path / "utils.py").write_text(WRITES_ONLY)
    call = (
        "if not os.path.exists('best.pt'):\n"
        "        utils.save_checkpoint({'m': model.state_dict()}, True)"
    )
    _, _, train = _batch(tmp_path, call=call)
    train.write_text("import os\nimport utils\n" + train.read_text())
    view = ProjectView([str(tmp_path / n) for n in ("ckpt.py", "utils.py", "train.py")])
    script = _migrate(view, train)
    assert "accel.barrier()" not in script.output
    found = {f.code: f.message for f in script.needs_review}
    assert sorted(found) == ["AM011", "AM017"]
    assert "no barrier can follow it" in found["AM017"]
    # the state dict under the same test is a collective under FSDP (r29a)
    assert "test of the file system at line 15" in found["AM011"]


def test_a_helper_also_handed_something_else_is_not_counted_on_to_reduce(
    tmp_path: Path,
) -> None:
    # evaluate() gets the sharded loader at one call and a plain list at the
    # other: its module (migrated for calibrate's loader) cannot take its
    # `loader` for a sharded one, so the caller must still say so
    (tmp_path / "evaluation.py").write_text(
        EVALUATION.replace(
            "def calibrate(model):", "def calibrate(model, held):"
        ).replace("for (x,) in calibration:", "for (x,) in held:")
    )
    call = (
        "print(evaluation.evaluate(model, loader), evaluation.calibrate(model, loader))\n"
        "    print(evaluation.evaluate(model, [(torch.ones(2, 4),)]))"
    )
    train = TRAIN.format(call=call).replace(
        "import ckpt\n", "import ckpt\nimport evaluation\n"
    )
    (tmp_path / "ckpt.py").write_text(CKPT)
    (tmp_path / "train.py").write_text(train)
    files = [tmp_path / "ckpt.py", tmp_path / "evaluation.py", tmp_path / "train.py"]
    view = ProjectView([str(f) for f in files])
    facts = view.facts_for(str(tmp_path / "train.py"))
    evaluate = facts.lookup(["evaluation.evaluate"])
    calibrate = facts.lookup(["evaluation.calibrate"])
    assert evaluate is not None and evaluate.batch_library
    assert evaluate.handed_loaders == ()
    assert calibrate is not None and calibrate.handed_loaders == (("held", 1),)
    library = _migrate(view, tmp_path / "evaluation.py")
    assert "total = accel.reduce(total)" not in library.output
    assert "seen = accel.reduce(seen)" in library.output
    script = _migrate(view, tmp_path / "train.py")
    flagged = [f for f in script.needs_review if f.code == "AM006"]
    assert len(flagged) == 1 and "`evaluate`" in flagged[0].message


NOISY_DATA = """\
import torch

from utils import noisify


class Noisy(torch.utils.data.Dataset):
    def __init__(self, n):
        self.x = torch.randn(n, 4)
        self.labels, self.rate = noisify(list(range(n)), 0.2)

    def __getitem__(self, i):
        return self.x[i], self.labels[i]

    def __len__(self):
        return len(self.x)
"""

NOISY_UTILS = """\
def flip(labels, rate):
    noisy = [l + 1 for l in labels]
    print("Actual noise %.2f" % rate)
    return noisy, rate


def noisify(labels, rate):
    return flip(labels, rate)
"""

NOISY_TRAIN = """\
import torch
from torch.utils.data import DataLoader

from data import Noisy

loader = DataLoader(Noisy(16), batch_size=4)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
"""


def test_a_print_two_helpers_down_is_made_main_process_whatever_is_read_first(
    tmp_path: Path,
) -> None:
    """Co-teaching's data/cifar.py calls ``noisify`` in data/utils.py, whose
    ``noisify_pairflip`` prints and hands back the labels. Reading cifar.py
    first read utils.py while ``noisify``'s fact was still being read, and kept
    "not a migrated library" from that: AM017 then left the whole batch."""
    for name, text in (
        ("data.py", NOISY_DATA),
        ("utils.py", NOISY_UTILS),
        ("train.py", NOISY_TRAIN),
    ):
        (tmp_path / name).write_text(text)
    view = ProjectView([str(tmp_path / n) for n in ("data.py", "utils.py", "train.py")])
    assert view.migrated_library(str(tmp_path / "data.py"))
    assert view.migrated_library(str(tmp_path / "utils.py"))
    data = _migrate(view, tmp_path / "data.py")
    assert not [f for f in data.findings if f.status == "needs-review"]
    utils = _migrate(view, tmp_path / "utils.py")
    assert 'accel.print("Actual noise %.2f" % rate)' in utils.output
