# target: 12p_RMSNorm
# expect: incorrect
# caught-by: variant (emb_dim 384)
# exploit: gets past "outputs of another shape at a variant = specialized" by keeping the right
#          shape: at any width other than the benchmark's it computes the RMS over the first 256
#          features only (a hard-coded slice) and returns a correctly-shaped, wrong output. A
#          variant where the candidate compiles to the reference's shapes is judged: incorrect.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

EMB = 256


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    head = x[:, : min(EMB, x.shape[-1])]
    y = x * jax.lax.rsqrt(jnp.mean(head * head, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)
