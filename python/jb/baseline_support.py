"""Helpers shared by the hand-tuned baselines in tokamax_baselines/ (block-size checks, interpret
mode, the flash-attention block sizes). Part of the worker package, so its source is in every key.
"""

from __future__ import annotations

import contextlib

# The paper's flash-attention settings besides the tuned blocks: batch block 1; the backward-pass
# blocks (unused by the forward pass) 128.
BLOCK_B = 1
BACKWARD_BLOCK = 128


def block_error(name: str, block: int, dim_name: str, dim: int, lane: int = 128) -> str | None:
    """Why `block` cannot tile a dimension of size `dim` (None when it can)."""
    if block <= 0:
        return f"{name}={block} must be positive"
    if block > dim:
        return f"{name}={block} exceeds {dim_name}={dim}"
    if dim % block:
        return f"{name}={block} does not divide {dim_name}={dim}"
    if block != dim and block % lane:
        return f"{name}={block} is not a multiple of {lane} (TPU tiling) nor the full {dim_name}={dim}"
    return None



def interpret_mode(interpret):
    """`pltpu.force_tpu_interpret_mode(interpret)` when interpreting, else nothing; enter it while
    the kernel is traced (the mode is resolved at trace time)."""
    if not interpret:
        return contextlib.nullcontext()
    from jax.experimental.pallas import tpu as pltpu

    return pltpu.force_tpu_interpret_mode(interpret)



def flash_block_error(cfg: dict, seq_len: int) -> str | None:
    """block_q is a sublane (second-minor) dimension: a multiple of 8; the K blocks are lane
    dimensions of the score tile: multiples of 128 (or the whole sequence)."""
    bq, bkm, bk = int(cfg["block_q"]), int(cfg["block_k_major"]), int(cfg["block_k"])
    return (
        block_error("block_q", bq, "seq_len", seq_len, lane=8)
        or block_error("block_k_major", bkm, "seq_len", seq_len)
        or block_error("block_k", bk, "seq_len", seq_len)
        or (f"block_k={bk} exceeds block_k_major={bkm}" if bk > bkm else None)
        or (f"block_k={bk} does not divide block_k_major={bkm}" if bkm % bk else None)
    )




def flash_block_sizes(cfg: dict):
    """`flash_attention.BlockSizes` for a configuration (forward blocks tuned, the rest fixed)."""
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    return fa.BlockSizes(
        block_q=int(cfg["block_q"]),
        block_k_major=int(cfg["block_k_major"]),
        block_k=int(cfg["block_k"]),
        block_b=BLOCK_B,
        block_q_major_dkv=BACKWARD_BLOCK,
        block_k_major_dkv=BACKWARD_BLOCK,
        block_k_dkv=BACKWARD_BLOCK,
        block_q_dkv=BACKWARD_BLOCK,
        block_k_major_dq=BACKWARD_BLOCK,
        block_k_dq=BACKWARD_BLOCK,
        block_q_dq=BACKWARD_BLOCK,
    )


def gpu_interpret_mode(interpret):
    """Mosaic GPU's interpreter (``plgpu.force_gpu_interpret_mode``) when interpreting, else
    nothing. The interpreter is a private-ish API that moved across releases: a jax without it
    raises a clear error (jb.interpret.gpu_interpreter)."""
    if not interpret:
        return contextlib.nullcontext()
    from jb import interpret as interp

    return interp.gpu_interpreter()
