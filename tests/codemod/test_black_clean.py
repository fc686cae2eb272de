"""``surely_not_black_clean``: a file it calls not black-clean is one black
changes, and it never calls a black-clean file so (``codemod/black_clean.py``)."""

from __future__ import annotations

import black
import pytest

from accel_migrate.codemod.black_clean import surely_not_black_clean
from tests.conftest import ROOT

MODE = black.Mode()
LONG = "x" * 60


@pytest.mark.parametrize(
    "source",
    [
        "x = 'abc'\n",
        "x = b''\n",
        "x = r'a.b'\n",
        "x = 1  #comment\n",
        "if x:\n  y = 1\n",
        "if x:\n\ty = 1\n",
        f"value = call({LONG!r}.upper(), other_argument_name, third_argument_name)\n".replace(
            "'", '"'
        ),
        "def f():\n    for i in range(3):\n        if i:\n"
        f"            total = compute(first_argument, second_argument, {LONG!r})\n".replace(
            "'", '"'
        ),
    ],
)
def test_what_it_calls_not_black_clean_black_changes(source: str) -> None:
    assert surely_not_black_clean(source, MODE)
    assert black.format_str(source, mode=MODE) != source


@pytest.mark.parametrize(
    "source",
    [
        'x = "abc"\n',
        "x = 'say \"hi\"'\n",  # black keeps the quotes that need no escapes
        "x = 'it\\'s'\n",  # escapes: black decides
        "#!/usr/bin/env python\nx = 1  # comment\n#: a Sphinx comment\n",
        "x = 'abc'  # fmt: skip\n",
        # too long, but nothing black can wrap
        f"# {LONG * 2}\n",
        f'x = "{LONG * 2}"\n',
    ],
)
def test_what_it_leaves_to_black(source: str) -> None:
    assert not surely_not_black_clean(source, MODE)


def test_no_black_clean_file_of_this_repository_is_called_otherwise() -> None:
    """The package and its tests are black-clean (the lint step checks it)."""
    files = sorted((ROOT / "accel_migrate").rglob("*.py"))
    files += sorted((ROOT / "tests").rglob("*.py"))
    assert len(files) > 100
    called = [
        p
        for p in files
        if surely_not_black_clean(p.read_text(), MODE)
        and black.format_str(p.read_text(), mode=MODE) == p.read_text()
    ]
    assert called == []


def test_a_shorter_line_length_is_read_from_the_mode() -> None:
    source = "value = call(first_argument_name, second_argument_name)\n"
    assert not surely_not_black_clean(source, MODE)
    narrow = black.Mode(line_length=40)
    assert surely_not_black_clean(source, narrow)
    assert black.format_str(source, mode=narrow) != source


def test_string_normalisation_off_keeps_single_quotes() -> None:
    assert not surely_not_black_clean(
        "x = 'abc'\n", black.Mode(string_normalization=False)
    )
