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
MAX_META_BYTES = 64 * 1024  # the leaf list: a few dozen bytes per leaf
ZIP_OVERHEAD = 64 * 1024  # local and central headers, .npy headers
MAX_ITEMSIZE = 16  # the widest dtype an output may honestly have (complex128)


class UnsafeOutput(ValueError):
    """An output file refused before it was read: too large for the expected outputs, compressed,
    or with members other than the ones ``save`` writes."""


def name_of(index: int, variant: int | None = None) -> str:
    return f"variant-{variant}" if variant is not None else f"trial-{index}"


def save(out_dir: pathlib.Path, name: str, leaves: list[np.ndarray]) -> None:
    d = out_dir / DIR
    d.mkdir(parents=True, exist_ok=True)
    meta = [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in leaves]
    arrays = {f"leaf{i}": np.ascontiguousarray(a).reshape(-1).view(np.uint8) for i, a in enumerate(leaves)}
    np.savez(d / f"{name}.npz", meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)


def _vet(path: pathlib.Path, expected: list[tuple[int, ...]] | None) -> None:
    """Refuse, before reading any array, a file that is larger than the expected outputs can be,
    or whose members are compressed (a 3 MB deflated member inflates to gigabytes) or are not the
    ones ``save`` writes. ``expected``: the reference's leaf shapes (None: no size bound)."""
    import zipfile

    rel = f"{DIR}/{path.name}"
    size = path.stat().st_size
    cap = None
    if expected is not None:
        cap = ZIP_OVERHEAD + MAX_META_BYTES + sum(int(np.prod(s, dtype=np.int64)) * MAX_ITEMSIZE for s in expected)
        if size > cap:
            raise UnsafeOutput(f"{rel}: {size} bytes, more than the expected outputs can take ({cap} bytes): not read")
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ValueError(f"{rel} is malformed: {exc}") from exc
    allowed = {"meta.npy"} | {f"leaf{i}.npy" for i in range(MAX_LEAVES)}
    for info in infos:
        if info.filename not in allowed:
            raise UnsafeOutput(f"{rel}: unexpected member {info.filename!r}: not read")
        if info.compress_type != zipfile.ZIP_STORED:
            raise UnsafeOutput(f"{rel}: member {info.filename} is compressed (method {info.compress_type}, "
                               f"{info.compress_size} -> {info.file_size} bytes): compressed outputs are refused, not read")
        if info.file_size != info.compress_size or (cap is not None and info.file_size > cap):
            raise UnsafeOutput(f"{rel}: member {info.filename} claims {info.file_size} bytes "
                               f"({info.compress_size} stored): not read")
        if info.filename == "meta.npy" and info.file_size > MAX_META_BYTES:
            raise UnsafeOutput(f"{rel}: leaf list of {info.file_size} bytes: not read")


def load(out_dir: pathlib.Path, name: str, expected: list[tuple[int, ...]] | None = None) -> list[np.ndarray]:
    """The leaves saved under ``name``; ValueError when the file is missing or malformed,
    :class:`UnsafeOutput` when it is refused unread (see :func:`_vet`). With ``expected`` (the
    reference's leaf shapes) the file's size, its leaf count and every leaf's element count are
    bounded by the reference's before any leaf's bytes are read."""
    import jax.numpy as jnp

    path = pathlib.Path(out_dir) / DIR / f"{name}.npz"
    if not path.is_file() or path.is_symlink():
        raise ValueError(f"no output file {DIR}/{name}.npz")
    _vet(path, expected)
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            if not isinstance(meta, list) or len(meta) > MAX_LEAVES:
                raise ValueError("bad leaf list")
            if expected is not None and len(meta) != len(expected):
                raise ValueError(f"{len(meta)} output leaves, the reference has {len(expected)}")
            leaves = []
            for i, m in enumerate(meta):
                dtype = jnp.dtype(str(m["dtype"]))
                shape = tuple(int(s) for s in m["shape"])
                if dtype.itemsize > MAX_ITEMSIZE:
                    raise UnsafeOutput(f"leaf {i}: dtype {dtype} wider than {MAX_ITEMSIZE} bytes: not read")
                # A different shape is the comparison's to judge (incorrect); more elements than
                # the reference's leaf holds is refused before its bytes are read.
                if expected is not None and np.prod(shape, dtype=np.int64) > np.prod(expected[i], dtype=np.int64):
                    raise UnsafeOutput(f"leaf {i}: shape {shape} holds more elements than the reference's "
                                       f"{tuple(expected[i])}: not read")
                raw = z[f"leaf{i}"]
                if raw.dtype != np.uint8 or raw.size != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
                    raise ValueError(f"leaf {i}: {raw.size} bytes for {dtype} {shape}")
                leaves.append(raw.view(dtype).reshape(shape))
            return leaves
    except (OSError, KeyError, TypeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{DIR}/{name}.npz is malformed: {exc}") from exc
