"""Hand-tuned baseline for 2p_GQA_Attention: Pallas TPU splash attention, tuned block sizes.

As in the paper: q (batch, seq, q_heads, head_dim) is transposed to (batch, heads, seq, head_dim)
and pre-scaled by ``head_dim ** -0.5``; K/V are repeated ``q_heads / kv_heads`` times along the
head axis (``jnp.repeat``) and transposed likewise; the splash kernel built by
``make_splash_mha_single_device`` (i.e. ``_make_splash_attention(..., is_mqa=False, head_shards=1,
q_seq_shards=1)``) over ``MultiHeadMask([CausalMask((S, S))] * q_heads)`` with q/k/v layouts
HEAD_DIM_MINOR and no backward blocks is vmapped over the batch; the output is transposed back.
Interpret mode: the kernel is built with ``interpret=True``.
"""

from __future__ import annotations

from jb.splash import make_splash_kernel, padded_seq_len, splash_block_error

WORKLOAD = "2p_GQA_Attention"
KERNEL = (
    "jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_kernel"
    ".make_splash_mha_single_device"
)
DEFAULTS = {"block_q": 2048, "block_kv": 2048, "block_kv_compute": 1024}


def unsupported(backend: str) -> str | None:
    return None


def invalid(config: dict, workload_config: dict) -> str | None:
    return splash_block_error({**DEFAULTS, **config}, padded_seq_len(int(workload_config["seq_len"])))


def make(config: dict, workload_config: dict, interpret: bool):
    import jax
    import jax.numpy as jnp

    cfg = {**DEFAULTS, **config}
    num_q_heads = int(workload_config["num_query_heads"])
    num_kv_heads = int(workload_config["num_kv_heads"])
    seq_len = int(workload_config["seq_len"])
    seq_pad = padded_seq_len(seq_len)
    kernel = jax.vmap(make_splash_kernel(cfg, num_q_heads, seq_pad, interpret))
    groups = num_q_heads // num_kv_heads

    def to_bhsd(x):
        x = jnp.transpose(x, (0, 2, 1, 3))
        if seq_pad != seq_len:
            x = jnp.pad(x, ((0, 0), (0, 0), (0, seq_pad - seq_len), (0, 0)))
        return x

    def fn(q, k, v):
        # (B, S, H, D) -> (B, H, S, D); K/V heads repeated to the query head count.
        scale = q.shape[-1] ** -0.5
        qt = to_bhsd((q.astype(jnp.float32) * scale).astype(q.dtype))
        kt = to_bhsd(jnp.repeat(k, groups, axis=2))
        vt = to_bhsd(jnp.repeat(v, groups, axis=2))
        out = kernel(qt, kt, vt)[:, :, :seq_len]
        return jnp.transpose(out, (0, 2, 1, 3))

    return fn


# GPU track (jb.impl.baseline_track): none; why, as found with jax 0.12.0.1 / tokamax 0.0.17.
GPU_UNSUPPORTED = (
    "no GPU track wired yet: the Mosaic GPU attention of the installed JAX (pallas.ops.gpu.attention_mgpu, GQA-capable) asserts the CUDA plugin's cuda_versions at trace time, so it cannot be exported from a CPU host, and tokamax's implementation='mosaic_gpu' picks its kernel from the concrete device ('Not supported on cpu')"
)
