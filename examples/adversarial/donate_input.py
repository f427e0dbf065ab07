# target: 12p_RMSNorm
# expect: correct
# exploit: input donation - the kernel is jitted with donate_argnums so its input buffer would be
#          reused for the output and the caller (or a reference computed afterwards) would read freed
#          memory. Neutralised by construction: jb traces the candidate inside its own jit and runs
#          the AOT-compiled program, where a nested jit cannot donate; the before/after input
#          checksums confirm the inputs survive (a deletion would give "rejected": input donated or
#          deleted). Deleting the caller's arrays from a host callback instead deadlocks the
#          runtime on CPU (-> timeout), and mutating them is mutate_input.py.
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


@functools.partial(jax.jit, donate_argnums=(0,))
def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype),
        input_output_aliases={0: 0},
    )(x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)
