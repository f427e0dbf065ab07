"""Example: causal attention with an online softmax (flash attention), one (batch, head, q-block)
per output block and the key/value blocks as the innermost grid axis.

Pattern: the running row max `m`, the running denominator `l` and the unnormalised output `acc`
live in float32 VMEM scratch across the kv axis. Each kv step rescales what was accumulated by
exp(m_old - m_new), adds the new block's contribution, and the last step divides by `l`. Blocks
entirely above the causal diagonal are skipped with `pl.when`.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

NEG_INF = -1e30  # a large finite negative: exp() of it is 0 and it never produces NaN


def _block(dim: int, preferred: int) -> int:
    for b in range(min(preferred, dim), 0, -1):
        if dim % b == 0 and (b % 8 == 0 or b == dim):
            return b
    return dim


def _flash_kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale, bq, bk):
    qi, ki = pl.program_id(2), pl.program_id(3)

    @pl.when(ki == 0)
    def _init():
        m_ref[...] = jnp.full_like(m_ref, NEG_INF)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    # Skip kv blocks that lie entirely in the future of every query of this block.
    @pl.when(ki * bk <= qi * bq + bq - 1)
    def _step():
        q = q_ref[...]                                   # (bq, d) bf16
        k = k_ref[...]                                   # (bk, d)
        s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32) * scale
        rows = qi * bq + jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 0)
        cols = ki * bk + jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 1)
        s = jnp.where(cols <= rows, s, NEG_INF)          # causal mask inside the block
        m_prev = m_ref[...]                              # (bq, 1)
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=-1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m_prev - m_new)                  # rescales the old partial results
        l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=-1, keepdims=True)
        acc_ref[...] = alpha * acc_ref[...] + jnp.dot(
            p.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    @pl.when(ki == pl.num_programs(3) - 1)
    def _finish():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


@jax.jit
def causal_attention(q, k, v):
    # q, k, v: (batch, heads, seq, head_dim)
    b, h, s, d = q.shape
    bq, bk = _block(s, 512), _block(s, 512)
    kernel = functools.partial(_flash_kernel, scale=d ** -0.5, bq=bq, bk=bk)
    # `None` in a block shape squeezes that dimension: the kernel sees (bq, d) refs.
    q_spec = pl.BlockSpec((None, None, bq, d), lambda bi, hi, qi, ki: (bi, hi, qi, 0))
    kv_spec = pl.BlockSpec((None, None, bk, d), lambda bi, hi, qi, ki: (bi, hi, ki, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(b, h, s // bq, s // bk),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=q_spec,
        scratch_shapes=[
            pltpu.VMEM((bq, 1), jnp.float32),    # m: running max
            pltpu.VMEM((bq, 1), jnp.float32),    # l: running denominator
            pltpu.VMEM((bq, d), jnp.float32),    # acc: unnormalised output
        ],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")
        ),
    )(q, k, v)
