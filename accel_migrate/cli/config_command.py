"""``accel-migrate config``: write the runtime settings into ``[tool.accel-migrate]``.

As ``accelerate config`` does, it asks on a terminal (each question with its
default) or takes the settings as flags. Every value is checked by the runtime's
own ``validated``, so the file holds only what a launched job accepts.

pyproject.toml belongs to the user: the file is edited as text, minimally (new
lines under the table's header, or a new table at the end), so other tables,
comments and formatting stay byte for byte. A setting the table already has is
replaced only with ``--force``. After the edit the file is parsed again and must
hold exactly the old data plus the new settings; otherwise nothing is written.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from .app import EXIT_OK, EXIT_USAGE, EXIT_WOULD_CHANGE
from .runtime_config import runtime_config

#: Asked on a terminal, and written with ``--yes``: the settings every job has.
ASKED = ("strategy", "precision", "batch_mode")
_HEADER = re.compile(
    r"""^[ \t]*\[[ \t]*tool[ \t]*\.[ \t]*(?:accel-migrate|"accel-migrate"|'accel-migrate')"""
    r"""[ \t]*\][ \t]*(?:#.*)?\r?$"""
)
_ANY_HEADER = re.compile(r"^[ \t]*\[")


class Refused(Exception):
    """Nothing is written; the message says why and what to do."""


def toml_key(key: str) -> str:
    return key.replace("_", "-")


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(json.dumps(str(v)) for v in value) + "]"
    return json.dumps(str(value))  # JSON's string escapes are TOML's


def _loads(text: str, path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise Refused(f"{path}: not valid TOML ({exc}); nothing written") from None


def _without_table(data: dict[str, Any]) -> dict[str, Any]:
    rest = dict(data)
    tool = dict(rest.pop("tool", {}))
    tool.pop("accel-migrate", None)
    if tool:
        rest["tool"] = tool
    return rest


def existing_table(text: str, path: Path) -> dict[str, Any]:
    table = _loads(text, path).get("tool", {}).get("accel-migrate", {})
    if not isinstance(table, dict):
        raise Refused(f"{path}: tool.accel-migrate is not a table; nothing written")
    return table


def _refuse_taken(
    keys: Iterable[str], table: dict[str, Any], path: Path, force: bool
) -> None:
    """Without ``--force``, no setting the table has already is written over."""
    taken = [toml_key(k) for k in keys if toml_key(k) in table]
    if taken and not force:
        raise Refused(
            f"{path}: [tool.accel-migrate] already sets {', '.join(taken)}; "
            f"--force replaces {'it' if len(taken) == 1 else 'them'} (the table's "
            "other keys are kept)"
        )


def edit(text: str, settings: dict[str, object], path: Path, force: bool) -> str:
    """``text`` with ``settings`` (validated values by setting name) in the table."""
    data = _loads(text, path)
    table = existing_table(text, path)
    _refuse_taken(settings, table, path, force)
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    header = next((i for i, line in enumerate(lines) if _HEADER.match(line)), None)
    written = {
        toml_key(k): f"{toml_key(k)} = {toml_value(v)}" for k, v in settings.items()
    }
    if header is None:
        if table:
            raise Refused(
                f"{path}: tool.accel-migrate is written as dotted keys or an inline "
                "table, which this command does not edit; add the settings by hand"
            )
        if text and not text.endswith(("\n", "\r")):
            text += newline
        block = newline.join(["[tool.accel-migrate]", *written.values()]) + newline
        new_text = text + (newline if text.strip() else "") + block
    else:
        end = next(
            (i for i in range(header + 1, len(lines)) if _ANY_HEADER.match(lines[i])),
            len(lines),
        )
        fresh = []
        for key, line in written.items():
            pattern = re.compile(
                rf"""^[ \t]*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')[ \t]*="""
            )
            at = next(
                (i for i in range(header + 1, end) if pattern.match(lines[i])), None
            )
            if at is None:
                fresh.append(line + newline)
            else:
                lines[at] = line + newline
        if not lines[header].endswith(("\n", "\r")):
            lines[header] += newline
        lines[header + 1 : header + 1] = fresh
        new_text = "".join(lines)
    # The edit must add the settings and change nothing else; a value spread over
    # several lines, say, would not survive the line edit and is caught here.
    try:
        new_data: dict[str, Any] | None = _loads(new_text, path)
    except Refused:
        new_data = None
    expected = {**table, **{toml_key(k): _plain(v) for k, v in settings.items()}}
    if (
        new_data is None
        or _without_table(new_data) != _without_table(data)
        or new_data.get("tool", {}).get("accel-migrate") != expected
    ):
        raise Refused(
            f"{path}: cannot edit [tool.accel-migrate] safely as text (a value over "
            "several lines?); nothing written, change it by hand"
        )
    return new_text


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def _check(key: str, value: object, source: str) -> object:
    module = runtime_config()
    try:
        return module.validated(key, value, source)
    except module.ConfigError as exc:
        raise Refused(str(exc)) from None


def _ask(key: str, default: object) -> object:
    module = runtime_config()
    choices = {
        "strategy": module.STRATEGIES,
        "precision": module.PRECISIONS,
        "batch_mode": module.BATCH_MODES,
    }[key]

    def accept(answer: str) -> object:
        try:
            return module.validated(key, answer.strip(), "your answer")
        except module.ConfigError as exc:
            raise click.UsageError(str(exc)) from None

    return click.prompt(
        f"{toml_key(key)} ({', '.join(choices)})",
        default=str(default),
        value_proc=accept,
    )


def run_config(
    flags: dict[str, object],
    *,
    file: str,
    yes: bool,
    force: bool,
    interactive: bool | None = None,
) -> int:
    module = runtime_config()
    path = Path(file)
    try:
        # Bytes, decoded: reading as text would turn CRLF into LF.
        text = path.read_bytes().decode("utf-8") if path.exists() else ""
        given = {
            key: _check(key, value, f"--{toml_key(key)}")
            for key, value in flags.items()
            if value is not None
        }
        if interactive is None:
            interactive = not yes and sys.stdin.isatty()
        keys = dict.fromkeys(
            [*(ASKED if interactive or yes else ()), *given]
        )  # ordered, unique
        if not keys:
            raise Refused(
                "nothing to write: give the settings as flags (--strategy fsdp "
                "--precision bf16 ...), --yes for the defaults, or run it on a terminal "
                "to be asked"
            )
        table = existing_table(text, path)
        _refuse_taken(keys, table, path, force)
        defaults = module.RuntimeConfig()
        settings: dict[str, object] = {}
        for key in [k for k in module.setting_keys() if k in keys]:
            if key in given:
                settings[key] = given[key]
            elif interactive:
                current = table.get(toml_key(key), getattr(defaults, key))
                settings[key] = _ask(key, current)
            else:
                # --yes answers as Enter does on a terminal: the table's value
                # first (with --force, a setting not given is kept, not reset).
                settings[key] = table.get(toml_key(key), getattr(defaults, key))
        new_text = edit(text, settings, path, force)
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: {path}: cannot read: {exc}", file=sys.stderr)
        return EXIT_USAGE
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in settings.items()]
    if interactive:
        click.echo("[tool.accel-migrate]\n" + "\n".join(lines))
        if not click.confirm(f"Write these to {path}?", default=True):
            click.echo("nothing written")
            return EXIT_WOULD_CHANGE
    return _write(path, text, new_text, lines)


def _write(path: Path, old: str, new: str, lines: list[str]) -> int:
    from .files import FileError, write_atomic

    data = new.encode("utf-8")
    try:
        if path.exists():
            write_atomic(str(path), data, expected=old.encode("utf-8"))
        else:
            with open(path, "xb") as handle:
                handle.write(data)
    except (FileError, OSError) as exc:
        print(f"error: {path}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    where = os.path.relpath(path) if not path.is_absolute() else str(path)
    print(f"wrote to {where} [tool.accel-migrate]:", *lines, sep="\n  ")
    return EXIT_OK
