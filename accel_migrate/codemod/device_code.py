"""Whether Python code may name a device: ``ast`` only, so that the project
view can ask it on the cache-hit path, which imports no libcst
(``device_free`` decides from it whether a script keeps every process on the
CPU)."""

from __future__ import annotations

import ast

#: Attributes that may move a tensor or ask for a device.
_ATTRIBUTES = frozenset(
    {
        "cuda",
        "to",
        "device",
        "devices",
        "is_available",
        "set_device",
        "current_device",
        "device_count",
        "accelerator",
        "mps",
        "xpu",
        "npu",
        "autocast",
        "amp",
        "GradScaler",
        "DataParallel",
        "DistributedDataParallel",
        "set_default_device",
        "half",
        "pin_memory",
    }
)
#: Keywords that name a device.
_KEYWORDS = frozenset(
    {"device", "map_location", "device_ids", "output_device", "pin_memory_device"}
)
#: Names that may hold or choose a device.
_NAMES = frozenset(
    {"device", "cuda", "DataParallel", "DistributedDataParallel", "autocast"}
)
#: Packages that never place a script's tensors on a device for it (a model or
#: batch built by one of them stays on the CPU unless the script moves it).
#: An import of any other package that is not a local module read here (an
#: installed ``mylib.models.build_model``) may: the script is then not taken
#: for device-free.
KNOWN_PACKAGES = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "torchtext",
        "numpy",
        "scipy",
        "pandas",
        "sklearn",
        "matplotlib",
        "PIL",
        "tqdm",
        "yaml",
        "h5py",
        "tensorboardX",
        "imageio",
        "cv2",
        "accel_migrate",
    }
)
#: Pieces of strings that name a device.
_STRINGS = ("cuda", "mps", "xpu", "gpu", "GPU", "nccl")


def has_device_code(tree: ast.AST) -> bool:
    """Does ``tree`` name a device anywhere (conservatively)?"""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _ATTRIBUTES:
            return True
        if isinstance(node, ast.keyword) and node.arg in _KEYWORDS:
            # `map_location="cpu"` keeps a checkpoint on the CPU, as `.cpu()` does
            if not (
                node.arg == "map_location"
                and isinstance(node.value, ast.Constant)
                and node.value.value == "cpu"
            ):
                return True
        if isinstance(node, ast.Name) and node.id in _NAMES:
            return True
        if isinstance(node, ast.alias) and (
            node.name.rsplit(".", 1)[-1] in _NAMES | _ATTRIBUTES
            or (node.asname or "") in _NAMES
        ):
            return True
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and any(piece in node.value for piece in _STRINGS)
        ):
            return True
    return False
