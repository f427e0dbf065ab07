"""SwiGLU MLP block of Llama-3.1-70B (MaxText MlpBlock): down(silu(x @ gate) * (x @ up)).

Matmuls take bf16 operands and accumulate in float32; the gated hidden activation is rounded to
the input dtype before the down projection; the output has the input dtype.
"""

import functools
import math

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "llama3_70b_swiglu",
    "model": "Llama-3.1-70B",
    "operator": "swiglu_mlp",
    "batch": 2,
    "seq_len": 4096,
    "emb_dim": 8192,
    "mlp_dim": 28672,
}

# Weights are N(0.02) whatever the size, so emb_dim/mlp_dim stay large enough (>= 1024) that the
# output keeps a magnitude of order 0.1-1 (well above atol); only the token count shrinks much.
SCALES = {
    "paper": {},
    "cpu": {"batch": 1, "seq_len": 256, "emb_dim": 1024, "mlp_dim": 2816},
    "tiny": {"batch": 2, "seq_len": 16, "emb_dim": 1024, "mlp_dim": 2048},
}

META = {
    "category": "priority",
    "model": "Llama-3.1-70B",
    "operator": "swiglu_mlp",
    "kernelbench_id": None,
    "handtuned": False,
}


def create_inputs(dtype=jnp.bfloat16):
    """Returns (x ~ N(0,1), gate_kernel, up_kernel, down_kernel ~ N(0,0.02)); key(42)."""
    c = CONFIG
    return _create(c["batch"], c["seq_len"], c["emb_dim"], c["mlp_dim"], jnp.dtype(dtype))


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _create(b, s, e, m, dtype):
    return tuple(_normals(jax.random.key(42), [
        ((b, s, e), 1.0, 0.0, dtype),
        ((e, m), 0.02, 0.0, dtype),
        ((e, m), 0.02, 0.0, dtype),
        ((m, e), 0.02, 0.0, dtype),
    ]))


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


def workload(x, gate_kernel, up_kernel, down_kernel):
    g = jnp.einsum("bse,em->bsm", x, gate_kernel, preferred_element_type=jnp.float32)
    u = jnp.einsum("bse,em->bsm", x, up_kernel, preferred_element_type=jnp.float32)
    h = (jax.nn.silu(g) * u).astype(x.dtype)
    out = jnp.einsum("bsm,me->bse", h, down_kernel, preferred_element_type=jnp.float32)
    return out.astype(x.dtype)


def get_flops():
    # Three matmuls (gate, up: tokens x emb x mlp; down: tokens x mlp x emb), 2 FLOPs per MAC:
    # 6 * B * S * emb_dim * mlp_dim (the published count; SiLU and the product are < 0.1 %).
    return 6 * CONFIG["batch"] * CONFIG["seq_len"] * CONFIG["emb_dim"] * CONFIG["mlp_dim"]


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): tokens and MLP width."""
    c = config
    return [{"seq_len": _halve(c["seq_len"]), "mlp_dim": _halve(c["mlp_dim"])}]
