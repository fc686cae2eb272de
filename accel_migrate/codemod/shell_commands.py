"""What a shell command run from Python does to files, as far as its text shows
(AM030's reading, shared with the project view's helper facts).

``os.system("cp a b")``, ``subprocess.run(["rm", "-rf", d])``: the command is read
only when it is a string literal (or a list or tuple of them) with no shell
syntax that could do more (redirection, pipes, ``;``, ``&&``, substitutions,
globs, variables). Static only: nothing is run.
"""

from __future__ import annotations

import ast
import shlex

#: Calls that run a command: ``(position, keyword)`` of the command.
RUNNERS: dict[str, tuple[int, str]] = {
    "os.system": (0, "command"),
    "os.popen": (0, "cmd"),
    "subprocess.run": (0, "args"),
    "subprocess.call": (0, "args"),
    "subprocess.check_call": (0, "args"),
    "subprocess.check_output": (0, "args"),
    "subprocess.Popen": (0, "args"),
    "subprocess.getoutput": (0, "cmd"),
    "subprocess.getstatusoutput": (0, "cmd"),
}
#: Commands that only remove what they name (moved to the main process, as
#: ``os.remove`` is).
REMOVERS = frozenset({"rm", "rmdir", "unlink"})
#: Commands that make, copy, move or fill files.
WRITERS = frozenset(
    {
        "cp",
        "mv",
        "mkdir",
        "tar",
        "zip",
        "unzip",
        "gzip",
        "gunzip",
        "rsync",
        "ln",
        "touch",
        "wget",
        "curl",
        "scp",
        "tee",
        "dd",
        "install",
        "chmod",
        "chown",
        "7z",
    }
)
#: Commands that read and print only (no finding: each process printing the
#: same facts is harmless).
READERS = frozenset(
    {"nvidia-smi", "hostname", "date", "pwd", "whoami", "uname", "ls", "nproc", "df"}
)
_SHELL_SYNTAX = set(">|;&`$*?<\n(){}~")


def command_words(text: str) -> list[str] | None:
    """The words of a literal shell command, or None where shell syntax could make
    it do more than its first word says."""
    if any(c in _SHELL_SYNTAX for c in text):
        return None
    try:
        return shlex.split(text)
    except ValueError:
        return None


def kind(words: list[str] | None) -> str:
    """ "remove", "write", "read" or "unknown" for a command's words."""
    if not words:
        return "unknown"
    program = words[0].rsplit("/", 1)[-1]
    if program in REMOVERS:
        return "remove"
    if program in WRITERS:
        return "write"
    if program in READERS:
        return "read"
    return "unknown"


def literal_command(call: ast.Call) -> list[str] | None:
    """The words of a command given as a literal (``"nvidia-smi -L"``,
    ``["git", "rev-parse", "HEAD"]``), else None."""
    command = call.args[0] if call.args else None
    if isinstance(command, ast.Constant) and isinstance(command.value, str):
        return command_words(command.value)
    if isinstance(command, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in command.elts
    ):
        return [e.value for e in command.elts]  # type: ignore[attr-defined]
    return None
