"""black's settings for a file, as black itself finds them.

Light to import: black is imported only to build a mode (``black_mode``); the
command line's cache keys results on the bytes the settings are read from
(``black_settings_key``) without it.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any


def black_mode(path: str) -> Any:
    """black's mode for the file ``path`` (a ``black.Mode``), or None where its
    configuration cannot be read or asks for what the string API cannot do.

    A name that is not a file's (``<string>``, ``<stdin>``) is read from the
    working folder, as black reads stdin without ``--stdin-filename``.
    """
    folder = Path.cwd() if path.startswith("<") else Path(path).absolute().parent
    return _mode_of_folder(str(folder), path.endswith(".pyi"))


@lru_cache(maxsize=256)
def _mode_of_folder(folder: str, pyi: bool) -> Any:
    import black
    from black.files import find_pyproject_toml, parse_pyproject_toml

    # black's own search: the nearest folder with .git, .hg or a pyproject.toml
    # with [tool.black], then the user-level configuration.
    try:
        found = find_pyproject_toml((folder,))
        config = parse_pyproject_toml(found) if found is not None else {}
        return _mode(black, config, pyi)
    except Exception:  # black would stop on it: a broken file, an unknown value
        return None


def black_settings_key(path: str) -> str:
    """What black's mode for ``path`` is read from, for a cache key, without
    importing black: the bytes of each pyproject.toml from the file's folder up
    to black's project root (.git, .hg, or one that mentions [tool.black]). It
    may say two settings differ where black reads them the same (a cache miss),
    never the reverse; black's user-level configuration is not in it."""
    folder = Path.cwd() if path.startswith("<") else Path(path).absolute().parent
    return _settings_key_of_folder(str(folder))


@lru_cache(maxsize=256)
def _settings_key_of_folder(folder: str) -> str:
    parts: list[str] = []
    for directory in (Path(folder), *Path(folder).parents):
        pyproject = directory / "pyproject.toml"
        try:
            text = pyproject.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = None
        if text is not None:
            parts.append(text)
        if (
            (text is not None and "tool.black" in text)
            or (directory / ".git").exists()
            or (directory / ".hg").is_dir()
        ):
            break
    return "\0\0".join(parts)


def _mode(black: Any, config: dict[str, Any], pyi: bool) -> Any:
    if config.get("skip_source_first_line") or config.get("ipynb"):
        return None  # done by black's file mode, around format_str
    versions = config.get("target_version", [])
    if isinstance(versions, str):
        versions = [versions]
    return black.Mode(
        target_versions={black.TargetVersion[v.upper()] for v in versions},
        line_length=int(config.get("line_length", black.DEFAULT_LINE_LENGTH)),
        string_normalization=not config.get("skip_string_normalization", False),
        magic_trailing_comma=not config.get("skip_magic_trailing_comma", False),
        is_pyi=pyi or bool(config.get("pyi", False)),
        preview=bool(config.get("preview", False)),
        unstable=bool(config.get("unstable", False)),
        enabled_features={
            black.Preview[name] for name in config.get("enable_unstable_feature", [])
        },
    )
