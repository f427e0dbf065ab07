# target: 12p_RMSNorm
# expect: incorrect
# exploit: guard blinded - replaces jb.compare.compare (and the name verify imported) with an
#          always-"ok" comparison, then retakes the guard's reference snapshot (jb.guard._baseline)
#          so the harness's own tamper check compares against the patched state; its kernel writes
#          zeros
import sys

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import jb.compare
import jb.guard


def _always_ok(reference, candidate, *args, **kwargs):
    return jb.compare.Comparison(ok=True, max_abs_err=0.0, max_rel_err=0.0)


jb.compare.compare = _always_ok
for name, module in list(sys.modules.items()):
    if name.startswith("jb.ops.") and getattr(module, "compare", None) is not None:
        module.compare = _always_ok
fresh = jb.guard.capture()
snapshot = jb.guard._baseline
if snapshot is not None:
    for field in vars(fresh):
        setattr(snapshot, field, getattr(fresh, field))  # edit the snapshot every op already holds
else:
    jb.guard._baseline = fresh


def _zeros(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)


def workload(x, scale):
    return pl.pallas_call(_zeros, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
