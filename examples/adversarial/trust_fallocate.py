# target: 12p_RMSNorm
# expect: compile_error
# exploit: disk past the scratch quota, unseen - at import (armed only in jb's sandbox) it
#          reserves 9 GiB with posix_fallocate in a file of its scratch folder, unlinked while
#          kept open: a directory walk (jb's old quota check) no longer sees it, so in the issue's
#          run it held 1.5 GiB past a 512 MiB quota. Now the scratch folder is a tmpfs of the
#          quota's size (8 GiB by default, JB_SANDBOX_SCRATCH_MB): the kernel refuses a
#          reservation past it (ENOSPC), so the import fails: `compile_error`. (A smaller
#          reservation inside the quota is charged to the sandbox's memory cgroup.)
import os
import pathlib

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

if os.environ.get("JB_SANDBOXED") == "1" or os.environ.get("JB_ATTACK_ARMED") == "1":
    scratch = pathlib.Path(__file__).resolve().parent.parent  # the sandbox's scratch folder
    fd = os.open(scratch / "reserved", os.O_CREAT | os.O_RDWR, 0o600)
    os.unlink(scratch / "reserved")
    os.posix_fallocate(fd, 0, 9 << 30)  # past the 8 GiB scratch mount: ENOSPC
    _KEEP = fd


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

