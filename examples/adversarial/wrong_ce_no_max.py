# target: 13p_Cross_Entropy
# expect: incorrect
# caught-by: large_logits
# exploit: numerically unsafe shortcut - logsumexp without the max subtraction, log(sum(exp(z))),
#          which saves a pass over the logits. With the published inits the logits are small
#          (std ~1) and this is exact; large-magnitude logits overflow exp in float32.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(h_ref, w_ref, lab_ref, o_ref):
    logits = jnp.dot(h_ref[...], w_ref[...], preferred_element_type=jnp.float32)  # (bt, V)
    lse = jnp.log(jnp.sum(jnp.exp(logits), axis=-1))  # no max subtraction
    col = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1)
    target = jnp.sum(jnp.where(col == lab_ref[...], logits, 0.0), axis=-1)
    o_ref[...] = (lse - target)[:, None]


def workload(hidden, weight, labels):
    b, h = hidden.shape
    v = weight.shape[1]
    bt = 16 if b % 16 == 0 else b
    per_token = pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((b, 1), jnp.float32),
        grid=(b // bt,),
        in_specs=[pl.BlockSpec((bt, h), lambda i: (i, 0)),
                  pl.BlockSpec((h, v), lambda i: (0, 0)),
                  pl.BlockSpec((bt, 1), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((bt, 1), lambda i: (i, 0)),
    )(hidden, weight, labels.reshape(b, 1).astype(jnp.int32))
    return jnp.mean(per_token)
