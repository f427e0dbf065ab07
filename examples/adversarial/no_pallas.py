# target: 12p_RMSNorm
# expect: rejected
# exploit: no kernel at all - the reference written in plain jax.numpy (XLA does the work)
import jax
import jax.numpy as jnp


def workload(x, scale):
    xf = x.astype(jnp.float32)
    y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + 1e-5)
    return (y * scale.astype(jnp.float32)).astype(x.dtype)
