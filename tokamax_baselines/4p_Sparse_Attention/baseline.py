"""Hand-tuned baseline for 4p_Sparse_Attention: Pallas TPU splash attention, tuned block sizes.

As in the paper: the workload's inputs are already (batch, heads, seq, head_dim) and q is already
scaled (no extra scale); K/V are repeated ``q_heads / kv_heads`` times along the head axis; the
splash kernel (``make_splash_mha_single_device`` over ``MultiHeadMask([CausalMask((S, S))] *
q_heads)``, HEAD_DIM_MINOR layouts, no backward blocks) is vmapped over the batch.
Interpret mode: the kernel is built with ``interpret=True``.
"""

from __future__ import annotations

from jb.splash import make_splash_kernel, padded_seq_len, splash_block_error

WORKLOAD = "4p_Sparse_Attention"
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

    def pad(x):
        if seq_pad == seq_len:
            return x
        return jnp.pad(x, ((0, 0), (0, 0), (0, seq_pad - seq_len), (0, 0)))

    def fn(q, k, v):
        # (B, H, S, D) throughout; K/V heads repeated to the query head count.
        out = kernel(pad(q), pad(jnp.repeat(k, groups, axis=1)), pad(jnp.repeat(v, groups, axis=1)))
        return out[:, :, :seq_len]

    return fn


# GPU track (jb.impl.baseline_track): none; why, as found with jax 0.12.0.1 / tokamax 0.0.17.
GPU_UNSUPPORTED = (
    "no GPU kernel: the splash (block-sparse) attention kernel is TPU-only; tokamax's GPU attention takes no block-sparse mask"
)
