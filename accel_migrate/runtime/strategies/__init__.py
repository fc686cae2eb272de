"""Strategies register themselves on import; ``strategy_class`` looks them up."""

from .._autoload import import_submodules
from .base import Strategy, strategies_reading, strategy_class, strategy_names

import_submodules(__name__, __path__)

__all__ = ["Strategy", "strategies_reading", "strategy_class", "strategy_names"]
