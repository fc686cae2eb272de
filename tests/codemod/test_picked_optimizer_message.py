"""AM004's finding for a model whose parameters go to an optimizer class the
script picks from a config value at run time (DeepHash-pytorch's
``optimizer = config["optimizer"]["type"](net.parameters(), **...)``): the
finding used to say the parameters reach no optimizer built in the file, which
is false; it names the call instead (the trials' dsh_hashing_map_t14b)."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
import torch.optim as optim


def train(config, loader):
    net = config["net"](8)
    optimizer = config["optimizer"]["type"](net.parameters(), lr=1e-3)
    for epoch in range(2):
        net.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x), y)
            loss.backward()
            optimizer.step()
    return net


config = {"optimizer": {"type": optim.RMSprop}, "net": torch.nn.Linear}
config = update_config(config)
train(config, get_loader(config))
"""


def test_parameters_handed_to_a_picked_callable_are_named() -> None:
    result = migrate_source(SCRIPT.encode(), "main.py")
    assert not result.changed
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert "reach no optimizer" not in blocking.message
    assert (
        'its parameters are handed to `config["optimizer"]["type"](net.parameters(), '
        'lr=1e-3)` (line 7), a call of `config["optimizer"]["type"]`, a value the '
        "script picks at run time that accel-migrate cannot show to be an "
        "optimizer class" in blocking.message
    )


def test_parameters_reaching_no_optimizer_keep_their_sentence() -> None:
    source = SCRIPT.replace(
        'config["optimizer"]["type"](net.parameters(), lr=1e-3)', "make_opt(net)"
    )
    result = migrate_source(source.encode(), "main.py")
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert "its parameters reach no optimizer built in this file" in blocking.message


DICT_SCRIPT = """\
import torch


def train(loader, nets, optimizer):
    snet = nets["snet"]
    snet.train()
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(snet(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


snet = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(snet.parameters(), lr=0.1)
for epoch in range(2):
    nets = {"snet": snet}
    train(get_loader(), nets, optimizer)
"""


def test_a_model_taken_out_of_a_container_is_said_to_be() -> None:
    """Knowledge-Distillation-Zoo's ``nets = {'snet': snet, ...}`` handed to
    ``train``, which takes ``snet = nets['snet']`` out: its parameters do reach
    ``SGD(snet.parameters())`` of the file; the finding said they reach no
    optimizer built in it (the trials' kdzoo_attention_transfer_t16a)."""
    result = migrate_source(DICT_SCRIPT.encode(), "main.py")
    assert not result.changed
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert "reach no optimizer" not in blocking.message
    assert (
        'it is taken out of a container (`nets["snet"]`, line 5), which '
        "accel-migrate does not follow to the model put in it" in blocking.message
    )
    assert "where it is built (before it is put in `nets`)" in blocking.message
