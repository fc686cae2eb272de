"""The changed-path transformer walk (``fasttransform``) makes every callback
libcst's transformer visit makes, in the same order, and builds the same code;
unchanged subtrees are the original objects, and a node left in two places is
given its own copy in each."""

from __future__ import annotations

from typing import Any

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from accel_migrate.codemod import fasttransform, fastvisit
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
