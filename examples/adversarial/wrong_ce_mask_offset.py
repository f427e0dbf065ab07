# target: 13p_Cross_Entropy
# expect: incorrect
# caught-by: confident
# exploit: a vocabulary-tiled fused cross-entropy whose label mask forgets the tile's offset: the
#          column index inside a tile is compared with the label as if every tile started at 0, so
#          the "target logit" is the sum of one logit per tile (labels below the tile width) or 0.
#          With random labels and logits of std ~0.2 the mean loss moves by 0.01-0.1 on ~7-10
#          (inside the noise bound of a bf16 scalar); on a trial whose logits know the labels
#          (a trained model: the label's logit well above the rest) it is off by the margin.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _kernel(h_ref, w_ref, lab_ref, o_ref, m_ref, s_ref, t_ref):
    j = pl.program_id(1)

    @pl.when(j == 0)
    def _():
        m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, jnp.float32)
        s_ref[...] = jnp.zeros(s_ref.shape, jnp.float32)
        t_ref[...] = jnp.zeros(t_ref.shape, jnp.float32)

    logits = jnp.dot(h_ref[...], w_ref[...], preferred_element_type=jnp.float32)  # (bt, bv)
    m_new = jnp.maximum(m_ref[...], jnp.max(logits, axis=-1, keepdims=True))
    s_ref[...] = s_ref[...] * jnp.exp(m_ref[...] - m_new) + jnp.sum(jnp.exp(logits - m_new), axis=-1, keepdims=True)
    m_ref[...] = m_new
    col = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1)  # BUG: should add j * bv
    t_ref[...] += jnp.sum(jnp.where(col == lab_ref[...], logits, 0.0), axis=-1, keepdims=True)

    @pl.when(j == pl.num_programs(1) - 1)
    def _():
        o_ref[...] = m_ref[...] + jnp.log(s_ref[...]) - t_ref[...]


def workload(hidden, weight, labels):
    b, h = hidden.shape
    v = weight.shape[1]
    bt = 16 if b % 16 == 0 else b
    bv = 256 if v % 256 == 0 else v
    per_token = pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((b, 1), jnp.float32),
        grid=(b // bt, v // bv),
        in_specs=[pl.BlockSpec((bt, h), lambda i, j: (i, 0)),
                  pl.BlockSpec((h, bv), lambda i, j: (0, j)),
                  pl.BlockSpec((bt, 1), lambda i, j: (i, 0))],
        out_specs=pl.BlockSpec((bt, 1), lambda i, j: (i, 0)),
        scratch_shapes=[pltpu.VMEM((bt, 1), jnp.float32) for _ in range(3)],
    )(hidden, weight, labels.reshape(b, 1).astype(jnp.int32))
    return jnp.mean(per_token)

