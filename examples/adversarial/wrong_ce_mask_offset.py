# target: 13p_Cross_Entropy
# expect: incorrect
# caught-by: confident
# exploit: an honest-looking bug, not a cheat - the vocabulary is tiled (online logsumexp over
#          vocab blocks) and the label mask compares the label with the column index *within*
#          the block, forgetting the block's offset. The target logit summed over the blocks is
#          then logits[label mod-ish]: a different column per token. With uniform random labels
#          and logits of std ~0.45 the mean loss moves by ~0.01-0.1 on ~9.8 (under a bf16 ulp of
#          the loss: it passed verify 8/8 at cpu scale, issue 27.2); on the `confident` trial
#          (labels mostly the argmax, logits of std ~4) the true target is the row maximum and
#          the loss moves by several units.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _block(n, target):
    for b in (target, 512, 256, 128, 64, 32, 16, 8):
        if b <= n and n % b == 0:
            return b
    return n


def _kernel(h_ref, w_ref, lab_ref, o_ref, m_ref, l_ref, t_ref):
    j = pl.program_id(1)

    @pl.when(j == 0)
    def _init():
        m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, jnp.float32)
        l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)
        t_ref[...] = jnp.zeros(t_ref.shape, jnp.float32)

    logits = jnp.dot(h_ref[...], w_ref[...], preferred_element_type=jnp.float32)  # (bt, bv)
    m_old = m_ref[...]
    m_new = jnp.maximum(m_old, jnp.max(logits, axis=-1, keepdims=True))
    l_ref[...] = l_ref[...] * jnp.exp(m_old - m_new) + jnp.sum(jnp.exp(logits - m_new), axis=-1, keepdims=True)
    m_ref[...] = m_new
    col = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1)  # BUG: + j * block width missing
    t_ref[...] += jnp.sum(jnp.where(col == lab_ref[...], logits, 0.0), axis=-1, keepdims=True)

    @pl.when(j == pl.num_programs(1) - 1)
    def _done():
        o_ref[...] = m_ref[...] + jnp.log(l_ref[...]) - t_ref[...]


def workload(hidden, weight, labels):
    b, h = hidden.shape
    v = weight.shape[1]
    bt, bv = _block(b, 128), _block(v, 2048)
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

