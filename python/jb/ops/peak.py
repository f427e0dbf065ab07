"""``peak``: measured matmul FLOP/s (bf16 in / f32 accumulate, and f32) and memory bandwidth.

Each figure is the best of a few short bursts of back-to-back calls on the default device (a few
seconds at most in total). Bandwidth is a read-only reduction over a large array (a fresh output
per call would measure page faults instead on CPU).
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

_perf_counter = time.perf_counter


def _best_seconds(fn, args, calls: int, bursts: int = 3, budget_s: float = 1.5) -> float:
    jax.block_until_ready(fn(*args))  # compile + warm
    best = float("inf")
    start = _perf_counter()
    for _ in range(bursts):
        t0 = _perf_counter()
        outs = [fn(*args) for _ in range(calls)]
        jax.block_until_ready(outs)
        best = min(best, (_perf_counter() - t0) / calls)
        if _perf_counter() - start > budget_s:
            break
    return best


def run(args: dict) -> dict:
    backend = jax.default_backend()
    device = jax.devices()[0]
    n = int(args.get("matmul_n") or (1024 if backend == "cpu" else 8192))
    mib = int(args.get("bandwidth_mib") or (256 if backend == "cpu" else 2048))
    calls = 3 if backend == "cpu" else 20
    key_a, key_b = jax.random.split(jax.random.key(0))
    a32 = jax.random.normal(key_a, (n, n), jnp.float32)
    b32 = jax.random.normal(key_b, (n, n), jnp.float32)
    a16, b16 = a32.astype(jnp.bfloat16), b32.astype(jnp.bfloat16)
    flops = 2.0 * n**3
    mm_bf16 = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32))
    mm_f32 = jax.jit(lambda a, b: jnp.dot(a, b))
    t_bf16 = _best_seconds(mm_bf16, (a16, b16), calls)
    t_f32 = _best_seconds(mm_f32, (a32, b32), calls)
    del a32, b32, a16, b16
    elems = mib * 2**20 // 4
    big = jnp.ones((elems,), jnp.float32) * 0.5
    reduce_sum = jax.jit(lambda x: jnp.sum(x))
    t_bw = _best_seconds(reduce_sum, (big,), calls * 2)
    del big
    return {
        "backend": backend,
        "device_kind": device.device_kind,
        "matmul_flops_per_s": {"bf16_f32acc": flops / t_bf16, "f32": flops / t_f32},
        "flops_per_s": flops / t_bf16,
        "bytes_per_s": elems * 4 / t_bw,
        "matmul_n": n,
        "bandwidth_bytes": elems * 4,
        "method": "best of bursts of back-to-back calls, host wall-clock",
    }
