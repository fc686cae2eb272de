"""What AM017 (main-process-writes) knows about calls that copy, move, rename,
remove or write files by their paths: which they are, and where the path they
make is; and paths that name a different file on each process."""

from __future__ import annotations

from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

import libcst as cst
import libcst.matchers as m

from .patterns import argument
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: ``pathlib.Path`` methods that change files: where the path they make is
#: ("self": the path itself), None for those that only remove.
PATH_CHANGERS: dict[str, tuple[int, str] | str | None] = {
    "write_text": "self",
    "write_bytes": "self",
    "rename": (0, "target"),
    "replace": (0, "target"),
    "unlink": None,
    "rmdir": None,
}
PATH_READERS = frozenset({"read_text", "read_bytes", "open"})
#: Calls whose value differs between processes: a path made from one names a
#: different file on each (a temporary file each process made for itself).
PER_PROCESS = frozenset({"os.getpid", "uuid.uuid1", "uuid.uuid4", "socket.gethostname"})
#: ``tempfile`` functions that name the folder every process shares (``/tmp``),
#: not one each process makes for itself (``mkdtemp``, ``mkstemp``...).
SHARED_TEMP = frozenset(
    {"tempfile.gettempdir", "tempfile.gettempdirb", "tempfile.gettempprefix"}
)


def shifted(call: cst.Call) -> cst.Call:
    """``p.open(mode)`` as ``open(p, mode)``, so that ``write_mode`` reads its mode."""
    return call.with_changes(args=[cst.Arg(value=cst.Name("_")), *call.args])


#: Functions that write a file at a path, with where that path is given
#: (position, keyword).
PATH_WRITERS: dict[str, tuple[int, str]] = {
    "torchvision.utils.save_image": (1, "fp"),
    "numpy.save": (0, "file"),
    "numpy.savez": (0, "file"),
    "numpy.savez_compressed": (0, "file"),
    "numpy.savetxt": (0, "fname"),
    "matplotlib.pyplot.savefig": (0, "fname"),
}


def written_path(
    call: cst.Call, writer: str | None = None
) -> cst.BaseExpression | None:
    """The path a call writes to: ``open``'s first argument, or where ``writer``
    (a PATH_WRITERS name) takes it."""
    position, keyword = PATH_WRITERS[writer] if writer else (0, "file")
    return argument(call, position, keyword)


def per_process(index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Is ``expr`` made from a value that differs between processes (a
    ``tempfile`` path, ``os.getpid()``), directly or through variables?"""
    for call in findall(expr, m.Call()):
        names = index.qualnames(call.func)  # type: ignore[attr-defined]
        if names & PER_PROCESS or any(
            n.startswith("tempfile.") and n not in SHARED_TEMP for n in names
        ):
            return True
    if depth > 3:
        return False
    for name in findall(expr, m.Name()):
        key = index.key(name)
        if key is not None and key in _temp_folders(index):
            return True
        for value in index.values.get(key, []) if key is not None else []:
            if value is not None and per_process(index, value, depth + 1):
                return True
    return False


def _temp_folders(index: ModuleIndex) -> frozenset[object]:
    """The keys of the names a ``with tempfile.TemporaryDirectory() as tempdir:``
    binds (the nn.Transformer language-model tutorial keeps its best weights in
    one): a folder each process makes for itself, as ``tempfile.mkdtemp()``.
    Computed once per tree."""
    cached = _TEMP_FOLDERS.get(index)
    if cached is not None:
        return cached
    found: set[object] = set()
    for item in findall(index.module, m.WithItem()):
        asname = item.asname  # type: ignore[attr-defined]
        value = item.item  # type: ignore[attr-defined]
        if asname is None or not isinstance(value, cst.Call):
            continue
        names = index.qualnames(value.func)
        if not any(n.startswith("tempfile.") and n not in SHARED_TEMP for n in names):
            continue
        key = index.key(asname.name)
        if key is not None:
            found.add(key)
    cached = _TEMP_FOLDERS[index] = frozenset(found)
    return cached


#: Per module index (one per tree), weakly: a cache that keeps no tree alive.
_TEMP_FOLDERS: WeakKeyDictionary[ModuleIndex, frozenset[object]] = WeakKeyDictionary()
