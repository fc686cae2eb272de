"""What AM017 (main-process-writes) knows about calls that copy, move, rename or
remove files by their paths: which they are, and where the path they make is."""

from __future__ import annotations

import libcst as cst

#: Functions that change files by their paths, with where the path they make is
#: given (position, keyword); None for those that only remove.
FILE_CHANGERS: dict[str, tuple[int, str] | None] = {
    "shutil.copyfile": (1, "dst"),
    "shutil.copy": (1, "dst"),
    "shutil.copy2": (1, "dst"),
    "shutil.copytree": (1, "dst"),
    "shutil.move": (1, "dst"),
    "shutil.rmtree": None,
    "os.remove": None,
    "os.unlink": None,
    "os.rmdir": None,
    "os.removedirs": None,
    "os.rename": (1, "dst"),
    "os.renames": (1, "new"),
    "os.replace": (1, "dst"),
}
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
SAVES = frozenset({"torch.save", "torch.serialization.save"})
PATH_READERS = frozenset({"read_text", "read_bytes", "open"})
#: Calls whose value differs between processes: a path made from one names a
#: different file on each (a temporary file each process made for itself).
PER_PROCESS = frozenset({"os.getpid", "uuid.uuid1", "uuid.uuid4", "socket.gethostname"})


def argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return positional[position].value if len(positional) > position else None


def shifted(call: cst.Call) -> cst.Call:
    """``p.open(mode)`` as ``open(p, mode)``, so that ``write_mode`` reads its mode."""
    return call.with_changes(args=[cst.Arg(value=cst.Name("_")), *call.args])
