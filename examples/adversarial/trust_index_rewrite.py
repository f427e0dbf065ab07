# target: 12p_RMSNorm
# expect: rejected
# exploit: a claim rewritten after the answer - a plain-jnp RMSNorm (no pallas_call, so its own
#          export says has_pallas_call false and the judge rejects it) whose exit hook (armed only
#          in jb's sandbox) rewrites export/index.json to claim a Pallas kernel after the export
#          step has answered. jb used to read the folder after the worker exited: the forged claim
#          got `correct`. Now the products are taken at the answer with the sandbox's processes
#          frozen (locally: its cgroup; on a Ray node: stopped), so the rewrite is never read:
#          `rejected`, no pallas_call.
import atexit
import json
import os
import pathlib

import jax
import jax.numpy as jnp


def _claim_pallas():
    index = pathlib.Path(__file__).resolve().parent.parent / "out" / "export" / "index.json"
    try:
        data = json.loads(index.read_text())
        data["has_pallas_call"] = True
        for p in data.get("programs", []):
            p["has_pallas_call"] = True
        index.write_text(json.dumps(data))
    except (OSError, ValueError):
        pass


if os.environ.get("JB_SANDBOXED") == "1" or os.environ.get("JB_ATTACK_ARMED") == "1":
    atexit.register(_claim_pallas)


@jax.jit
def workload(x, scale):
    xf = x.astype(jnp.float32)
    y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + 1e-5)
    return (y * scale.astype(jnp.float32)).astype(x.dtype)
