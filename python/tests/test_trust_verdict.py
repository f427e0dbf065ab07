"""Trust verdict (issue 20): the recheck of a real sandboxed verify step whose dumped output is a
decompression bomb says `rejected`, not `error` and jb.outputs.load refuses a
bomb, an oversized file, a leaf of another shape and extra members before reading them."""

from __future__ import annotations

import pathlib
import zipfile

import numpy as np
import pytest

from jb import outputs
from jb.ops import recheck, verify

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
RMSNORM = str(ROOT / "workloads" / "12p_RMSNorm")
TPU_ONLY = {"kind": "candidate", "path": str(FIXTURES / "candidates" / "prng_rmsnorm.py")}
SEED = 4_242_4242


def _bomb(path: pathlib.Path, inflated: int) -> None:
    """An .npz whose leaf0 member deflates `inflated` zero bytes into a few hundred KB."""
    path.parent.mkdir(parents=True, exist_ok=True)
    chunk = bytes(1 << 20)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("meta.npy", b"\x93NUMPY")
        with zf.open("leaf0.npy", "w", force_zip64=True) as f:
            for _ in range(inflated // len(chunk)):
                f.write(chunk)


F32 = [(np.float32, (4, 4))]


def test_a_compressed_output_is_refused_unread(tmp_path):
    _bomb(tmp_path / outputs.DIR / "trial-0.npz", 64 << 20)
    assert (tmp_path / outputs.DIR / "trial-0.npz").stat().st_size < 1 << 20
    with pytest.raises(ValueError, match="compressed"):
        outputs.load(tmp_path, "trial-0", expected=F32)


def test_an_output_larger_than_the_reference_is_refused_unread(tmp_path):
    outputs.save(tmp_path, "trial-0", [np.zeros((1024, 1024), np.float32)])
    with pytest.raises(ValueError, match="more than the"):
        outputs.load(tmp_path, "trial-0", expected=F32)
    # Within the file budget but a leaf of another shape: a wrong answer, refused before its bytes are read.
    outputs.save(tmp_path, "trial-1", [np.zeros((64,), np.float32)])
    with pytest.raises(outputs.Mismatch, match="reference is float32"):
        outputs.load(tmp_path, "trial-1", expected=F32)
    # The honest file of the same shape loads.
    outputs.save(tmp_path, "trial-2", [np.ones((4, 4), np.float32)])
    (leaf,) = outputs.load(tmp_path, "trial-2", expected=F32)
    assert leaf.shape == (4, 4) and float(leaf.sum()) == 16.0


def test_extra_members_are_refused(tmp_path):
    outputs.save(tmp_path, "trial-0", [np.ones((4, 4), np.float32)])
    with zipfile.ZipFile(tmp_path / outputs.DIR / "trial-0.npz", "a") as zf:
        zf.writestr("payload.bin", b"x" * 10)
    with pytest.raises(ValueError, match="unexpected members"):
        outputs.load(tmp_path, "trial-0", expected=F32)


def test_the_recheck_rejects_a_bomb_in_a_real_sandboxed_verify(tmp_path):
    r = verify.run({"workload": RMSNORM, "scale": "tiny", "impl": TPU_ONLY, "seed": SEED,
                    "dump_outputs": True, "out_dir": str(tmp_path)})
    assert r["status"] == "correct", r["reasons"]
    _bomb(tmp_path / outputs.DIR / "trial-1.npz", 256 << 20)
    again = recheck.run({"workload": RMSNORM, "scale": "tiny", "impl": TPU_ONLY, "seed": SEED,
                         "outputs_dir": str(tmp_path)})
    assert again["status"] == "rejected", again
    assert any("trial-1" in m and ("compressed" in m or "more than" in m) for m in again["reasons"]), again["reasons"]
