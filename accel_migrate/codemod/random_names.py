"""The names of random draws, without libcst: random functions, tensor methods
that fill a tensor with random numbers, ``torch.distributions`` samples and
torchvision's random augmentations. The project view (``project_draws``) reads
helpers with ``ast`` on the cache's path, where libcst is not imported; the
rules' libcst side (``rank_local_calls``, ``data_pipeline``) shares these."""

from __future__ import annotations

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


#: torchvision's augmentations that draw from the global random state when applied
#: (besides every ``Random*`` class).
_RANDOM_TRANSFORMS = frozenset(
    {"ColorJitter", "RandAugment", "AutoAugment", "TrivialAugmentWide", "AugMix"}
)


def random_transform(qualname: str) -> bool:
    """``torchvision.transforms.RandomCrop``, ``...v2.RandomHorizontalFlip``,
    ``...ColorJitter``: an augmentation that draws each time it is applied."""
    if not qualname.startswith("torchvision.transforms."):
        return False
    last = qualname.rsplit(".", 1)[-1]
    return last.startswith("Random") or last in _RANDOM_TRANSFORMS


#: torchvision's detection models whose region proposal network and RoI heads
#: sample the anchors and proposals they train on in train mode
#: (``BalancedPositiveNegativeSampler``: ``torch.randperm`` per image): the
#: classes, by their exact names (not ``MaskRCNNPredictor`` nor
#: ``KeypointRCNNHeads``, layers that draw nothing), and the builders, by the
#: prefix of theirs (``fasterrcnn_resnet50_fpn``).
_SAMPLING_CLASSES = frozenset(
    {"FasterRCNN", "MaskRCNN", "KeypointRCNN", "RegionProposalNetwork", "RoIHeads"}
)
_SAMPLING_BUILDERS = ("fasterrcnn_", "maskrcnn_", "keypointrcnn_")


def sampling_model(qualname: str) -> bool:
    """Does ``qualname`` build a library model that draws in train mode: a
    torchvision Faster/Mask/Keypoint R-CNN (or its RPN or RoI heads), which
    samples anchors and proposals with ``torch.randperm`` for each image?"""
    if not qualname.startswith("torchvision.models.detection."):
        return False
    last = qualname.rsplit(".", 1)[-1]
    return last in _SAMPLING_CLASSES or last.startswith(_SAMPLING_BUILDERS)


#: What a random state or generator draws with (``rng.choice``, ``rs.permutation``),
#: and what ``random``/``numpy.random``/``torch`` pick items with.
_PICKS = frozenset(
    {"choice", "choices", "sample", "shuffle", "permutation", "multinomial"}
)
_STATE_DRAWS = _PICKS | frozenset(
    {"integers", "random", "uniform", "normal", "randint", "randn", "rand", "randrange"}
)
#: How a held random state is spelt (``self.rng``, ``np_random``, ``generator``).
_STATES = ("rng", "random_state", "generator", "np_random")


def spelled_draw(dotted: str, picks_only: bool = False) -> bool:
    """Is the call spelt ``dotted`` (as written, unresolved: ``np.random.choice``,
    ``random.sample``, ``torch.randint``, ``self.rng.choice``, a bare ``choice``
    imported from ``random``) a random draw? For the ``ast``-only readers that see
    one class without its imports (``replay_buffers``). ``picks_only``: only the
    draws that pick items (``choice``, ``sample``, ``multinomial``...). A name
    that only contains such a word (``sample_weights``, ``choices_cfg``,
    ``downsample``, ``self.sampler``) is not a draw."""
    parts = dotted.split(".")
    last, head = parts[-1], parts[:-1]
    if last in _NOT_DRAWS:
        return False
    names = _PICKS if picks_only else _STATE_DRAWS | {"randperm", "bernoulli"}
    if not head:  # `from random import choice`
        return last in names and last not in ("random", "normal", "uniform")
    owner = head[-1].lower()
    if owner == "random":  # random.x, np.random.x, torch.random.x
        return last in names or not picks_only
    if head == ["torch"]:
        torch_names = {"multinomial", "randperm"} if picks_only else None
        return (
            last in torch_names
            if torch_names is not None
            else is_random_draw("torch." + last) or last == "randperm"
        )
    if any(s in owner for s in _STATES) or owner == "rs":
        return last in names
    return False
