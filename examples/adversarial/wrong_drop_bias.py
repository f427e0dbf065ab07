# target: 23k_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp
# expect: incorrect
# caught-by: affine
# exploit: drops the bias. The output is sum_j (x W^T + b)_j (the max/avgpool/logsumexp run over
#          size-1 axes); with the published bias ~N(0, 0.02) its share is sum(b) ~ 0.02 * sqrt(out),
#          under the published-era atol of 1.0. Trials with a full-size bias expose it.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, w_ref, o_ref):
    wsum = jnp.sum(w_ref[...].astype(jnp.float32), axis=0)  # sum over out_features: (K,)
    o_ref[...] = jnp.sum(x_ref[...].astype(jnp.float32) * wsum[None, :], axis=1, keepdims=True).astype(o_ref.dtype)


def workload(x, weight, bias):
    b, k = x.shape
    n = weight.shape[0]
    bb = 8 if b % 8 == 0 else b
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((b, 1), x.dtype),
        grid=(b // bb,),
        in_specs=[pl.BlockSpec((bb, k), lambda i: (i, 0)), pl.BlockSpec((n, k), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((bb, 1), lambda i: (i, 0)),
    )(x, weight)
