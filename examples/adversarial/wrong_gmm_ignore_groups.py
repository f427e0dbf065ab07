# target: 11p_Megablox_GMM
# expect: incorrect
# caught-by: ragged_groups (every trial)
# exploit: ignores group_sizes - assumes every expert owns exactly M / G consecutive rows (what
#          create_inputs builds), so the kernel is a plain batched matmul with no group metadata,
#          no masking and no scalar prefetch. Ragged group sizes expose it.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, w_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], w_ref[0], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def workload(lhs, rhs, group_sizes, max_expert_size):
    m, k = lhs.shape
    g, _, n = rhs.shape
    rows = m // g
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), lhs.dtype),
        grid=(g,),
        in_specs=[pl.BlockSpec((rows, k), lambda i: (i, 0)),
                  pl.BlockSpec((1, k, n), lambda i: (i, 0, 0))],
        out_specs=pl.BlockSpec((rows, n), lambda i: (i, 0)),
    )(lhs, rhs)
