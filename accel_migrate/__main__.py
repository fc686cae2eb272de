"""``python -m accel_migrate`` is the ``accel-migrate`` command."""

from .cli import entry

if __name__ == "__main__":
    entry()
