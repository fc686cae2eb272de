"""A trained model rebuilt around itself (for AM004): which binding to prepare.

DINO's ``main_dino.py`` builds the backbone, then a module around it with a
head of new parameters, in the same variable::

    student = vits.__dict__[args.arch]()
    student = utils.MultiCropWrapper(student, DINOHead(embed_dim, args.out_dim))
    ...
    optimizer = torch.optim.AdamW(utils.get_params_groups(student))

The optimizer trains the wrapper, head included. Preparing the first binding
(the backbone) would leave the head's parameters outside the prepared model:
their gradients would never be averaged. The binding to prepare is the
wrapper's: a value that builds a module (a module class, a local module's
model class, a ``torch.nn`` constructor) and reads the variable only as one of
its direct arguments (``rewraps``), of a variable an optimizer trains; and a
binding that such a rewrap, later in the same block (so that every path goes
through it), takes in is not prepared itself (``rewrapped_later``).

The rewrap stands in for the build under it only when nothing uses the bare
model in between (``unread_between``): a model trained first and wrapped after
(``model = Net()``; the optimizer and the loop; then ``model =
Calibrated(model, head)``) must have its first build prepared, or its training
runs unprepared while the loader is sharded. Between the two statements the
variable may only be read as ``name = model.attribute`` (DINO's ``embed_dim =
student.embed_dim``); any other read, or a function or class of the block
above the rewrap that reads it (it may be called in between), keeps the first
build prepared.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from .analysis import Key, ModuleIndex
from .subtrees import findall


def rewraps(
    index: ModuleIndex,
    key: Key,
    value: cst.BaseExpression | None,
    core: cst.BaseExpression | None,
    builds: Callable[[cst.BaseExpression], bool],
) -> bool:
    """Is ``value`` (``core``: without its ``.to(device)``) a module built around
    the model ``key`` holds, handed as a direct argument?"""
    if value is None or not isinstance(core, cst.Call) or not builds(value):
        return False
    direct = [a.value for a in core.args if not a.star and index.key(a.value) == key]
    if not direct:
        return False
    return not any(
        index.key(n) == key and not any(n is d for d in direct)
        for n in findall(value, m.Name() | m.Attribute())
    )


def follows_every_build(
    index: ModuleIndex,
    key: Key,
    value: cst.BaseExpression,
    builds_anew: Callable[[cst.BaseExpression | None], bool],
    line: Callable[[cst.CSTNode], int],
) -> bool:
    """Is the rewrap ``value`` in the block of every other binding of ``key`` that
    builds a model anew (``builds_anew``), below it: the model it wraps is
    always the one built there (not ``if heads: student = Wrapper(student)``,
    whose other path keeps the bare model)?"""
    block = _block(index, value)
    if block is None:
        return False
    here = line(value)
    return all(
        _block(index, other) is block
        and line(other) < here  # type: ignore[arg-type]
        and unread_between(index, key, other, value)  # type: ignore[arg-type]
        for other in index.values.get(key, [])
        if other is not value and builds_anew(other)
    )


def unread_between(
    index: ModuleIndex,
    key: Key,
    build: cst.BaseExpression,
    rewrap: cst.BaseExpression,
) -> bool:
    """Is ``key`` left unread between the statement binding ``build`` and the one
    binding ``rewrap`` (both plain ``name = value`` lines of one block), but
    for ``name = key.attribute``? A read in a function, lambda or class of the
    block placed above the rewrap counts (it may run in between), and so does
    one outside the block."""
    block = _block(index, rewrap)
    if block is None or _block(index, build) is not block:
        return False
    body = list(getattr(block, "body", ()))
    first = _position(body, index.parent(index.parent(build)))
    last = _position(body, index.parent(index.parent(rewrap)))
    if first is None or last is None:
        return False
    for name in findall(index.module, m.Name()):
        if index.key(name) != key:
            continue
        statement, deferred = _statement_in(index, name, block)
        at = _position(body, statement)
        if at is None:
            return False  # read outside the block
        if deferred and at < last:
            return False
        if first < at < last and not _reads_attribute(index, name):
            return False
    return True


def _position(body: list[cst.CSTNode], node: cst.CSTNode | None) -> int | None:
    return next((i for i, s in enumerate(body) if s is node), None)


def _statement_in(
    index: ModuleIndex, node: cst.CSTNode, block: cst.CSTNode
) -> tuple[cst.CSTNode | None, bool]:
    """The statement of ``block`` holding ``node``, and whether ``node`` lies in
    a function, lambda or class (run when called, not where it stands)."""
    deferred = False
    child: cst.CSTNode = node
    for parent in index.ancestors(node):
        if parent is block:
            return child, deferred
        if isinstance(parent, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            deferred = True
        child = parent
    return None, deferred


def _reads_attribute(index: ModuleIndex, name: cst.Name) -> bool:
    """``embed_dim = student.embed_dim``: a plain attribute read, bound as is."""
    attribute = index.parent(name)
    if not isinstance(attribute, cst.Attribute) or attribute.value is not name:
        return False
    assign = index.parent(attribute)
    return (
        isinstance(assign, cst.Assign)
        and assign.value is attribute
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
    )


def rewrapped_later(
    index: ModuleIndex,
    key: Key,
    value: cst.BaseExpression | None,
    rewrap: Callable[[cst.BaseExpression | None], bool],
    line: Callable[[cst.CSTNode], int],
) -> bool:
    """Does a rewrap of ``key`` (``rewrap``) follow the binding ``value``, in
    the same block, so that the model ``value`` builds always goes into it?"""
    if value is None:
        return False
    block = _block(index, value)
    if block is None:
        return False
    here = line(value)
    return any(
        other is not value
        and rewrap(other)
        and _block(index, other) is block
        and line(other) > here  # type: ignore[arg-type]
        for other in index.values.get(key, [])
    )


def _block(index: ModuleIndex, value: cst.CSTNode) -> cst.CSTNode | None:
    """The block (a function's body, the module) of the statement binding
    ``value`` with a plain ``name = value``; None for any other binding."""
    assign = index.parent(value)
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    line = index.parent(assign)
    if not isinstance(line, cst.SimpleStatementLine):
        return None
    return index.parent(line)
