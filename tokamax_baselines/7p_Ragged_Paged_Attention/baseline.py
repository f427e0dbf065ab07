"""Hand-tuned baseline for 7p_Ragged_Paged_Attention: Pallas TPU ``ragged_paged_attention``.

The workload's 6 inputs are the kernel's own (queries, kv_pages with K/V interleaved on axis 2,
kv_lens, page_indices, cu_q_lens, num_seqs); the call adds ``sm_scale = head_dim ** -0.5`` (the
kernel's default mask value equals the workload's) and the tuned ``num_kv_pages_per_block``,
``num_queries_per_block`` and ``vmem_limit_bytes``. Query rows of no sequence (only when a scaled
scenario does not fill max_num_batched_tokens; never at paper scale) are zeroed as in the workload.

Not runnable off TPU: in jax 0.10.2 this kernel fails in both Pallas interpreters (see
``unsupported``), so on CPU/GPU there is no interpret path; ``make`` would pass ``interpret`` through
``pltpu.force_tpu_interpret_mode`` if it ever worked.
"""

from __future__ import annotations

from jb.baseline_support import interpret_mode as _interpret_mode

WORKLOAD = "7p_Ragged_Paged_Attention"
KERNEL = "jax.experimental.pallas.ops.tpu.ragged_paged_attention.ragged_paged_attention"
DEFAULTS = {"num_kv_pages_per_block": 64, "num_queries_per_block": 64, "vmem_limit_bytes": 33554432}

_INTERPRET_FAILURE = (
    "ragged_paged_attention does not run in Pallas interpret mode (jax 0.10.2, checked on CPU): "
    "the generic interpreter (interpret=True) fails with \"AttributeError: 'TypedInt' object has no "
    "attribute 'shape'\" and TPU interpret mode (pltpu.InterpretParams()) with \"AttributeError: "
    "'ReshapeTransform' object has no attribute 'indices'\"; it needs a real TPU"
)


def unsupported(backend: str) -> str | None:
    if backend != "tpu":
        return _INTERPRET_FAILURE
    return None


def invalid(config: dict, workload_config: dict) -> str | None:
    cfg = {**DEFAULTS, **config}
    c = workload_config
    nkv, nq, vmem = (int(cfg[p]) for p in ("num_kv_pages_per_block", "num_queries_per_block", "vmem_limit_bytes"))
    pages_per_seq, tokens = int(c["pages_per_seq"]), int(c["max_num_batched_tokens"])
    if not 0 < nkv <= pages_per_seq:
        return f"num_kv_pages_per_block={nkv} must be in (0, pages_per_seq={pages_per_seq}]"
    # The kernel takes cdiv blocks of queries and of KV pages (a ragged last block is fine), so
    # neither block has to divide its dimension; a block larger than the dimension is rejected.
    if not 0 < nq <= tokens:
        return f"num_queries_per_block={nq} must be in (0, max_num_batched_tokens={tokens}]"
    if vmem <= 0:
        return f"vmem_limit_bytes={vmem} must be positive"
    if c["num_q_heads"] % c["num_kv_heads"]:
        return "num_q_heads is not a multiple of num_kv_heads"
    return None


def make(config: dict, workload_config: dict, interpret: bool):
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import ragged_paged_attention

    cfg = {**DEFAULTS, **config}
    kwargs = dict(
        num_kv_pages_per_block=int(cfg["num_kv_pages_per_block"]),
        num_queries_per_block=int(cfg["num_queries_per_block"]),
        vmem_limit_bytes=int(cfg["vmem_limit_bytes"]),
    )
    tokens = int(workload_config["max_num_batched_tokens"])
    q_lens = workload_config.get("active_q_lens")  # absent at paper scale, whose scenario fills all rows
    zero_tail = q_lens is not None and sum(q_lens) < tokens

    def fn(queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs):
        with _interpret_mode(interpret):
            out = ragged_paged_attention(
                queries, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                sm_scale=queries.shape[-1] ** -0.5, **kwargs,
            )
        if zero_tail:
            used = cu_q_lens[num_seqs[0]]
            out = jnp.where((jnp.arange(out.shape[0]) < used)[:, None, None], out, jnp.zeros_like(out))
        return out

    return fn


# GPU track (jb.impl.baseline_track): none; why, as found with jax 0.12.0.1 / tokamax 0.0.17.
GPU_UNSUPPORTED = (
    'no GPU kernel: ragged paged attention exists only for TPU (pallas.ops.tpu / tokamax batched_rpa)'
)
