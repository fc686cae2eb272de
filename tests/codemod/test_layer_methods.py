"""``layer_methods``: the methods of a model class, other than ``forward``, that
run its layers themselves (AM042's loss methods), read with ``ast`` from a
class's source. End to end (and AM017's model methods that write files):
fixtures/projects/model_method_calls and fixtures/unimplemented_forward."""

from __future__ import annotations

import ast
import textwrap

from accel_migrate.codemod.layer_methods import layer_methods

SOURCE = textwrap.dedent("""
    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(10, 4)
            self.crf = CRF(4, 3)
            self.scale = 2.0

        def __features(self, xs):
            return self.embedding(xs)

        def loss(self, xs, tags):
            return self.crf.loss(self.__features(xs), tags)

        def nll(self, x, y):
            return F.cross_entropy(self(x), y)

        def through_forward(self, x):
            return self.forward(x).sum()

        def loss_function(self, recons, x):
            return F.mse_loss(recons, x) * self.scale

        def forward(self, xs):
            return self.crf(self.__features(xs))

        @staticmethod
        def helper(x):
            return x
    """)


def _cls() -> ast.ClassDef:
    node = ast.parse(SOURCE).body[0]
    assert isinstance(node, ast.ClassDef)
    return node


def test_methods_that_run_layers() -> None:
    assert layer_methods(_cls()) == ("__features", "loss", "nll", "through_forward")


def test_a_method_combining_outputs_runs_none() -> None:
    found = layer_methods(_cls())
    assert "loss_function" not in found
    assert "forward" not in found and "__init__" not in found
    assert "helper" not in found
