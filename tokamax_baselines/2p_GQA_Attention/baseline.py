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

WORKLOAD = "2p_GQA_Attention"
KERNEL = (
    "jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_kernel"
    ".make_splash_mha_single_device"
)
DEFAULTS = {"block_q": 2048, "block_kv": 2048, "block_kv_compute": 1024}


def unsupported(backend: str) -> str | None:
    return None


def _block_error(name: str, block: int, dim_name: str, dim: int, lane: int = 128) -> str | None:
    if block <= 0:
        return f"{name}={block} must be positive"
    if block > dim:
        return f"{name}={block} exceeds {dim_name}={dim}"
    if dim % block:
        return f"{name}={block} does not divide {dim_name}={dim}"
    if block != dim and block % lane:
        return f"{name}={block} is not a multiple of {lane} (TPU tiling) nor the full {dim_name}={dim}"
    return None


def padded_seq_len(seq_len: int) -> int:
    """Splash needs block_kv_compute % 128 == 0, so a sequence shorter than (or not a multiple of)
    128 is zero-padded to the next multiple of 128. Under the causal mask no real query sees a
    padded key, and the padded queries' rows are sliced off: the result is exact. Only the tiny
    scale pads; paper and cpu sequence lengths are multiples of 128."""
    return -(-seq_len // 128) * 128


def splash_block_error(cfg: dict, seq_len: int) -> str | None:
    """Blocks must divide the (padded) sequence; block_q is a sublane dimension (multiple of 8),
    block_kv a lane dimension (multiple of 128), block_kv_compute | block_kv, multiple of 128."""
    bq, bkv, bkvc = int(cfg["block_q"]), int(cfg["block_kv"]), int(cfg["block_kv_compute"])
    return (
        _block_error("block_q", bq, "seq_len", seq_len, lane=8)
        or _block_error("block_kv", bkv, "seq_len", seq_len)
        or (f"block_kv_compute={bkvc} is not a multiple of 128 (splash requirement)" if bkvc <= 0 or bkvc % 128 else None)
        or (f"block_kv_compute={bkvc} exceeds block_kv={bkv}" if bkvc > bkv else None)
        or (f"block_kv_compute={bkvc} does not divide block_kv={bkv}" if bkv % bkvc else None)
    )


def invalid(config: dict, workload_config: dict) -> str | None:
    return splash_block_error({**DEFAULTS, **config}, padded_seq_len(int(workload_config["seq_len"])))


def make_splash_kernel(cfg: dict, num_heads: int, seq_len: int, interpret):
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sm

    layout = sk.QKVLayout.HEAD_DIM_MINOR
    block_sizes = sk.BlockSizes(
        block_q=int(cfg["block_q"]),
        block_kv=int(cfg["block_kv"]),
        block_kv_compute=int(cfg["block_kv_compute"]),
        q_layout=layout,
        k_layout=layout,
        v_layout=layout,
    )
    mask = sm.MultiHeadMask([sm.CausalMask((seq_len, seq_len))] * num_heads)
    return sk.make_splash_mha_single_device(mask, block_sizes=block_sizes, interpret=interpret or False)


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
