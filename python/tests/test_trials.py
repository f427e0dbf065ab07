"""Trials (jb.inputs.trial_plan / make_trial) and shape variants of every workload, at tiny scale.

Lint, per workload: every trial keeps the inputs' structure (shapes, dtypes, Python scalars), its
reference output is finite, every array leaf is varied by some trial (nothing that carries meaning
stays at create_inputs' value: ints, page tables, lengths, group sizes, affine parameters), and no
float leaf stays constant. Per operator class: the draws are valid (lengths within bounds, group
sizes summing to the row count, permuted page tables) and do what the class promises (sharp
scores, slow decay, large logits, very uneven routing). Variants: every workload declares one, it
runs at tiny scale and traces (shapes only) at cpu scale.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jb import inputs as jbi
from jb.compare import to_host_leaves
from jb.workload import load_workload
from workload_checks import WORKLOADS, workload_dir

IDS = sorted((p.name.split("_")[0] for p in WORKLOADS.iterdir() if (p / "workload.py").is_file()),
             key=lambda s: (s[-1], int(s[:-1])))
SEED = 12345
# Integer inputs that are static structure, not data: 6p's cu_q_lens (one decode token per
# sequence: 0..num_seqs), 7p's cu_q_lens and num_seqs (the serving scenario's query rows, static
# in the workload; its kv lengths and page table are redrawn).
STRUCTURAL = {"6p": {5}, "7p": {4, 5}}


def test_fifty_workloads():
    assert len(IDS) == 50


def _leaves(inputs):
    return [x for x in inputs if isinstance(x, (jax.Array, np.ndarray))]


@pytest.mark.parametrize("prefix", IDS)
def test_trials_valid_and_varied(prefix):
    wl = load_workload(workload_dir(prefix), "tiny")
    base = wl.create_inputs()
    plan = jbi.trial_plan(wl)
    assert plan[:6] == list(jbi.DISTRIBUTIONS) and len(set(plan)) == len(plan)
    fn = wl.jitted()
    varied = [False] * len(base)
    for name in plan:
        trial = jbi.make_trial(wl, base, SEED, name)
        assert len(trial) == len(base), name
        for i, (a, b) in enumerate(zip(base, trial)):
            if isinstance(a, (jax.Array, np.ndarray)):
                assert a.shape == b.shape and a.dtype == b.dtype, (prefix, name, i)
                if not np.array_equal(np.asarray(a), np.asarray(b)):
                    varied[i] = True
                if jnp.issubdtype(b.dtype, jnp.floating) and b.size > 1:
                    host = np.asarray(b, np.float32)
                    assert np.all(np.isfinite(host)), (prefix, name, i)
                    assert not np.all(host == host.flat[0]), f"{prefix} {name}: input {i} is constant"
            else:
                assert a == b, (prefix, name, i)  # static Python arguments keep their value
        out = jax.block_until_ready(fn(*trial))
        for leaf in to_host_leaves(out):
            assert np.all(np.isfinite(leaf.astype(np.float32))), f"{prefix} {name}: non-finite reference"
    again = jbi.make_trial(wl, base, SEED, plan[-1])  # replayable from (seed, name)
    for a, b in zip(_leaves(trial), _leaves(again)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    unvaried = [i for i, (a, v) in enumerate(zip(base, varied))
                if isinstance(a, (jax.Array, np.ndarray)) and not v and i not in STRUCTURAL.get(prefix, ())]
    assert not unvaried, f"{prefix}: inputs {unvaried} are never varied by any trial"


def _trial(prefix, name, seed=SEED):
    wl = load_workload(workload_dir(prefix), "tiny")
    base = wl.create_inputs()
    return wl, base, jbi.make_trial(wl, base, seed, name)


def _score_std(q, k, scale):
    q, k = np.asarray(q, np.float32), np.asarray(k, np.float32)
    return float(np.std(np.einsum("...qd,...kd->...qk", q[..., :16, :], k[..., :, :]) * scale))


@pytest.mark.parametrize("prefix,scale", [("1p", 128 ** -0.5), ("4p", 1.0), ("5p", 128 ** -0.5)])
def test_sharp_attention(prefix, scale):
    _, base, (q, k, *_) = _trial(prefix, "sharp")
    k = np.repeat(np.asarray(k, np.float32), q.shape[1] // k.shape[1], axis=1)
    assert _score_std(base[0], np.repeat(np.asarray(base[1], np.float32), q.shape[1] // base[1].shape[1], axis=1), scale) < 1.5
    assert _score_std(q, k, scale) > 2.5


def test_long_range_attention_leans_on_far_keys():
    _, _, (q, k, v) = _trial("1p", "long_range")
    q, k = np.asarray(q, np.float32), np.asarray(k, np.float32)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
    last = s[:, :, -1, :]  # the last query sees every key
    top = np.argmax(last, axis=-1)
    # The keys it attends most are spread over the sequence, not just the recent window.
    assert np.any(top < q.shape[2] - 32)
    p = np.exp(last - last.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    assert float(p[..., : q.shape[2] - 32].sum(-1).mean()) > 0.5


def test_ssd_long_range_decay():
    _, base, (_, _, _, a_log) = _trial("16p", "long_range")
    a = 1 / (1 + np.exp(-np.asarray(a_log, np.float64)))
    assert a.min() >= 0.98
    assert (1 / (1 + np.exp(-np.asarray(base[3], np.float64)))).max() < 0.2  # the published decay is fast


@pytest.mark.parametrize("name", ["normal", "random_pages", "sharp"])
def test_paged_attention_pages_and_lengths(name):
    wl, base, trial = _trial("6p", name)
    _, k_pages, _, kv_lens, table, _ = (np.asarray(x) for x in trial)
    n, pps = table.shape
    max_len = pps * k_pages.shape[1]
    assert len(set(table.ravel().tolist())) == table.size and table.min() >= 0 and table.max() < k_pages.shape[0]
    assert not np.array_equal(table, np.asarray(base[4]))
    assert kv_lens.min() >= 1 and kv_lens.max() <= max_len
    assert kv_lens.max() == max_len or name == "random_pages"
    assert kv_lens.min() < 2 * k_pages.shape[1]  # at least one short sequence


@pytest.mark.parametrize("name", ["normal", "random_pages"])
def test_ragged_paged_attention_lengths(name):
    wl, base, trial = _trial("7p", name)
    bound = np.asarray(base[2])
    q_lens = np.diff(np.asarray(base[4]))
    lens = np.asarray(trial[2])
    active = int(np.asarray(base[5])[0])
    assert np.all(lens[:active] >= q_lens[:active]) and np.all(lens[:active] <= bound[:active])
    assert np.array_equal(lens[active:], bound[active:])
    table = np.asarray(trial[3])
    assert sorted(table.ravel().tolist()) == list(range(table.size))
    assert not np.array_equal(table, np.asarray(base[3]))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_gmm_ragged_groups(seed):
    wl, base, (lhs, rhs, sizes, cap) = _trial("11p", "ragged_groups", seed)
    sizes = np.asarray(sizes)
    assert sizes.sum() == lhs.shape[0] and sizes.max() <= cap and sizes.min() == 0
    assert sizes.max() >= 2 * lhs.shape[0] // rhs.shape[0]  # very uneven
    _, _, (_, _, normal_sizes, _) = _trial("11p", "normal", seed)
    assert np.asarray(normal_sizes).sum() == lhs.shape[0] and np.asarray(normal_sizes).max() <= cap


def test_ragged_sizes_bounds():
    rng = np.random.default_rng(0)
    for total, groups, cap in [(128, 8, 64), (64, 8, 8), (10, 3, 10), (1024, 16, 256), (5, 1, 5)]:
        s = jbi.ragged_sizes(rng, total, groups, cap)
        assert s.sum() == total and s.max() <= cap and s.min() >= 0 and len(s) == groups
    with pytest.raises(ValueError):
        jbi.ragged_sizes(rng, 100, 2, 10)


def test_moe_ragged_routing_leaves_experts_empty():
    wl, base, (x, router, *_) = _trial("10p", "ragged_groups")
    logits = np.asarray(x, np.float32).reshape(-1, x.shape[-1]) @ np.asarray(router, np.float32)
    top2 = np.argsort(-logits, axis=1)[:, :2]
    counts = np.bincount(top2.ravel(), minlength=router.shape[1])
    assert (counts == 0).sum() >= 2 and counts.max() >= 0.5 * x.shape[0] * x.shape[1]


@pytest.mark.parametrize("prefix", ["13p", "38k", "43k", "50k"])
def test_large_logits(prefix):
    wl, base, trial = _trial(prefix, "large_logits")
    if prefix == "13p":
        logits = np.asarray(trial[0], np.float32) @ np.asarray(trial[1], np.float32)
        assert np.mean(logits.max(axis=1) > 88.0) > 0.5  # exp overflows float32 on most rows
        labels = np.asarray(trial[2])
        assert labels.min() >= 0 and labels.max() < trial[1].shape[1]
        assert not np.array_equal(labels, np.asarray(base[2]))
    else:
        out = np.asarray(wl.jitted()(*trial), np.float32)
        assert np.mean(out.max(axis=1) > 0.9) > 0.5  # softmax rows nearly one-hot


@pytest.mark.parametrize("prefix", ["22k", "25k", "26k", "28k", "29k", "31k", "34k", "40k", "43k", "45k", "46k", "48k"])
def test_affine_parameters_resampled(prefix):
    wl, base, trial = _trial(prefix, "affine")
    constants = [i for i, a in enumerate(base) if isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jnp.floating)
                 and np.all(np.asarray(a) == np.asarray(a).ravel()[0])]
    assert constants, f"{prefix}: expected constant affine parameters in create_inputs"
    for i in constants:
        new = np.asarray(trial[i], np.float32)
        c = float(np.asarray(base[i]).ravel()[0])
        moved = np.std(new) > 0.1 if new.size > 1 else float(new.ravel()[0]) != c
        assert moved and (c == 0 or np.all(np.sign(new) == np.sign(c))), (prefix, i)


def test_mask_is_binary_and_random():
    _, base, trial = _trial("17p", "normal")
    mask = np.asarray(trial[1], np.float32)
    assert set(np.unique(mask).tolist()) == {0.0, 1.0} and 0.6 < mask.mean() < 0.95


def test_unknown_trial_rejected():
    wl = load_workload(workload_dir("12p"), "tiny")
    with pytest.raises(ValueError):
        jbi.make_trial(wl, wl.create_inputs(), 1, "nonsense")


# ----------------------------------------------------------------------------------------------
# Shape variants


@pytest.mark.parametrize("prefix", IDS)
def test_variants_run(prefix):
    for scale in ("tiny", "cpu"):
        wl = load_workload(workload_dir(prefix), scale)
        variants = wl.variants()
        assert variants, f"{prefix}: no shape variant declared"
        base_shapes = [tuple(x.shape) for x in jax.eval_shape(wl.create_inputs) if hasattr(x, "shape")]
        for override in variants:
            vwl = load_workload(workload_dir(prefix), scale)
            vwl.module.CONFIG.update(override)
            if scale == "tiny":  # run the reference, on a trial too
                inputs = vwl.create_inputs()
                out = jax.block_until_ready(vwl.jitted()(*jbi.make_trial(vwl, inputs, SEED, jbi.trial_plan(vwl)[-1])))
                assert all(np.all(np.isfinite(x.astype(np.float32))) for x in to_host_leaves(out)), (prefix, override)
                shapes = [tuple(x.shape) for x in inputs if hasattr(x, "shape")]
            else:  # shapes only (cheap): create_inputs and the workload, traced
                abstract = list(jax.eval_shape(vwl.create_inputs))
                if vwl.static_argnums:  # Python scalars (11p's max_expert_size) must be concrete
                    concrete = vwl.create_inputs()
                    for i in vwl.static_argnums:
                        abstract[i] = concrete[i]
                vwl.jitted().trace(*abstract)
                shapes = [tuple(x.shape) for x in abstract if hasattr(x, "shape")]
            assert shapes != base_shapes, f"{prefix} {scale}: variant {override} does not change any input shape"
