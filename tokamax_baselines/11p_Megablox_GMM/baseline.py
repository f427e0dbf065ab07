"""Hand-tuned baseline for 11p_Megablox_GMM: megablox ``gmm`` from the installed JAX Pallas ops.

The workload takes ``(lhs, rhs, group_sizes, max_expert_size)``; the kernel takes the first three
(``max_expert_size`` is a static Python int the kernel does not need). ``tiling=(tm, tk, tn)``.
The output has lhs's dtype (``preferred_element_type=lhs.dtype``; gmm accumulates in a float32
scratch and rounds once), the workload's output dtype as published (bf16).
Interpret mode: ``gmm(..., interpret=True)``.
"""

from __future__ import annotations

import importlib

WORKLOAD = "11p_Megablox_GMM"
KERNEL = "jax.experimental.pallas.ops.tpu.megablox.gmm.gmm"
DEFAULTS = {"tm": 256, "tk": 1024, "tn": 1024}


def unsupported(backend: str) -> str | None:
    return None


def _shape(workload_config: dict) -> tuple[int, int, int]:
    m = workload_config["seq_len"] * workload_config["num_experts_per_tok"]
    return m, workload_config["emb_dim"], workload_config["moe_mlp_dim"]


def invalid(config: dict, workload_config: dict) -> str | None:
    cfg = {**DEFAULTS, **config}
    tm, tk, tn = (int(cfg[p]) for p in ("tm", "tk", "tn"))
    m, k, n = _shape(workload_config)
    for name, t in (("tm", tm), ("tk", tk), ("tn", tn)):
        if t <= 0:
            return f"{name}={t} must be positive"
    # gmm requires m % tm == 0; k and n may be ragged (the kernel masks the remainder).
    if tm > m or m % tm:
        return f"tm={tm} does not divide M={m}"
    if tm % 16 and tm != m:
        return f"tm={tm} is not a multiple of 16 (bf16 TPU tiling)"
    if tk > k:
        return f"tk={tk} exceeds K={k}"
    if tn > n:
        return f"tn={tn} exceeds N={n}"
    if tk % 128 and tk != k:
        return f"tk={tk} is not a multiple of 128 (TPU tiling) nor K={k}"
    if tn % 128 and tn != n:
        return f"tn={tn} is not a multiple of 128 (TPU tiling) nor N={n}"
    return None


def make(config: dict, workload_config: dict, interpret: bool):
    # `from ...megablox import gmm` is the custom_vjp wrapper; the module holds the kernel entry.
    gmm_module = importlib.import_module("jax.experimental.pallas.ops.tpu.megablox.gmm")
    cfg = {**DEFAULTS, **config}
    tiling = (int(cfg["tm"]), int(cfg["tk"]), int(cfg["tn"]))

    def fn(lhs, rhs, group_sizes, max_expert_size=None):
        del max_expert_size  # a static shape hint for the XLA reference only
        return gmm_module.gmm(
            lhs,
            rhs,
            group_sizes,
            preferred_element_type=lhs.dtype,
            tiling=tiling,
            interpret=interpret,
        )

    return fn


# GPU track (jb.impl.baseline_track): none; why, as found with jax 0.12.0.1 / tokamax 0.0.17.
GPU_UNSUPPORTED = (
    "no GPU track wired yet: pallas.ops.gpu.ragged_dot_mgpu fails Mosaic GPU layout inference when exported from CPU for cuda at paper scale ('Failed to infer a possible set of layouts'), and tokamax's ragged_dot implementation='mosaic_gpu' picks its kernel from the concrete device ('Unsupported GPU architecture' on CPU)"
)
