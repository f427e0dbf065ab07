"""Hand-tuned baseline for 1p_Flash_Attention: Pallas TPU ``flash_attention``, tuned block sizes.

Inputs are the workload's q, k, v in (batch, heads, seq, head_dim); the kernel is called with
``causal=True`` and ``sm_scale = head_dim ** -0.5``. ``block_b`` is 1 and the backward block sizes
are 128, as in the paper (the backward blocks are unused by the forward pass).
``flash_attention`` takes no ``interpret=`` argument: on CPU it is traced under
``pltpu.force_tpu_interpret_mode(True)`` (the generic interpreter).
"""

from __future__ import annotations

from jb.baseline_support import flash_block_error, flash_block_sizes, interpret_mode as _interpret_mode

WORKLOAD = "1p_Flash_Attention"
KERNEL = "jax.experimental.pallas.ops.tpu.flash_attention.flash_attention"
DEFAULTS = {"block_q": 2048, "block_k_major": 2048, "block_k": 1024}


def unsupported(backend: str) -> str | None:
    return None


def invalid(config: dict, workload_config: dict) -> str | None:
    return flash_block_error({**DEFAULTS, **config}, int(workload_config["seq_len"]))


def make(config: dict, workload_config: dict, interpret: bool):
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    cfg = {**DEFAULTS, **config}
    block_sizes = flash_block_sizes(cfg)

    def fn(q, k, v):
        with _interpret_mode(interpret):
            return fa.flash_attention(
                q, k, v, causal=True, sm_scale=q.shape[-1] ** -0.5, block_sizes=block_sizes
            )

    return fn


# GPU track (jb.impl.baseline_track): none; why, as found with jax 0.12.0.1 / tokamax 0.0.17.
GPU_UNSUPPORTED = (
    "no GPU track wired yet: the Mosaic GPU attention of the installed JAX (pallas.ops.gpu.attention_mgpu) asserts the CUDA plugin's cuda_versions at trace time, so it cannot be exported from a CPU host, and tokamax's implementation='mosaic_gpu' picks its kernel from the concrete device ('Not supported on cpu'); both run on a GPU host only (jb's GPU track exports from CPU)"
)
