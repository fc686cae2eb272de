"""Where a script reads back a file it writes, for AM017 (main-process-writes).

A file written on the main process only must not be read by another process
before it is written: the rule leaves such a write alone (or adds a barrier).
A read is a call of a reader (``open``, ``torch.load``, ``numpy.load``, ...,
``accel.load``) or of a ``pathlib.Path`` method that reads, on the same path
code; a string path is compared without the suffix numpy adds.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m
from libcst.metadata import PositionProvider

from .file_changes import PATH_READERS, shifted
from .patterns import string_value

if TYPE_CHECKING:
    from .analysis import ModuleIndex
    from .rule import Rule

READERS = frozenset(
    {
        "builtins.open",
        "io.open",
        "torch.load",
        "json.load",
        "pickle.load",
        "numpy.load",
        "numpy.loadtxt",
        "numpy.genfromtxt",
        "matplotlib.pyplot.imread",
        "matplotlib.image.imread",
        "PIL.Image.open",
        "torchvision.io.read_image",
        "imageio.imread",
        "imageio.v2.imread",
        "imageio.v3.imread",
    }
)
#: Calls that look at the file system: listings, tests and reads.
FS_LOOKS = frozenset(
    {
        *READERS,
        "glob.glob",
        "glob.iglob",
        "os.listdir",
        "os.scandir",
        "os.walk",
        "os.path.exists",
        "os.path.isfile",
        "os.path.isdir",
        "os.path.getsize",
        "os.path.getmtime",
        "os.stat",
    }
)
#: ``pathlib.Path`` methods that look at the file system.
PATH_LOOKS = frozenset(
    {"glob", "rglob", "iterdir", "exists", "is_file", "is_dir", "stat"}
    | {"read_text", "read_bytes"}
)


#: Suffixes numpy adds to a path given without one.
_NUMPY_SUFFIXES = (".npy", ".npz")


class FileReads:
    """The file reads of the module ``rule`` runs on."""

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.index = rule.index

    @cached_property
    def reads(self) -> list[tuple[int, str, frozenset[int]]]:
        """(line, path key, enclosing loops) of every call that reads a file."""
        # Helpers of two rules; imported here, not at the top, because importing
        # the rules package imports the rule that uses this module.
        from .rules.output_folders import is_path
        from .save_calls import OPEN_CALLS, write_mode

        rule = self.rule
        found = []
        for call in self.index.calls:
            # accel.load: what AM024 made of torch.load (a second run sees it)
            reader = rule.is_call_to(call, READERS)
            if not (reader or self.index.is_runtime_call(call, "load")):
                continue
            if not call.args:
                continue
            if rule.is_call_to(call, OPEN_CALLS) and write_mode(call) is not None:
                continue
            source = call.args[0].value
            if rule.is_call_to(source, OPEN_CALLS) and source.args:  # type: ignore[attr-defined]
                source = source.args[0].value  # type: ignore[attr-defined]
            line = rule.get_metadata(PositionProvider, call).start.line
            found.append((line, path_key(source), loops(self.index, call)))
        for call in self.index.calls:
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in PATH_READERS
                and is_path(rule, func.value)
                and (func.attr.value != "open" or write_mode(shifted(call)) is None)
            ):
                line = rule.get_metadata(PositionProvider, call).start.line
                found.append((line, path_key(func.value), loops(self.index, call)))
        return found

    def read_again(self, call: cst.Call, path: cst.BaseExpression | None) -> bool:
        """Is the file at ``path`` read after ``call`` writes it: on a later line, or
        anywhere in a loop around the write (the next pass reads it)? Or handed,
        after the write, to a function or class of the project, which may read it
        (``handed_on``)?"""
        if path is None:
            return False
        key = path_key(path)
        line = self._line(call)
        around_write = loops(self.index, call)
        return any(
            read == key and (later > line or bool(around & around_write))
            for later, read, around in self.reads
        ) or self.handed_on(call, path)

    def handed_on(self, call: cst.Call, path: cst.BaseExpression) -> bool:
        """Is ``path`` (or, where it is a parameter of the function that writes,
        what a caller passes for it) given, after the write, to a function or
        class of the project (of this module or another)? ``write_corpus(
        args.corpus)`` writes the file that ``InputData(args.corpus)`` opens in
        input_data.py: the read is not on this module's lines. So is the object
        that holds the path (``holders_of``): BiDAF-pytorch writes
        ``args.prediction_file`` and then calls ``evaluate.main(args)``, which
        opens it."""
        index = self.index
        handed = [(path, self._line(call))]
        function = index.enclosing_function(call)
        if isinstance(path, cst.Name) and function is not None:
            param = index.function_scope_key(function, path.value)
            if index.key(path) == param:
                for site in index.call_sites(function):
                    for key, arg in index.arguments(site):
                        if key == param:
                            handed.append((arg, self._line(site)))
        for expr, after in handed:
            code, holders = path_key(expr), holders_of(expr)
            for other in index.calls:
                if other is call or not self._project_call(other):
                    continue
                if self._line(other) <= after:
                    continue
                codes = {path_key(a.value) for a in other.args}
                if code in codes:
                    return True
                if (
                    codes & holders
                    and index.enclosing_function(other)
                    is index.enclosing_function(call)
                    and self._reads_held(other, code)
                ):
                    # `evaluate.main(args)` after writing `args.prediction_file`,
                    # in the same function, and it opens `args.prediction_file`
                    return True
        return False

    def _reads_held(self, other: cst.Call, code: str) -> bool:
        """Does ``other`` open the path ``code`` (``args.prediction_file``) by
        the object it is handed (``args``)? Read in the local function it
        calls, or in the project view's fact (``HelperFact.reads_paths``)."""
        positional = 0
        for arg in other.args:
            held = path_key(arg.value)
            index = positional if arg.keyword is None and not arg.star else -1
            if arg.keyword is None and not arg.star:
                positional += 1
            if not code.startswith(held + "."):
                continue
            attr = code[len(held) + 1 :]
            keyword = arg.keyword.value if arg.keyword is not None else ""
            fact = self.index.helper(other.func)
            if fact is not None and any(
                a == attr
                and ((index >= 0 and i == index) or (keyword and n == keyword))
                for i, n, a in fact.reads_paths
            ):
                return True
            if self._local_reads(other, arg.value, attr):
                return True
        return False

    def _local_reads(
        self, other: cst.Call, handed: cst.BaseExpression, attr: str
    ) -> bool:
        """Does the function of this module that ``other`` calls open
        ``<its parameter bound to handed>.<attr>`` for reading?"""
        from .save_calls import OPEN_CALLS, write_mode
        from .subtrees import findall

        target = self.index.callee(other)
        if target is None:
            return False
        function = target[0]
        for key, value in self.index.arguments(other):
            if value is not handed:
                continue
            wanted = f"{key[1]}.{attr}"
            for read in findall(function, m.Call()):
                if not read.args or not self.rule.is_call_to(read, READERS):
                    continue
                if self.rule.is_call_to(read, OPEN_CALLS) and write_mode(read):
                    continue
                if path_key(read.args[0].value) == wanted:
                    return True
        return False

    def _project_call(self, call: cst.Call) -> bool:
        """A call of a function or class of this module or of the project's others."""
        return (
            self.index.callee(call) is not None
            or self.index.helper(call.func) is not None
        )

    def _line(self, node: cst.CSTNode) -> int:
        return self.rule.get_metadata(PositionProvider, node).start.line


def holders_of(path: cst.BaseExpression) -> set[str]:
    """The code of each object an attribute path is read from: ``args`` for
    ``args.prediction_file``, ``self.cfg`` and ``self`` for
    ``self.cfg.out_file``. Handing one of them to a call hands it the path."""
    found: set[str] = set()
    while isinstance(path, cst.Attribute):
        path = path.value
        if not isinstance(path, (cst.Name, cst.Attribute)):
            break
        found.add(cst.Module([]).code_for_node(path))
    return found


def loops(index: ModuleIndex, node: cst.CSTNode) -> frozenset[int]:
    """The loops around ``node`` (their ids)."""
    return frozenset(
        id(a) for a in index.ancestors(node) if isinstance(a, (cst.For, cst.While))
    )


def looks_at_files(rule: Rule | ModuleIndex, call: cst.Call) -> bool:
    """Does ``call`` read, list or test the file system (``os.path.isdir(d)``,
    ``glob.glob(p)``, ``open(f)`` to read, ``path.exists()``)?"""
    from .save_calls import OPEN_CALLS, write_mode

    if rule.is_call_to(call, OPEN_CALLS):
        return write_mode(call) is None
    return rule.is_call_to(call, FS_LOOKS) or (
        isinstance(call.func, cst.Attribute) and call.func.attr.value in PATH_LOOKS
    )


def tests_files(rule: Rule | ModuleIndex, node: cst.CSTNode) -> bool:
    """Does ``node`` (a branch's test) look at the file system anywhere?"""
    from .subtrees import findall

    return any(looks_at_files(rule, c) for c in findall(node, m.Call()))


def path_key(path: cst.BaseExpression) -> str:
    """A path's code, or a string path without the suffix numpy would add
    (``np.savez("w")`` writes ``w.npz``)."""
    value = string_value(path)
    if value is None:
        return cst.Module([]).code_for_node(path)
    for suffix in _NUMPY_SUFFIXES:
        value = value.removesuffix(suffix)
    return repr(value)


_FIELD = re.compile(r"\{[^{}]*\}")
_PERCENT = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdifgeErx]")


def path_template(index: ModuleIndex, path: cst.BaseExpression) -> str | None:
    """The family of files a path built from a template names, with each field
    as ``{}``: ``"model_epoch_{}.pth"`` for ``"model_epoch_{}.pth".format(epoch)``,
    ``f"model_epoch_{n}.pth"``, ``"model_epoch_" + str(n) + ".pth"``, or a
    variable only ever set to one of them. pytorch/examples' super_resolution
    saves ``"model_epoch_{}.pth".format(epoch)`` in ``checkpoint(epoch)`` and
    loads ``"model_epoch_{}.pth".format(opt.nEpochs)``: the two codes differ,
    the file may be the same. None for a path with no literal text or no field
    (a plain string is compared by its code)."""
    if isinstance(path, cst.Name):
        key = index.key(path)
        values = index.values.get(key, []) if key is not None else []
        if len(values) != 1 or values[0] is None or isinstance(values[0], cst.Name):
            return None
        path = values[0]
    text = _template(path)
    if text is None or "{}" not in text or not text.replace("{}", ""):
        return None
    return text


def same_template(
    index: ModuleIndex, a: cst.BaseExpression, b: cst.BaseExpression
) -> bool:
    """May the paths ``a`` and ``b`` name the same file by their templates: both
    built from one template (``path_template``), or one a string the other's
    template spells (``"model_epoch_2.pth"`` for ``"model_epoch_{}.pth"``)?"""
    first, second = path_template(index, a), path_template(index, b)
    if first is not None and first == second:
        return True
    for template, other in ((first, b), (second, a)):
        text = string_value(other)
        if template is not None and text is not None:
            pattern = ".+".join(re.escape(part) for part in template.split("{}"))
            if re.fullmatch(pattern, text):
                return True
    return False


def _template(node: cst.BaseExpression) -> str | None:
    value = string_value(node)
    if value is not None:
        return _FIELD.sub("{}", value.replace("{{", "").replace("}}", ""))
    if isinstance(node, cst.FormattedString):
        parts = []
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                parts.append(part.value.replace("{{", "").replace("}}", ""))
            else:
                parts.append("{}")
        return "".join(parts)
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "format"
        and string_value(node.func.value) is not None
    ):
        return _template(node.func.value)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        left, right = _template(node.left), _template(node.right)
        if left is None and right is None:
            return None
        return (left if left is not None else "{}") + (
            right if right is not None else "{}"
        )
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
        text = string_value(node.left)
        if text is not None:
            return _PERCENT.sub("{}", text.replace("%%", ""))
    return None
