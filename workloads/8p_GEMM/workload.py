"""Dense matmul of a Llama-3.1-70B FFN projection: C = A @ B.

float32 accumulation, output in the input dtype.
"""

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "gemm_llama70b",
    "model": "Llama-3.1-70B",
    "operator": "dense_matmul",
    "M": 8192,
    "K": 8192,
    "N": 28672,
}

# N/K = 3.5 (the FFN expansion) kept at every scale.
SCALES = {
    "paper": {},
    "cpu": {"M": 1024, "K": 1024, "N": 3584},
    "tiny": {"M": 64, "K": 128, "N": 448},
}

META = {
    "category": "priority",
    "model": "Llama-3.1-70B",
    "operator": "dense_matmul",
    "kernelbench_id": None,
    "handtuned": True,
}


def create_inputs(dtype=jnp.bfloat16):
    """Returns (A (M,K) ~ N(0,1), B (K,N) ~ N(0,0.02))."""
    c = CONFIG
    k_a, k_b = jax.random.split(jax.random.key(42), 2)
    a = jax.random.normal(k_a, (c["M"], c["K"]), jnp.float32).astype(dtype)
    b = (jax.random.normal(k_b, (c["K"], c["N"]), jnp.float32) * 0.02).astype(dtype)
    return a, b


def workload(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)


def get_flops():
    c = CONFIG
    return 2 * c["M"] * c["K"] * c["N"]
