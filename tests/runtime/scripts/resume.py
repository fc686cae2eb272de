"""Resume: 3 epochs of 6 steps, state saved after every odd step. On the first
attempt rank 1 kills itself (SIGKILL) at epoch 1, step 4, before that step is
saved; torchrun restarts the job, which resumes from the state folder.

argv: STATE_DIR OUT_PATH [--no-kill]
"""

import os
import signal
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import accel_migrate.runtime as accel

state_dir, out = sys.argv[1], sys.argv[2]
kill = "--no-kill" not in sys.argv
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

torch.manual_seed(0)
data = TensorDataset(torch.randn(60, 5), torch.randn(60, 1))
loader = accel.prepare_dataloader(DataLoader(data, batch_size=10, shuffle=True))
net = nn.Sequential(nn.Linear(5, 16), nn.Dropout(0.2), nn.ReLU(), nn.Linear(16, 1))
model = accel.prepare_model(net)
optimizer = accel.prepare_optimizer(torch.optim.Adam(model.parameters(), lr=0.01))
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)

resume = accel.load_state(state_dir, scheduler)
first_epoch = resume.epoch if resume else 0
accel.print(
    f"attempt {attempt} starts at epoch {first_epoch} step {resume.step if resume else 0}"
)
for epoch in range(first_epoch, 3):
    step = resume.step if resume and epoch == first_epoch else 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        accel.backward(loss)
        optimizer.step()
        accel.print(
            f"epoch {epoch} step {step} loss {accel.global_loss(loss).item():.10e}"
        )
        if kill and attempt == 0 and epoch == 1 and step == 4 and accel.rank() == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        if step % 2 == 1:
            accel.save_state(state_dir, scheduler, epoch=epoch)
        step += 1
    scheduler.step()
accel.save(accel.state_dict(model), out)
