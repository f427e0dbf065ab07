# target: 40k_Gemm_GroupNorm_Min_BiasAdd
# expect: incorrect
# caught-by: affine (every trial)
# exploit: drops the GroupNorm weight and bias (create_inputs sets them to ones and zeros, so
#          "x * 1 + 0" looks like dead work). Resampled normalisation parameters expose it.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _make_kernel(groups):
    def kernel(x_ref, w_ref, lb_ref, o_ref):
        h = jax.lax.dot_general(x_ref[...], w_ref[...], (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32) + lb_ref[...].astype(jnp.float32)
        b, n = h.shape
        g = h.reshape(b, groups, n // groups)
        mean = jnp.mean(g, axis=2, keepdims=True)
        var = jnp.mean(jnp.square(g - mean), axis=2, keepdims=True)
        g = (g - mean) * jax.lax.rsqrt(var + 1e-5)  # no gn_weight / gn_bias
        o_ref[...] = jnp.min(g.reshape(b, n), axis=1, keepdims=True)
    return kernel


def workload(x, weight, linear_bias, gn_weight, gn_bias, bias):
    b, k = x.shape
    n = weight.shape[0]
    groups = n // 16 if n % 16 == 0 else 1  # CONFIG's num_groups at every jb scale: 16 features each
    bb = 8 if b % 8 == 0 else b
    m = pl.pallas_call(
        _make_kernel(groups),
        out_shape=jax.ShapeDtypeStruct((b, 1), jnp.float32),
        grid=(b // bb,),
        in_specs=[pl.BlockSpec((bb, k), lambda i: (i, 0)),
                  pl.BlockSpec((n, k), lambda i: (0, 0)),
                  pl.BlockSpec((1, n), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((bb, 1), lambda i: (i, 0)),
    )(x, weight, linear_bias.reshape(1, n))
    return (m + bias.astype(jnp.float32)).astype(x.dtype)
