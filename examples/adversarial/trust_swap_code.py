# target: 12p_RMSNorm
# expect: rejected
# exploit: code swap - replaces the __code__ of jb.compare.compare (always "ok") and of the timing
#          statistics jb.ops.common.stats (every figure divided by 1000) in place, so the functions
#          keep their identity and an identity check sees nothing; its kernel writes zeros
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import jb.compare
import jb.ops.common


def _always_ok(reference, candidate, *args, **kwargs):
    return Comparison(ok=True, max_abs_err=0.0, max_rel_err=0.0)  # noqa: F821 - runs with jb.compare's globals


def _fast_stats(samples):
    out = {}
    for name in ("median_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "p90_ms"):
        out[name] = 0.001
    return out


jb.compare.compare.__code__ = _always_ok.__code__
jb.ops.common.stats.__code__ = _fast_stats.__code__


def _zeros(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)


def workload(x, scale):
    return pl.pallas_call(_zeros, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
