"""A 4-block residual MLP trained 6 steps with Adam and gradient clipping; prints
the losses and, under the runtime, the FSDP units, the mesh its parameters
live on and whether the unsharded original parameters were freed; saves the final state dict. The same file runs plain (one process, no
runtime) and under the runtime.

argv: MODE OUT [STATE_DIR]. Under the runtime with STATE_DIR, the state is saved
after step 2 (``accel.save_state``), and after the 6 steps it is loaded again and
steps 3-5 are run a second time ("again G loss L"): a resume inside the same job.
MODE "resume" (runtime, any strategy and world) loads STATE_DIR first and runs
the steps after it ("again G loss L"): a state saved under HSDP resumed under
plain FSDP at another world size (docs/runtime.md, HSDP).
"""

import gc
import sys
import weakref

import torch
from torch import nn

USE_RUNTIME = sys.argv[1] in ("runtime", "resume")
RESUME_ONLY = sys.argv[1] == "resume"
OUT = sys.argv[2]
STATE = sys.argv[3] if len(sys.argv) > 3 else None
if USE_RUNTIME:
    import accel_migrate.runtime as accel


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(6, 16)
        self.blocks = nn.ModuleList(Block(16) for _ in range(4))
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
data = torch.randn(48, 6)
target = torch.randint(0, 3, (48,))
# Global batches of 8: 2 rows a rank at world 4.
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(data, target), batch_size=8
)
if USE_RUNTIME:
    # Sharding replaces the parameters; the full originals must then be freed.
    original = weakref.ref(model.blocks[0].fc1.weight)
    model = accel.prepare_model(model)
    optimizer = accel.prepare_optimizer(optimizer)
    loader = accel.prepare_dataloader(loader)


def train(label: str, first: int) -> None:
    for step, (x, y) in enumerate(loader, start=first):
        if USE_RUNTIME:  # the batch goes where the model is (a GPU under NCCL)
            x, y = x.to(accel.device()), y.to(accel.device())
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        if USE_RUNTIME:
            accel.backward(loss)
            accel.clip_grad_norm_(model.parameters(), 0.5)
            accel.print(f"{label} {step} loss {accel.global_loss(loss).item():.10e}")
        else:
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            print(f"{label} {step} loss {loss.item():.10e}")
        optimizer.step()
        if USE_RUNTIME and STATE and label == "step" and step == 2:
            accel.save_state(STATE)


if RESUME_ONLY:
    resumed = accel.load_state(STATE)
    assert resumed is not None and resumed.epoch == 0, resumed
    train("again", resumed.step)
    accel.save(accel.state_dict(model), OUT)
    sys.exit(0)
train("step", 0)
if USE_RUNTIME:
    from torch.distributed.fsdp import FSDPModule

    modules = list(accel.unwrap(model).modules())
    accel.print(f"units {sum(isinstance(m, FSDPModule) for m in modules)}")
    gc.collect()
    accel.print(f"original parameters freed {original() is None}")
    weight = accel.unwrap(model).blocks[0].fc1.weight
    accel.print(
        f"mesh {tuple(weight.device_mesh.shape)} {weight.device_mesh.mesh_dim_names} "
        f"placements {[type(p).__name__ for p in weight.placements]}"
    )
    accel.save(accel.state_dict(model), OUT)
    if STATE:
        resume = accel.load_state(STATE)
        assert resume is not None and resume.epoch == 0, resume
        train("again", resume.step)
else:
    torch.save(model.state_dict(), OUT)
