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


# ----------------------------------------------------------------------------------------------
# GPU track (jb.impl.baseline_track): the Mosaic GPU Hopper matmul of the installed JAX
# (warpgroup MMA, TMA pipelining over K with ``max_concurrent_steps`` stages in flight, a persistent
# grid over the SMs), tuned tile sizes; its search space is the one the kernel's own autotuning
# loop (``main``) sweeps. For H100/H200 (sm_90a).

GPU_KERNEL = "jax.experimental.pallas.ops.gpu.hopper_matmul_mgpu.matmul"
GPU_DEFAULTS = {"tile_m": 128, "tile_n": 128, "tile_k": 64, "max_concurrent_steps": 4, "grid_tile_width": 4,
                "wg_dimension": "N"}


def gpu_invalid(config: dict, workload_config: dict) -> str | None:
    """The kernel's own shape rules: two warpgroups share a CTA tile along ``wg_dimension`` (so
    that dimension's tile is twice the config's), and every dimension is a whole number of tiles.
    Shared-memory overflows are the compiler's to report (only on a GPU)."""
    cfg = {**GPU_DEFAULTS, **config}
    m, k, n = workload_config["M"], workload_config["K"], workload_config["N"]
    wg = str(cfg["wg_dimension"])
    if wg not in ("M", "N"):
        return f"wg_dimension={wg!r} must be 'M' or 'N'"
    tm, tn, tk = int(cfg["tile_m"]), int(cfg["tile_n"]), int(cfg["tile_k"])
    for name, v in (("tile_m", tm), ("tile_n", tn), ("tile_k", tk), ("max_concurrent_steps", int(cfg["max_concurrent_steps"])),
                    ("grid_tile_width", int(cfg["grid_tile_width"]))):
        if v <= 0:
            return f"{name}={v} must be positive"
    cta_m, cta_n = tm * (2 if wg == "M" else 1), tn * (2 if wg == "N" else 1)
    if m % cta_m:
        return f"M={m} is not a multiple of the CTA tile {cta_m} (tile_m={tm}, wg_dimension={wg})"
    if n % cta_n:
        return f"N={n} is not a multiple of the CTA tile {cta_n} (tile_n={tn}, wg_dimension={wg})"
    if k % tk:
        return f"K={k} is not a multiple of tile_k={tk}"
    return None


def gpu_make(config: dict, workload_config: dict, interpret: bool):
    from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as hm

    from jb.baseline_support import gpu_interpret_mode

    cfg = {**GPU_DEFAULTS, **config}
    tuning = hm.TuningConfig(
        tile_m=int(cfg["tile_m"]), tile_n=int(cfg["tile_n"]), tile_k=int(cfg["tile_k"]),
        max_concurrent_steps=int(cfg["max_concurrent_steps"]), grid_tile_width=int(cfg["grid_tile_width"]),
        wg_dimension=hm.MatmulDimension[str(cfg["wg_dimension"])],
    )

    def fn(a, b):
        with gpu_interpret_mode(interpret):
            return hm.matmul(a, b, None, tuning)

    return fn
