"""Runtime configuration: which strategy, precision and batch mode a run uses.

Precedence, highest first: the flags of ``accel-migrate launch`` (which it passes
on as the environment variables below), environment variables set by the user,
``[tool.accel-migrate]`` in the nearest ``pyproject.toml``, then the defaults.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal, get_args

StrategyName = Literal["auto", "single", "ddp", "fsdp", "deepspeed", "hsdp"]
PrecisionName = Literal["fp32", "bf16", "fp16"]
BatchMode = Literal["global", "per-device"]
#: FSDP units: one per repeated block plus the root ("blocks"), or the root only.
FsdpWrap = Literal["blocks", "root"]

STRATEGIES: tuple[str, ...] = get_args(StrategyName)
#: Why no strategy name claims TPUs (``--strategy tpu``, ``strategy = "xla"``).
NO_TPU = (
    "TPU/XLA is not supported (torch-xla's last release pins torch 2.9; "
    "see docs/runtime.md)"
)
PRECISIONS: tuple[str, ...] = get_args(PrecisionName)
BATCH_MODES: tuple[str, ...] = get_args(BatchMode)
FSDP_WRAPS: tuple[str, ...] = get_args(FsdpWrap)
#: DeepSpeed ZeRO stages: 1 shards optimizer state, 2 also gradients, 3 also parameters.
ZERO_STAGES: tuple[int, ...] = (1, 2, 3)

ENV_PREFIX = "ACCEL_MIGRATE_"
#: Set by the launcher next to the settings it passes on: for each, the value it
#: set and where that value came from (its flag, pyproject.toml, the default), so
#: that messages in the processes name that, not the variable that carried it.
SOURCES_VARIABLE = ENV_PREFIX + "SOURCES"


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message says what was asked."""


@dataclass(frozen=True)
class RuntimeConfig:
    strategy: StrategyName = "auto"
    precision: PrecisionName = "fp32"
    batch_mode: BatchMode = "global"
    #: Seconds a collective may wait before the job fails instead of hanging.
    timeout: float = 1800.0
    #: BatchNorm in train mode normalises by the global batch (global batch mode,
    #: more than one process); off: by each process's own samples (faster).
    sync_batchnorm: bool = True
    #: Under FSDP: ``fully_shard`` each repeated block, then the root ("blocks"),
    #: or the root only ("root"). See ``strategies/fsdp_units.py``.
    fsdp_wrap: FsdpWrap = "blocks"
    #: Class names that are FSDP blocks, instead of the repeated children of
    #: ModuleList/Sequential containers.
    fsdp_block_classes: tuple[str, ...] = ()
    #: With no repeated blocks: a submodule of at least this many parameters is a
    #: unit of its own (0: off).
    fsdp_min_params: int = 0
    #: Free each unit's gathered parameters after its forward (gather again for
    #: backward): less memory, one more all-gather per unit.
    fsdp_reshard_after_forward: bool = True
    #: Under FSDP on a GPU: keep the sharded parameters, gradients and optimizer
    #: state in host memory (FSDP2's ``CPUOffloadPolicy``); the optimizer steps on
    #: the CPU. On a CPU device it changes nothing (they live there already).
    fsdp_cpu_offload: bool = False
    #: Under FSDP: recompute each block's activations in backward instead of
    #: keeping them.
    activation_checkpointing: bool = False
    #: Under ``--strategy deepspeed``: the ZeRO stage (see ``strategies/deepspeed.py``).
    zero_stage: int = 2
    #: Under ``--strategy deepspeed``: a JSON file of DeepSpeed entries merged over
    #: the generated config ("": none; see ``strategies/deepspeed_user.py``).
    deepspeed_config: str = ""
    #: Where each setting came from, for error messages ("--strategy", "pyproject.toml", ...).
    sources: tuple[tuple[str, str], ...] = ()

    def source_of(self, key: str) -> str:
        return dict(self.sources).get(key, "default")

    def describe(self) -> str:
        return (
            f"strategy={self.strategy!r} ({self.source_of('strategy')}), "
            f"precision={self.precision!r} ({self.source_of('precision')})"
        )


_CHOICES: dict[str, tuple[str, ...]] = {
    "strategy": STRATEGIES,
    "precision": PRECISIONS,
    "batch_mode": BATCH_MODES,
    "fsdp_wrap": FSDP_WRAPS,
}
_BOOLEANS = frozenset(
    {
        "sync_batchnorm",
        "fsdp_reshard_after_forward",
        "fsdp_cpu_offload",
        "activation_checkpointing",
    }
)


def env_name(key: str) -> str:
    return ENV_PREFIX + key.upper()


def _toml_key(key: str) -> str:
    return key.replace("_", "-")


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start``."""
    start = start.resolve()
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def read_tool_table(pyproject: Path) -> dict[str, object]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        with pyproject.open("rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(
            f"{pyproject}: cannot read [tool.accel-migrate]: {exc}"
        ) from exc
    table = data.get("tool", {}).get("accel-migrate", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.accel-migrate] must be a table")
    return table


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _validated(key: str, value: object, source: str) -> object:
    if key == "fsdp_block_classes":
        names = (
            [n for n in value.split(",") if n.strip()]
            if isinstance(value, str)
            else value
        )
        if not isinstance(names, (list, tuple)) or not all(
            isinstance(n, str) and n.strip().isidentifier() for n in names
        ):
            raise ConfigError(
                f"fsdp-block-classes={value!r} from {source} is not a list of class names"
            )
        return tuple(n.strip() for n in names)
    if key == "fsdp_min_params":
        try:
            count = int(value)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            count = -1
        if isinstance(value, bool) or count < 0:
            raise ConfigError(
                f"fsdp-min-params={value!r} from {source} is not a whole number >= 0"
            )
        return count
    if key == "deepspeed_config":
        if not isinstance(value, str):
            raise ConfigError(
                f"deepspeed-config={value!r} from {source} is not a file name"
            )
        return value.strip()
    if key == "zero_stage":
        try:
            stage = int(str(value).strip())
        except ValueError:
            stage = -1
        if isinstance(value, bool) or stage not in ZERO_STAGES:
            raise ConfigError(
                f"zero-stage={value!r} from {source} is not one of: 1, 2, 3"
            )
        return stage
    if key in _BOOLEANS:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise ConfigError(
            f"{_toml_key(key)}={value!r} from {source} is not true or false"
        )
    if key == "timeout":
        try:
            seconds = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ConfigError(
                f"timeout={value!r} from {source} is not a number"
            ) from None
        if seconds <= 0:
            raise ConfigError(f"timeout={value!r} from {source} must be positive")
        return seconds
    choices = _CHOICES[key]
    if key == "strategy" and str(value).lower() in ("tpu", "xla"):
        raise ConfigError(f"strategy={value!r} from {source}: {NO_TPU}")
    if value not in choices:
        raise ConfigError(
            f"{_toml_key(key)}={value!r} from {source} is not one of: {', '.join(choices)}"
        )
    return value


def validated(key: str, value: object, source: str) -> object:
    """``value`` for setting ``key`` (``strategy``, ``batch_mode``...) as a job would
    use it, or ``ConfigError`` naming ``source``; ``accel-migrate config`` checks what
    it writes with this, so that it writes only what a job accepts."""
    return _validated(key, value, source)


def setting_keys() -> tuple[str, ...]:
    """The settings of ``RuntimeConfig``, in declaration order."""
    return tuple(f.name for f in fields(RuntimeConfig) if f.name != "sources")


def load_config(
    overrides: dict[str, object] | None = None,
    *,
    environ: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> RuntimeConfig:
    """Resolve the configuration: overrides, then environment, then pyproject.toml."""
    environ = dict(os.environ) if environ is None else environ
    keys = [f.name for f in fields(RuntimeConfig) if f.name != "sources"]
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    for key, value in (overrides or {}).items():
        if value is not None:
            flag = f"--{_toml_key(key)}"
            if key == "sync_batchnorm" and value is False:
                flag = "--no-sync-batchnorm"
            if key == "fsdp_reshard_after_forward" and value is False:
                flag = "--no-reshard-after-forward"
            values[key] = _validated(key, value, flag)
            sources[key] = flag
    for key in keys:
        if key not in values and env_name(key) in environ:
            values[key] = _validated(key, environ[env_name(key)], env_name(key))
            sources[key] = env_name(key)
    _carried_sources(environ, sources)
    missing = [key for key in keys if key not in values]
    if missing:
        pyproject = find_pyproject(cwd or Path.cwd())
        if pyproject is not None:
            table = read_tool_table(pyproject)
            for key in missing:
                if _toml_key(key) in table:
                    where = f"{pyproject} [tool.accel-migrate]"
                    values[key] = _validated(key, table[_toml_key(key)], where)
                    sources[key] = where
                    if key == "deepspeed_config" and values[key]:
                        # A file named in pyproject.toml is next to it, wherever
                        # the job is started from.
                        values[key] = str(pyproject.parent / str(values[key]))
    return RuntimeConfig(**values, sources=tuple(sorted(sources.items())))  # type: ignore[arg-type]


def _carried_sources(environ: dict[str, str], sources: dict[str, str]) -> None:
    """The launcher's sources for the values it set (and that are still set)."""
    try:
        carried = json.loads(environ.get(SOURCES_VARIABLE, "{}"))
    except ValueError:
        return
    if not isinstance(carried, dict):
        return
    for key, where in list(sources.items()):
        entry = carried.get(key)
        if (
            where == env_name(key)
            and isinstance(entry, list)
            and len(entry) == 2
            and entry[0] == environ.get(env_name(key))
        ):
            sources[key] = str(entry[1])


def config_environment(config: RuntimeConfig) -> dict[str, str]:
    """Environment variables that make child processes resolve to ``config``, and
    say where each value came from."""
    settings = _settings_environment(config)
    carried = {
        key: [settings[env_name(key)], config.source_of(key)]
        for key in setting_keys()
        if env_name(key) in settings
    }
    return {**settings, SOURCES_VARIABLE: json.dumps(carried)}


def _settings_environment(config: RuntimeConfig) -> dict[str, str]:
    return {
        env_name("strategy"): config.strategy,
        env_name("precision"): config.precision,
        env_name("batch_mode"): config.batch_mode,
        env_name("timeout"): repr(config.timeout),
        env_name("sync_batchnorm"): "1" if config.sync_batchnorm else "0",
        env_name("fsdp_wrap"): config.fsdp_wrap,
        env_name("fsdp_block_classes"): ",".join(config.fsdp_block_classes),
        env_name("fsdp_min_params"): str(config.fsdp_min_params),
        env_name("fsdp_reshard_after_forward"): (
            "1" if config.fsdp_reshard_after_forward else "0"
        ),
        env_name("fsdp_cpu_offload"): "1" if config.fsdp_cpu_offload else "0",
        env_name("activation_checkpointing"): (
            "1" if config.activation_checkpointing else "0"
        ),
        env_name("zero_stage"): str(config.zero_stage),
        env_name("deepspeed_config"): config.deepspeed_config,
    }
