"""The ``accel-migrate`` command. ``main(argv) -> int`` is the whole interface."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from .app import main as app_main

    return app_main(argv)


def entry() -> None:
    sys.exit(main())


__all__ = ["entry", "main"]
