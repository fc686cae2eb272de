"""``[tool.accel-migrate]`` for the migrate command: found, read, checked, merged
with the command line (the command line wins).

Light: standard library only (``--help`` must not pay for libcst, rich or torch).
The runtime reads the same table for ``strategy``, ``precision``, ``batch-mode``
and ``timeout`` when a migrated script is launched; here they are only checked, so
that a typo fails in CI rather than on the cluster.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

#: Folders never worth walking into (gitignore syntax). ``exclude`` replaces this
#: list; ``extend-exclude`` adds to it.
DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".*/",
    "__pycache__/",
    "venv/",
    "env/",
    "node_modules/",
    "build/",
    "dist/",
    "site-packages/",
)

# The runtime's choices (accel_migrate.runtime.config; a test keeps them equal).
STRATEGIES = ("auto", "single", "ddp", "fsdp", "deepspeed", "hsdp")
PRECISIONS = ("fp32", "bf16", "fp16")
BATCH_MODES = ("global", "per-device")

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CODE = re.compile(r"[A-Z]+[0-9]*\Z")


class ConfigError(ValueError):
    """A setting that cannot be used; the message names where it came from."""


@dataclass(frozen=True)
class Settings:
    """What the migrate command runs with."""

    select: frozenset[str] | None = None
    ignore: frozenset[str] = frozenset()
    #: Codes run as well as ``select``'s (all rules run when ``select`` is None).
    extend_select: frozenset[str] = frozenset()
    #: ``[tool.accel-migrate.per-file-ignores]``: (glob, codes), relative to ``base``.
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    #: Added patterns, each with the folder it is relative to.
    extend_exclude: tuple[tuple[Path, str], ...] = ()
    respect_gitignore: bool = True
    alias: str = "accel"
    strategy: str | None = None
    precision: str | None = None
    #: The pyproject.toml (or --config file) read, if any.
    source: Path | None = None
    #: The folder ``exclude`` patterns are relative to.
    base: Path = field(default_factory=Path.cwd)

    def exclusions(self) -> list[tuple[Path, tuple[str, ...]]]:
        """(base folder, patterns), in the order they apply (later ones win)."""
        groups = [(self.base, self.exclude)]
        for base, pattern in self.extend_exclude:
            groups.append((base, (pattern,)))
        return groups

    @property
    def selected(self) -> frozenset[str] | None:
        """``select`` with ``extend-select`` added (None: every rule)."""
        if self.select is None:
            return None
        return self.select | self.extend_select


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start`` (as the runtime finds it)."""
    start = start.resolve()
    if start.is_file():
        start = start.parent
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def common_base(paths: Sequence[str]) -> Path:
    """The folder that holds every path (the working folder for stdin)."""
    real = [os.path.abspath(p) for p in paths if p != "-"]
    if not real:
        return Path.cwd()
    try:
        base = os.path.commonpath(real)
    except ValueError:  # different drives
        return Path.cwd()
    return Path(base if os.path.isdir(base) else os.path.dirname(base))


def _load_toml(path: Path) -> dict[str, object]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def read_table(path: Path, *, explicit: bool) -> dict[str, object]:
    """``[tool.accel-migrate]`` of ``path``. A ``--config`` file that is not a
    pyproject.toml may also hold the settings at its top level."""
    data = _load_toml(path)
    tool = data.get("tool")
    table = tool.get("accel-migrate") if isinstance(tool, dict) else None
    if table is None and explicit and path.name != "pyproject.toml":
        table = data
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.accel-migrate] must be a table")
    return table


_KEYS = {
    "select",
    "extend-select",
    "ignore",
    "per-file-ignores",
    "exclude",
    "extend-exclude",
    "respect-gitignore",
    "alias",
    "strategy",
    "precision",
    "batch-mode",
    "timeout",
}


def _strings(value: object, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} in {where} must be a list of strings")
    return tuple(value)


def _codes(values: Sequence[str], key: str, where: str) -> frozenset[str]:
    codes = frozenset(v.strip().upper() for v in values if v.strip())
    bad = sorted(c for c in codes if not _CODE.match(c))
    if bad:
        raise ConfigError(f"{key} in {where}: {', '.join(bad)} is not a rule code")
    return codes


def _choice(value: object, key: str, where: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ConfigError(
            f"{key}={value!r} in {where} is not one of: {', '.join(choices)}"
        )
    return str(value)


def settings_from_table(
    table: Mapping[str, object], where: str, base: Path
) -> Settings:
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(
            f"unknown key{'s' if len(unknown) > 1 else ''} in {where}: "
            f"{', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})"
        )
    settings = Settings(base=base)
    if "select" in table:
        settings = replace(
            settings,
            select=_codes(_strings(table["select"], "select", where), "select", where),
        )
    if "ignore" in table:
        settings = replace(
            settings,
            ignore=_codes(_strings(table["ignore"], "ignore", where), "ignore", where),
        )
    if "extend-select" in table:
        values = _strings(table["extend-select"], "extend-select", where)
        settings = replace(
            settings, extend_select=_codes(values, "extend-select", where)
        )
    if "per-file-ignores" in table:
        from .codes import per_file_ignores

        entries = per_file_ignores(table["per-file-ignores"], where, base)
        for pattern, codes in entries:
            _codes(sorted(codes), f"per-file-ignores {pattern!r}", where)
        settings = replace(settings, per_file_ignores=entries)
    if "exclude" in table:
        settings = replace(
            settings, exclude=_strings(table["exclude"], "exclude", where)
        )
    if "extend-exclude" in table:
        patterns = _strings(table["extend-exclude"], "extend-exclude", where)
        settings = replace(settings, extend_exclude=tuple((base, p) for p in patterns))
    if "respect-gitignore" in table:
        value = table["respect-gitignore"]
        if not isinstance(value, bool):
            raise ConfigError(f"respect-gitignore in {where} must be true or false")
        settings = replace(settings, respect_gitignore=value)
    if "alias" in table:
        alias = table["alias"]
        if not isinstance(alias, str) or not _IDENTIFIER.match(alias):
            raise ConfigError(f"alias={alias!r} in {where} is not a Python name")
        settings = replace(settings, alias=alias)
    if "strategy" in table:
        settings = replace(
            settings,
            strategy=_choice(table["strategy"], "strategy", where, STRATEGIES),
        )
    if "precision" in table:
        settings = replace(
            settings,
            precision=_choice(table["precision"], "precision", where, PRECISIONS),
        )
    if "batch-mode" in table:
        _choice(table["batch-mode"], "batch-mode", where, BATCH_MODES)
    if "timeout" in table:
        timeout = table["timeout"]
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise ConfigError(f"timeout={timeout!r} in {where} is not a number")
        if timeout <= 0:
            raise ConfigError(f"timeout={timeout!r} in {where} must be positive")
    return settings


def load_settings(
    paths: Sequence[str],
    *,
    config: str | None = None,
    select: frozenset[str] | None = None,
    ignore: frozenset[str] | None = None,
    extend_select: frozenset[str] | None = None,
    exclude: tuple[str, ...] | None = None,
    extend_exclude: tuple[str, ...] | None = None,
    respect_gitignore: bool | None = None,
    alias: str | None = None,
    known_codes: Callable[[], frozenset[str]] | None = None,
) -> Settings:
    """The configuration file's settings, with the command line's on top.

    With ``known_codes`` (called only when there is a code to check), every rule
    code (of the file and of the command line) must name a rule: ConfigError
    otherwise."""
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise ConfigError(f"--config {config}: no such file")
        table = read_table(path, explicit=True)
        where = str(path)
    else:
        found = find_pyproject(common_base(paths))
        path = found  # type: ignore[assignment]
        table = read_table(found, explicit=False) if found is not None else {}
        where = f"{found} [tool.accel-migrate]"
    base = path.resolve().parent if path is not None else Path.cwd()
    settings = replace(
        settings_from_table(table, where, base),
        source=path if table or config is not None else None,
    )
    if known_codes is not None:
        from .codes import check

        for codes, place in (
            (settings.select, f"select in {where}"),
            (settings.extend_select, f"extend-select in {where}"),
            (settings.ignore, f"ignore in {where}"),
            *(
                (codes, f"per-file-ignores {pattern!r} in {where}")
                for pattern, codes in settings.per_file_ignores
            ),
            (select, "--select"),
            (extend_select, "--extend-select"),
            (ignore, "--ignore"),
        ):
            if codes:  # the rules are imported only to check a code
                check(codes, place, known_codes())
    if select is not None:
        settings = replace(settings, select=select)
    if ignore is not None:
        settings = replace(settings, ignore=ignore)
    if extend_select is not None:
        settings = replace(
            settings, extend_select=settings.extend_select | extend_select
        )
    if exclude is not None:
        settings = replace(settings, exclude=exclude, base=Path.cwd())
    if extend_exclude is not None:
        cwd = Path.cwd()
        settings = replace(
            settings,
            extend_exclude=(
                *settings.extend_exclude,
                *((cwd, p) for p in extend_exclude),
            ),
        )
    if respect_gitignore is not None:
        settings = replace(settings, respect_gitignore=respect_gitignore)
    if alias is not None:
        if not _IDENTIFIER.match(alias):
            raise ConfigError(f"--alias {alias!r} is not a Python name")
        settings = replace(settings, alias=alias)
    return settings
