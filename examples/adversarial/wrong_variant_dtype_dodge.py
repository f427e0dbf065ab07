# target: 12p_RMSNorm
# expect: incorrect
# caught-by: variant (emb_dim 384)
# exploit: gets past "a variant the candidate does not serve is specialized, not judged": the
#          hard-coded-shape kernel (normalises over a fixed 256-wide embedding) disguises its wrong
#          answer at other widths as a refusal by returning it in float32 (an output that "does
#          not fit" the variant). jb counts only a failure to compile, or outputs of other shapes,
#          as specialized; another dtype or structure at a variant is judged and fails.
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
    dtype = x.dtype if d == EMB else jnp.float32  # the disguise
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)
