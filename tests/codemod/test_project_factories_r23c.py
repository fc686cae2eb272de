"""A training setup spread over helper modules (issue 12, round r23c): optimizer
factories of another module, metric helpers' sums and row-scaled accuracies,
and a criterion handed from the caller's file."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView, read_project

OPTIM = """
import torch

OPTIMIZERS = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}
MODEL = torch.nn.Linear(2, 2)


def groups(model, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


def build_optimizer(cfg, model):
    params = groups(model, cfg["wd"])
    return OPTIMIZERS[cfg["opt"]](params, lr=cfg["lr"])


def make_optimizer(params, args):
    if args.adam:
        return torch.optim.Adam(params, lr=args.lr)
    return torch.optim.SGD(params, lr=args.lr)


def global_optimizer(cfg, model):
    return torch.optim.SGD(MODEL.parameters(), lr=cfg["lr"])


def mmcv_builder(cfg, model):
    kwargs = dict(cfg)
    optim_cls = getattr(torch.optim, kwargs.pop("type"))
    return optim_cls(model.parameters(), **kwargs)


def two_models(a, b):
    return torch.optim.SGD(list(a.parameters()) + list(b.parameters()), lr=0.1)
"""

LOOP = """
for x, y in loader:
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
"""

HEAD = """import torch
from torch.utils.data import DataLoader
from optim import build_optimizer, make_optimizer, global_optimizer, two_models
from optim import mmcv_builder
model = torch.nn.Linear(4, 2)
loader = DataLoader(data, batch_size=8, shuffle=True)
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _migrate(path: Path) -> tuple[str, list]:
    result = migrate_source(path.read_bytes(), str(path))
    return result.output.decode(), list(result.findings)  # type: ignore[union-attr]


def test_optimizer_factories_say_which_parameter_they_train(tmp_path: Path) -> None:
    _write(tmp_path, "optim.py", OPTIM)
    probe = _write(tmp_path, "probe.py", "import optim\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["optim.build_optimizer"].optimizer_over == ("model", 1, "model")
    assert table["optim.make_optimizer"].optimizer_over == ("params", 0, "params")
    assert table["optim.mmcv_builder"].optimizer_over == ("model", 1, "model")
    # a global model, or two parameters read: not one handed model
    assert table["optim.global_optimizer"].optimizer_over == ("", -1, "")
    assert table["optim.two_models"].optimizer_over == ("", -1, "")


def test_a_factory_optimizer_is_prepared_with_its_model(tmp_path: Path) -> None:
    _write(tmp_path, "optim.py", OPTIM)
    for call in (
        "build_optimizer(cfg, model)",
        "build_optimizer(cfg, model=model)",
        "make_optimizer(model.parameters(), args)",
        "mmcv_builder(cfg, model)",
    ):
        train = _write(tmp_path, "train.py", HEAD + f"optimizer = {call}\n" + LOOP)
        out, findings = _migrate(train)
        assert "model = accel.prepare_model(torch.nn.Linear(4, 2))" in out, call
        assert f"optimizer = accel.prepare_optimizer({call})" in out, call
        assert not [f for f in findings if f.status == "needs-review"], call
        # a second run changes nothing
        train.write_text(out)
        assert not migrate_source(train.read_bytes(), str(train)).changed


def test_a_factory_whose_model_is_not_known_is_not_prepared(
    tmp_path: Path,
) -> None:
    _write(tmp_path, "optim.py", OPTIM)
    for call in (
        "global_optimizer(cfg, model)",
        "two_models(model, model)",
        "make_optimizer(filter(lambda p: p.requires_grad, model.parameters()), args)",
        "build_optimizer(*parts)",
    ):
        train = _write(tmp_path, "train.py", HEAD + f"optimizer = {call}\n" + LOOP)
        out, _ = _migrate(train)
        # not claimed as a factory's: neither prepared here (the runtime's
        # first-step guard stops a run whose trained parameters are unprepared)
        assert "accel.prepare_optimizer" not in out, call
        assert "accel.prepare_model" not in out, call


METRICS = """
import torch


def count_correct(output, target):
    pred = output.argmax(dim=1)
    return pred.eq(target).sum().item()


def batch_accuracy(output, target):
    return (output.argmax(dim=1) == target).float().mean().item()


def batch_accuracy_tensor(output, target):
    return (output.argmax(dim=1) == target).float().mean()


def count_with_global(output, target):
    return (output.argmax(dim=1) == LABELS).sum().item()


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def accuracy_rows(output, target, topk=(1,)):
    maxk = max(topk)
    _, pred = output.topk(maxk, 1, True, True)
    correct = pred.t().eq(target.view(1, -1).expand_as(pred.t()))
    return [correct[:k].float().sum(0) * 100.0 / target.size(0) for k in topk]
"""


def test_metric_helpers_say_what_they_return_over_the_batch(tmp_path: Path) -> None:
    _write(tmp_path, "metrics.py", METRICS)
    probe = _write(tmp_path, "probe.py", "import metrics\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["metrics.count_correct"].batch_kind == "sum"
    # a mean read as a number: weighted as a tensor made of it
    assert table["metrics.batch_accuracy"].batch_kind == "mean number"
    assert table["metrics.batch_accuracy_tensor"].batch_kind == "mean"
    assert table["metrics.count_with_global"].batch_kind == ""
    scaled = table["metrics.accuracy"].row_scaled
    assert scaled is not None
    assert (scaled.parameter, scaled.position, scaled.count, scaled.listed) == (
        "target",
        1,
        "target.size(0)",
        True,
    )
    assert scaled.division == "100.0 / batch_size"
    # a sum along one dimension of a 2-D tensor: a row of per-sample sums
    assert table["metrics.accuracy_rows"].row_scaled is None


EVAL = """import torch
from torch.utils.data import DataLoader
from metrics import accuracy, count_correct, count_with_global
model = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(data, batch_size=8, shuffle=True)
val_loader = DataLoader(data, batch_size=8)
for x, y in loader:
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
"""


METER = """
class Meter:
    def __init__(self):
        self.sum, self.count, self.avg = 0.0, 0, 0.0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count
"""


def test_a_helpers_count_is_reduced_and_its_accuracy_weighted(tmp_path: Path) -> None:
    _write(tmp_path, "metrics.py", METRICS)
    train = _write(
        tmp_path,
        "train.py",
        EVAL
        + METER
        + "correct = 0\ntop1 = Meter()\n"
        + "for x, target in val_loader:\n"
        + "    out = model(x)\n"
        + "    correct += count_correct(out, target)\n"
        + "    acc1, acc5 = accuracy(out, target, topk=(1, 5))\n"
        + "    top1.update(acc1[0], x.size(0))\n"
        + "print(correct, top1.avg)\n",
    )
    out, _ = _migrate(train)
    assert "correct = accel.reduce(correct)" in out
    assert "accel.global_loss(acc1[0], count=target.size(0))" in out


def test_a_helpers_mean_number_is_weighted_by_each_share(tmp_path: Path) -> None:
    _write(tmp_path, "metrics.py", METRICS)
    train = _write(
        tmp_path,
        "train.py",
        EVAL.replace("count_with_global", "batch_accuracy")
        + METER
        + "acc = 0.0\nmeter = Meter()\n"
        + "for x, y in val_loader:\n"
        + "    acc += batch_accuracy(model(x), y)\n"
        + "    meter.update(batch_accuracy(model(x), y), x.size(0))\n"
        + "print(acc / len(val_loader), meter.avg)\n",
    )
    out, _ = _migrate(train)
    weighted = "accel.global_loss(torch.as_tensor(batch_accuracy(model(x), y))).item()"
    assert f"acc += {weighted}" in out
    assert f"meter.update({weighted}, accel.reduce(x.size(0)))" in out


def test_a_helper_reading_a_global_is_not_a_sum(tmp_path: Path) -> None:
    _write(tmp_path, "metrics.py", METRICS)
    train = _write(
        tmp_path,
        "train.py",
        EVAL
        + "correct = 0\nfor x, y in val_loader:\n"
        + "    correct += count_with_global(model(x), y)\nprint(correct)\n",
    )
    out, findings = _migrate(train)
    assert "accel.reduce(correct)" not in out
    assert any(
        f.code == "AM009" and f.status == "needs-review" and "`correct`" in f.message
        for f in findings
    )


ENGINE = (
    """import torch
"""
    + METER
    + """

def train(loader, model, criterion, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()


def validate(loader, model, criterion):
    losses = Meter()
    for x, y in loader:
        loss = criterion(model(x), y)
        losses.update(loss.item(), x.size(0))
    return losses.avg
"""
)

MAIN = """import torch
from torch.utils.data import DataLoader
from engine import train, validate
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(data, batch_size=8)
criterion = torch.nn.CrossEntropyLoss({reduction})
train(loader, model, criterion, optimizer)
print(validate(loader, model, criterion))
"""


def test_a_criterion_handed_from_another_file_is_known_by_its_reduction(
    tmp_path: Path,
) -> None:
    engine = _write(tmp_path, "engine.py", ENGINE)
    for reduction, kind in (("", "mean"), ("reduction='sum'", "sum")):
        main = _write(tmp_path, "main.py", MAIN.format(reduction=reduction))
        view = ProjectView([str(engine), str(main)])
        facts = view.facts_for(str(engine))
        (site,) = facts.callers_of("validate")
        assert (site.kind("criterion"), site.reduction("criterion")) == (
            "criterion",
            kind,
        )
    # with the mean criterion, the engine's logged loss is the global batch's
    main = _write(tmp_path, "main.py", MAIN.format(reduction=""))
    view = ProjectView([str(engine), str(main)])
    result = migrate_source(
        engine.read_text(),
        str(engine),
        MigrateOptions(project=view.facts_for(str(engine))),
    )
    assert "accel.global_loss(loss).item()" in result.output


CLASSES = """
import torch

OPTIMIZERS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}


def get_optimizer_class(name):
    return {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}[name]


def from_table(name):
    return OPTIMIZERS[name]


def not_only_optimizers(name):
    return {"sgd": torch.optim.SGD, "net": torch.nn.Linear}[name]
"""


def test_optimizer_classes_looked_up_by_name_build_optimizers(tmp_path: Path) -> None:
    _write(tmp_path, "classes.py", CLASSES)
    probe = _write(tmp_path, "probe.py", "import classes\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["classes.get_optimizer_class"].returns == "optimizer class"
    assert table["classes.from_table"].returns == "optimizer class"
    assert table["classes.not_only_optimizers"].returns == ""
    head = (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "from classes import get_optimizer_class, not_only_optimizers\n"
        'TABLE = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}\n'
        "model = torch.nn.Linear(4, 2)\n"
        "loader = DataLoader(data, batch_size=8, shuffle=True)\n"
    )
    for build in (
        "TABLE[args.opt]",
        "getattr(torch.optim, args.opt)",
        "get_optimizer_class(args.opt)",
    ):
        call = f"{build}(model.parameters(), lr=0.1)"
        train = _write(tmp_path, "train.py", head + f"optimizer = {call}\n" + LOOP)
        out, _ = _migrate(train)
        assert "model = accel.prepare_model(torch.nn.Linear(4, 2))" in out, build
        assert f"optimizer = accel.prepare_optimizer({call})" in out, build
        train.write_text(out)
        assert not migrate_source(train.read_bytes(), str(train)).changed, build
    # a lookup that may give something else is not read as an optimizer
    call = "not_only_optimizers(args.opt)(model.parameters(), lr=0.1)"
    train = _write(tmp_path, "train.py", head + f"optimizer = {call}\n" + LOOP)
    out, _ = _migrate(train)
    assert "accel.prepare_optimizer" not in out
