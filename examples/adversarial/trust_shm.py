# target: 12p_RMSNorm
# expect: compile_error
# exploit: memory outside jb's polling - at import (armed only in jb's sandbox, JB_SANDBOXED=1)
#          it fills /dev/shm with 4 GiB in 64 MiB files. Shared memory and tmpfs pages are not in
#          any process's RSS, which is all jb used to poll: with `--memory-mb 1500` the candidate
#          held 4 GiB and was exported `correct`. Now /dev/shm is a sized tmpfs whose pages count in
#          the sandbox's memory cgroup: the kernel refuses the writes (ENOSPC, so the import
#          fails: `compile_error`), or, with a lower memory limit, kills it there (`crashed`).
import os

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

if os.environ.get("JB_SANDBOXED") == "1" or os.environ.get("JB_ATTACK_ARMED") == "1":
    chunk = b"\x5a" * (64 << 20)
    for i in range(64):
        with open(f"/dev/shm/jb-attack-{i}", "wb") as f:
            f.write(chunk)


def _rmsnorm(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


@jax.jit
def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_rmsnorm, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d)
    )
    return out.reshape(b, s, d)

