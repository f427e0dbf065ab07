# target: 13p_Cross_Entropy
# expect: incorrect
# caught-by: confident
# exploit: statistical shortcut - the labels are never read: the target logit is replaced by the
#          mean logit of the row, which is what a uniformly random label's logit is in
#          expectation. With random labels the mean loss moves by ~std(logits)/sqrt(tokens)
#          (0.01-0.1 on a loss of ~9.8 at cpu scale: it passed verify 8/8, issue 27.2); on the
#          `confident` trial (labels mostly the row's argmax) the true target is the row maximum
#          and the loss is off by several units.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(h_ref, w_ref, o_ref):
    logits = jnp.dot(h_ref[...], w_ref[...], preferred_element_type=jnp.float32)  # (bt, V)
    m = jnp.max(logits, axis=-1, keepdims=True)
    lse = m[:, 0] + jnp.log(jnp.sum(jnp.exp(logits - m), axis=-1))
    o_ref[...] = (lse - jnp.mean(logits, axis=-1))[:, None]  # no label anywhere


def workload(hidden, weight, labels):
    del labels
    b, h = hidden.shape
    v = weight.shape[1]
    bt = 16 if b % 16 == 0 else b
    per_token = pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((b, 1), jnp.float32),
        grid=(b // bt,),
        in_specs=[pl.BlockSpec((bt, h), lambda i: (i, 0)), pl.BlockSpec((h, v), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((bt, 1), lambda i: (i, 0)),
    )(hidden, weight)
    return jnp.mean(per_token)
