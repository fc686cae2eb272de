"""With no torchrun variables, every runtime call is the identity or the plain call."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import accel_migrate.runtime as accel
from accel_migrate.runtime._state import Runtime, reset_runtime
from accel_migrate.runtime.config import RuntimeConfig
from accel_migrate.runtime.env import DistEnv
from accel_migrate.runtime.module import PreparedModule


@pytest.fixture(autouse=True)
def fresh_runtime(monkeypatch: pytest.MonkeyPatch):
    for name in (
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "ACCEL_MIGRATE_STRATEGY",
        "ACCEL_MIGRATE_PRECISION",
    ):
        monkeypatch.delenv(name, raising=False)
    previous = reset_runtime(None)
    yield
    reset_runtime(previous)


def test_single_process_calls_are_identities() -> None:
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(4, 3)), batch_size=2)
    assert (
        accel.device()
        == torch.device("cuda" if torch.cuda.is_available() else "cpu", 0)
        or accel.device().type == "cpu"
    )
    assert accel.prepare_model(model) is model
    assert accel.prepare_optimizer(optimizer) is optimizer
    assert accel.prepare_dataloader(loader) is loader
    assert (accel.rank(), accel.world_size(), accel.is_main_process()) == (0, 1, True)
    loss = torch.tensor(2.5)
    assert accel.global_loss(loss) is loss
    assert accel.reduce(7) == 7 and accel.reduce(2.5) == 2.5
    assert torch.equal(accel.gather(torch.arange(3)), torch.arange(3))


def test_backward_is_the_plain_backward() -> None:
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    x = torch.randn(5, 3)
    model(x).pow(2).mean().backward()
    expected = model.weight.grad.clone()
    model.zero_grad()
    accel.backward(model(x).pow(2).mean())
    assert torch.equal(model.weight.grad, expected)


def test_print_and_save(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    accel.print("hello", 3)
    assert capsys.readouterr().out == "hello 3\n"
    target = tmp_path / "ck.pt"
    accel.save({"w": torch.ones(2)}, target)
    assert torch.equal(torch.load(target)["w"], torch.ones(2))
    assert os.listdir(tmp_path) == ["ck.pt"], "no temporary file left behind"
    mode = os.stat(target).st_mode & 0o777
    assert mode & 0o600 == 0o600 and not mode & 0o022 & ~0o644


def _raised(save, *args) -> tuple[type, str]:
    with pytest.raises(BaseException) as info:
        save(*args)
    return info.type, str(info.value)


def test_save_raises_what_torch_save_raises(tmp_path: Path) -> None:
    """A user's ``except`` around the save catches the same thing: torch.save
    raises RuntimeError for a missing folder (accel.save raised
    FileNotFoundError from its temporary file before r32b) and for a folder in
    the target's place."""
    missing = tmp_path / "missing" / "ck.pt"
    expected = _raised(torch.save, {}, missing)
    assert expected[0] is RuntimeError
    assert _raised(accel.save, {}, missing) == expected
    folder = tmp_path / "folder"
    folder.mkdir()
    expected = _raised(torch.save, {}, folder)
    assert expected[0] is RuntimeError
    assert _raised(accel.save, {}, folder) == expected
    assert sorted(os.listdir(tmp_path)) == ["folder"], "no temporary file left"
    assert os.listdir(folder) == []


def test_save_writes_no_second_time_where_the_replace_failed_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rev12: any OSError of os.replace naming the target fell back to a
    torch.save in place, which can leave half a file where the previous
    checkpoint was: only a folder in the target's place, or the target's
    folder gone, falls back now; anything else is raised, the previous file
    kept."""
    target = tmp_path / "ck.pt"
    torch.save({"w": 1}, target)

    def refused(src: str, dst: str) -> None:
        raise PermissionError(13, "Permission denied", src, None, dst)

    monkeypatch.setattr(os, "replace", refused)
    written: list[object] = []
    save = torch.save

    def counted(obj: object, f: object, *args: object, **kwargs: object) -> None:
        if not hasattr(f, "write"):  # (the temporary file is a stream)
            written.append(f)
        save(obj, f, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch, "save", counted)
    with pytest.raises(PermissionError):
        accel.save({"w": 2}, target)
    monkeypatch.undo()
    assert written == [] and torch.load(target) == {"w": 1}
    assert os.listdir(tmp_path) == ["ck.pt"], "no temporary file left"


def test_device_false_pins_the_cpu() -> None:
    assert accel.device(accelerator=False).type == "cpu"


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(2, 2)
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) * self.scale

    def describe(self) -> str:
        return "net"


def _wrapped() -> tuple[_Net, PreparedModule, list[nn.Module]]:
    """A PreparedModule around a single-device strategy that records its setup."""
    runtime = Runtime(RuntimeConfig(), DistEnv(), accelerator=False)
    built: list[nn.Module] = []
    original_setup = runtime.strategy.setup_module
    runtime.strategy.setup_module = lambda m: built.append(m) or original_setup(m)  # type: ignore[method-assign]
    net = _Net()
    return net, PreparedModule(net, runtime), built


def test_prepared_module_behaves_like_the_users_module() -> None:
    net, model, built = _wrapped()
    assert model.describe() == "net"
    assert [name for name, _ in model.named_parameters()] == [
        name for name, _ in net.named_parameters()
    ]
    assert list(model.state_dict()) == ["scale", "body.weight", "body.bias"]
    model.body = nn.Linear(
        2, 2
    )  # replacing a layer before the first forward reaches the user's module
    assert net.body is model.body
    assert built == [], "the strategy wrapper waits for the first forward"
    model(torch.ones(1, 2))
    assert built == [net]
    model.eval()
    assert not net.training and not model.training
    assert model.module is net, "code written for DataParallel reads .module"
    assert isinstance(
        pickle.loads(pickle.dumps(model)), _Net
    ), "torch.save(model) stores the user's class"


def test_load_state_dict_through_the_wrapper() -> None:
    net, model, _ = _wrapped()
    state = {k: torch.zeros_like(v) for k, v in net.state_dict().items()}
    accel.load_state_dict(model, state)
    assert torch.count_nonzero(net.body.weight) == 0


def test_fp16_without_a_prepared_optimizer_fails_at_the_first_backward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Manual SGD (``p.data.add_(p.grad, ...)``) never passes the scaled gradients
    through a prepared optimizer, so nothing would divide the loss scale out."""
    monkeypatch.setenv("ACCEL_MIGRATE_PRECISION", "fp16")
    accel.device(accelerator=False)
    model = accel.prepare_model(nn.Linear(3, 1))
    loss = model(torch.randn(4, 3)).pow(2).mean()
    with pytest.raises(accel.ConfigError, match="no prepared optimizer"):
        accel.backward(loss)


def test_fp16_with_a_prepared_optimizer_trains(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCEL_MIGRATE_PRECISION", "fp16")
    accel.device(accelerator=False)
    model = accel.prepare_model(nn.Linear(3, 1))
    optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    before = model.weight.detach().clone()
    for _ in range(30):  # the first steps may be skipped while the scale comes down
        optimizer.zero_grad()
        accel.backward(model(torch.randn(4, 3)).pow(2).mean())
        optimizer.step()
    assert not torch.equal(before, model.weight.detach())
    assert torch.isfinite(model.weight).all()


def test_a_prepared_container_hands_out_its_parts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``model[0]``, ``len(model)`` and ``for layer in model`` read the user's
    container (freezing a layer after preparing is common); a module that is not
    a container gets no ``__len__``, so ``bool(model)`` keeps its meaning."""
    monkeypatch.setenv("ACCEL_MIGRATE_PRECISION", "fp16")  # a wrapper, not passthrough
    accel.device(accelerator=False)
    layers = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    model = accel.prepare_model(layers)
    assert isinstance(model, PreparedModule)
    assert model[0] is layers[0]
    assert len(model) == 3
    assert list(model) == list(layers)
    single = accel.prepare_model(nn.Linear(3, 1))
    assert isinstance(single, PreparedModule)
    assert bool(single)
    with pytest.raises(TypeError):
        single[0]


def test_parts_called_instead_of_the_prepared_model_fail_at_the_first_backward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``nets[0](x)`` of a prepared ``nn.ModuleList`` runs outside the strategy's
    forward (no gradient averaging): refused loudly, not trained silently."""
    monkeypatch.setenv("ACCEL_MIGRATE_PRECISION", "fp16")
    accel.device(accelerator=False)
    nets = accel.prepare_model(nn.ModuleList([nn.Linear(3, 1), nn.Linear(3, 1)]))
    accel.prepare_optimizer(torch.optim.SGD(nets.parameters(), lr=0.1))
    loss = (nets[0](torch.randn(4, 3)) + nets[1](torch.randn(4, 3))).pow(2).mean()
    with pytest.raises(RuntimeError, match="never called"):
        accel.backward(loss)


def test_prepare_dataloaders_prepares_the_loaders_of_a_tuple_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``accel.prepare_dataloaders(make_data_loader(args))`` (AM006's rewrite of a
    tuple of loaders beside None and a class count): each DataLoader goes through
    prepare_dataloader, the other items come back as they are, in their places."""
    import accel_migrate.runtime.api as api

    train = DataLoader(TensorDataset(torch.arange(4.0)), batch_size=2)
    val = DataLoader(TensorDataset(torch.arange(2.0)), batch_size=2)
    prepared: list[DataLoader] = []

    def fake(loader: DataLoader) -> str:
        prepared.append(loader)
        return f"prepared {len(prepared)}"

    monkeypatch.setattr(api, "prepare_dataloader", fake)
    result = accel.prepare_dataloaders((train, val, None, 21))
    assert result == ("prepared 1", "prepared 2", None, 21)
    assert prepared == [train, val]
    monkeypatch.undo()
    plain = accel.prepare_dataloaders(iter([train, None]))
    assert plain[0] is train and plain[1] is None
    # a Dataset beside its loader (`return train_loader, train_set`): handed back
    # as it is, at one process and when launched
    dataset = TensorDataset(torch.arange(4.0))
    assert accel.prepare_dataloaders((train, dataset))[1] is dataset
    monkeypatch.setattr(api, "prepare_dataloader", fake)
    launched = accel.prepare_dataloaders((train, dataset))
    assert launched[0] == "prepared 3" and launched[1] is dataset
