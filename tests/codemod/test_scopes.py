"""The engine's own scope analysis (codemod/scopes.py) gives libcst's answers:
every node's scope, the bindings a name sees, ``in scope.assignments``, the
references of each binding and the qualified names of every node
(scope_compare.differences), on tricky Python and on every fixture."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from accel_migrate.codemod import scopes
from tests.codemod.scope_compare import differences

ROOT = Path(__file__).resolve().parents[2]

CASES = {
    "global and nonlocal": """
        count = 0
        def bump():
            global count
            count += 1
            def inner():
                nonlocal_value = count
                return nonlocal_value
            return inner
        def outer():
            total = 0
            def add(x):
                nonlocal total
                total = total + x
            add(1)
            return total
    """,
    "comprehensions": """
        xs = [1, 2]
        ys = [x * y for x in xs for y in range(x) if x if y]
        d = {k: v for k, v in zip(xs, ys)}
        g = (x for x in x)
        s = {i for i in [j for j in xs]}
        x = [x for x in xs]
    """,
    "class bodies": """
        size = 3
        class Net:
            size = size + 1
            layers = [size for _ in range(2)]
            def forward(self, size=size):
                return size, Net, self.size
            class Inner:
                size = 5
                def f(self):
                    return size
    """,
    "lambdas and defaults": """
        scale = 2.0
        f = lambda x, s=scale: x * s + scale
        def g(a, b=scale, *args, c=f(1), **kw) -> float:
            return lambda: a + b + c
    """,
    "imports with aliases": """
        import torch
        import torch.nn as nn
        import torch.distributed
        import os.path as osp, sys
        from torch import optim as opt, cuda
        from . import utils
        from .models import Net as Model
        from ..pkg.sub import thing
        model = nn.Linear(2, 2)
        torch.distributed.init_process_group("gloo")
        opt.SGD(model.parameters(), lr=0.1)
        cuda.is_available(); osp.join("a", "b"); sys.argv; utils.f(); Model(); thing()
        def late():
            import numpy as np
            return np.zeros(3), torch.cuda.device_count()
    """,
    "star import": """
        from utils import *
        from torch.nn import *
        model = build()
        layer = Linear(2, 2)
    """,
    "match patterns": """
        def f(command):
            match command:
                case ["go", direction]:
                    return direction
                case {"x": x, **rest}:
                    return x, rest
                case Point(x=0, y=y) as point:
                    return y, point
                case [first, *others]:
                    return first, others
                case _:
                    return None
    """,
    "walrus": """
        data = [1, 2, 3]
        if (n := len(data)) > 2:
            print(n)
        values = [y for x in data if (y := x * 2) > 2]
        def f():
            while (chunk := read()):
                use(chunk)
    """,
    "del": """
        a = 1
        del a
        b = [1, 2]
        del b[0], b
        def f():
            c = 1
            del c
            return c
    """,
    "try and except names": """
        try:
            import apex
        except ImportError as error:
            apex = None
            print(error)
        else:
            ok = True
        finally:
            done = True
        try:
            pass
        except* ValueError as group:
            print(group)
        with open("f") as handle, open("g") as (first, second):
            print(handle, first, second)
    """,
    "decorators": """
        import functools
        def deco(fn):
            return fn
        @deco
        @functools.lru_cache(maxsize=None)
        def cached(x):
            return x
        class A:
            @staticmethod
            def s(): ...
            @property
            def p(self): return self
    """,
    "reassignment order": """
        import torch
        x = x + 1
        model = torch.nn.Linear(2, 2)
        model = model.to("cpu")
        torch = None
        print(torch)
        for i in range(3):
            i = i + 1
        def f():
            print(y)
            y = 1
            y += y
    """,
    "annotations and strings": """
        from typing import cast, TypeVar, NewType, Literal, Optional
        import typing as t
        T = TypeVar("T", bound="Model")
        UserId = NewType("UserId", "int")
        class Model: ...
        def f(m: "Model", k: Literal["a", "b"]) -> "Optional[Model]":
            v: "t.List[Model]" = cast("Model", m)
            w = t.cast("list[Model]", v)
            return w
        x: int = 5
        y: "bad syntax (("
    """,
    "attributes and calls": """
        import torch.nn.functional as F
        import torch
        out = F.relu(x).sum().backward()
        torch.cuda.amp.autocast()
        a = torch.optim.Adam(params).step
        torch.nn.parallel.DistributedDataParallel(model).module.state_dict()
        obj.attr.other = torch.zeros(1)
        d[torch.arange(3)] = 1
    """,
    "parenthesized names": """
        x = 1
        y = (x)
        (z) = ((y))
        print((x), (y).real, [(a) for (a) in (z,)])
        def f(q=(x)): ...
    """,
    "async and with": """
        import asyncio
        async def main(loader):
            async for batch in loader:
                await asyncio.sleep(0)
            async with lock as held:
                print(held)
            return [b async for b in loader]
    """,
    "type parameters": """
        type Alias[T] = list[T]
        def first[T](xs: list[T]) -> T:
            return xs[0]
        class Box[T: int]:
            item: T
            def get(self) -> T:
                return self.item
    """,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_answers_as_libcst(name: str) -> None:
    module = cst.parse_module(textwrap.dedent(CASES[name]))
    assert differences(module) == []


def test_comparison_sees_a_difference() -> None:
    """The comparison can fail: a ``global`` ignored moves the binding."""
    from accel_migrate.codemod import scope_walk

    module = cst.parse_module(textwrap.dedent(CASES["global and nonlocal"]))
    handler = scope_walk._HANDLERS[cst.Global]
    scope_walk._HANDLERS[cst.Global] = lambda walk, node, store: None
    try:
        assert differences(module) != []
    finally:
        scope_walk._HANDLERS[cst.Global] = handler


def test_keys_are_stable_per_tree() -> None:
    """``(scope, name)`` variable keys: one scope object per scope of a tree, and
    the same one for every node in it."""
    module = cst.parse_module("def f(a):\n    b = a\n    return b\n")
    found = MetadataWrapper(module, unsafe_skip_copy=True).resolve(scopes.ScopeProvider)
    function = module.body[0]
    assert isinstance(function, cst.FunctionDef)
    names = [n for n in found if isinstance(n, cst.Name) and n.value in "ab"]
    inner = {found[n] for n in names}
    assert len(inner) == 1
    (scope,) = inner
    assert isinstance(scope, scopes.FunctionScope) and scope.node is function
    assert {b.scope for b in scope["b"]} == {scope}
    assert scope.globals is found[module]


def _sources() -> list[Path]:
    return sorted(
        {*ROOT.glob("fixtures/**/*.py"), *ROOT.glob("examples/**/*.py")}
        - set(ROOT.glob("fixtures/**/__pycache__/*.py"))
    )


def test_every_fixture_same_answers_as_libcst() -> None:
    failed = []
    for path in _sources():
        try:
            module = cst.parse_module(path.read_bytes())
        except cst.ParserSyntaxError:
            continue
        found = differences(module)
        if found:
            failed.append(f"{path.relative_to(ROOT)}: {found[:3]}")
    assert not failed, "\n".join(failed)
