"""Candidate outputs written to files, for a trusted process to judge.

Where a candidate cannot be exported, its verify step runs in the sandbox with the candidate in
the same process: the verdict it answers could be forged there. So that step also writes every
trial's output (``outputs/<name>.npz``: each leaf's raw bytes, with its dtype and shape), and jb has
a pooled judge that never imports candidate code recompute the references and judge these files
(``jb.ops.recheck``). Arrays are stored as bytes so bfloat16 and other extension dtypes round-trip.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np

DIR = "outputs"
MAX_LEAVES = 256


def name_of(index: int, variant: int | None = None) -> str:
    return f"variant-{variant}" if variant is not None else f"trial-{index}"


def save(out_dir: pathlib.Path, name: str, leaves: list[np.ndarray]) -> None:
    d = out_dir / DIR
    d.mkdir(parents=True, exist_ok=True)
    meta = [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in leaves]
    arrays = {f"leaf{i}": np.ascontiguousarray(a).reshape(-1).view(np.uint8) for i, a in enumerate(leaves)}
    np.savez(d / f"{name}.npz", meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)


def load(out_dir: pathlib.Path, name: str) -> list[np.ndarray]:
    """The leaves saved under ``name``; ValueError when the file is missing or malformed."""
    import jax.numpy as jnp

    path = pathlib.Path(out_dir) / DIR / f"{name}.npz"
    if not path.is_file():
        raise ValueError(f"no output file {DIR}/{name}.npz")
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            if not isinstance(meta, list) or len(meta) > MAX_LEAVES:
                raise ValueError("bad leaf list")
            leaves = []
            for i, m in enumerate(meta):
                dtype = jnp.dtype(str(m["dtype"]))
                shape = tuple(int(s) for s in m["shape"])
                raw = z[f"leaf{i}"]
                if raw.dtype != np.uint8 or raw.size != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
                    raise ValueError(f"leaf {i}: {raw.size} bytes for {dtype} {shape}")
                leaves.append(raw.view(dtype).reshape(shape))
            return leaves
    except (OSError, KeyError, TypeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{DIR}/{name}.npz is malformed: {exc}") from exc
