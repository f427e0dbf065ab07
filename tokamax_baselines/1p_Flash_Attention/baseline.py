"""Hand-tuned baseline for 1p_Flash_Attention: Pallas TPU ``flash_attention``, tuned block sizes.

Inputs are the workload's q, k, v in (batch, heads, seq, head_dim); the kernel is called with
``causal=True`` and ``sm_scale = head_dim ** -0.5``. ``block_b`` is 1 and the backward block sizes
are 128, as in the paper (the backward blocks are unused by the forward pass).
``flash_attention`` takes no ``interpret=`` argument: on CPU it is traced under
``pltpu.force_tpu_interpret_mode(True)`` (the generic interpreter).
"""

from __future__ import annotations

import contextlib

WORKLOAD = "1p_Flash_Attention"
KERNEL = "jax.experimental.pallas.ops.tpu.flash_attention.flash_attention"
DEFAULTS = {"block_q": 2048, "block_k_major": 2048, "block_k": 1024}

BLOCK_B = 1
BACKWARD_BLOCK = 128


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


def flash_block_error(cfg: dict, seq_len: int) -> str | None:
    """block_q is a sublane (second-minor) dimension: a multiple of 8; the K blocks are lane
    dimensions of the score tile: multiples of 128 (or the whole sequence)."""
    bq, bkm, bk = int(cfg["block_q"]), int(cfg["block_k_major"]), int(cfg["block_k"])
    return (
        _block_error("block_q", bq, "seq_len", seq_len, lane=8)
        or _block_error("block_k_major", bkm, "seq_len", seq_len)
        or _block_error("block_k", bk, "seq_len", seq_len)
        or (f"block_k={bk} exceeds block_k_major={bkm}" if bk > bkm else None)
        or (f"block_k={bk} does not divide block_k_major={bkm}" if bkm % bk else None)
    )


def invalid(config: dict, workload_config: dict) -> str | None:
    return flash_block_error({**DEFAULTS, **config}, int(workload_config["seq_len"]))


def _interpret_mode(interpret):
    if not interpret:
        return contextlib.nullcontext()
    from jax.experimental.pallas import tpu as pltpu

    return pltpu.force_tpu_interpret_mode(interpret)


def make(config: dict, workload_config: dict, interpret: bool):
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    cfg = {**DEFAULTS, **config}
    block_sizes = fa.BlockSizes(
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

    def fn(q, k, v):
        with _interpret_mode(interpret):
            return fa.flash_attention(
                q, k, v, causal=True, sm_scale=q.shape[-1] ** -0.5, block_sizes=block_sizes
            )

    return fn
