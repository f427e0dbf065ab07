"""Workloads 1p-8p: independent float64 references at tiny scale, lints, paper CONFIGs, FLOP counts."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jb.workload import load_workload
from workload_checks import lint_workload, workload_dir

IDS = ["1p", "2p", "3p", "4p", "5p", "6p", "7p", "8p"]

# Published CONFIGs (reference/jaxbench.md), written out independently of the workload files.
PAPER_CONFIGS = {
    "1p": {"name": "flash_attention_baseline", "model": "Baseline-MHA", "operator": "causal_mha",
           "batch": 4, "seq_len": 4096, "num_heads": 64, "head_dim": 128},
    "2p": {"name": "llama3_405b_gqa", "model": "Llama-3.1-405B", "operator": "gqa_attention",
           "batch": 4, "seq_len": 4096, "num_query_heads": 128, "num_kv_heads": 8, "head_dim": 128,
           "emb_dim": 16384},
    "3p": {"name": "deepseek_v3_mla", "model": "DeepSeek-V3-671B", "operator": "mla_attention",
           "batch": 4, "seq_len": 2048, "emb_dim": 7168, "num_heads": 128, "q_lora_rank": 1536,
           "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
           "rope_theta": 10000},
    "4p": {"name": "llama3_70b_sparse_attention", "model": "Llama-3.1-70B", "operator": "sparse_attention",
           "batch": 4, "seq_len": 4096, "num_query_heads": 64, "num_kv_heads": 8, "head_dim": 128},
    "5p": {"name": "llama3_70b_flex_attention", "model": "Llama-3.1-70B", "operator": "flex_attention",
           "batch": 4, "seq_len": 4096, "num_heads": 64, "head_dim": 128},
    "6p": {"name": "llama3_70b_paged_attention", "model": "Llama-3.1-70B", "operator": "paged_attention",
           "num_seqs": 64, "max_seq_len": 4096, "num_query_heads": 64, "num_kv_heads": 8, "head_dim": 128,
           "page_size": 16, "pages_per_seq": 256},
    "7p": {"name": "ragged_paged_attention_llama70b", "model": "Llama-3.1-70B",
           "operator": "ragged_paged_attention", "max_num_batched_tokens": 4096, "max_num_seqs": 64,
           "num_q_heads": 64, "num_kv_heads": 8, "head_dim": 128, "page_size": 16, "pages_per_seq": 256},
    "8p": {"name": "gemm_llama70b", "model": "Llama-3.1-70B", "operator": "dense_matmul",
           "M": 8192, "K": 8192, "N": 28672},
}
HANDTUNED = {"1p", "2p", "3p", "4p", "6p", "7p", "8p"}


def load(prefix: str, scale: str = "tiny"):
    return load_workload(workload_dir(prefix), scale)


def f64(x) -> np.ndarray:
    """bf16/f32 array -> float64 (exact)."""
    return np.asarray(jnp.asarray(x, jnp.float32), np.float64)


@functools.lru_cache(maxsize=None)
def tiny(prefix: str):
    """(workload at tiny scale, its jitted function), shared by the reference tests of a workload."""
    wl = load(prefix)
    return wl, wl.jitted()


@functools.lru_cache(maxsize=None)
def tiny_inputs(prefix: str):
    return tiny(prefix)[0].create_inputs()


def softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def assert_close(out, ref: np.ndarray, rtol: float = 2e-2, atol_frac: float = 5e-3) -> None:
    """Symmetric closeness for a bf16 output vs a float64 reference; atol relative to max |ref|."""
    got = f64(out)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert np.all(np.isfinite(got))
    scale = float(np.abs(ref).max())
    assert scale > 0
    err = np.abs(got - ref)
    bad = err > atol_frac * scale + rtol * np.maximum(np.abs(ref), np.abs(got))
    assert not bad.any(), f"{int(bad.sum())} of {bad.size} bad; max err {err.max():.3g}, ref max {scale:.3g}"


def causal(sq: int, sk: int) -> np.ndarray:
    return np.tril(np.ones((sq, sk), bool))


# ---------------------------------------------------------------- independent references (float64)

def ref_mha(q, k, v, scale, bias=None):
    """q, k, v (B, H, S, D) with equal heads; causal softmax attention."""
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if bias is not None:
        s = s + bias[None]
    s = np.where(causal(q.shape[2], k.shape[2]), s, -np.inf)
    return np.einsum("bhqk,bhkd->bhqd", softmax(s), v)


def ref_2p(q, k, v):
    g = q.shape[2] // k.shape[2]
    k = np.repeat(k, g, axis=2)  # query head h <- kv head h // g
    v = np.repeat(v, g, axis=2)
    out = ref_mha(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3),
                  q.shape[-1] ** -0.5)
    return out.transpose(0, 2, 1, 3)


def ref_4p(q, k, v):
    g = q.shape[1] // k.shape[1]
    return ref_mha(q, np.repeat(k, g, axis=1), np.repeat(v, g, axis=1), 1.0)


def rope_rotate(x, theta):
    """Half-split RoPE via complex rotation: pair (i, i + d/2) as x_i + 1j*x_{i+d/2}. x: (B, S, ..., d)."""
    s, d = x.shape[1], x.shape[-1]
    half = d // 2
    pos = np.arange(s, dtype=np.float64)
    freq = theta ** (-np.arange(half, dtype=np.float64) / half)
    rot = np.exp(1j * pos[:, None] * freq[None, :])  # (S, half)
    rot = rot.reshape((1, s) + (1,) * (x.ndim - 3) + (half,))
    z = (x[..., :half] + 1j * x[..., half:]) * rot
    return np.concatenate([z.real, z.imag], axis=-1)


def ref_3p(cfg, x, wqd, wqu, wkvd, wku, wvu, wo):
    b, s, _ = x.shape
    h, kvl = cfg["num_heads"], cfg["kv_lora_rank"]
    nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    q = (x @ wqd @ wqu).reshape(b, s, h, nope + rope)
    latent = x @ wkvd
    c_kv, k_pe = latent[..., :kvl], latent[..., kvl:]
    k_nope = (c_kv @ wku).reshape(b, s, h, nope)
    v = (c_kv @ wvu).reshape(b, s, h, vd)
    k_pe = np.broadcast_to(rope_rotate(k_pe, cfg["rope_theta"])[:, :, None, :], (b, s, h, rope))
    q_full = np.concatenate([q[..., :nope], rope_rotate(q[..., nope:], cfg["rope_theta"])], axis=-1)
    k_full = np.concatenate([k_nope, k_pe], axis=-1)
    out = ref_mha(q_full.transpose(0, 2, 1, 3), k_full.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3),
                  (nope + rope) ** -0.5)
    return out.transpose(0, 2, 1, 3).reshape(b, s, h * vd) @ wo


def dense_attention(q, k, v, q_pos):
    """q (Q, Hq, D) at absolute positions q_pos; k, v (L, Hkv, D); causal; scale 1/sqrt(D)."""
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = np.einsum("qhd,lhd->hql", q, k) / math.sqrt(q.shape[-1])
    s = np.where(np.arange(k.shape[0])[None, None, :] <= np.asarray(q_pos)[None, :, None], s, -np.inf)
    return np.einsum("hql,lhd->qhd", softmax(s), v)


def ref_6p(queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens):
    h_kv, d = k_pages.shape[2], k_pages.shape[3]
    outs = []
    for i in range(page_indices.shape[0]):
        n = int(kv_lens[i])
        k = k_pages[page_indices[i]].reshape(-1, h_kv, d)[:n]
        v = v_pages[page_indices[i]].reshape(-1, h_kv, d)[:n]
        q = queries[int(cu_q_lens[i]):int(cu_q_lens[i]) + 1]
        outs.append(dense_attention(q, k, v, [n - 1])[0])
    return np.stack(outs)


def ref_7p(queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs):
    h_kv, d = kv_pages.shape[2] // 2, kv_pages.shape[3]
    out = np.zeros(queries.shape)
    for i in range(int(num_seqs[0])):
        lo, hi, n = int(cu_q_lens[i]), int(cu_q_lens[i + 1]), int(kv_lens[i])
        cache = kv_pages[page_indices[i]].reshape(-1, 2 * h_kv, d)[:n]
        k, v = cache[:, 0::2], cache[:, 1::2]
        out[lo:hi] = dense_attention(queries[lo:hi], k, v, n - (hi - lo) + np.arange(hi - lo))
    return out


# ---------------------------------------------------------------- 1. workload vs reference

def _check(prefix, inputs, ref_fn, **tol):
    wl, fn = tiny(prefix)
    out = jax.block_until_ready(fn(*inputs))
    assert out.dtype == inputs[0].dtype
    assert_close(out, ref_fn(*[f64(x) if jnp.issubdtype(x.dtype, jnp.floating) else np.asarray(x)
                               for x in inputs]), **tol)
    return wl


def test_1p_reference():
    inputs = tiny_inputs("1p")
    _check("1p", inputs, lambda q, k, v: ref_mha(q, k, v, q.shape[-1] ** -0.5))


def test_2p_reference():
    inputs = tiny_inputs("2p")
    assert inputs[0].shape[2] // inputs[1].shape[2] == 16 and inputs[1].shape[2] >= 2
    _check("2p", inputs, ref_2p)


def test_3p_reference():
    wl = tiny("3p")[0]
    inputs = tiny_inputs("3p")
    cfg = dict(wl.config)
    _check("3p", inputs, lambda *a: ref_3p(cfg, *a))
    # Sharper softmax (query up-projection x8) so that RoPE and masking errors cannot hide.
    sharp = list(inputs)
    sharp[2] = (inputs[2].astype(jnp.float32) * 8).astype(inputs[2].dtype)
    _check("3p", tuple(sharp), lambda *a: ref_3p(cfg, *a), rtol=3e-2, atol_frac=1e-2)


def test_4p_reference():
    inputs = tiny_inputs("4p")
    _check("4p", inputs, ref_4p)
    q, k, v = inputs
    _check("4p", ((q.astype(jnp.float32) * 10).astype(q.dtype), k * 10, v), ref_4p)


def test_5p_reference():
    inputs = tiny_inputs("5p")
    ref = lambda q, k, v, bias: ref_mha(q, k, v, q.shape[-1] ** -0.5, bias)
    # The reference is bf16 end to end (scores, softmax, PV), as published: a few ulps of the
    # largest output (atol 2% of max |ref|) separate it from the float64 evaluation.
    _check("5p", inputs, ref, atol_frac=2e-2)
    q, k, v, bias = inputs
    _check("5p", (q, k * 60, v, bias * 100), ref, atol_frac=2e-2)


def test_6p_reference():
    inputs = tiny_inputs("6p")
    _check("6p", inputs, ref_6p)
    # Varied kv lengths, a permuted page table, and a sharper softmax.
    queries, k_pages, v_pages, kv_lens, page_indices, cu_q_lens = inputs
    n, pages_per_seq = page_indices.shape
    rng = np.random.default_rng(0)
    lens = rng.integers(1, pages_per_seq * k_pages.shape[1] + 1, size=n).astype(np.int32)
    lens[0] = 1
    table = rng.permutation(page_indices.size).astype(np.int32).reshape(n, pages_per_seq)
    varied = (queries, k_pages * 50, v_pages, jnp.asarray(lens), jnp.asarray(table), cu_q_lens)
    _check("6p", varied, ref_6p)


def test_7p_reference():
    inputs = tiny_inputs("7p")
    queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs = inputs
    q_lens = np.diff(np.asarray(cu_q_lens))[: int(num_seqs[0])]
    assert (q_lens == 1).sum() >= 2 and (q_lens > 1).sum() >= 2  # decode and prefill mixed
    assert int(num_seqs[0]) < page_indices.shape[0]  # inactive slots exist
    assert sorted(np.asarray(page_indices).ravel().tolist()) == list(range(page_indices.size))
    assert not np.array_equal(np.asarray(page_indices).ravel(), np.arange(page_indices.size))
    assert int(cu_q_lens[int(num_seqs[0])]) == queries.shape[0]
    _check("7p", inputs, ref_7p)
    # Another page table (the workload must read it, not assume the one of create_inputs).
    table = np.random.default_rng(1).permutation(page_indices.size).astype(np.int32)
    _check("7p", (queries, kv_pages, kv_lens, jnp.asarray(table.reshape(page_indices.shape)), cu_q_lens,
                  num_seqs), ref_7p)


def test_8p_reference():
    _check("8p", tiny_inputs("8p"), lambda a, b: a @ b)


# ---------------------------------------------------------------- 2. lints

@pytest.mark.parametrize("prefix", IDS)
def test_lint(prefix):
    lint_workload(prefix)


# ---------------------------------------------------------------- 3. paper CONFIG, META, FLOPs

@pytest.mark.parametrize("prefix", IDS)
def test_paper_config_and_meta(prefix):
    wl = load(prefix, "paper")
    assert wl.config == PAPER_CONFIGS[prefix]
    assert wl.module.SCALES["paper"] == {}
    assert set(wl.module.SCALES) == {"paper", "cpu", "tiny"}
    meta = wl.meta
    assert meta["category"] == "priority" and meta["kernelbench_id"] is None
    assert meta["model"] == PAPER_CONFIGS[prefix]["model"]
    assert meta["operator"] == PAPER_CONFIGS[prefix]["operator"]
    assert meta["handtuned"] == (prefix in HANDTUNED)


def test_7p_paper_scenario():
    mod = load("7p", "paper").module
    q_lens, kv_lens = mod.scenario()
    assert q_lens == (1,) * 48 + (512,) * 7 + (464,)
    assert kv_lens == tuple(257 + ((i * 73) % 240) * 16 for i in range(48)) + (
        1023, 1535, 2047, 2559, 3071, 3583, 4095, 4095)
    assert sum(q_lens) == 4096 and len(q_lens) == 56


def _independent_flops(prefix, inputs):
    if prefix in ("1p", "5p"):
        b, h, s, d = inputs[0].shape
        return 4 * b * h * s * s * d
    if prefix == "2p":
        b, s, h, d = inputs[0].shape
        return 4 * b * h * s * s * d
    if prefix == "4p":
        b, h, s, d = inputs[0].shape
        return 4 * b * h * s * s * d
    if prefix == "3p":
        x, wqd, wqu, wkvd, wku, wvu, wo = inputs
        b, s, _ = x.shape
        tokens = b * s
        proj = sum(2 * tokens * w.shape[0] * w.shape[1] for w in (wqd, wqu, wkvd, wku, wvu, wo))
        h = wo.shape[0] // 128  # v_head_dim 128
        qk_dim = wqu.shape[1] // h
        return proj + 2 * b * h * s * s * qk_dim + 2 * b * h * s * s * 128
    if prefix == "6p":
        queries, k_pages, _, kv_lens, _, _ = inputs
        return 4 * queries.shape[1] * queries.shape[2] * int(np.asarray(kv_lens).sum())
    if prefix == "7p":
        queries, _, kv_lens, _, cu_q_lens, num_seqs = inputs
        n = int(num_seqs[0])
        q_lens = np.diff(np.asarray(cu_q_lens))[:n]
        return 4 * queries.shape[1] * queries.shape[2] * int((q_lens * np.asarray(kv_lens)[:n]).sum())
    if prefix == "8p":
        a, b = inputs
        return 2 * a.shape[0] * a.shape[1] * b.shape[1]
    raise KeyError(prefix)


@pytest.mark.parametrize("prefix", IDS)
def test_flops_tiny(prefix):
    wl = load(prefix)
    assert wl.flops() == _independent_flops(prefix, tiny_inputs(prefix))


def test_scaled_structure():
    """cpu/tiny keep the operators' structure (group ratios, head dims, ranks, pages, scenario mix)."""
    for scale in ("cpu", "tiny"):
        c = load("2p", scale).config
        assert c["num_query_heads"] // c["num_kv_heads"] == 16 and c["num_kv_heads"] >= 2
        assert c["emb_dim"] == c["num_query_heads"] * c["head_dim"]
        c = load("4p", scale).config
        assert c["num_query_heads"] // c["num_kv_heads"] == 8 and c["num_kv_heads"] >= 2
        c = load("6p", scale).config
        assert c["num_query_heads"] // c["num_kv_heads"] == 8 and c["page_size"] == 16
        assert c["max_seq_len"] == c["pages_per_seq"] * c["page_size"] and c["pages_per_seq"] > 1
        wl = load("7p", scale)
        c = wl.config
        assert c["num_q_heads"] // c["num_kv_heads"] == 8 and c["page_size"] == 16
        q_lens, kv_lens = wl.module.scenario()
        assert sum(q_lens) == c["max_num_batched_tokens"] and len(q_lens) < c["max_num_seqs"]
        assert 1 in q_lens and any(q > 1 for q in q_lens) and len(set(kv_lens)) > 2
        assert any(kv > q for q, kv in zip(q_lens, kv_lens) if q > 1)  # prefill after a cached prefix
        for prefix in ("1p", "2p", "4p", "5p", "6p", "7p"):
            assert load(prefix, scale).config["head_dim"] == 128
    c = load("3p", "cpu").config
    for key in ("emb_dim", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        assert c[key] == PAPER_CONFIGS["3p"][key]


PAPER_SHAPES = {  # (inputs, output) at the published CONFIG, from the reference
    "1p": ([(4, 64, 4096, 128)] * 3, (4, 64, 4096, 128)),
    "2p": ([(4, 4096, 128, 128), (4, 4096, 8, 128), (4, 4096, 8, 128)], (4, 4096, 128, 128)),
    "3p": ([(4, 2048, 7168), (7168, 1536), (1536, 24576), (7168, 576), (512, 16384), (512, 16384),
            (16384, 7168)], (4, 2048, 7168)),
    "4p": ([(4, 64, 4096, 128), (4, 8, 4096, 128), (4, 8, 4096, 128)], (4, 64, 4096, 128)),
    "5p": ([(4, 64, 4096, 128)] * 3 + [(64, 4096, 4096)], (4, 64, 4096, 128)),
    "6p": ([(64, 64, 128), (16384, 16, 8, 128), (16384, 16, 8, 128), (64,), (64, 256), (65,)], (64, 64, 128)),
    "7p": ([(4096, 64, 128), (16384, 16, 16, 128), (64,), (64, 256), (65,), (1,)], (4096, 64, 128)),
    "8p": ([(8192, 8192), (8192, 28672)], (8192, 28672)),
}


@pytest.mark.parametrize("prefix", IDS)
def test_paper_shapes(prefix):
    """Abstract evaluation only (nothing is allocated): paper-scale input and output shapes."""
    wl = load(prefix, "paper")
    inputs = jax.eval_shape(wl.module.create_inputs)
    assert [tuple(x.shape) for x in inputs] == PAPER_SHAPES[prefix][0]
    assert inputs[0].dtype == jnp.bfloat16
    out = jax.eval_shape(wl.fn, *inputs)
    assert tuple(out.shape) == PAPER_SHAPES[prefix][1] and out.dtype == jnp.bfloat16
