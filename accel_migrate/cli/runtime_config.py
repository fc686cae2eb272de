"""The runtime's configuration module, also where torch is not installed.

``accel_migrate.runtime`` imports torch in its ``__init__``, but its ``config``
module is standard library only. ``env`` and ``config`` must resolve and validate
settings with exactly the code a launched job uses, and work without torch (the
CLI installs without it), so they load that one file on its own when the package
cannot be imported.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

_STANDALONE = "accel_migrate._runtime_config_standalone"


def runtime_config() -> ModuleType:
    try:
        from ..runtime import config
    except ImportError:
        return _standalone()
    return config


def config_without_torch() -> ModuleType:
    """The runtime's configuration module without importing the runtime (whose
    ``__init__`` imports torch, 13 s): the one already imported, or the file
    loaded on its own. For what ``--help`` shows."""
    loaded = sys.modules.get("accel_migrate.runtime.config")
    return loaded if loaded is not None else _standalone()


def _standalone() -> ModuleType:
    if _STANDALONE in sys.modules:
        return sys.modules[_STANDALONE]
    path = Path(__file__).resolve().parent.parent / "runtime" / "config.py"
    spec = importlib.util.spec_from_file_location(_STANDALONE, path)
    assert spec is not None and spec.loader is not None
    config = importlib.util.module_from_spec(spec)
    sys.modules[_STANDALONE] = config  # dataclasses look the module up by name
    spec.loader.exec_module(config)
    return config
