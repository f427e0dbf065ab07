"""Fresh input sets for verification and timing: generic distributions and per-operator trials.

``create_inputs`` of a workload uses fixed seeds. To give each correctness trial fresh values (so a
kernel that caches results across calls, or that hard-codes the seed's statistics, fails), each
floating-point input leaf is redrawn from a distribution at the leaf's own scale:
``mean(orig) + std(orig) * z`` with z from the named distribution (``resample``).

The magnitude distributions (``small``, ``large``) rescale only the first floating-point input
(the activations); weights keep their scale. Rescaling every input compounds in multi-input
workloads (MLA scores would move by 4^3), turning attention into argmax and making a correct bf16
kernel fail, or shrinking outputs until a kernel returning zeros passes.

Trials (``trial_plan`` / ``make_trial``) go further, so that the shortcuts a kernel could take under
gentle inputs fail:

* every trial also redraws the leaves ``resample`` keeps: constant float leaves (the affine and
  normalisation parameters that ``create_inputs`` sets to ones/zeros) are drawn away from their
  constant (ones -> uniform [0.5, 2), positive so variances stay valid; zeros -> N(0, 0.5)), so a
  kernel that ignores a GroupNorm weight or a BatchNorm mean fails;
* a workload may declare ``TRIALS = [names]`` (operator classes such as ``"sharp"``,
  ``"long_range"``, ``"random_pages"``, ``"ragged_groups"``, ``"large_logits"``, ``"confident"``) and a hook
  ``make_trial(name, rng, inputs) -> tuple | None`` that is called for EVERY trial (generic ones
  included) after the generic redraw: it redraws the leaves that carry meaning (integer labels,
  page tables, lengths, group sizes, masks) validly and applies its own classes. ``None`` means
  "no change". Hooks read shapes from the inputs (not CONFIG), so they also serve shape variants.
"""

from __future__ import annotations

import zlib

import numpy as np

DISTRIBUTIONS = ("normal", "uniform", "signed", "small", "large", "sparse")

# Operator classes a workload may list in TRIALS (documentation and validation).
# (A bf16 accumulator is exposed by a long-reduction shape variant, not a trial: trials keep shapes.)
# "confident": a classifier's inputs that know their labels (the label's logit well above the rest,
# as in a trained model): with random labels a loss averaged over tokens hardly depends on them.
CLASSES = ("sharp", "long_range", "random_pages", "ragged_groups", "affine", "large_logits", "confident")


def _standard_sample(rng: np.random.Generator, dist: str, shape) -> np.ndarray:
    if dist == "normal":
        return rng.standard_normal(shape, dtype=np.float32)
    if dist == "uniform":  # [0, 1) rescaled to unit variance, mean 0.5*sqrt(12)
        return (rng.random(shape, dtype=np.float32) - 0.5) * np.float32(np.sqrt(12.0))
    if dist == "signed":  # random signs of magnitude ~1: a bimodal distribution
        return np.where(rng.random(shape) < 0.5, -1.0, 1.0).astype(np.float32) * (
            0.75 + 0.5 * rng.random(shape, dtype=np.float32)
        )
    if dist == "small":
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.25)
    if dist == "large":
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(2.0)
    if dist == "normal_unit":  # internal: the shape of small/large without their magnitude
        return rng.standard_normal(shape, dtype=np.float32)
    if dist == "sparse":
        z = rng.standard_normal(shape, dtype=np.float32) * np.float32(2.0)
        return np.where(rng.random(shape) < 0.75, np.float32(0.0), z)
    raise ValueError(f"unknown distribution {dist!r}; expected one of {DISTRIBUTIONS}")


def resample(inputs, seed: int, dist: str = "normal"):
    """Return a tuple like ``inputs`` with every non-constant float leaf redrawn.

    Constant leaves, integer leaves and Python scalars keep their values (``make_trial`` redraws
    those too)."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    first_float = [True]

    def redraw(leaf):
        if not isinstance(leaf, (jax.Array, np.ndarray)):
            return leaf
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            return leaf
        host = np.asarray(leaf, dtype=np.float32)
        if host.size <= 1:
            return leaf
        mean, std = float(host.mean()), float(host.std())
        if std == 0.0 or not np.isfinite(std):
            return leaf
        leaf_dist = dist
        if dist in ("small", "large") and not first_float[0]:
            leaf_dist = "normal_unit"
        first_float[0] = False
        z = _standard_sample(rng, leaf_dist, host.shape)
        if dist == "sparse":
            new = z * std + np.where(z == 0, 0.0, mean)
        else:
            new = mean + std * z
        return jnp.asarray(new.astype(np.float32), dtype=leaf.dtype)

    return tuple(jax.tree_util.tree_map(redraw, tuple(inputs)))


def trial_plan(wl) -> list[str]:
    """Trial names for a workload: the generic distributions, then the workload's own classes."""
    own = [str(n) for n in (getattr(wl.module, "TRIALS", None) or [])]
    unknown = [n for n in own if n not in CLASSES and n not in DISTRIBUTIONS]
    if unknown:
        raise ValueError(f"{wl.name}: unknown trial classes {unknown}; expected some of {CLASSES}")
    return list(DISTRIBUTIONS) + [n for n in own if n not in DISTRIBUTIONS]


def trial_rng(seed: int, name: str) -> np.random.Generator:
    """The generator a trial's hook draws from: a function of (seed, name) only."""
    return np.random.default_rng([int(seed) & (2**63 - 1), zlib.crc32(name.encode())])


def redraw_constants(inputs, rng: np.random.Generator, wide: bool = False) -> tuple:
    """Redraw every constant float leaf (size >= 1): ones-like (c != 0) -> c * U[0.5, 2), zeros ->
    N(0, 0.5); ``wide`` (the "affine" trial): c * exp(N(0, 0.8)) and N(0, 1). The sign of c is
    kept (a variance stays positive). Non-constant, integer and Python-scalar leaves are kept."""
    import jax
    import jax.numpy as jnp

    def redraw(leaf):
        if not isinstance(leaf, (jax.Array, np.ndarray)) or not jnp.issubdtype(leaf.dtype, jnp.floating):
            return leaf
        host = np.asarray(leaf, dtype=np.float32)
        if host.size == 0 or not np.all(host == host.flat[0]):
            return leaf
        c = float(host.flat[0])
        if c == 0.0:
            new = rng.standard_normal(host.shape).astype(np.float32) * np.float32(1.0 if wide else 0.5)
        elif wide:
            new = np.float32(c) * np.exp(rng.normal(0.0, 0.8, host.shape)).astype(np.float32)
        else:
            new = np.float32(c) * rng.uniform(0.5, 2.0, host.shape).astype(np.float32)
        return jnp.asarray(new, dtype=leaf.dtype)

    return tuple(jax.tree_util.tree_map(redraw, tuple(inputs)))


def make_trial(wl, base_inputs, seed: int, name: str) -> tuple:
    """Fresh inputs for trial ``name`` (see ``trial_plan``) from the workload's base inputs.

    Generic names redraw the float leaves with that distribution; class names start from ``normal``.
    Then constant float leaves are redrawn (``redraw_constants``) and the workload's
    ``make_trial`` hook, if any, redraws what carries meaning and applies the class.
    """
    if name not in DISTRIBUTIONS and name not in CLASSES:
        raise ValueError(f"unknown trial {name!r}; expected one of {DISTRIBUTIONS + CLASSES}")
    dist = name if name in DISTRIBUTIONS else "normal"
    inputs = resample(base_inputs, seed, dist)
    rng = trial_rng(seed, name)
    inputs = redraw_constants(inputs, rng, wide=(name == "affine"))
    hook = getattr(wl.module, "make_trial", None)
    if callable(hook):
        out = hook(name, rng, tuple(inputs))
        if out is not None:
            if len(out) != len(inputs):
                raise ValueError(f"{wl.name}: make_trial({name!r}) returned {len(out)} inputs, expected {len(inputs)}")
            inputs = tuple(out)
    return tuple(inputs)


# Helpers for workload hooks -------------------------------------------------------------------


def like(leaf, values: np.ndarray):
    """``values`` as a jax array with ``leaf``'s dtype."""
    import jax.numpy as jnp

    return jnp.asarray(np.asarray(values), dtype=leaf.dtype)


def host(leaf) -> np.ndarray:
    return np.asarray(leaf, dtype=np.float32)


def ragged_sizes(rng: np.random.Generator, total: int, groups: int, cap: int) -> np.ndarray:
    """``groups`` int sizes, each in [0, cap], summing to ``total``: very uneven, with empty groups.

    Requires groups * cap >= total. Half the groups (at least one, when groups > 1 and the rest can
    hold ``total``) are empty or tiny; the rest take random shares, filled up to the cap greedily.
    """
    if groups * cap < total:
        raise ValueError(f"cannot split {total} rows into {groups} groups of at most {cap}")
    weights = rng.exponential(1.0, groups) ** 3  # heavy-tailed shares: very uneven
    n_empty = min(groups - -(-total // cap), max(1, groups // 3)) if groups > 1 else 0
    if n_empty > 0:
        weights[rng.choice(groups, n_empty, replace=False)] = 0.0
    if weights.sum() == 0:
        weights[rng.integers(groups)] = 1.0
    sizes = np.minimum(np.floor(weights / weights.sum() * total).astype(np.int64), cap)
    # The remainder goes to non-empty groups first (random order, each up to the cap).
    order = rng.permutation(groups)
    left = total - int(sizes.sum())
    for g in [g for g in order if weights[g] > 0] + [g for g in order if weights[g] == 0]:
        add = min(cap - int(sizes[g]), left)
        sizes[g] += add
        left -= add
    assert int(sizes.sum()) == total and sizes.max() <= cap and sizes.min() >= 0
    return sizes


def spread_scale(samples: np.ndarray, target_std: float) -> float:
    """Factor that brings the standard deviation of ``samples`` to ``target_std``."""
    std = float(np.std(samples))
    return target_std / std if std > 0 else 1.0


def rms(a) -> float:
    a = host(a)
    return float(np.sqrt(np.mean(a * a))) if a.size else 0.0


def sharpen(q, k, score_scale: float, target_std: float = 4.0):
    """``q`` rescaled so that scores ``score_scale * q.k`` have a standard deviation of about
    ``target_std`` (softmax far from uniform). Estimate: rms(q) * rms(k) * sqrt(D) * score_scale."""
    d = q.shape[-1]
    est = rms(q) * rms(k) * np.sqrt(d) * score_scale
    factor = target_std / est if est > 0 else 1.0
    return like(q, host(q) * np.float32(factor))


def long_range(rng: np.random.Generator, q, k, score_scale: float, boost: float = 6.0,
               seq_axis: int = -2):
    """Long-range dependence: a random direction u is added to every query and, with a large
    weight, to the keys at a few random positions spread over the whole sequence (one per
    segment of S/16), so that every
    query's attention concentrates on far-away keys (score boost ~``boost``). Heads, batch and
    positions share u. Returns (q, k)."""
    qh, kh = host(q), host(k)
    if seq_axis not in (-2, kh.ndim - 2):
        raise ValueError("long_range expects (..., S, D) inputs")
    d, s_k = qh.shape[-1], kh.shape[-2]
    u = rng.standard_normal(d).astype(np.float32)
    u /= np.linalg.norm(u)
    a = max(rms(qh) * np.sqrt(d), 1e-3)  # about a query row's norm
    b = boost / (score_scale * a)
    n_pos = max(2, min(s_k, s_k // 16))  # one random position in each of n_pos equal segments
    edges = np.linspace(0, s_k, n_pos + 1).astype(int)
    pos = np.array([rng.integers(lo, max(lo + 1, hi)) for lo, hi in zip(edges[:-1], edges[1:])])
    bump = np.zeros((s_k, 1), np.float32)
    bump[pos] = np.float32(b)
    return like(q, qh + np.float32(a) * u), like(k, kh + bump * u)
