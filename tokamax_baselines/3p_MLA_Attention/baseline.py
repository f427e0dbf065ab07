"""Hand-tuned baseline for 3p_MLA_Attention: MLA projections + Pallas TPU ``flash_attention``.

As in the paper: the same projections as the workload (low-rank q, low-rank KV with a shared
rotary key part, half-split RoPE), then the attention core runs in ``flash_attention`` with
q = [q_nope | q_rope] and k = [k_nope | k_rope broadcast to every head] (head dim 192), both
zero-padded to 256 (``_PAD_HEAD_DIM``; v 128 -> 256 too, the kernel needs equal head dims),
``causal=True``, ``sm_scale = 192 ** -0.5``; the output is sliced back to the v head dim and goes
through o_proj. Block sizes as in 1p. The projections are this adapter's own JAX code, written to
match the workload's numerics (f32 accumulation, activations rounded to the input dtype after each
projection, RoPE in f32).
``flash_attention`` takes no ``interpret=`` argument: on CPU it is traced under
``pltpu.force_tpu_interpret_mode(True)`` (the generic interpreter).
"""

from __future__ import annotations

from jb.baseline_support import flash_block_error, flash_block_sizes, interpret_mode as _interpret_mode

WORKLOAD = "3p_MLA_Attention"
KERNEL = "jax.experimental.pallas.ops.tpu.flash_attention.flash_attention"
DEFAULTS = {"block_q": 2048, "block_k_major": 2048, "block_k": 1024}

PAD_HEAD_DIM = 256


def unsupported(backend: str) -> str | None:
    return None


def invalid(config: dict, workload_config: dict) -> str | None:
    c = workload_config
    qk_dim = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    if max(qk_dim, c["v_head_dim"]) > PAD_HEAD_DIM:
        return f"head dims ({qk_dim}, {c['v_head_dim']}) exceed the padded head dim {PAD_HEAD_DIM}"
    return flash_block_error({**DEFAULTS, **config}, int(c["seq_len"]))


def make(config: dict, workload_config: dict, interpret: bool):
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    cfg = {**DEFAULTS, **config}
    c = dict(workload_config)
    h, kvl = int(c["num_heads"]), int(c["kv_lora_rank"])
    nope, rope, vd = int(c["qk_nope_head_dim"]), int(c["qk_rope_head_dim"]), int(c["v_head_dim"])
    theta = c["rope_theta"]
    block_sizes = flash_block_sizes(cfg)

    def proj(a, w):
        return jnp.einsum("...i,io->...o", a, w, preferred_element_type=jnp.float32).astype(a.dtype)

    def rope_half(x):
        # x (B, S, ..., d); pairs (i, i + d/2) rotated by position * theta^(-2i/d), in float32.
        s, d = x.shape[1], x.shape[-1]
        half = d // 2
        inv_freq = 1.0 / (theta ** (jnp.arange(half, dtype=jnp.float32) * 2.0 / d))
        angles = jnp.arange(s, dtype=jnp.float32)[:, None] * inv_freq[None, :]
        bshape = (1, s) + (1,) * (x.ndim - 3) + (half,)
        cos, sin = jnp.cos(angles).reshape(bshape), jnp.sin(angles).reshape(bshape)
        xf = x.astype(jnp.float32)
        x1, x2 = xf[..., :half], xf[..., half:]
        return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1).astype(x.dtype)

    def pad_to_bhsd(x):
        # (B, S, H, d) -> (B, H, S, PAD_HEAD_DIM)
        x = jnp.transpose(x, (0, 2, 1, 3))
        return jnp.pad(x, ((0, 0), (0, 0), (0, 0), (0, PAD_HEAD_DIM - x.shape[-1])))

    def fn(x, q_down, q_up, kv_down, k_up, v_up, o_proj):
        b, s, _ = x.shape
        q = proj(proj(x, q_down), q_up).reshape(b, s, h, nope + rope)
        q = jnp.concatenate([q[..., :nope], rope_half(q[..., nope:])], axis=-1)
        ckv = proj(x, kv_down)
        c_kv, k_rope = ckv[..., :kvl], rope_half(ckv[..., kvl:])
        k_nope = proj(c_kv, k_up).reshape(b, s, h, nope)
        k = jnp.concatenate([k_nope, jnp.broadcast_to(k_rope[:, :, None, :], (b, s, h, rope))], axis=-1)
        v = proj(c_kv, v_up).reshape(b, s, h, vd)
        with _interpret_mode(interpret):
            out = fa.flash_attention(
                pad_to_bhsd(q), pad_to_bhsd(k), pad_to_bhsd(v),
                causal=True, sm_scale=(nope + rope) ** -0.5, block_sizes=block_sizes,
            )
        out = jnp.transpose(out[..., :vd], (0, 2, 1, 3)).reshape(b, s, h * vd)
        return proj(out, o_proj)

    return fn


# GPU track (jb.impl.baseline_track): none; why, as found with jax 0.12.0.1 / tokamax 0.0.17.
GPU_UNSUPPORTED = (
    'no GPU kernel: neither tokamax nor jax.experimental.pallas.ops.gpu has an MLA attention kernel'
)
