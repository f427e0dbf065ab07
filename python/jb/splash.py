"""Splash attention (the Pallas TPU kernel shipped with JAX) as used by the hand-tuned baselines of
2p_GQA_Attention and 4p_Sparse_Attention: block-size checks and the kernel builder. Lives in the
worker package so that its source is part of every key that depends on it.
"""

from __future__ import annotations

from jb.baseline_support import block_error as _block_error


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
