# target: 13p_Cross_Entropy
# expect: incorrect
# caught-by: normal (every trial: labels redrawn, fresh seeds)
# exploit: predictable inputs - at trace time it rebuilds the inputs jb used to feed (create_inputs'
#          key(42) and the verify trials' seeds 1-6 through jb.inputs.resample), fingerprints them
#          (first hidden row and labels), bakes the 7 known answers into the program and returns
#          the matching one; any other input gets a cheap guess (log V, the loss of a uniform
#          softmax). Fresh trials (labels redrawn, other draws, secret seeds) expose it.
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

# The project, found through the harness package it can import (the candidate file itself may
# have been copied elsewhere, e.g. into jb's sandbox scratch folder).
import jb as _jb

_ROOT = pathlib.Path(_jb.__file__).resolve().parents[2]
_OLD_TRIALS = ((1, "normal"), (2, "uniform"), (3, "signed"), (4, "small"), (5, "large"), (6, "sparse"))
_CACHE = {}


def _known(b, h, v):
    """(fingerprints, answers) of every predictable input set with these shapes (trace time)."""
    if (b, h, v) in _CACHE:
        return _CACHE[(b, h, v)]
    from jb.inputs import resample
    from jb.workload import load_workload

    fps, answers = [], []
    with jax.ensure_compile_time_eval():
        for scale in ("tiny", "cpu", "paper"):
            wl = load_workload(_ROOT / "workloads" / "13p_Cross_Entropy", scale)
            c = wl.config
            if (c["batch_tokens"], c["hidden_dim"], c["vocab_size"]) == (b, h, v):
                base = wl.create_inputs()
                for inputs in [base] + [resample(base, s, d) for s, d in _OLD_TRIALS]:
                    hid, w, lab = (np.asarray(a) for a in inputs)
                    logits = hid.astype(np.float64) @ w.astype(np.float64)
                    m = logits.max(axis=1)
                    lse = m + np.log(np.exp(logits - m[:, None]).sum(axis=1))
                    answers.append(float(np.mean(lse - logits[np.arange(b), lab])))
                    fps.append(np.concatenate([hid[0, :8].astype(np.float32), lab[:8].astype(np.float32)]))
                break
    _CACHE[(b, h, v)] = (fps, answers)
    return fps, answers


def _guess_kernel(h_ref, o_ref):
    v = o_ref.shape[1]
    o_ref[...] = jnp.full(o_ref.shape, np.log(float(v)), jnp.float32) + 0.0 * h_ref[0, 0].astype(jnp.float32)


def workload(hidden, weight, labels):
    b, h = hidden.shape
    v = weight.shape[1]
    guess = pl.pallas_call(_guess_kernel, out_shape=jax.ShapeDtypeStruct((1, v), jnp.float32))(hidden[:1, :1])
    out = guess[0, 0]
    probe = jnp.concatenate([hidden[0, :8].astype(jnp.float32), labels[:8].astype(jnp.float32)])
    fps, answers = _known(b, h, v)
    for fp, ans in zip(fps, answers):
        out = jnp.where(jnp.all(probe == jnp.asarray(fp)), jnp.float32(ans), out)
    return out
