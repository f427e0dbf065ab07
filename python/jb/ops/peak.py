"""``peak``: measured matmul FLOP/s (bf16 in / f32 accumulate, and f32) and memory bandwidth.

Each figure is the best of a few short bursts of back-to-back calls on the default device (a few
seconds at most in total). The FLOP/s peak is the best XLA reaches: the fastest of its own
matmuls over a few sizes and both dtypes (one size underrates a CPU, whose best size depends on
its caches and core count; XLA's workloads then ran at "125 % of peak"). Bandwidth is a
read-only reduction over a large array (a fresh output per call would measure page faults
instead on CPU). On CPU both stay estimates: data that fits a cache moves faster than memory.
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


def _matmul_flops(n: int, calls: int) -> dict:
    """FLOP/s of XLA's n x n matmul, bf16 in / f32 accumulate and f32."""
    key_a, key_b = jax.random.split(jax.random.key(0))
    a32 = jax.random.normal(key_a, (n, n), jnp.float32)
    b32 = jax.random.normal(key_b, (n, n), jnp.float32)
    a16, b16 = a32.astype(jnp.bfloat16), b32.astype(jnp.bfloat16)
    flops = 2.0 * n**3
    mm_bf16 = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32))
    mm_f32 = jax.jit(lambda a, b: jnp.dot(a, b))
    return {
        "bf16_f32acc": flops / _best_seconds(mm_bf16, (a16, b16), calls),
        "f32": flops / _best_seconds(mm_f32, (a32, b32), calls),
    }


def run(args: dict) -> dict:
    backend = jax.default_backend()
    device = jax.devices()[0]
    if args.get("matmul_n"):
        sizes = [int(args["matmul_n"])]
    elif backend == "cpu":
        sizes = [256, 512, 1024]
    else:
        sizes = [4096, 8192]
    mib = int(args.get("bandwidth_mib") or (256 if backend == "cpu" else 2048))
    calls = 3 if backend == "cpu" else 20
    by_size = {str(n): _matmul_flops(n, calls) for n in sizes}
    best_n, best = max(
        ((n, f) for n, f in by_size.items()), key=lambda nf: max(nf[1].values())
    )
    elems = mib * 2**20 // 4
    big = jnp.ones((elems,), jnp.float32) * 0.5
    reduce_sum = jax.jit(lambda x: jnp.sum(x))
    t_bw = _best_seconds(reduce_sum, (big,), calls * 2)
    del big
    return {
        "backend": backend,
        "device_kind": device.device_kind,
        "matmul_flops_per_s": best,
        "matmul_by_size": by_size,
        "flops_per_s": max(best.values()),
        "bytes_per_s": elems * 4 / t_bw,
        "matmul_n": int(best_n),
        "bandwidth_bytes": elems * 4,
        "estimate": backend == "cpu",
        "method": "the fastest XLA matmul over sizes %s and dtypes bf16/f32 (best of bursts of back-to-back calls, host wall-clock); bandwidth: a reduction over %d MiB"
        % (sizes, mib),
    }
