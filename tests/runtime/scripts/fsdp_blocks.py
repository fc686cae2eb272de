"""A 6-block model (an embedding, six residual MLP blocks in a ModuleList, a head),
trained a few steps with SGD; prints the losses and the number of FSDP units, and
saves the final state dict. The same file runs plain (world 1, no runtime) and
under the runtime."""

import sys

import torch
from torch import nn

USE_RUNTIME = sys.argv[1] == "runtime"
OUT = sys.argv[2]
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
        self.blocks = nn.ModuleList(Block(16) for _ in range(6))
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
data = torch.randn(32, 6)
target = torch.randint(0, 3, (32,))
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(data, target), batch_size=8
)
if USE_RUNTIME:
    model = accel.prepare_model(model)
    optimizer = accel.prepare_optimizer(optimizer)
    loader = accel.prepare_dataloader(loader)
step = 0
for _ in range(2):
    for x, y in loader:
        if USE_RUNTIME:  # the batch goes where the model is (a GPU under NCCL)
            x, y = x.to(accel.device()), y.to(accel.device())
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        if USE_RUNTIME:
            accel.backward(loss)
            accel.print(f"step {step} loss {accel.global_loss(loss).item():.10e}")
        else:
            loss.backward()
            print(f"step {step} loss {loss.item():.10e}")
        optimizer.step()
        step += 1
if USE_RUNTIME:
    # The runtime shards at the first forward.
    from torch.distributed.fsdp import FSDPModule

    units = sum(isinstance(m, FSDPModule) for m in accel.unwrap(model).modules())
    accel.print(f"units {units}")
    accel.save(accel.state_dict(model), OUT)
else:
    torch.save(model.state_dict(), OUT)
