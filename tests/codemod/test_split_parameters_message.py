"""AM004's finding for a model whose parameters reach the optimizer through a
call that takes the model itself and returns its parameters in groups
(ZhaoJ9014/face.evoLVe's ``backbone_paras_only_bn, backbone_paras_wo_bn =
separate_irse_bn_paras(BACKBONE)``, then ``optim.SGD([{'params':
backbone_paras_wo_bn, ...}, {'params': backbone_paras_only_bn}])``): the
finding said the parameters reach no optimizer built in the file, which is
false; it names the call instead (the trials' face_evolve_arcface_head_t18b)."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
import torch.optim as optim
from util import separate_bn_paras

BACKBONE = build_backbone()
paras_only_bn, paras_wo_bn = separate_bn_paras(BACKBONE)
OPTIMIZER = optim.SGD(
    [{"params": paras_wo_bn, "weight_decay": 5e-4}, {"params": paras_only_bn}],
    lr=0.1,
)
for epoch in range(2):
    BACKBONE.train()
    for inputs, labels in train_loader:
        loss = torch.nn.functional.cross_entropy(BACKBONE(inputs), labels)
        OPTIMIZER.zero_grad()
        loss.backward()
        OPTIMIZER.step()
"""


def test_parameters_split_by_a_call_are_named() -> None:
    result = migrate_source(SCRIPT.encode(), "main.py")
    assert not result.changed
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert "reach no optimizer" not in blocking.message
    assert (
        "its parameters reach an optimizer only through "
        "`separate_bn_paras(BACKBONE)` (line 6)" in blocking.message
    )


def test_a_single_name_bound_by_the_call_is_followed() -> None:
    source = SCRIPT.replace(
        "paras_only_bn, paras_wo_bn = separate_bn_paras(BACKBONE)",
        "paras_wo_bn = trainable_paras(BACKBONE)\nparas_only_bn = []",
    )
    result = migrate_source(source.encode(), "main.py")
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert "only through `trainable_paras(BACKBONE)` (line 6)" in blocking.message


def test_a_call_whose_result_reaches_no_optimizer_keeps_the_sentence() -> None:
    source = SCRIPT.replace(
        "paras_only_bn, paras_wo_bn = separate_bn_paras(BACKBONE)",
        "stats = count_paras(BACKBONE)\nparas_only_bn, paras_wo_bn = [], []",
    )
    result = migrate_source(source.encode(), "main.py")
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert "its parameters reach no optimizer built in this file" in blocking.message
