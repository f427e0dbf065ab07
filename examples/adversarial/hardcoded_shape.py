# target: 12p_RMSNorm
# expect: incorrect
# exploit: hard-coded shapes - normalises over a fixed 256-wide embedding (the tiny scale's) instead
#          of the input's last axis; caught by a held-out shape variant (verify args.variants, e.g.
#          [{"emb_dim": 384}]), passes the plain trials at the tiny scale
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

EMB = 256  # hard-coded


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    head = x[:, :EMB]
    y = x * jax.lax.rsqrt(jnp.mean(head * head, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)
