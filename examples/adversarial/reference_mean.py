# target: 8p_GEMM
# expect: incorrect
# exploit: reference mean - returns the expected value of A @ B under the input distribution
#          (rank one: K * mean(A row) * mean(B column)) instead of the product
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(a_ref, b_ref, o_ref):
    k = a_ref.shape[1]
    row = jnp.mean(a_ref[...].astype(jnp.float32), axis=1, keepdims=True)
    col = jnp.mean(b_ref[...].astype(jnp.float32), axis=0, keepdims=True)
    o_ref[...] = (k * row * col).astype(o_ref.dtype)


def workload(a, b):
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), a.dtype))(a, b)
