"""AM030 shell-commands: shell commands that change files run on the main process only, or are reported.

## What
Reads the command of ``os.system(...)``, ``os.popen(...)`` and ``subprocess.run``
/ ``call`` / ``check_call`` / ``check_output`` / ``Popen`` / ``getoutput`` where
it is a string literal (or a list or tuple of them) without shell syntax
(redirection, pipes, ``;``, ``&&``, substitutions, globs, variables):

- a command that only removes what it names (``rm``, ``rmdir``, ``unlink``), in
  a statement of its own, is run on the main process:
  ``accel.on_main_process(os.system, "rm -f last.pth")``, as AM017 does for
  ``os.remove``;
- a command that makes, copies, moves or fills files (``cp``, ``mv``, ``tar``,
  ``wget``, ``rsync``, ``mkdir``...), one whose result is used, and any command
  that cannot be read (built at run time, or with shell syntax) is left as it
  is and reported as needs-review;
- a command that only prints facts (``nvidia-smi``, ``hostname``, ``ls``...) is
  left alone.

## Why
Every process runs the script, so every process runs the command: two ``cp``
or ``tar`` into one file race and may leave it truncated, a ``mv`` fails on the
slower process (the source is gone), and a copy of a checkpoint that the main
process alone writes (AM010) copies a file that does not exist yet on the
others. What a shell command reads and writes cannot be seen, so moving one
that makes files would leave the other processes reading files that are not
there yet; the finding says where to guard it.

## Example
```python
# before
os.system("rm -f checkpoints/last.pth")
os.system(f"cp {ckpt} best.pth")
# after
accel.on_main_process(os.system, "rm -f checkpoints/last.pth")
os.system(f"cp {ckpt} best.pth")  # needs-review: runs on every process
```

## Fix safety
Safe for removals whose result is not used: on the main process the removal
runs where the script has it, and the other processes skip it (they would race
to remove the same file). Everything else is reported, never rewritten. A local
module's helper that runs such a command is reported by AM017 (needs-review:
its effects cannot be shown to be only writes).
"""

from __future__ import annotations

import libcst as cst

from ..file_changes import argument
from ..patterns import string_value
from ..rule import Rule
from ..shell_commands import RUNNERS, command_words, kind


class ShellCommands(Rule):
    code = "AM030"
    name = "shell-commands"
    summary = "os.system('rm ...') -> accel.on_main_process(os.system, ...); other file-changing commands reported"

    def applies(self) -> bool:
        return self.originally_calls(RUNNERS.keys())  # its one hook's test

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        names = self.qualnames(original_node.func) & RUNNERS.keys()
        if not names:
            return updated_node
        name = sorted(names)[0]
        command = argument(original_node, *RUNNERS[name])
        words = _words(command)
        what = kind(words)
        if what == "read":
            return updated_node
        shown = " ".join(words[:3]) if words else ""
        if what == "unknown":
            self.report(
                original_node,
                "needs-review",
                f"{name}(...) runs a command accel-migrate cannot read on every "
                "process; if it changes files, the processes race (and read files "
                "the main process has not written yet): run it under `if "
                "accel.is_main_process():`, then accel.barrier() where every "
                "process reaches it",
                if_migrated=True,
            )
            return updated_node
        used = not isinstance(self.parent(original_node), cst.Expr)
        if what == "remove" and used:
            self.report(
                original_node,
                "needs-review",
                f"{name}(`{shown}`) removes files on every process, racing with the "
                "others, and its result is used: on the main process only "
                "(accel.on_main_process) the others would get no result; run it "
                "under `if accel.is_main_process():`",
                if_migrated=True,
            )
            return updated_node
        if what == "write" or any(a.star for a in original_node.args):
            self.report(
                original_node,
                "needs-review",
                f"{name}(`{shown}`) changes files on every process, racing with "
                "the others; what it reads and makes cannot be seen, so it is not "
                "moved: run it under `if accel.is_main_process():`, then "
                "accel.barrier() where every process reaches it",
                if_migrated=True,
            )
            return updated_node
        self.report(
            original_node,
            "fixed",
            f"{name}(`{shown}`) removes files -> accel.on_main_process(...) "
            "(the other processes would race to remove them)",
        )
        return self.on_main_process(updated_node)


def _words(command: cst.BaseExpression | None) -> list[str] | None:
    if command is None:
        return None
    text = string_value(command)
    if text is not None:
        return command_words(text)
    if isinstance(command, (cst.List, cst.Tuple)):
        words = []
        for element in command.elements:
            if isinstance(element, cst.StarredElement):
                return None
            value = string_value(element.value)
            if value is None:
                return None
            words.append(value)
        return words
    return None
