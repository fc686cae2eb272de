"""AM030 and the project view's reading of shell commands in helpers."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project
from accel_migrate.codemod.shell_commands import command_words, kind

LOOP = (
    "import torch\nimport utils\nfrom torch.utils.data import DataLoader\n"
    "model = torch.nn.Linear(2, 2)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "for x, y in DataLoader(ds, batch_size=4):\n"
    "    opt.zero_grad()\n    model(x).sum().backward()\n    opt.step()\n"
    "    {call}\n"
)


def test_command_words() -> None:
    assert kind(command_words("rm -f a.pth")) == "remove"
    assert kind(command_words("/bin/cp a b")) == "write"
    assert kind(command_words("nvidia-smi -L")) == "read"
    # shell syntax could make a read or a removal do more: not read
    for text in (
        "ls > files.txt",
        "rm a; cp b c",
        "rm $OLD",
        "rm *.tmp",
        "cat a | tee b",
    ):
        assert command_words(text) is None, text
        assert kind(command_words(text)) == "unknown"


def test_shell_commands_in_a_helper_are_reported_not_moved(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text(
        "import os\nimport subprocess\n\n\n"
        "def backup(path):\n    os.system('cp ' + path + ' backup.pth')\n\n\n"
        "def gpu_info():\n    subprocess.run(['nvidia-smi', '-L'])\n"
    )
    train = tmp_path / "train.py"
    table = dict(read_project(str(_write(train, "import utils\n"))).helpers)
    backup, info = table["utils.backup"], table["utils.gpu_info"]
    assert backup.writes == ("os.system (a shell command)",)
    assert not backup.effects_only
    assert info.prints and info.effects_only and not info.writes
    _write(train, LOOP.format(call="utils.backup('m.pth')"))
    result = migrate_source(train.read_bytes(), str(train))
    assert b"on_main_process(utils.backup" not in result.output
    assert any(
        f.code == "AM017" and f.status == "needs-review" and "backup" in f.message
        for f in result.findings
    )
    _write(train, LOOP.format(call="utils.gpu_info()"))
    out = migrate_source(train.read_bytes(), str(train)).output
    assert b"accel.on_main_process(utils.gpu_info)" in out


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
