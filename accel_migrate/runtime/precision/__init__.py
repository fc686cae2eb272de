"""Precision plugins register themselves on import; ``precision_class`` looks them up."""

from .._autoload import import_submodules
from .base import Precision, PrecisionUnavailableError, precision_class

import_submodules(__name__, __path__)

__all__ = ["Precision", "PrecisionUnavailableError", "precision_class"]
