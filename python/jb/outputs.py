"""Candidate outputs written to files, for a trusted process to judge.

Where a candidate cannot be exported, its verify step runs in the sandbox with the candidate in
the same process: the verdict it answers could be forged there. So that step also writes every
trial's output (``outputs/<name>.npz``: each leaf's raw bytes, with its dtype and shape), and jb has
a pooled judge that never imports candidate code recompute the references and judge these files
(``jb.ops.recheck``). Arrays are stored as bytes so bfloat16 and other extension dtypes round-trip.

The files were written where the candidate ran, so the judge reads them as hostile input
(``load``): a regular file (no link), an uncompressed zip (``np.savez``: every member stored, none
deflated, so nothing inflates past the file's own size), its members exactly ``meta.npy`` and
``leaf<i>.npy``, each bounded before it is read; with ``expected`` (the reference's leaves) the
whole file is bounded by the bytes those need, and each leaf's declared dtype and shape must be
the reference's before any of its bytes are read (``Mismatch`` otherwise).
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import stat
import zipfile

import numpy as np

DIR = "outputs"
MAX_LEAVES = 256
# The leaf list (``meta.npy``) is a short JSON text.
MAX_META_BYTES = 64 * 1024
# A member's .npy header, and a zip's per-member overhead (local + central headers, zip64 extras).
NPY_HEADER_MAX = 4096
ZIP_MEMBER_OVERHEAD = 512
# Without an expected output (tools, tests): no member is read past this.
MAX_LEAF_BYTES = 1 << 30


class Mismatch(ValueError):
    """The file's leaves are not the expected dtypes/shapes: a wrong answer, not a broken file."""


def name_of(index: int, variant: int | None = None) -> str:
    return f"variant-{variant}" if variant is not None else f"trial-{index}"


def save(out_dir: pathlib.Path, name: str, leaves: list[np.ndarray]) -> None:
    d = out_dir / DIR
    d.mkdir(parents=True, exist_ok=True)
    meta = [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in leaves]
    arrays = {f"leaf{i}": np.ascontiguousarray(a).reshape(-1).view(np.uint8) for i, a in enumerate(leaves)}
    np.savez(d / f"{name}.npz", meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)


def _nbytes(dtype, shape) -> int:
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def file_budget(expected: list[tuple[object, tuple[int, ...]]]) -> int:
    """The most bytes an honest file holding ``expected`` takes."""
    members = len(expected) + 1
    data = sum(_nbytes(d, s) for d, s in expected)
    return data + MAX_META_BYTES + members * (NPY_HEADER_MAX + ZIP_MEMBER_OVERHEAD) + 1024


def _member(z: zipfile.ZipFile, name: str, nbytes: int, exact: bool = True) -> np.ndarray:
    """Member ``name`` as a 1-D uint8 array of exactly (``exact``) or at most ``nbytes`` bytes,
    read bounded."""
    try:
        info = z.getinfo(name)
    except KeyError:
        raise ValueError(f"no member {name}") from None
    limit = nbytes + NPY_HEADER_MAX
    if info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"member {name} is compressed (zip method {info.compress_type}); only stored members are read")
    if info.file_size > limit or info.compress_size != info.file_size:
        raise ValueError(f"member {name} declares {info.file_size} bytes ({info.compress_size} stored), more than the {limit} its leaf needs")
    with z.open(info) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"member {name} holds more than {limit} bytes")
    arr = np.lib.format.read_array(io.BytesIO(data), allow_pickle=False, max_header_size=NPY_HEADER_MAX)
    if arr.dtype != np.uint8 or arr.ndim != 1 or (arr.size != nbytes if exact else arr.size > nbytes):
        raise ValueError(f"member {name}: {arr.dtype} {arr.shape}, expected {nbytes} raw bytes")
    return arr


def _meta(z: zipfile.ZipFile) -> list[tuple[np.dtype, tuple[int, ...]]]:
    import jax.numpy as jnp

    raw = _member(z, "meta.npy", MAX_META_BYTES, exact=False)
    meta = json.loads(bytes(raw).decode())
    if not isinstance(meta, list) or len(meta) > MAX_LEAVES:
        raise ValueError("bad leaf list")
    out = []
    for i, m in enumerate(meta):
        if not isinstance(m, dict) or not isinstance(m.get("shape"), list):
            raise ValueError(f"leaf {i}: bad entry {m!r:.80}")
        shape = tuple(int(s) for s in m["shape"])
        if any(s < 0 for s in shape) or len(shape) > 32:
            raise ValueError(f"leaf {i}: bad shape {shape}")
        out.append((jnp.dtype(str(m["dtype"])), shape))
    return out


def load(out_dir: pathlib.Path, name: str, expected: list[tuple[object, tuple[int, ...]]] | None = None) -> list[np.ndarray]:
    """The leaves saved under ``name``, read as hostile input.

    ``expected``: the reference's leaves as (dtype, shape); the file is then refused unread when it
    is larger than those need, and ``Mismatch`` is raised (before any leaf's bytes are read) when
    its leaves have another dtype or shape. ValueError when the file is missing or malformed
    (a link, not an uncompressed zip, a compressed member, a member larger than its leaf).
    """
    path = pathlib.Path(out_dir) / DIR / f"{name}.npz"
    rel = f"{DIR}/{name}.npz"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise ValueError(f"no output file {rel}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{rel} is not a regular file")
    if expected is not None:
        budget = file_budget(expected)
        if st.st_size > budget:
            raise ValueError(f"{rel} is {st.st_size} bytes, more than the {budget} the expected outputs take; not read")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh, zipfile.ZipFile(fh) as z:
            infos = z.infolist()
            names = [i.filename for i in infos]
            if len(infos) > MAX_LEAVES + 1 or len(set(names)) != len(names):
                raise ValueError(f"{len(infos)} members")
            for i in infos:
                if i.compress_type != zipfile.ZIP_STORED:
                    raise ValueError(f"member {i.filename} is compressed (zip method {i.compress_type}); only stored members are read")
            meta = _meta(z)
            allowed = {"meta.npy"} | {f"leaf{i}.npy" for i in range(len(meta))}
            extra = sorted(set(names) - allowed)
            if extra:
                raise ValueError(f"unexpected members {extra[:4]}")
            if expected is not None:
                if len(meta) != len(expected):
                    raise ValueError(f"{len(meta)} output leaves, the reference has {len(expected)}")
                for i, ((d, s), (ed, es)) in enumerate(zip(meta, expected)):
                    if d != np.dtype(ed) or s != tuple(es):
                        raise Mismatch(f"output {i}: {d} {list(s)} where the reference is {np.dtype(ed)} {list(es)}")
            leaves = []
            for i, (dtype, shape) in enumerate(meta):
                nbytes = _nbytes(dtype, shape)
                if expected is None and nbytes > MAX_LEAF_BYTES:
                    raise ValueError(f"leaf {i}: {nbytes} bytes, over {MAX_LEAF_BYTES}")
                leaves.append(_member(z, f"leaf{i}.npy", nbytes).view(dtype).reshape(shape))
            return leaves
    except Mismatch:
        raise
    except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{rel} is malformed: {exc}") from exc
