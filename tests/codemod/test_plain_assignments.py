"""Rule.plain_assignments, which AM022 and AM023 use to prove a variable's value."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

TRAINING = (
    "import torch\n"
    "from torch.utils.data import DataLoader\n"
    "model = torch.nn.Linear(4, 1)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "loader = DataLoader(list(range(4)))\n"
)


def test_a_builtin_name_is_not_a_plain_assignment() -> None:
    """A builtin's binding has no node; asking about it once crashed the file."""
    source = TRAINING + "with torch.cuda.device(id):\n    x = torch.ones(1).to(len)\n"
    result = migrate_source(source, "train.py")
    codes = [(f.code, f.status) for f in result.findings]
    assert ("AM023", "needs-review") in codes
    assert ".to(len)" in str(result.output), "a builtin is not an integer GPU index"


def test_every_binding_must_be_an_integer() -> None:
    source = TRAINING + (
        "gpu = 0\n"
        "x = torch.ones(1).to(gpu)\n"
        "def pick():\n"
        "    global gpu\n"
        "    gpu = torch.device('cpu')\n"
    )
    result = migrate_source(source, "train.py")
    assert ".to(gpu)" in str(result.output), "the global statement binds it too"
    only_integer = migrate_source(TRAINING + "gpu = 0\nx = torch.ones(1).to(gpu)\n")
    assert ".to(accel.device())" in str(only_integer.output)


def _rewritten(body: str) -> bool:
    """Did AM022 rewrite the ``.to(device)`` in ``body``?"""
    output = str(migrate_source(TRAINING + body, "train.py").output)
    return ".to(accel.device())" in output


def test_a_match_capture_binds_the_name_too() -> None:
    """libcst's scopes do not record ``match`` captures."""
    assert not _rewritten(
        "device = 0\n"
        "match {'device': 'cpu'}:\n"
        "    case {'device': device}:\n"
        "        pass\n"
        "model.to(device)\n"
    )


def test_a_class_body_reads_the_global_until_its_own_assignment() -> None:
    assert not _rewritten(
        "device = 'cpu'\n"
        "class A:\n"
        "    t = torch.zeros(1).to(device)\n"
        "    device = 0\n"
    )


def test_a_star_import_may_bind_any_name() -> None:
    assert not _rewritten("device = 0\nfrom os.path import *\nmodel.to(device)\n")
    assert _rewritten("device = 0\nmodel.to(device)\n")
