"""Resume at another world size: 2 epochs of 4 steps of a deterministic model
(no dropout) with Adam, a shuffling loader and an LR scheduler.

argv: STATE_DIR OUT_DIR MODE. MODE "save" trains every step, and after global
step 2 (epoch 0, mid-epoch) saves the state and, as one plain file, the model at
that point (OUT_DIR/at_save.pt). MODE "resume" loads the state and trains the
rest. Both print "step G loss L" per global step and write the final model to
OUT_DIR/final-<world>.pt with accel.save.
"""

import sys
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import accel_migrate.runtime as accel

state_dir, out, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
STEPS, SAVE_AFTER = 4, 2

torch.manual_seed(0)
data = TensorDataset(torch.randn(32, 5), torch.randn(32, 1))
# 8 rows a batch: slices of 8, 4/4 and 3/3/2 at worlds 1, 2 and 3.
loader = accel.prepare_dataloader(DataLoader(data, batch_size=8, shuffle=True))
net = nn.Sequential(
    nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)
)
model = accel.prepare_model(net)
optimizer = accel.prepare_optimizer(torch.optim.Adam(model.parameters(), lr=0.01))
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)

first_epoch, first_step = 0, 0
if mode == "resume":
    resume = accel.load_state(state_dir, scheduler)
    assert resume is not None, "nothing to resume"
    first_epoch, first_step = resume.epoch, resume.step
    assert resume.values == {"epoch": 0}, resume.values
for epoch in range(first_epoch, 2):
    step = first_step if epoch == first_epoch else 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        accel.backward(loss)
        optimizer.step()
        accel.print(
            f"step {epoch * STEPS + step} loss "
            f"{accel.global_loss(loss).item():.10e}"
        )
        if mode == "save" and epoch * STEPS + step == SAVE_AFTER:
            accel.save_state(state_dir, scheduler, epoch=epoch)
            accel.save(accel.state_dict(model), out / "at_save.pt")
        step += 1
    scheduler.step()
accel.save(accel.state_dict(model), out / f"final-{accel.world_size()}.pt")
