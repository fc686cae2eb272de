"""Shapes of a new-user trial (t13a) on DINO and MoCo projects:

- an optimizer over the parameter groups a local module's function hands back
  (DINO's ``AdamW(utils.get_params_groups(student))``, ``param_group_helpers``):
  before, no optimizer was seen over the student's parameters and AM004
  prepared the loss module instead (the runtime then refused the first step);
- a model rebuilt around itself (``student = MultiCropWrapper(student,
  DINOHead(...))``, ``model_rewraps``): the wrapper is prepared, not the
  backbone under it (the head's parameters would be left out);
- a buffer a local module's model class writes in its ``forward`` from its
  inputs (MoCo's queue in ``model.py``, ``project_state_writes``): AM032
  reports it where the step runs the model; and a buffer of a loss class of
  the file written in a step whose loop takes its batches through
  ``enumerate(metric_logger.log_every(data_loader, ...))`` (DINO's centre).
"""

from __future__ import annotations

import ast
from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.param_group_helpers import groups_over
from accel_migrate.codemod.project_state_writes import state_writes

UTILS = """
import torch
import torch.nn as nn


def get_params_groups(model):
    regularized, not_regularized = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if name.endswith(".bias") or len(param.shape) == 1:
            not_regularized.append(param)
        else:
            regularized.append(param)
    return [{"params": regularized}, {"params": not_regularized, "weight_decay": 0.0}]


def groups_of_two(a, b):
    return [{"params": a.parameters()}, {"params": b.parameters()}]


def not_groups(model):
    return list(model.parameters())


class MultiCropWrapper(nn.Module):
    def __init__(self, backbone, head):
        super().__init__()
        self.backbone = backbone
        self.head = head

    def forward(self, x):
        return self.head(self.backbone(x))


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)
"""

DINO = """import torch
from torch.utils.data import DataLoader

import utils

loader = DataLoader(data, batch_size=8, shuffle=True, drop_last=True)
student = torch.nn.Linear(4, 4)
student = utils.MultiCropWrapper(student, utils.Head())
student = student.to("cpu")
params_groups = utils.get_params_groups(student)
optimizer = torch.optim.AdamW(params_groups)
for x in loader:
    loss = student(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _function(source: str, name: str) -> ast.FunctionDef:
    tree = ast.parse(source)
    return next(
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name
    )


def test_a_function_that_groups_one_models_parameters() -> None:
    functions = {
        n.name: n for n in ast.parse(UTILS).body if isinstance(n, ast.FunctionDef)
    }
    assert groups_over(functions["get_params_groups"], functions) == ("model", 0)
    # two models' parameters, or a plain list: not one model's groups
    assert groups_over(functions["groups_of_two"], functions) == ("", -1)
    assert groups_over(functions["not_groups"], functions) == ("", -1)


def test_the_wrapper_around_the_grouped_model_is_prepared(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text(UTILS)
    train = tmp_path / "train.py"
    train.write_text(DINO)
    result = migrate_source(train.read_bytes(), str(train))
    out = result.output.decode()  # type: ignore[union-attr]
    assert "student = torch.nn.Linear(4, 4)\n" in out  # the backbone: not prepared
    assert (
        "student = accel.prepare_model(utils.MultiCropWrapper(student, utils.Head()))"
        in out
    )
    assert out.count("accel.prepare_model(") == 1
    assert "accel.prepare_optimizer(torch.optim.AdamW(params_groups))" in out


def test_a_conditional_rewrap_leaves_the_first_binding_prepared(
    tmp_path: Path,
) -> None:
    # the wrapper is built on one path only: the backbone binding reaches the
    # optimizer unwrapped on the other, so it is not taken as rewrapped
    (tmp_path / "utils.py").write_text(UTILS)
    train = tmp_path / "train.py"
    train.write_text(
        DINO.replace(
            "student = utils.MultiCropWrapper(",
            "if heads:\n    student = utils.MultiCropWrapper(",
        )
    )
    result = migrate_source(train.read_bytes(), str(train))
    out = result.output.decode()  # type: ignore[union-attr]
    assert "student = accel.prepare_model(torch.nn.Linear(4, 4))" in out
    # and the wrapper is not prepared around a prepared model
    assert out.count("accel.prepare_model(") == 1


TRAINED_THEN_WRAPPED = """import torch
import torch.nn as nn
from torch.utils.data import DataLoader

import utils


def main():
    loader = DataLoader(data, batch_size=8, shuffle=True)
    model = nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in loader:
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model = utils.MultiCropWrapper(model, utils.Head())
    torch.save(model.state_dict(), "wrapped.pt")
"""


def test_a_model_trained_before_its_rewrap_keeps_its_build_prepared(
    tmp_path: Path,
) -> None:
    # the loop trains the bare model; the wrapper only comes after: preparing
    # the wrapper instead would leave the training unprepared (rev11 rw2)
    (tmp_path / "utils.py").write_text(UTILS)
    train = tmp_path / "train.py"
    train.write_text(TRAINED_THEN_WRAPPED)
    out = migrate_source(train.read_bytes(), str(train)).output.decode()  # type: ignore[union-attr]
    assert "model = accel.prepare_model(nn.Linear(4, 4))" in out
    assert "model = utils.MultiCropWrapper(model, utils.Head())" in out
    assert out.count("accel.prepare_model(") == 1


def test_a_read_between_build_and_rewrap_keeps_the_build_prepared(
    tmp_path: Path,
) -> None:
    # a call on the bare model, or a function of the block above the rewrap
    # that reads it, may use it unwrapped; a plain attribute read may not
    (tmp_path / "utils.py").write_text(UTILS)
    train = tmp_path / "train.py"
    for between, first in [
        ("student.train()\n", True),
        ("def peek():\n    return student(x)\n", True),
        ("width = student.out_features\n", False),
    ]:
        train.write_text(
            DINO.replace(
                "student = utils.MultiCropWrapper(",
                between + "student = utils.MultiCropWrapper(",
            )
        )
        out = migrate_source(train.read_bytes(), str(train)).output.decode()  # type: ignore[union-attr]
        assert (
            "student = accel.prepare_model(torch.nn.Linear(4, 4))" in out
        ) is first, between
        assert (
            "student = accel.prepare_model(utils.MultiCropWrapper(" in out
        ) is not first, between
        assert out.count("accel.prepare_model(") == 1


MOCO_MODEL = """
import torch
import torch.nn as nn


class ModelMoCo(nn.Module):
    def __init__(self, K=64):
        super().__init__()
        self.K = K
        self.encoder_q = nn.Linear(4, 4)
        self.register_buffer("queue", torch.randn(4, K))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        self.queue[:, ptr : ptr + batch_size] = keys.t()
        self.queue_ptr[0] = (ptr + batch_size) % self.K

    def forward(self, im1, im2):
        q = self.encoder_q(im1)
        k = self.encoder_q(im2).detach()
        loss = (q @ self.queue.clone()).mean() - (q * k).sum(1).mean()
        self._dequeue_and_enqueue(k)
        return loss


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x):
        self.count[0] = 0
        return self.fc(x).mean()


class Gathered(ModelMoCo):
    def _dequeue_and_enqueue(self, keys):
        keys = concat_all_gather(keys)
        self.queue[:, :keys.shape[0]] = keys.t()
"""

MOCO = """import torch
from torch.utils.data import DataLoader

from model import ModelMoCo

loader = DataLoader(data, batch_size=8, shuffle=True, drop_last=True)
model = ModelMoCo().to("cpu")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train(net, data_loader, train_optimizer):
    for im_1, im_2 in data_loader:
        loss = net(im_1, im_2)
        train_optimizer.zero_grad()
        loss.backward()
        train_optimizer.step()


train(model, loader, optimizer)
"""


def test_the_buffers_a_forward_writes_from_its_inputs() -> None:
    classes = {
        n.name: n for n in ast.parse(MOCO_MODEL).body if isinstance(n, ast.ClassDef)
    }
    found = state_writes(classes["ModelMoCo"])
    assert "`ModelMoCo._dequeue_and_enqueue` writes the buffer `self.queue`" in found
    # a constant written, or keys gathered from every process first: nothing
    assert state_writes(classes["Plain"]) == ""
    assert state_writes(classes["Gathered"]) == ""


def test_am032_names_a_local_modules_queue_where_the_step_runs_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "model.py").write_text(MOCO_MODEL)
    train = tmp_path / "main.py"
    train.write_text(MOCO)
    result = migrate_source(train.read_bytes(), str(train))
    found = [f for f in result.findings if f.code == "AM032"]
    assert len(found) == 1 and found[0].status == "needs-review"
    assert "`ModelMoCo` of model.py" in found[0].message
    assert "self.queue" in found[0].message


CENTER = """import torch
import torch.nn as nn
from torch.utils.data import DataLoader

import utils


class DINOLoss(nn.Module):
    def __init__(self, out_dim):
        super().__init__()
        self.register_buffer("center", torch.zeros(1, out_dim))

    def forward(self, student_output, teacher_output):
        loss = -(teacher_output.softmax(-1) * student_output.log_softmax(-1)).sum(-1)
        self.update_center(teacher_output)
        return loss.mean()

    @torch.no_grad()
    def update_center(self, teacher_output):
        batch_center = torch.sum(teacher_output, dim=0, keepdim=True)
        batch_center = batch_center / len(teacher_output)
        self.center = self.center * 0.9 + batch_center * 0.1


def train_one_epoch(student, dino_loss, data_loader, optimizer, metric_logger):
    for it, images in enumerate(metric_logger.log_every(data_loader, 10)):
        loss = dino_loss(student(images), student(images).detach())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


loader = DataLoader(data, batch_size=8, shuffle=True, drop_last=True)
student = nn.Linear(4, 4)
dino_loss = DINOLoss(4)
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
train_one_epoch(student, dino_loss, loader, optimizer, utils.MetricLogger())
"""


def test_am032_names_a_centre_updated_in_a_step_through_a_logger(
    tmp_path: Path,
) -> None:
    (tmp_path / "utils.py").write_text(
        "class MetricLogger:\n"
        "    def log_every(self, iterable, freq):\n"
        "        for obj in iterable:\n"
        "            yield obj\n"
    )
    train = tmp_path / "main_dino.py"
    train.write_text(CENTER)
    result = migrate_source(train.read_bytes(), str(train))
    found = [f for f in result.findings if f.code == "AM032"]
    assert len(found) == 1 and "`DINOLoss.update_center`" in found[0].message


AUGMENTED = """import torch
from torch.utils.data import DataLoader, Dataset


class DataAugmentationDINO(object):
    def crop(self, image, size):
        top = torch.randint(0, image.shape[1] - size + 1, (1,)).item()
        return image[:, top : top + size, :size]

    def __call__(self, image):
        return [self.crop(image, 8), self.crop(image, 4)]


class ImageFolder(Dataset):
    def __init__(self, root, transform=None):
        self.samples = torch.rand(32, 3, 10, 10)
        self.transform = transform

    def __getitem__(self, index):
        return self.transform(self.samples[index]), 0

    def __len__(self):
        return len(self.samples)


dataset = ImageFolder("/data", transform=DataAugmentationDINO())
loader = DataLoader(dataset, batch_size=8, shuffle=True)
model = torch.nn.Linear(4, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for crops, _ in loader:
    loss = model(crops[1].mean((1, 2))[:, :4].repeat(1, 1)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_am020_follows_a_datasets_call_of_the_transform_object_it_holds(
    tmp_path: Path,
) -> None:
    train = tmp_path / "main_dino.py"
    train.write_text(AUGMENTED)
    result = migrate_source(train.read_bytes(), str(train))
    found = [f for f in result.findings if f.code == "AM020"]
    assert len(found) == 1 and found[0].status == "needs-review"
    assert (
        "`crop`, called from `DataAugmentationDINO.__call__`, called from "
        "`ImageFolder.__getitem__`" in found[0].message
    )


PROXY_NCA = """
import torch
import torch.nn.functional as F
from torch.nn import Parameter


class ProxyNCA(torch.nn.Module):
    def __init__(self, nb_classes, sz_embedding, scaling_p=3):
        torch.nn.Module.__init__(self)
        self.proxies = Parameter(torch.randn(nb_classes, sz_embedding) / 8)
        self.scaling_p = scaling_p

    def forward(self, X, T):
        P = F.normalize(self.proxies, p=2, dim=-1) * self.scaling_p
        X = F.normalize(X, p=2, dim=-1)
        D = torch.cdist(X, P) ** 2
        loss = torch.sum(-F.one_hot(T, len(P)) * F.log_softmax(-D, -1), -1)
        return loss.mean()
"""

PROXY_MAIN = """import numpy as np
import torch
from torch.utils.data import DataLoader

import proxynca

loader = DataLoader(data, batch_size=8, shuffle=True, drop_last=True)
model = torch.nn.Linear(4, 4)
criterion = proxynca.ProxyNCA(nb_classes=4, sz_embedding=4)
opt = torch.optim.Adam([{"params": model.parameters()}, {"params": criterion.parameters()}])
for e in range(2):
    losses_per_epoch = []
    for x, y in loader:
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        losses_per_epoch.append(loss.data.cpu().numpy())
        opt.step()
    print("epoch", e, np.mean(losses_per_epoch))
"""


def test_distances_to_held_proxies_and_a_numpy_read_of_the_loss(
    tmp_path: Path,
) -> None:
    # torch.cdist(X, P) against the criterion's own proxies sets each sample
    # against the proxies, not against the batch's other samples (no AM007);
    # the loss read with `.data.cpu().numpy()` is the logged loss, made the
    # whole batch's (not gathered per batch as if it were outputs: AM029)
    (tmp_path / "proxynca.py").write_text(PROXY_NCA)
    train = tmp_path / "train.py"
    train.write_text(PROXY_MAIN)
    result = migrate_source(train.read_bytes(), str(train))
    out = result.output.decode()  # type: ignore[union-attr]
    # the global loss of `loss` itself, copied then: the runtime knows the
    # backpropagated loss by its identity and storage, not a CPU copy's
    assert "losses_per_epoch.append(accel.global_loss(loss).data.cpu().numpy())" in out
    assert "gather_in_order" not in out
    assert not [f for f in result.findings if f.status == "needs-review"]


SUMMED_NUMPY = """import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

loader = DataLoader(data, batch_size=8, shuffle=True)
model = torch.nn.Linear(8, 2).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
losses = []
for x, y in loader:
    x, y = x.cuda(), y.cuda()
    loss = F.mse_loss(model(x), y, reduction="sum")
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.data.cpu().numpy())
    print(loss.detach().cpu().item(), float(loss.cpu()), loss.detach().item())
print(np.mean(losses))
"""


def test_a_copied_read_of_a_summed_loss_is_made_global_before_the_copy(
    tmp_path: Path,
) -> None:
    # rev11 ll2: `accel.global_loss(loss.data.cpu())` gave the runtime a CPU
    # copy, not the loss of accel.backward: a sum was combined as a mean
    train = tmp_path / "train.py"
    train.write_text(SUMMED_NUMPY)
    out = migrate_source(train.read_bytes(), str(train)).output.decode()  # type: ignore[union-attr]
    assert 'accel.backward(loss, reduction="sum")' in out
    assert "losses.append(accel.global_loss(loss).data.cpu().numpy())" in out
    assert "accel.global_loss(loss).detach().cpu().item()" in out
    assert "float(accel.global_loss(loss).cpu())" in out
    # no copy: the same storage, which the runtime knows (unchanged)
    assert "accel.global_loss(loss.detach()).item()" in out
    assert "global_loss(loss.data.cpu())" not in out


SECOND_MOMENTS = """
import torch
import torch.nn as nn


class RunningMoments(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = nn.Linear(dim, dim)
        self.register_buffer("second", torch.zeros(dim))

    def forward(self, x):
        out = self.net(x)
        self.second.addcmul_(out.mean(0), out.mean(0), value=0.01)
        return out


class Codebook(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = nn.Linear(dim, dim)
        self.register_buffer("cluster_size", torch.zeros(dim))
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, x):
        out = self.net(x)
        counts = out.detach().sum(0)
        self.cluster_size.mul_(0.99).add_(counts, alpha=0.01)
        self.steps.mul_(1.0).add_(1)
        return out


class Peaks(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = nn.Linear(dim, dim)
        self.register_buffer("peak", torch.zeros(4, dim))

    def forward(self, x, group):
        out = self.net(x)
        self.peak.scatter_reduce_(0, group, out.detach(), reduce="amax")
        return out
"""


def test_a_local_class_counts_every_write_the_rule_counts() -> None:
    # one set of in-place writes for AM032 in the file and in a local module:
    # `addcmul_`, `scatter_reduce_` were the rule's only
    from accel_migrate.codemod import project_state_writes
    from accel_migrate.codemod.rules import batch_state_writes

    classes = {
        n.name: n for n in ast.parse(SECOND_MOMENTS).body if isinstance(n, ast.ClassDef)
    }
    found = state_writes(classes["RunningMoments"])
    assert "`RunningMoments.forward` writes the buffer `self.second`" in found
    assert "addcmul_" in found
    found = state_writes(classes["Peaks"])
    assert "`Peaks.forward` writes the buffer `self.peak`" in found
    # a chain of writes, as the rule reads one in the file
    found = state_writes(classes["Codebook"])
    assert "`Codebook.forward` writes the buffer `self.cluster_size`" in found
    assert project_state_writes.STATE_WRITES is batch_state_writes.STATE_WRITES
