"""Where a value comes from that differs between processes: the clock, the pid,
random draws (functions, tensor methods, ``torch.distributions``), and the
runtime's calls whose result is the same on every process (``divergence``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex

#: Calls whose result differs between ranks wherever they are made: the clock, the pid.
_RANK_LOCAL_CALL_PREFIXES = (
    "time.",
    "datetime.",
    "os.getpid",
)
#: Of them, the clock: each process's own reading is as right as the original's.
CLOCK_PREFIXES = ("time.", "datetime.")
#: Random draws. Every rank starts from the same seed and makes the same draws in
#: straight-line setup code (``x = torch.randn(115, 7)`` before training), so they
#: are the same there. Once training runs, the ranks' RNG states can drift apart
#: (dropout on slices of different sizes, per-step draws of local sizes): a draw in
#: a loop, in a function called from one, or after training is rank-local. A draw
#: from an explicit ``generator=`` is the same on every rank (its arguments aside).
RANDOM_CALL_PREFIXES = (
    "torch.rand",
    "torch.normal",
    "torch.bernoulli",
    "torch.multinomial",
    "torch.poisson",
    "random.",
    "numpy.random.",
)
#: Functions under those prefixes that draw nothing (seeding, RNG state, generators).
_NOT_DRAWS = frozenset(
    {
        "seed",
        "manual_seed",
        "initial_seed",
        "get_rng_state",
        "set_rng_state",
        "fork_rng",
        "getstate",
        "setstate",
        "RandomState",
        "Generator",
        "default_rng",
        "SeedSequence",
        "Random",
    }
)


def is_random_draw(qualname: str) -> bool:
    """``torch.randn``, ``random.random``, ``numpy.random.rand``... (not the seeding
    and RNG-state functions, nor a method of what a draw returns:
    ``torch.rand(1).item``)."""
    parts = qualname.split(".")
    if parts[-1] in _NOT_DRAWS:
        return False
    if parts[0] == "torch":
        return len(parts) == 2 and qualname.startswith(RANDOM_CALL_PREFIXES)
    if parts[0] == "random":
        return len(parts) == 2
    return len(parts) == 3 and parts[:2] == ["numpy", "random"]


#: Tensor methods that fill or sample a tensor with random numbers
#: (``std.data.new(std.size()).normal_()``, ``torch.empty_like(x).uniform_()``).
DRAW_METHODS = frozenset(
    {
        "bernoulli",
        "bernoulli_",
        "cauchy_",
        "exponential_",
        "geometric_",
        "log_normal_",
        "normal_",
        "random_",
        "uniform_",
    }
)
#: Methods of a ``torch.distributions`` distribution that draw (``rsample`` is
#: theirs alone; ``sample`` only on a value built by a distribution class).
DISTRIBUTION_DRAWS = frozenset({"rsample", "sample", "sample_n"})
DISTRIBUTIONS = "torch.distributions."


def method_draw(
    index: ModuleIndex, call: cst.Call, distributions: set[Key] | None = None
) -> str | None:
    """How a random draw made by a method reads (``.normal_()``,
    ``Normal(...).rsample()``), or None. ``distributions``: the variables that
    may hold a ``torch.distributions`` object (``distribution_values``)."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    name = func.attr.value
    if name in DRAW_METHODS or name == "rsample":
        return f".{name}()"
    if name not in DISTRIBUTION_DRAWS:
        return None
    receiver = func.value
    if isinstance(receiver, cst.Call) and any(
        q.startswith(DISTRIBUTIONS) for q in index.qualnames(receiver.func)
    ):
        return f".{name}()"
    key = index.key(receiver)
    if distributions is not None and key is not None and key in distributions:
        return f".{name}()"
    return None


def distribution_values(index: ModuleIndex) -> set[Key]:
    """Variables that may hold a ``torch.distributions`` object."""
    return index.tagged(
        lambda e: isinstance(e, cst.Call)
        and any(q.startswith(DISTRIBUTIONS) for q in index.qualnames(e.func))
    )


_UNIFORM_RUNTIME_CALLS = (
    "reduce",
    "global_loss",
    "gather",
    "gather_in_order",
    "world_size",
    "rank",
)
#: ``x.item()`` and ``float(x)``: a tensor read as a Python number.
TENSOR_READ = m.Call(func=m.Attribute(attr=m.Name("item")), args=[]) | m.Call(
    func=m.Name("float"), args=[m.Arg(keyword=None)]
)


def _read_tensor(read: cst.Call) -> cst.BaseExpression:
    """The tensor that ``x.item()`` or ``float(x)`` reads."""
    if isinstance(read.func, cst.Attribute):
        return read.func.value
    return read.args[0].value
