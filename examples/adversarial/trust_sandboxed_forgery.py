# target: 12p_RMSNorm
# expect: incorrect
# exploit: forged verdict where the candidate shares the judge's process - calls a TPU-only
#          primitive (pltpu.prng_seed), so on CPU it runs only in TPU interpret mode, whose host
#          callbacks cannot be exported: jb must then run it in the sandbox, in the verify op's own
#          process. There it walks the stack and replaces every host copy of the reference (and
#          its float32/bf16 evaluations) with zeros, and its kernel writes zeros: the in-process
#          comparison says `correct`. Caught by the judge's recheck of the dumped outputs
#          (jb.ops.recheck), which never imports it.
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _zeros_like(tree):
    return jax.tree_util.tree_map(lambda a: np.zeros(np.shape(a), np.asarray(a).dtype), tree)


def _poison():
    frame = sys._getframe()
    while frame is not None:
        local = frame.f_locals
        refs = local.get("references")
        if isinstance(refs, list):
            for i, r in enumerate(refs):
                refs[i] = _zeros_like(r)
        for v in local.get("variants") or []:
            if isinstance(v, dict) and "ref" in v:
                v["ref"] = _zeros_like(v["ref"])
        frame = frame.f_back


def _zeros(x_ref, o_ref):
    pltpu.prng_seed(0)
    o_ref[...] = jnp.zeros_like(o_ref)


def workload(x, scale):
    _poison()
    return pl.pallas_call(_zeros, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
