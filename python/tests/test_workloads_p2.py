"""Priority workloads 9p-17p: independent numpy references at tiny scale, lints, published CONFIGs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jb.workload import load_workload
from workload_checks import lint_workload, workload_dir

IDS = ["9p", "10p", "11p", "12p", "13p", "14p", "15p", "16p", "17p"]


def load(prefix: str, scale: str = "tiny"):
    return load_workload(workload_dir(prefix), scale)


def f64(x) -> np.ndarray:
    """The exact (bf16-rounded) values of a JAX array as float64 (host-side, no JAX compile)."""
    return np.asarray(x).astype(np.float64)


def run_tiny(prefix: str):
    wl = load(prefix)
    inputs = wl.create_inputs()
    out = np.asarray(jax.block_until_ready(wl.jitted()(*inputs))).astype(np.float64)
    return wl, inputs, out


def assert_close(out, ref, atol=1e-2, rtol=1e-2):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    err = np.abs(out - ref)
    bound = atol + rtol * np.maximum(np.abs(out), np.abs(ref))
    assert np.all(err <= bound), f"max abs err {err.max():.3g}, {int((err > bound).sum())} of {err.size} outside"
    # The comparison must not be vacuous.
    assert np.abs(ref).max() > 10 * atol


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


# ----------------------------------------------------------------------------------------------
# 1. Independent references (tiny scale)


def test_9p_swiglu_reference():
    _, (x, wg, wu, wd), out = run_tiny("9p")
    x, wg, wu, wd = map(f64, (x, wg, wu, wd))
    tokens = x.reshape(-1, x.shape[-1])
    ref = np.stack([(silu(t @ wg) * (t @ wu)) @ wd for t in tokens]).reshape(out.shape)
    assert out.dtype == np.float64 and ref.shape == (2, 16, 1024)
    assert_close(out, ref)


def test_10p_moe_reference():
    wl, inputs, out = run_tiny("10p")
    x, router, wg, wu, wd = map(f64, inputs)
    k = wl.config["num_experts_per_tok"]
    tokens = x.reshape(-1, x.shape[-1])
    ref = np.zeros_like(tokens)
    for t, tok in enumerate(tokens):
        logits = tok @ router
        order = np.argsort(-logits, kind="stable")
        chosen = order[:k]
        # The routing decision must be unambiguous for this comparison to be meaningful.
        assert logits[order[k - 1]] - logits[order[k]] > 1e-4
        w = np.exp(logits[chosen] - logits[chosen].max())
        w /= w.sum()
        for weight, e in zip(w, chosen):
            ref[t] += weight * ((silu(tok @ wg[e]) * (tok @ wu[e])) @ wd[e])
    assert len(router[0]) == 8 and k == 2
    assert_close(out, ref.reshape(out.shape))


def gmm_loop(lhs, rhs, sizes):
    out = np.zeros((lhs.shape[0], rhs.shape[-1]))
    start = 0
    for g, size in enumerate(sizes):
        out[start:start + size] = lhs[start:start + size] @ rhs[g]
        start += size
    return out


def test_11p_gmm_reference():
    wl, (lhs, rhs, sizes, max_size), out = run_tiny("11p")
    assert isinstance(max_size, int) and wl.static_argnums == (3,)
    assert np.asarray(sizes).tolist() == [16] * 8 and max_size == 64  # min(M, 4 * M/G), as published
    assert out.shape == (128, 64) and wl.jitted()(lhs, rhs, sizes, max_size).dtype == jnp.bfloat16
    assert_close(out, gmm_loop(f64(lhs), f64(rhs), np.asarray(sizes)))


def test_11p_gmm_uneven_groups():
    """The scan handles empty and unequal groups (window = the largest group)."""
    wl = load("11p")
    lhs, rhs, _, _ = wl.create_inputs()
    sizes = [5, 0, 30, 16, 9, 20, 40, 8]
    assert sum(sizes) == lhs.shape[0]
    out = wl.jitted()(lhs, rhs, jnp.asarray(sizes, jnp.int32), max(sizes))
    assert out.dtype == jnp.bfloat16  # bf16 output, as published
    assert_close(np.asarray(out), gmm_loop(f64(lhs), f64(rhs), sizes))


def test_12p_rmsnorm_reference():
    wl, (x, scale), out = run_tiny("12p")
    x, scale = f64(x), f64(scale)
    ref = x / np.sqrt(np.mean(x ** 2, axis=-1, keepdims=True) + wl.config["epsilon"]) * scale
    assert_close(out, ref)


def test_13p_cross_entropy_reference():
    wl, (h, w, labels), out = run_tiny("13p")
    logits = f64(h) @ f64(w)
    m = logits.max(axis=-1)
    lse = m + np.log(np.exp(logits - m[:, None]).sum(axis=-1))
    labels = np.asarray(labels)
    ref = np.mean(lse - logits[np.arange(len(labels)), labels])
    assert out.shape == () and np.asarray(wl.jitted()(h, w, labels)).dtype == np.float32
    # A scalar mean in float32: far tighter than bf16 element tolerance (see the workload's TOLERANCE).
    assert abs(float(out) - ref) <= 1e-4 * abs(ref)
    assert wl.tolerance == {"atol": 1e-3, "rtol": 1e-4}


def test_14p_ragged_dot_reference():
    _, (x, w), out = run_tiny("14p")
    x, w = f64(x), f64(w)
    ref = np.stack([x[g] @ w[g] for g in range(x.shape[0])])
    assert out.shape == (4, 32, 96)
    assert_close(out, ref)


def test_15p_retention_recurrent_form():
    wl, (q, k, v), out = run_tiny("15p")
    q, k, v = f64(q), f64(k), f64(v)
    b, h, s, d = q.shape
    ref = np.zeros_like(v)
    for bi in range(b):
        for hi in range(h):
            gamma = 1.0 - 2.0 ** (-5 - hi)
            state = np.zeros((d, d))  # S_n = gamma * S_{n-1} + k_n^T v_n
            keys_seen = []
            for n in range(s):
                state = gamma * state + np.outer(k[bi, hi, n], v[bi, hi, n])
                keys_seen.append(k[bi, hi, n])
                numer = q[bi, hi, n] @ state
                # Normaliser: sum over m <= n of |q_n . k_m| gamma^(n-m), clamped below at 1.
                weights = np.array([abs(q[bi, hi, n] @ km) * gamma ** (n - m) for m, km in enumerate(keys_seen)])
                ref[bi, hi, n] = numer / max(weights.sum(), 1.0)
    assert_close(out, ref)


def test_16p_ssd_recurrent_scan():
    _, (q, k, v, a_log), out = run_tiny("16p")
    assert a_log.dtype == jnp.float32
    q, k, v, a_log = f64(q), f64(k), f64(v), np.asarray(a_log, np.float64)
    b, h, s, d = q.shape
    ref = np.zeros_like(v)
    for bi in range(b):
        for hi in range(h):
            state = np.zeros((d, d))  # h_t = a_t h_{t-1} + k_t v_t^T
            ksum = np.zeros(d)  # z_t = a_t z_{t-1} + k_t  (row sums of the masked scores: q_t . z_t)
            for t in range(s):
                a = sigmoid(a_log[bi, hi, t])
                state = a * state + np.outer(k[bi, hi, t], v[bi, hi, t])
                ksum = a * ksum + k[bi, hi, t]
                ref[bi, hi, t] = (q[bi, hi, t] @ state) / max(abs(q[bi, hi, t] @ ksum), 1.0)
    assert_close(out, ref)


def test_17p_triangle_reference():
    _, inputs, out = run_tiny("17p")
    act, mask, wl_, wr, wlg, wrg, cscale, wo, wog = map(f64, inputs)
    x = act * mask
    left = (x @ wl_) * sigmoid(x @ wlg)
    right = (x @ wr) * sigmoid(x @ wrg)
    n, _, c = left.shape
    # Outgoing edges: center[i, j, c] = sum_k left[i, k, c] right[j, k, c], one matmul per channel.
    center = np.stack([left[:, :, ch] @ right[:, :, ch].T for ch in range(c)], axis=-1)
    center = center / np.sqrt(np.mean(center ** 2, axis=-1, keepdims=True) + 1e-6) * cscale
    ref = (center @ wo) * sigmoid(act @ wog)
    assert ref.shape == (32, 32, 64)
    assert_close(out, ref)


# ----------------------------------------------------------------------------------------------
# 2. Lints


@pytest.mark.parametrize("prefix", IDS)
def test_lint(prefix):
    lint_workload(prefix)


# ----------------------------------------------------------------------------------------------
# 3. Published CONFIGs and FLOP counts

PAPER = {
    "9p": {"name": "llama3_70b_swiglu", "model": "Llama-3.1-70B", "operator": "swiglu_mlp", "batch": 2,
           "seq_len": 4096, "emb_dim": 8192, "mlp_dim": 28672},
    "10p": {"name": "mixtral_8x7b_moe", "model": "Mixtral-8x7B", "operator": "sparse_moe", "batch": 2,
            "seq_len": 4096, "emb_dim": 4096, "mlp_dim": 14336, "num_experts": 8, "num_experts_per_tok": 2},
    "11p": {"name": "megablox_gmm_qwen3_235b", "model": "Qwen3-235B-A22B", "operator": "grouped_matmul",
            "num_experts": 128, "num_experts_per_tok": 8, "emb_dim": 4096, "moe_mlp_dim": 1536, "seq_len": 4096},
    "12p": {"name": "llama3_70b_rmsnorm", "model": "Llama-3.1-70B", "operator": "rms_norm", "batch": 8,
            "seq_len": 4096, "emb_dim": 8192, "epsilon": 1e-5},
    "13p": {"name": "llama3_8b_cross_entropy", "model": "Llama-3.1-8B", "operator": "fused_cross_entropy",
            "batch_tokens": 8192, "hidden_dim": 4096, "vocab_size": 128256},
    "14p": {"name": "mixtral_8x7b_ragged_dot", "model": "Mixtral-8x7B", "operator": "ragged_dot",
            "num_groups": 8, "M": 8192, "K": 4096, "N": 14336},
    "15p": {"name": "retnet_6_7b_retention", "model": "RetNet-6.7B", "operator": "multi_scale_retention",
            "batch": 4, "seq_len": 4096, "num_heads": 16, "head_dim": 256, "d_model": 4096},
    "16p": {"name": "mamba2_2_7b_ssd", "model": "Mamba-2-2.7B", "operator": "state_space_duality", "batch": 4,
            "seq_len": 4096, "num_heads": 64, "head_dim": 64, "d_state": 128, "d_model": 2560},
    "17p": {"name": "alphafold_768_triangle_mult", "model": "AlphaFold2", "operator": "triangle_mult_outgoing",
            "N": 1536, "C": 128, "direction": "outgoing"},
}

HANDTUNED = {"11p"}


def expected_flops(prefix: str, c: dict) -> int:
    if prefix == "9p":  # gate, up, down matmuls
        return 3 * 2 * c["batch"] * c["seq_len"] * c["emb_dim"] * c["mlp_dim"]
    if prefix == "10p":  # router + every expert's SwiGLU MLP for every token (the paper's dense count)
        t = c["batch"] * c["seq_len"]
        return 2 * t * c["emb_dim"] * c["num_experts"] + t * c["num_experts"] * 3 * 2 * c["emb_dim"] * c["mlp_dim"]
    if prefix == "11p":
        return 2 * (c["seq_len"] * c["num_experts_per_tok"]) * c["emb_dim"] * c["moe_mlp_dim"]
    if prefix == "12p":
        return 5 * c["batch"] * c["seq_len"] * c["emb_dim"]
    if prefix == "13p":
        return 2 * c["batch_tokens"] * c["hidden_dim"] * c["vocab_size"] + 3 * c["batch_tokens"] * c["vocab_size"]
    if prefix == "14p":
        return 2 * c["M"] * c["K"] * c["N"]
    if prefix in ("15p", "16p"):  # Q K^T and scores @ V over the full S x S matrix
        return 2 * 2 * c["batch"] * c["num_heads"] * c["seq_len"] ** 2 * c["head_dim"]
    if prefix == "17p":  # 4 input proj/gate + output proj + output gate, plus the triangle contraction
        return 6 * 2 * c["N"] ** 2 * c["C"] ** 2 + 2 * c["N"] ** 3 * c["C"]
    raise KeyError(prefix)


@pytest.mark.parametrize("prefix", IDS)
def test_config_meta_flops(prefix):
    paper = load(prefix, "paper")
    assert paper.config == PAPER[prefix]
    assert paper.module.SCALES["paper"] == {}
    meta = paper.meta
    assert meta["category"] == "priority" and meta["kernelbench_id"] is None
    assert meta["model"] == PAPER[prefix]["model"] and meta["operator"] == PAPER[prefix]["operator"]
    assert meta["handtuned"] is (prefix in HANDTUNED)
    assert paper.flops() == expected_flops(prefix, PAPER[prefix])
    tiny = load(prefix, "tiny")
    tiny_config = dict(PAPER[prefix], **tiny.module.SCALES["tiny"])
    assert tiny.config == tiny_config
    assert tiny.flops() == expected_flops(prefix, tiny_config)
    # Scales are CONFIG overrides of existing keys only.
    for scale in ("cpu", "tiny"):
        assert set(paper.module.SCALES[scale]) <= set(PAPER[prefix])


def test_published_flops_values():
    """Spot checks against the published figures (TFLOPS x ms of the paper's table)."""
    assert load("11p", "paper").flops() == 412_316_860_416
    # 10p: 30.7251 ms at 751.69 TFLOP/s imply 2.3096e13 FLOPs: the dense count (routed top-2: 5.8e12).
    assert abs(load("10p", "paper").flops() - 751.69e12 * 30.7251e-3) < 1e-3 * 751.69e12 * 30.7251e-3
    assert load("12p", "paper").flops() == 1_342_177_280
    assert load("14p", "paper").flops() == 962_072_674_304
