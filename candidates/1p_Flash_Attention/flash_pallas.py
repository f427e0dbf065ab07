"""Causal flash attention (online softmax) as a Pallas TPU kernel, layout (B, H, S, D).

Grid (B, H, S/bq, S/bk): the KV axis is innermost ("arbitrary") and carries the running max ``m``,
the running denominator ``l`` and the f32 output accumulator in VMEM scratch. KV blocks entirely
above the diagonal are skipped. Numerics follow the workload: scores and softmax in f32, the
probabilities cast to the value dtype for the PV product, masked scores set to -1e9.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_Q, BLOCK_K = 256, 256
MASK_VALUE = -1e9


def _block(dim: int, preferred: int, align: int = 8) -> int:
    for b in range(min(preferred, dim), 0, -1):
        if dim % b == 0 and b % align == 0:
            return b
    return dim


def _flash_kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale, bq, bk):
    qi, ki = pl.program_id(2), pl.program_id(3)

    @pl.when(ki == 0)
    def _init():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    # Skip KV blocks that lie entirely above the causal diagonal.
    @pl.when(ki * bk <= qi * bq + bq - 1)
    def _compute():
        q = q_ref[...]
        k = k_ref[...]
        s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32) * scale
        rows = qi * bq + jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 0)
        cols = ki * bk + jax.lax.broadcasted_iota(jnp.int32, (bq, bk), 1)
        s = jnp.where(rows >= cols, s, MASK_VALUE)
        m_prev = m_ref[...]
        m_new = jnp.maximum(m_prev, s.max(axis=-1, keepdims=True))
        alpha = jnp.exp(m_prev - m_new)
        p = jnp.exp(s - m_new)
        l_ref[...] = alpha * l_ref[...] + p.sum(axis=-1, keepdims=True)
        pv = jnp.dot(p.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32)
        acc_ref[...] = alpha * acc_ref[...] + pv
        m_ref[...] = m_new

    @pl.when(ki == pl.num_programs(3) - 1)
    def _finish():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


@jax.jit
def workload(query, key, value):
    b, h, s, d = query.shape
    bq, bk = _block(s, BLOCK_Q), _block(s, BLOCK_K)
    kernel = functools.partial(_flash_kernel, scale=d ** -0.5, bq=bq, bk=bk)
    squeezed = pl.Squeezed() if hasattr(pl, "Squeezed") else None
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(query.shape, query.dtype),
        grid=(b, h, s // bq, s // bk),
        in_specs=[
            pl.BlockSpec((squeezed, squeezed, bq, d), lambda bi, hi, qi, ki: (bi, hi, qi, 0)),
            pl.BlockSpec((squeezed, squeezed, bk, d), lambda bi, hi, qi, ki: (bi, hi, ki, 0)),
            pl.BlockSpec((squeezed, squeezed, bk, d), lambda bi, hi, qi, ki: (bi, hi, ki, 0)),
        ],
        out_specs=pl.BlockSpec((squeezed, squeezed, bq, d), lambda bi, hi, qi, ki: (bi, hi, qi, 0)),
        scratch_shapes=[
            pltpu.VMEM((bq, 1), jnp.float32),
            pltpu.VMEM((bq, 1), jnp.float32),
            pltpu.VMEM((bq, d), jnp.float32),
        ],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
    )(query, key, value)
