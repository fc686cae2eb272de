"""The stand-in other processes get for main-process-only objects (files, loggers)."""

from __future__ import annotations

import os

from accel_migrate.runtime.main_only import MainProcessOnly


def test_stand_in_file_has_a_real_descriptor() -> None:
    """deep-person-reid's Logger.flush ends in ``os.fsync(self.file.fileno())``:
    on a process other than the main one ``self.file`` is the stand-in, and
    ``os.fsync`` needs an int (a TypeError at interpreter exit otherwise)."""
    stand_in = MainProcessOnly("open")
    fd = stand_in.fileno()
    assert isinstance(fd, int)
    os.fsync(fd)
    assert stand_in.fileno() == fd  # one descriptor, not one per call


def test_writes_through_the_descriptor_do_not_pile_up() -> None:
    stand_in = MainProcessOnly("open")
    fd = stand_in.fileno()
    os.write(fd, b"x" * 4096)
    assert os.fstat(fd).st_size == 4096
    assert os.fstat(stand_in.fileno()).st_size == 0  # emptied at each use


def test_stand_in_still_accepts_other_calls() -> None:
    stand_in = MainProcessOnly("open")
    assert stand_in.write("x") is stand_in
    assert stand_in.flush() is stand_in
    assert list(stand_in) == []
