"""Hand-tuned baseline for 8p_GEMM: the JAX Pallas TPU example matmul, tuned block sizes.

The paper's GEMM baseline is a tiled matmul over ``PrefetchScalarGridSpec(grid=(M/bm, N/bn, K/bk))``
with an f32 VMEM accumulator and dimension semantics (parallel, parallel, arbitrary), parameterised
by ``block_shape=[bm, bn]`` and ``block_k``. The installed JAX ships exactly that kernel as
``jax.experimental.pallas.ops.tpu.matmul.matmul`` (same parameters), so it is called from there.
It takes no ``interpret=`` argument: on CPU the call is traced under
``pltpu.force_tpu_interpret_mode(True)`` (the generic interpreter).
"""

from __future__ import annotations

from jb.baseline_support import interpret_mode as _interpret_mode

WORKLOAD = "8p_GEMM"
KERNEL = "jax.experimental.pallas.ops.tpu.matmul.matmul"
DEFAULTS = {"bm": 1024, "bn": 2048, "bk": 1024}


def unsupported(backend: str) -> str | None:
    return None


def _block_error(name: str, block: int, dim_name: str, dim: int, lane: int) -> str | None:
    if block <= 0:
        return f"{name}={block} must be positive"
    if block > dim:
        return f"{name}={block} exceeds {dim_name}={dim}"
    if dim % block:
        return f"{name}={block} does not divide {dim_name}={dim}"
    if block != dim and block % lane:
        return f"{name}={block} is not a multiple of {lane} (TPU tiling) nor the full {dim_name}={dim}"
    return None


def invalid(config: dict, workload_config: dict) -> str | None:
    cfg = {**DEFAULTS, **config}
    m, k, n = workload_config["M"], workload_config["K"], workload_config["N"]
    return (
        _block_error("bm", cfg["bm"], "M", m, 16)  # bf16 sublane packing
        or _block_error("bn", cfg["bn"], "N", n, 128)
        or _block_error("bk", cfg["bk"], "K", k, 128)
    )


def make(config: dict, workload_config: dict, interpret: bool):
    from jax.experimental.pallas.ops.tpu.matmul import matmul

    cfg = {**DEFAULTS, **config}
    block_shape = (int(cfg["bm"]), int(cfg["bn"]))
    block_k = int(cfg["bk"])

    def fn(a, b):
        with _interpret_mode(interpret):
            return matmul(a, b, block_shape=block_shape, block_k=block_k)

    return fn
