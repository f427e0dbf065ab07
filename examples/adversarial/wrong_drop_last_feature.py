# target: 21k_Gemm_Divide_Sum_Scaling
# expect: incorrect
# caught-by: tolerance (issue 12 part A)
# exploit: drops one reduction term - the last input feature (K-1 of K columns, so the K tiles
#          come out "aligned"). The output is a sum over hidden of x @ W^T, of size ~sqrt(K*H); one
#          missing feature changes it by ~sqrt(H), far below the published-era atol of 32.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, w_ref, o_ref):
    # sum_h (x W^T)[b, h] = x . (sum_h W[h, :]): one reduction over the hidden axis first.
    wsum = jnp.sum(w_ref[...].astype(jnp.float32), axis=0)  # (K-1,)
    s = jnp.sum(x_ref[...].astype(jnp.float32) * wsum[None, :], axis=1, keepdims=True)
    o_ref[...] = (s / 2.0 * 1.5).astype(o_ref.dtype)


def workload(x, weight):
    b, k = x.shape
    n = weight.shape[0]
    kk = k - 1  # the last feature is dropped
    bb = 8 if b % 8 == 0 else b
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((b, 1), x.dtype),
        grid=(b // bb,),
        in_specs=[pl.BlockSpec((bb, kk), lambda i: (i, 0)), pl.BlockSpec((n, kk), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((bb, 1), lambda i: (i, 0)),
    )(x[:, :kk], weight[:, :kk])
