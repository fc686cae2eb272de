"""accel_migrate.cli.files: finding, checking and safely writing files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from accel_migrate.cli import files
from accel_migrate.cli.files import (
    FileError,
    discover,
    read_source,
    write_atomic,
)
from accel_migrate.codemod.findings import MigrationError
from accel_migrate.codemod.source import check_decodable

pytestmark = pytest.mark.in_tmp


def touch(*names: str) -> None:
    for name in names:
        path = Path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


# --- discover --------------------------------------------------------------------


def test_discover_walks_folders_sorted_and_skips_tool_and_hidden_folders() -> None:
    touch(
        "src/z.py",
        "src/a.py",
        "src/m/b.py",
        "src/m/n/c.py",
        "src/.git/hooks/x.py",
        "src/.cache/x.py",
        "src/venv/x.py",
        "src/node_modules/x.py",
        "src/readme.md",
        "src/script",
    )
    assert list(discover(["src"])) == [
        "src/a.py",
        "src/m/b.py",
        "src/m/n/c.py",
        "src/z.py",
    ]


def test_discover_keeps_the_order_of_the_arguments_and_files_as_given() -> None:
    touch("b/x.py", "a/y.py", "script")
    # a file named directly is taken whatever its name; missing paths are passed on
    assert list(discover(["b", "script", "a", "missing.py"])) == [
        "b/x.py",
        "script",
        "a/y.py",
        "missing.py",
    ]


def test_discover_yields_each_file_once() -> None:
    touch("pkg/a.py", "pkg/b.py")
    os.symlink("pkg/a.py", "link.py")
    found = list(discover(["pkg/a.py", "pkg", "./pkg/b.py", "link.py", "pkg/a.py"]))
    assert found == ["pkg/a.py", "pkg/b.py"]


# --- read_source and check_decodable -----------------------------------------------


def test_read_source_names_the_path_in_its_errors() -> None:
    Path("folder").mkdir()
    with pytest.raises(FileError, match=r"^missing\.py:1:1: no such file$"):
        read_source("missing.py")
    with pytest.raises(FileError, match=r"^folder:1:1: is a directory$"):
        read_source("folder")


@pytest.mark.parametrize(
    "data",
    [
        b"x = 'caf\xc3\xa9'\n",
        b"\xef\xbb\xbfx = 'caf\xc3\xa9'\n",
        b"# -*- coding: latin-1 -*-\nx = 'caf\xe9'\n",
        b"#!/usr/bin/env python\n# coding=cp1252\nx = '\x80'\n",
        b"",
    ],
    ids=["utf-8", "utf-8-bom", "latin-1-cookie", "cookie-on-line-2", "empty"],
)
def test_check_decodable_accepts_what_python_accepts(data: bytes) -> None:
    compile(data, "f.py", "exec")  # the premise: Python reads it
    check_decodable("f.py", data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"# caf\xe9\n", r"^f\.py:1:6: cannot decode: byte 0xe9 is not valid utf-8; "),
        (
            b"x = 1\n\ny = 'caf\xe9'\n",
            r"^f\.py:3:9: cannot decode: byte 0xe9 is not valid utf-8; ",
        ),
        (
            b"# coding: ascii\nx = 'caf\xe9'\n",
            r"^f\.py:2:9: cannot decode: byte 0xe9 is not valid ascii$",
        ),
        (b"# coding: nope\nx = 1\n", r"^f\.py:1:1: cannot decode: unknown encoding"),
    ],
    ids=["line-1", "line-3", "ascii-cookie", "unknown-cookie"],
)
def test_check_decodable_says_where_and_why(data: bytes, message: str) -> None:
    # (``python f.py`` refuses each of these; ``compile`` lets some pass in comments)
    with pytest.raises(MigrationError, match=message):
        check_decodable("f.py", data)


# --- write_atomic ------------------------------------------------------------------


def test_write_atomic_replaces_the_content_and_keeps_the_mode() -> None:
    target = Path("f.py")
    target.write_bytes(b"old\n")
    target.chmod(0o751)
    write_atomic("f.py", b"new\r\n\xe9")
    assert target.read_bytes() == b"new\r\n\xe9"
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert sorted(os.listdir(".")) == ["f.py"]


def test_write_atomic_writes_through_a_link_and_keeps_the_link() -> None:
    Path("real.py").write_bytes(b"old\n")
    os.symlink("real.py", "link.py")
    write_atomic("link.py", b"new\n")
    assert os.path.islink("link.py")
    assert Path("real.py").read_bytes() == b"new\n"


def test_write_atomic_refuses_a_read_only_file() -> None:
    target = Path("f.py")
    target.write_bytes(b"old\n")
    target.chmod(0o444)
    with pytest.raises(
        FileError, match=r"^f\.py:1:1: cannot write: file is read-only$"
    ):
        write_atomic("f.py", b"new\n")
    assert target.read_bytes() == b"old\n"
    assert sorted(os.listdir(".")) == ["f.py"]


def test_write_atomic_leaves_the_old_file_and_no_temporary_file_when_it_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = Path("f.py")
    target.write_bytes(b"old\n")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", broken_replace)
    with pytest.raises(FileError, match=r"^f\.py:1:1: cannot write: No space left"):
        write_atomic("f.py", b"new\n")
    assert target.read_bytes() == b"old\n"
    assert sorted(os.listdir(".")) == ["f.py"]


def test_write_atomic_cleans_up_after_an_interrupt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Path("f.py").write_bytes(b"old\n")

    def interrupted(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic("f.py", b"new\n")
    assert Path("f.py").read_bytes() == b"old\n"
    assert sorted(os.listdir(".")) == ["f.py"]


def test_write_atomic_on_a_missing_file_is_a_file_error() -> None:
    with pytest.raises(FileError, match=r"^gone\.py:1:1: cannot write: "):
        write_atomic("gone.py", b"new\n")
    assert not os.path.exists("gone.py")
