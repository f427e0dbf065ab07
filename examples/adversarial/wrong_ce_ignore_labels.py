# target: 13p_Cross_Entropy
# expect: incorrect
# caught-by: confident
# exploit: ignores the labels: the "target logit" is the row's mean logit (what a label drawn
#          uniformly at random gives on average), so the loss is logsumexp - mean(logits). With
#          random labels over a 1k-128k vocabulary and logits of std ~0.2 the mean loss moves by
#          0.01-0.1 on ~7-10, inside the noise bound of a bf16 scalar; on a trial whose logits know
#          the labels (the label's logit well above the rest, as in a trained model) it is off by
#          the margin.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(h_ref, w_ref, o_ref):
    logits = jnp.dot(h_ref[...], w_ref[...], preferred_element_type=jnp.float32)  # (bt, V)
    m = jnp.max(logits, axis=-1, keepdims=True)
    lse = m[:, 0] + jnp.log(jnp.sum(jnp.exp(logits - m), axis=-1))
    o_ref[...] = (lse - jnp.mean(logits, axis=-1))[:, None]


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
