"""Finding the files to migrate, reading them, and writing them back safely.

Folders are walked in sorted order. An entry is skipped when an ``exclude`` /
``extend-exclude`` pattern or a ``.gitignore`` (from the repository root down, and
``.git/info/exclude``) ignores it. Links to folders are never followed (their
targets inside the tree are walked anyway; outside it they are not ours; and a link
to a parent would loop); links to files are followed when the file lies inside the
tree. Files named on the command line are taken as given, unless ``force_exclude``.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from .config import Settings
from .ignore import PatternSet, ignored

_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


class FileError(Exception):
    """A file that cannot be read or written; the message names it."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(path, message)
        self.path = path
        self.message = message

    def __str__(self) -> str:
        return f"{self.path}:1:1: {self.message}"


def discover(
    paths: Sequence[str],
    settings: Settings | None = None,
    *,
    force_exclude: bool = False,
) -> Iterator[str]:
    """The Python files named by ``paths``: files as given, folders walked.

    A file named twice (directly, through a folder, or through a link) comes
    once, the first time.
    """
    walker = _Walker(settings or Settings())
    seen: set[str] = set()
    for raw in paths:
        if force_exclude and walker.excluded_argument(raw):
            continue
        found = walker.walk(raw) if os.path.isdir(raw) else iter([raw])
        for name in found:
            key = os.path.realpath(name)
            if key not in seen:
                seen.add(key)
                yield name


class _Walker:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.excludes = [
            PatternSet(str(base), patterns) for base, patterns in settings.exclusions()
        ]
        self._gitignore: dict[str, PatternSet | None] = {}

    # -- .gitignore files -------------------------------------------------------------
    def _ignore_file(self, folder: str) -> PatternSet | None:
        if folder not in self._gitignore:
            self._gitignore[folder] = PatternSet.from_file(
                os.path.join(folder, ".gitignore")
            )
        return self._gitignore[folder]

    def _chain(self, folder: str) -> list[PatternSet]:
        """The ignore files that apply to ``folder``'s entries, shallowest first."""
        if not self.settings.respect_gitignore:
            return []
        folder = os.path.abspath(folder)
        top = _repository_root(folder)
        chain: list[PatternSet] = []
        if top is not None:
            info = PatternSet.from_file(os.path.join(top, ".git", "info", "exclude"))
            if info is not None:
                info.base = top
                chain.append(info)
            parts = Path(folder).relative_to(top).parts
            current = top
            for part in ("", *parts):
                current = os.path.join(current, part) if part else current
                found = self._ignore_file(current)
                if found is not None:
                    chain.append(found)
        else:
            found = self._ignore_file(folder)
            if found is not None:
                chain.append(found)
        return chain

    def _skipped(self, path: str, is_dir: bool, chain: list[PatternSet]) -> bool:
        return ignored(path, is_dir, self.excludes) or ignored(path, is_dir, chain)

    def excluded_argument(self, raw: str) -> bool:
        """``--force-exclude``: is this path, or a folder above it, excluded?"""
        path = os.path.abspath(raw)
        is_dir = os.path.isdir(path)
        parents = [p for p in Path(path).parents if p != Path(p.anchor)]
        for folder in reversed(parents):
            if self._skipped(str(folder), True, self._chain(str(folder.parent))):
                return True
        return self._skipped(path, is_dir, self._chain(os.path.dirname(path)))

    # -- the walk -----------------------------------------------------------------------
    def walk(self, root: str) -> Iterator[str]:
        """The Python files under ``root``, in sorted order of their path parts."""
        tree = os.path.realpath(root)
        links: list[str] = []
        stack = [self._entries(root, self._chain(root), tree, links)]
        while stack:
            try:
                path, chain = next(stack[-1])
            except StopIteration:
                stack.pop()
                continue
            if chain is None:
                yield path
            else:
                stack.append(self._entries(path, chain, tree, links))
        # Links last: a file reached both ways is reported under its own name.
        yield from links

    def _entries(
        self, folder: str, chain: list[PatternSet], tree: str, links: list[str]
    ) -> Iterator[tuple[str, list[PatternSet] | None]]:
        """``folder``'s Python files (chain None) and subfolders (with the ignore
        files that apply inside them), in name order; links to files in ``links``."""
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            path = os.path.join(folder, entry.name)
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if not self._skipped(path, True, chain):
                    inner = (
                        self._ignore_file(path)
                        if self.settings.respect_gitignore
                        else None
                    )
                    yield path, ([*chain, inner] if inner is not None else chain)
            elif entry.name.endswith(".py") and not self._skipped(path, False, chain):
                if is_link:
                    if _inside_or_unresolvable(path, tree):
                        links.append(path)
                    continue  # (a link out of the tree, or to a folder: skipped)
                yield path, None


def _inside_or_unresolvable(path: str, tree: str) -> bool:
    try:
        target = os.path.realpath(path, strict=True)
    except OSError:  # broken, or a loop: reading it reports the error
        return True
    if os.path.isdir(target):
        return False
    return target == tree or target.startswith(tree.rstrip(os.sep) + os.sep)


def _repository_root(folder: str) -> str | None:
    for candidate in (folder, *map(str, Path(folder).parents)):
        if os.path.exists(os.path.join(candidate, ".git")):
            return candidate
    return None


def read_source(path: str) -> bytes:
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise FileError(path, "is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise FileError(path, "not a regular file")
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        message = "broken symbolic link" if os.path.islink(path) else "no such file"
        raise FileError(path, message) from None
    except IsADirectoryError:
        raise FileError(path, "is a directory") from None
    except OSError as exc:
        raise FileError(path, f"cannot read: {exc.strerror or exc}") from None


def write_atomic(path: str, data: bytes, *, expected: bytes | None = None) -> None:
    """Replace ``path`` with ``data`` in one step, keeping its permission bits.

    The new content goes to a temporary file in the same folder, which is then
    renamed over the original: a crash or an interrupt leaves either the old file
    or the new one, never half of it. With ``expected``, the file must still hold
    exactly those bytes (it was not changed or deleted since it was read).
    """
    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
        # No write bit means read-only, also for root, whom os.access lets write.
        if not mode & _WRITE_BITS or not os.access(target, os.W_OK):
            raise FileError(path, "cannot write: file is read-only")
        if expected is not None:
            with open(target, "rb") as handle:
                if handle.read() != expected:
                    raise FileError(
                        path, "changed while it was being migrated; not written"
                    )
        handle_fd, tmp = tempfile.mkstemp(
            prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=folder
        )
    except FileError:
        raise
    except FileNotFoundError:
        raise FileError(path, "cannot write: the file was deleted") from None
    except OSError as exc:
        raise FileError(path, f"cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(handle_fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise FileError(path, f"cannot write: {exc.strerror or exc}") from None
        raise
