"""AM025 follows the names computed before the loop from a tensor made with the
configured batch size (``batch_size_derived``): rrmina's fast neural style
hands ``style_tensor.expand([BATCH_SIZE, C, H, W])`` to the feature net, keeps
the Gram matrices in a dict and compares them whole with every batch's (a size
error at world size 2: reported); pytorch/examples' script slices them to the
step's rows first (``gm_s[:n_batch]``: not reported)."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SCRIPT = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

BATCH_SIZE = 4


def gram(t):
    b, c, h, w = t.shape
    x = t.view(b, c, h * w)
    return torch.bmm(x, x.transpose(1, 2)) / (c * h * w)


class Features(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        for p in self.parameters():
            p.requires_grad = False

    def forward(self, x):
        return {{"relu1": torch.relu(self.conv(x))}}


def train(dataset, style_tensor):
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True)
    net = nn.Conv2d(3, 3, 3, padding=1)
    VGG = Features()
    optimizer = torch.optim.Adam(net.parameters())
    B, C, H, W = style_tensor.shape
{made}
    for x, _ in loader:
        optimizer.zero_grad()
        feats = VGG(net(x))
        loss = 0
{use}
        loss.backward()
        optimizer.step()
"""

DICT_MADE = """    style_features = VGG(style_tensor.expand([BATCH_SIZE, C, H, W]))
    style_gram = {}
    for key, value in style_features.items():
        style_gram[key] = gram(value)"""

DICT_USE = """        for key, value in feats.items():
            loss = loss + nn.MSELoss()(gram(value), style_gram[key])"""

SLICED_USE = """        n = len(x)
        for key, value in feats.items():
            loss = loss + nn.MSELoss()(gram(value), style_gram[key][:n])"""

LIST_MADE = """    style = style_tensor.repeat(BATCH_SIZE, 1, 1, 1)
    grams = [gram(y) for y in VGG(style).values()]"""

ZIP_USE = """        for g_y, g_s in zip([gram(y) for y in feats.values()], grams):
            loss = loss + nn.MSELoss()(g_y, g_s)"""

ZIP_SLICED_USE = """        for g_y, g_s in zip([gram(y) for y in feats.values()], grams):
            loss = loss + nn.MSELoss()(g_y, g_s[: len(x)])"""


def _am025(made: str, use: str) -> list[str]:
    result = migrate_source(SCRIPT.format(made=made, use=use), "train.py")
    return [
        f.message
        for f in result.findings
        if f.code == "AM025" and f.status == "needs-review"
    ]


def test_grams_of_an_expanded_style_image_compared_whole_are_reported() -> None:
    (message,) = _am025(DICT_MADE, DICT_USE)
    assert message.startswith("`style_tensor.expand([BATCH_SIZE, C, H, W])` is made")
    assert "`style_gram`, computed from it before the loop" in message
    assert "style_gram[key]" in message


def test_grams_cut_to_the_step_rows_are_not_reported() -> None:
    assert _am025(DICT_MADE, SLICED_USE) == []


def test_a_kept_repeat_followed_through_a_list_and_a_zip_in_the_step() -> None:
    (message,) = _am025(LIST_MADE, ZIP_USE)
    assert "`grams`, computed from it before the loop" in message
    assert _am025(LIST_MADE, ZIP_SLICED_USE) == []
