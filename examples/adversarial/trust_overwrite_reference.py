# target: 12p_RMSNorm
# expect: incorrect
# exploit: poisoned reference - while it is traced, walks the stack of the process that judges it
#          and replaces the host copies of the reference outputs (the verify op's `references`,
#          `ref` and variant `ref` entries) with zeros; its kernel writes zeros
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


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
    o_ref[...] = jnp.zeros_like(o_ref)


def workload(x, scale):
    _poison()
    return pl.pallas_call(_zeros, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
