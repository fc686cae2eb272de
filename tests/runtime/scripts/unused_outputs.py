"""Models whose backward passes leave some parameters without gradients, under DDP.

Run plainly (the original) and under ``accel-migrate launch`` (world 2): the losses
printed and the parameters saved to argv[1] must agree. One line per model at the
end says whether the runtime rebuilt its DDP wrapper with find_unused_parameters.
"""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import accel_migrate.runtime as accel


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Linear(4, 8)
        self.a = nn.Linear(8, 1)
        self.b = nn.Linear(8, 2)
        self.never = nn.Linear(8, 1)  # defined, never called

    def forward(self, x):
        h = torch.tanh(self.trunk(x))
        return self.a(h), self.b(h)


def data() -> DataLoader:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(24, 4, generator=g)
    return accel.prepare_dataloader(DataLoader(TensorDataset(x), batch_size=8))


def sgd(*models: nn.Module) -> torch.optim.Optimizer:
    params = [p for m in models for p in m.parameters()]
    return accel.prepare_optimizer(torch.optim.SGD(params, lr=0.1, momentum=0.9))


def report(mode: str, step: int, loss: torch.Tensor) -> None:
    accel.print(f"{mode} step {step} loss {accel.global_loss(loss).item():.10e}")


class Full(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Linear(4, 8)
        self.a = nn.Linear(8, 1)
        self.b = nn.Linear(8, 2)

    def forward(self, x):
        h = torch.tanh(self.trunk(x))
        return self.a(h), self.b(h)


def retain_graph(model: nn.Module, name: str) -> nn.Module:
    """Two backward passes through one forward: the first uses every output, the
    second one head (feature-matching GANs). DDP averages only the first."""
    model = accel.prepare_model(model)
    optimizer = sgd(model)
    for step, (x,) in enumerate(data()):
        optimizer.zero_grad()
        a, b = model(x)
        loss = a.pow(2).mean() + b.pow(2).mean()
        accel.backward(loss, retain_graph=True)
        extra = (b - 1).pow(2).mean()
        accel.backward(extra)
        optimizer.step()
        report(name, step, loss + extra)
    return model


def aux_first() -> nn.Module:
    """An auxiliary loss backwarded first (retain_graph=True), reaching the trunk
    and one head only, then the main loss through the same forward: no DDP
    wrapper takes that step, so the strategy averages every backward itself."""
    model = accel.prepare_model(Full())
    optimizer = sgd(model)
    for step, (x,) in enumerate(data()):
        optimizer.zero_grad()
        a, b = model(x)
        aux = 0.4 * a.pow(2).mean()
        accel.backward(aux, retain_graph=True)
        main = (b - 1).pow(2).mean()
        accel.backward(main)
        optimizer.step()
        report("aux_first", step, aux + main)
    return model


def dcgan_order() -> tuple[nn.Module, nn.Module]:
    """G's forward runs before D's backward, which does not use it (fake.detach())."""
    generator = accel.prepare_model(nn.Linear(4, 4))
    discriminator = accel.prepare_model(TwoHeads())
    opt_g, opt_d = sgd(generator), sgd(discriminator)
    for step, (x,) in enumerate(data()):
        opt_d.zero_grad()
        real, _ = discriminator(x)
        fake = generator(x.flip(1))
        fake_score, _ = discriminator(fake.detach())
        d_loss = (real - 1).pow(2).mean() + fake_score.pow(2).mean()
        accel.backward(d_loss)
        opt_d.step()
        opt_g.zero_grad()
        score, _ = discriminator(fake)
        g_loss = (score - 1).pow(2).mean()
        accel.backward(g_loss)
        opt_g.step()
        report("dcgan", step, d_loss + g_loss)
    return generator, discriminator


def accumulate() -> nn.Module:
    """Gradient accumulation: a no_sync backward of one head, then a synced one."""
    model = accel.prepare_model(TwoHeads())
    optimizer = sgd(model)
    for step, (x,) in enumerate(data()):
        optimizer.zero_grad()
        with accel.no_sync(model):
            a, _ = model(x)
            loss_a = a.pow(2).mean()
            accel.backward(loss_a)
        _, b = model(x)
        loss_b = (b - 1).pow(2).mean()
        accel.backward(loss_b)
        optimizer.step()
        report("accumulate", step, loss_a + loss_b)
    return model


def lazy_r1() -> nn.Module:
    """StyleGAN2's lazy R1: every other step a separate backward of the gradient
    penalty ``autograd.grad(D(x).sum(), x, create_graph=True)``, which reaches
    every parameter but the last bias (the wrapper, rebuilt with
    find_unused_parameters after the first such step, still waits for it)."""
    model = accel.prepare_model(
        nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    )
    optimizer = sgd(model)
    for step, (x,) in enumerate(data()):
        for _ in range(2):
            optimizer.zero_grad()
            loss = model(x).pow(2).mean()
            accel.backward(loss)
            optimizer.step()
            report("lazy_r1", step, loss)
            optimizer.zero_grad()
            x = x.detach().requires_grad_(True)
            (grad,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)
            penalty = grad.pow(2).sum(1).mean()
            accel.backward(penalty)
            optimizer.step()
            report("lazy_r1", step, penalty)
    return model


def all_used() -> nn.Module:
    """Every parameter gets a gradient: the wrapper must stay as it was built."""
    model = accel.prepare_model(
        nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    )
    optimizer = sgd(model)
    for step, (x,) in enumerate(data()):
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        accel.backward(loss)
        optimizer.step()
        report("all_used", step, loss)
    return model


def unfreeze() -> nn.Module:
    """Gradual unfreezing (ULMFiT): the head alone trains first, the trunk is made
    trainable after the wrapper was built. Its gradients must be averaged too
    (SILENT before: DDP had registered only the head, and each process stepped the
    trunk with its own share's gradient); the wrapper is rebuilt over both."""
    model = accel.prepare_model(
        nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    )
    optimizer = sgd(model)
    for p in model[0].parameters():
        p.requires_grad = False
    for phase in range(2):
        if phase:
            for p in model[0].parameters():
                p.requires_grad = True
        for step, (x,) in enumerate(data()):
            optimizer.zero_grad()
            loss = model(x).pow(2).mean()
            accel.backward(loss)
            optimizer.step()
            report("unfreeze", 3 * phase + step, loss)
    return model


torch.manual_seed(0)
models = {
    "retain": retain_graph(Full(), "retain"),
    # The first backward leaves `never` without a gradient, so the wrapper is
    # rebuilt with find_unused_parameters, which cannot take the second backward
    # through the same forward: from then on the strategy averages each backward.
    "retain_unused": retain_graph(TwoHeads(), "retain_unused"),
    "aux_first": aux_first(),
    **dict(zip(("dcgan_g", "dcgan_d"), dcgan_order(), strict=True)),
    "accumulate": accumulate(),
    "lazy_r1": lazy_r1(),
    "all_used": all_used(),
    "unfreeze": unfreeze(),
}
state = {}
for name, model in models.items():
    state.update({f"{name}.{k}": v for k, v in accel.state_dict(model).items()})
    wrapper = getattr(model, "forward_module", None)
    accel.print(
        f"{name} find_unused {getattr(wrapper, 'find_unused_parameters', None)}"
    )
accel.save(state, sys.argv[1])
