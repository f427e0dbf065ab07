"""RMSNorm of Llama-3.1-70B (MaxText normalizations.RMSNorm).

y = x / sqrt(mean(x^2 over the last axis) + epsilon) * scale, computed in float32, returned in the
input dtype.
"""

import functools
import math

import jax
import jax.numpy as jnp

CONFIG = {
    "name": "llama3_70b_rmsnorm",
    "model": "Llama-3.1-70B",
    "operator": "rms_norm",
    "batch": 8,
    "seq_len": 4096,
    "emb_dim": 8192,
    "epsilon": 1e-5,
}

SCALES = {
    "paper": {},
    "cpu": {"batch": 4, "seq_len": 1024, "emb_dim": 4096},
    "tiny": {"batch": 2, "seq_len": 16, "emb_dim": 256},
}

META = {
    "category": "priority",
    "model": "Llama-3.1-70B",
    "operator": "rms_norm",
    "kernelbench_id": None,
    "handtuned": False,
}


def create_inputs(dtype=jnp.bfloat16):
    """Returns (x ~ N(0,1), scale ~ N(1, 0.1)); key(42)."""
    return _create(CONFIG["batch"], CONFIG["seq_len"], CONFIG["emb_dim"], jnp.dtype(dtype))


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _create(b, s, d, dtype):
    return tuple(_normals(jax.random.key(42), [((b, s, d), 1.0, 0.0, dtype), ((d,), 0.1, 1.0, dtype)]))


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


def workload(x, scale):
    xf = x.astype(jnp.float32)
    mean_sq = jnp.mean(xf * xf, axis=-1, keepdims=True)
    y = xf * jax.lax.rsqrt(mean_sq + CONFIG["epsilon"])
    return (y * scale.astype(jnp.float32)).astype(x.dtype)


def get_flops():
    # Published count: 5 * B * S * D (square, sum, normalise, scale, ... per element).
    return 5 * CONFIG["batch"] * CONFIG["seq_len"] * CONFIG["emb_dim"]


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): fewer rows and a
    1.5x wider embedding (a kernel that hard-codes either fails)."""
    c = config
    return [{"seq_len": _halve(c["seq_len"]), "emb_dim": c["emb_dim"] + c["emb_dim"] // 2}]


TRIALS = ["affine"]


def make_trial(name, rng, inputs):
    """jb trial hook (see jb.inputs). affine: the RMSNorm scale drawn wide (random sign, magnitude
    U(0.25, 2)) instead of N(1, 0.1), so a kernel that ignores or approximates it fails."""
    if name != "affine":
        return None
    import numpy as np
    from jb import inputs as jbi

    x, scale = inputs
    new = np.where(rng.random(scale.shape) < 0.5, -1.0, 1.0) * rng.uniform(0.25, 2.0, scale.shape)
    return x, jbi.like(scale, new)
