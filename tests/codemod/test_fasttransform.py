"""The changed-path transformer walk (``fasttransform``) makes every callback
libcst's transformer visit makes, in the same order, and builds the same code;
unchanged subtrees are the original objects, and a node left in two places is
given its own copy in each."""

from __future__ import annotations

from typing import Any

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from accel_migrate.codemod import fasttransform, fastvisit, node_kinds
from accel_migrate.codemod.rule import Rule, RuleContext, registered_rules
from tests.codemod.test_fastvisit import SOURCES, SYNTHETIC


class _Everything(cst.CSTTransformer):
    """Records every callback (custom on_* methods: libcst's dispatch is bypassed)
    and changes the tree with every kind of result libcst allows."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[Any, ...]] = []
        self.attributes: list[tuple[type, str]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("visit", id(node)))
        return not isinstance(node, (cst.Lambda, cst.Decorator))

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.events.append(("visit_attr", id(node), attribute))
        self.attributes.append((type(node), attribute))

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        self.events.append(("leave_attr", id(original_node), attribute))
        self.attributes.pop()

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        self.events.append(("leave", id(original_node), type(updated_node).__name__))
        where = self.attributes[-1] if self.attributes else None
        if isinstance(updated_node, cst.Name) and updated_node.value == "model":
            return updated_node.with_changes(value="net")
        if isinstance(updated_node, cst.Pass):
            return cst.RemovalSentinel.REMOVE  # the line goes (body removal)
        if isinstance(updated_node, cst.Import):
            # A statement becomes two (FlattenSentinel in a small-statement list).
            return cst.FlattenSentinel([updated_node, cst.Expr(cst.Name("noted"))])
        if isinstance(updated_node, cst.Comma) and where == (cst.Arg, "comma"):
            return cst.RemovalSentinel.REMOVE  # a MaybeSentinel field: DEFAULT
        if isinstance(updated_node, cst.Annotation) and where == (
            cst.FunctionDef,
            "returns",
        ):
            return cst.RemovalSentinel.REMOVE  # an optional field: None
        return updated_node


class _Hooks(cst.CSTTransformer):
    """libcst's default dispatch: named hooks, attribute hooks, a False visit."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int]] = []

    def visit_Call(self, node: cst.Call) -> bool:
        self.events.append(("call", id(node)))
        return len(node.args) != 1  # a one-argument call's children are skipped

    def visit_Call_func(self, node: cst.Call) -> None:
        self.events.append(("func", id(node)))

    def leave_Call_args(self, node: cst.Call) -> None:
        self.events.append(("args", id(node)))

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> Any:
        self.events.append(("name", id(original_node)))
        if original_node.value == "x":
            return updated_node.with_changes(value="x_")
        return updated_node

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> Any:
        self.events.append(("line", id(original_node)))
        if any(isinstance(s, cst.Expr) for s in original_node.body):
            # The empty line is dropped in a body (libcst's "removable" rule).
            empty = cst.SimpleStatementLine(body=())
            return cst.FlattenSentinel([updated, updated.deep_clone(), empty])
        return updated


def _modules() -> list[tuple[str, cst.Module]]:
    found = [("synthetic", cst.parse_module(SYNTHETIC + "def g() -> int: pass\n"))]
    # A quarter of fastvisit's sources: the callbacks do not depend on the file.
    found += [(p.name, cst.parse_module(p.read_bytes())) for p in SOURCES[::4]]
    return found


def _run(module: cst.Module, transformer: Any, fast: bool) -> tuple[Any, list]:
    if fast:
        result, _ = fasttransform.transform(module, transformer)
    else:
        fastvisit.uninstall()  # libcst's own visit for everything
        try:
            result = module.visit(transformer)
        finally:
            fastvisit.install()
    return result, transformer.events


@pytest.mark.parametrize("transformer_class", [_Everything, _Hooks])
def test_same_callbacks_and_code_as_libcst(transformer_class: type) -> None:
    for name, module in _modules():
        code = module.code
        expected, expected_events = _run(module, transformer_class(), fast=False)
        found, events = _run(module, transformer_class(), fast=True)
        assert expected_events and events == expected_events, name
        assert found.code == expected.code, name
        assert found.code != code, name  # every module had something to change
        assert found.deep_equals(expected), name
        assert module.code == code, name  # the original tree is untouched


def test_unchanged_subtrees_are_the_original_nodes() -> None:
    module = cst.parse_module("def f(model):\n    return model + 1\n\ny = 2\n")
    found, changed = fasttransform.transform(module, _Hooks())
    assert not changed and found is module  # nothing to change: nothing rebuilt

    class Rename(cst.CSTTransformer):
        def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> Any:
            self.seen = [*getattr(self, "seen", []), updated_node is original_node]
            if original_node.value == "y":
                return updated_node.with_changes(value="z")
            return updated_node

    rename = Rename()
    found, changed = fasttransform.transform(module, rename)
    assert changed and found.code.endswith("z = 2\n")
    assert all(rename.seen)  # a leaf with no changed child is handed over as is
    assert found.body[0] is module.body[0]  # the untouched function is shared
    assert found.body[1] is not module.body[1]


def test_every_class_reads_the_fields_libcst_visits() -> None:
    """The field order read from libcst's source is the order its visit records."""
    checked = set()
    for _, module in _modules():
        for node in _nodes(module):
            kind = type(node)
            if kind in checked:
                continue
            checked.add(kind)
            spec = fasttransform.spec_of(kind)
            recorded = fastvisit._fields(node)
            assert spec is not None, kind
            if recorded is not None:
                assert tuple(name for name, _ in spec) == recorded, kind
    assert len(checked) > 100


def _nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    found = [node]
    for child in node.children:
        found += _nodes(child)
    return found


def test_a_node_in_two_places_gets_its_own_copy() -> None:
    module = cst.parse_module("x = load(path)\nprint(x)\n")

    class Twice(cst.CSTTransformer):
        """Keeps the original call where it was and also puts it in a new line."""

        def leave_Module(self, original_node: cst.Module, updated: cst.Module) -> Any:
            call = original_node.body[0].body[0].value  # type: ignore[attr-defined]
            line = cst.SimpleStatementLine([cst.Expr(call)])
            return updated.with_changes(body=[*updated.body, line])

    found, changed = fasttransform.transform(module, Twice())
    assert changed
    call = module.body[0].body[0].value  # type: ignore[attr-defined]
    occurrences = [n for n in _nodes(found) if n is call]
    assert len(occurrences) == 2  # the danger: one object, two places
    unique = fasttransform.unique_nodes(found)
    assert unique.code == found.code == "x = load(path)\nprint(x)\nload(path)\n"
    nodes = [n for n in _nodes(unique) if fasttransform.spec_of(type(n)) != ()]
    assert len({id(n) for n in nodes}) == len(nodes)
    positions = MetadataWrapper(unique, unsafe_skip_copy=True).resolve(PositionProvider)
    lines = sorted(
        positions[n].start.line
        for n in nodes
        if isinstance(n, cst.Call) and n.deep_equals(call)
    )
    assert lines == [1, 3]  # each copy has its own place
    assert fasttransform.unique_nodes(module) is module  # nothing repeated


#: A short training script that most rules have something to say about.
TRAINING = """
import torch
from torch import nn
from torch.utils.data import DataLoader
from tqdm import tqdm

device = torch.device("cuda:0")
model = nn.DataParallel(nn.Linear(4, 2)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(list(range(8)), batch_size=4, shuffle=True)
scaler = torch.cuda.amp.GradScaler()
for epoch in range(2):
    total = 0.0
    for x in tqdm(loader):
        x = x.cuda()
        with torch.cuda.amp.autocast():
            loss = model(x).sum()
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        total += loss.item()
    print(epoch, total / len(loader))
    torch.save(model.state_dict(), "model.pt")
"""


def test_rules_match_libcst_on_a_training_script() -> None:
    """Every rule's pass, both ways: the same module code and the same findings."""
    source = TRAINING
    results = []
    for enabled in (False, True):
        fasttransform.ENABLED = enabled
        try:
            module = cst.parse_module(source)
            context = RuleContext(alias="accel", original_code=module.code)
            wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
            modified_rules = []
            for rule in registered_rules():
                changed, modified = rule.run(wrapper, context)
                if modified:
                    modified_rules.append(rule.code)
                    wrapper = MetadataWrapper(changed, unsafe_skip_copy=True)
            results.append((wrapper.module.code, context.findings, modified_rules))
        finally:
            fasttransform.ENABLED = True
    assert results[0] == results[1]
    assert results[1][2]  # some rule changed the script
    assert issubclass(registered_rules()[0], Rule)


class _CallsOnly(cst.CSTTransformer):
    """Hooks for two node classes only: the walk skips subtrees without them."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int]] = []

    def visit_Call(self, node: cst.Call) -> bool:
        self.events.append(("call", id(node)))
        return True

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> Any:
        self.events.append(("arg", id(original_node)))
        if isinstance(updated_node.value, cst.Integer):
            return updated_node.with_changes(value=cst.Integer("7"))
        return updated_node


def test_subtrees_without_a_hooked_class_are_skipped() -> None:
    dispatch = fasttransform.dispatch_of(_CallsOnly())
    assert dispatch.hooked is not None
    assert dispatch.hooked & node_kinds.BITS[cst.Call]
    assert not dispatch.hooked & node_kinds.BITS[cst.Name]
    assert fasttransform.dispatch_of(_Hooks()).hooked is None  # attribute hooks
    entered: list[type] = []
    original = fasttransform._Walk.node

    def counting(walk: Any, node: cst.CSTNode) -> Any:
        entered.append(type(node))
        return original(walk, node)

    for name, module in _modules():
        expected, expected_events = _run(module, _CallsOnly(), fast=False)
        fasttransform._Walk.node = counting  # type: ignore[method-assign]
        try:
            found, events = _run(module, _CallsOnly(), fast=True)
        finally:
            fasttransform._Walk.node = original  # type: ignore[method-assign]
        assert events == expected_events, name
        assert found.code == expected.code, name
    # Pruned: a subtree with no Call/Arg is handed back without entering it.
    assert entered and cst.Integer not in entered[: entered.index(cst.Call)]
    total = sum(len(_nodes(module)) for _, module in _modules())
    assert len(entered) < total / 2, (len(entered), total)


def test_masks_hold_every_class_below() -> None:
    module = cst.parse_module("def f(x):\n    return g(x[0])\n")
    with node_kinds.keep():
        mask = node_kinds.mask_of(module, fasttransform._node_fields)
        function = module.body[0]
        # libcst's own children give the same mask as the spec's fields.
        assert node_kinds.mask_of(function, lambda n: None) == (
            mask & ~node_kinds.BITS[cst.Module]
        )
        assert node_kinds.active()
    for kind in {type(n) for n in _nodes(module)}:
        assert mask & node_kinds.BITS[kind], kind
    assert not mask & node_kinds.BITS[cst.While]
    assert not node_kinds.active()  # released after the pass
