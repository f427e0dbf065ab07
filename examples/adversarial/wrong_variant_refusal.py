# target: 12p_RMSNorm
# expect: incorrect
# caught-by: variant
# exploit: the dodge of the `specialized` rule - hard-coded to a 256-wide embedding (as
#          hardcoded_shape.py, exact at the tiny scale's width and wrong at any other) and, at a
#          width it was not built for, it "refuses" the way some kernels signal an unsupported
#          input: it still answers with the variant's shape, NaN-filled, hoping a NaN answer
#          reads as a refusal. Only a program that does not compile, raises, or answers with
#          another shape is specialized; an answer of the variant's shape is judged: incorrect.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

EMB = 256  # hard-coded


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    head = x[:, :EMB]
    y = x * jax.lax.rsqrt(jnp.mean(head * head, axis=-1, keepdims=True) + 1e-5)
    if x.shape[-1] != EMB:
        y = jnp.full_like(y, jnp.nan)  # "unsupported"
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)
