"""Ragged dot of Mixtral-8x7B's expert up-projection (openxla/tokamax ragged_dot benchmark).

Equal group sizes (M / num_groups rows each), so the ragged dot is the batched matmul
einsum('gmk,gkn->gmn'); float32 accumulation, output in the input dtype.
"""

import functools
import math

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "mixtral_8x7b_ragged_dot",
    "model": "Mixtral-8x7B",
    "operator": "ragged_dot",
    "num_groups": 8,
    "M": 8192,
    "K": 4096,
    "N": 14336,
}

SCALES = {
    "paper": {},
    "cpu": {"num_groups": 8, "M": 2048, "K": 1024, "N": 1024},
    "tiny": {"num_groups": 4, "M": 128, "K": 128, "N": 96},
}

META = {
    "category": "priority",
    "model": "Mixtral-8x7B",
    "operator": "ragged_dot",
    "kernelbench_id": None,
    "handtuned": False,
}


def create_inputs(dtype=jnp.bfloat16):
    """Returns (x (G, M/G, K) ~ N(0,1), w (G, K, N) ~ N(0,0.02)); key(42)."""
    c = CONFIG
    return _create(c["num_groups"], c["M"], c["K"], c["N"], jnp.dtype(dtype))


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _create(g, m, k, n, dtype):
    return tuple(_normals(jax.random.key(42), [((g, m // g, k), 1.0, 0.0, dtype), ((g, k, n), 0.02, 0.0, dtype)]))


def _normals(key, specs):
    """Normal draws for several inputs from ONE threefry call (one random op per input compiles
    several times slower on CPU). specs: (shape, std, mean, dtype) per input."""
    sizes = [math.prod(shape) for shape, *_ in specs]
    z = jax.random.normal(key, (sum(sizes),), jnp.float32)
    out, offset = [], 0
    for (shape, std, mean, dtype), size in zip(specs, sizes):
        out.append((z[offset:offset + size].reshape(shape) * std + mean).astype(dtype))
        offset += size
    return out


def workload(x, w):
    out = jnp.einsum("gmk,gkn->gmn", x, w, preferred_element_type=jnp.float32)
    return out.astype(x.dtype)


def get_flops():
    # 2 * M * K * N: every one of the M rows meets one group's K x N matrix.
    return 2 * CONFIG["M"] * CONFIG["K"] * CONFIG["N"]


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): group count (rows per group halved)."""
    c = config
    return [{"num_groups": 2 * c["num_groups"]}]
