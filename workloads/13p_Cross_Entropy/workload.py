"""Fused linear + softmax cross-entropy of Llama-3.1-8B's LM head (as in openxla/tokamax).

loss = mean over tokens of (logsumexp(h @ W) - (h @ W)[label]). Logits accumulate in float32 and
the loss is computed and returned in float32 (a 0-d array), as tokamax's fused loss does; a bf16
log-softmax over a 128k vocabulary would quantise the loss to steps of 1/16.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

CONFIG = {
    "name": "llama3_8b_cross_entropy",
    "model": "Llama-3.1-8B",
    "operator": "fused_cross_entropy",
    "batch_tokens": 8192,
    "hidden_dim": 4096,
    "vocab_size": 128256,
}

SCALES = {
    "paper": {},
    "cpu": {"batch_tokens": 256, "hidden_dim": 512, "vocab_size": 16384},
    "tiny": {"batch_tokens": 32, "hidden_dim": 128, "vocab_size": 1024},
}

# The output is one float32 scalar of about log(vocab_size) ~ 7-12, averaged over all tokens.
# With the default rtol=1e-2 the allowed error (~0.1) exceeds how much the loss moves between input
# draws, so a kernel that ignored the labels or a constant log(V) could pass. A correct kernel
# (bf16 operands, float32 accumulation) agrees to ~1e-5, so 1e-3 absolute (+1e-4 relative) is safe.
TOLERANCE = {"atol": 1e-3, "rtol": 1e-4}

META = {
    "category": "priority",
    "model": "Llama-3.1-8B",
    "operator": "fused_cross_entropy",
    "kernelbench_id": None,
    "handtuned": False,
}


def create_inputs(dtype=jnp.bfloat16):
    """Returns (hidden ~ N(0,1), weight ~ N(0,0.02), labels ~ randint(0, vocab) int32); key(42)."""
    c = CONFIG
    return _create(c["batch_tokens"], c["hidden_dim"], c["vocab_size"], jnp.dtype(dtype))


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _create(b, h, v, dtype):
    k_normal, k_labels = jax.random.split(jax.random.key(42), 2)
    hidden, weight = _normals(k_normal, [((b, h), 1.0, 0.0, dtype), ((h, v), 0.02, 0.0, dtype)])
    labels = jax.random.randint(k_labels, (b,), 0, v, dtype=jnp.int32)
    return hidden, weight, labels


def _normals(key, specs):
    """Normal draws for several inputs from ONE threefry call (one random op per input compiles
    several times slower on CPU). specs: (shape, std, mean, dtype) per input."""
    sizes = [math.prod(shape) for shape, *_ in specs]
    z = jax.random.normal(key, (sum(sizes),), jnp.float32)
    out, offset = [], 0
    for (shape, std, mean, dtype), size in zip(specs, sizes):
        out.append((z[offset:offset + size].reshape(shape) * std + mean).astype(dtype))
        offset += size
    return out


def workload(hidden, weight, labels):
    logits = jnp.dot(hidden, weight, preferred_element_type=jnp.float32)
    lse = jax.nn.logsumexp(logits, axis=-1)
    target = jnp.take_along_axis(logits, labels[:, None].astype(jnp.int32), axis=-1)[:, 0]
    return jnp.mean(lse - target)


def get_flops():
    # Published: matmul 2*B*H*V plus 3*B*V for the softmax and loss.
    b, h, v = CONFIG["batch_tokens"], CONFIG["hidden_dim"], CONFIG["vocab_size"]
    return 2 * b * h * v + 3 * b * v


def _halve(n):
    """n // 2 when n is even and at least 2, else 2 * n (so the variant always differs)."""
    return n // 2 if n >= 2 and n % 2 == 0 else 2 * n


def variants(config):
    """Held-out shape variant (CONFIG overrides relative to the scaled config): tokens and vocabulary."""
    c = config
    return [{"batch_tokens": _halve(c["batch_tokens"]), "vocab_size": _halve(c["vocab_size"])}]


TRIALS = ["large_logits", "confident"]


def make_trial(name, rng, inputs):
    """jb trial hook (see jb.inputs), every trial: fresh random labels. large_logits: hidden
    rescaled so the logits have a std of ~40 (row maxima ~100-150: exp overflows float32 without
    the max subtraction). confident: the labels carry the answer, as a trained model's do: each
    token's hidden state is moved along its label's weight column so that the label's logit
    rises by log(vocab) + U[-2, 4] on three tokens in four (there the label is the row's argmax;
    the rest keep a random label, so the row maximum is not the answer either). With random labels a kernel that ignores them, or reads the wrong column (a tiled
    vocabulary's label mask without the tile's offset), moves the mean loss by only
    ~std(logits)/sqrt(tokens), the size of a bf16 program's rounding (issue 27.2); here by
    several units."""
    import jax.numpy as jnp
    import numpy as np

    from jb import inputs as jbi

    hidden, weight, labels = inputs
    labels = jbi.like(labels, rng.integers(0, weight.shape[1], labels.shape))
    if name == "large_logits":
        est = jbi.rms(hidden) * jbi.rms(weight) * hidden.shape[1] ** 0.5
        hidden = jbi.like(hidden, jbi.host(hidden) * (40.0 / est))
    elif name == "confident":
        cols = np.asarray(jnp.take(weight, labels, axis=1).astype(jnp.float32)).T  # (B, H)
        norm2 = np.maximum(np.sum(cols * cols, axis=1, keepdims=True), 1e-6)
        boost = np.log(weight.shape[1]) + rng.uniform(-2.0, 4.0, (labels.shape[0], 1))
        boost = np.where(rng.random((labels.shape[0], 1)) < 0.75, boost, 0.0)  # a quarter stay random
        hidden = jbi.like(hidden, jbi.host(hidden) + (boost / norm2).astype(np.float32) * cols)
    return hidden, weight, labels
