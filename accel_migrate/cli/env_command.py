"""``accel-migrate env``: what a bug report needs, as ``accelerate env`` prints it.

Versions (accel-migrate, torch, CUDA, NCCL, libcst, Python), the devices, and the
runtime configuration resolved from the current folder exactly as a launched job
resolves it (``load_config``, the same sources the launch banner names). torch is
optional: without it the report says "none" instead of failing.
"""

from __future__ import annotations

import json
import platform
import sys
from dataclasses import fields
from importlib import metadata
from typing import Any

from .app import EXIT_OK, EXIT_USAGE


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "none"


def _torch_facts() -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {"torch": "none", "cuda": "none", "nccl": "none", "devices": ["cpu"]}
    cuda = torch.version.cuda or "none"
    nccl = "none"
    if torch.cuda.is_available():
        try:
            found = torch.cuda.nccl.version()
            nccl = ".".join(map(str, found)) if isinstance(found, tuple) else str(found)
        except (AttributeError, RuntimeError):
            pass  # a build without NCCL
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices = [
            f"cuda:{index} {torch.cuda.get_device_name(index)}"
            for index in range(torch.cuda.device_count())
        ]
    return {"torch": torch.__version__, "cuda": cuda, "nccl": nccl, "devices": devices}


def _config() -> tuple[dict[str, dict[str, object]], str | None]:
    """Each setting with its source, or the configuration error a job would stop on."""
    from .runtime_config import runtime_config

    module = runtime_config()
    try:
        config = module.load_config()
    except module.ConfigError as exc:
        return {}, str(exc)
    settings: dict[str, dict[str, object]] = {}
    for field in fields(module.RuntimeConfig):
        if field.name == "sources":
            continue
        value = getattr(config, field.name)
        settings[field.name.replace("_", "-")] = {
            "value": list(value) if isinstance(value, tuple) else value,
            "source": config.source_of(field.name),
        }
    return settings, None


def gather() -> dict[str, Any]:
    torch_facts = _torch_facts()
    settings, error = _config()
    return {
        "versions": {
            "accel-migrate": _version("accel-migrate"),
            "torch": torch_facts["torch"],
            "cuda": torch_facts["cuda"],
            "nccl": torch_facts["nccl"],
            "libcst": _version("libcst"),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "devices": torch_facts["devices"],
        "config": settings,
        "config_error": error,
    }


def render_text(report: dict[str, Any]) -> str:
    lines = ["accel-migrate env (paste this into a bug report)", ""]
    for name, value in report["versions"].items():
        lines.append(f"- {name}: {value}")
    lines.append(f"- devices: {', '.join(report['devices'])}")
    lines.append("")
    lines.append("runtime configuration (from the current folder):")
    if report["config_error"] is not None:
        lines.append(f"- error: {report['config_error']}")
    for name, entry in report["config"].items():
        value = entry["value"]
        shown = (",".join(value) or "(none)") if isinstance(value, list) else value
        if isinstance(value, bool):
            shown = "true" if value else "false"
        if value == "":
            shown = "(none)"  # deepspeed-config unset
        lines.append(f"- {name}: {shown} ({entry['source']})")
    return "\n".join(lines) + "\n"


def run_env(output_format: str) -> int:
    report = gather()
    if output_format == "json":
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(render_text(report))
    if report["config_error"] is not None:
        print(f"error: {report['config_error']}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK
