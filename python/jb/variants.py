"""Held-out shape variants: what a candidate's answer at another shape means.

A kernel tuned to the benchmark's shape is legitimate (hand-tuned kernels are; block sizes often
only divide that shape). So at a variant a candidate that does not compile, refuses the shape at
run time, or returns outputs of another structure or shape (it was built for its own shape, e.g.
a copy of the published CONFIG) is *specialized*: recorded with the reason, not incorrect. One
that compiles and returns outputs of the variant's structure and shape is judged like any trial:
wrong there is ``incorrect``. Refusing gains a wrong program nothing: its benchmark-shape trials
are judged in full, and the refusal is shown (``variants.status``).

A sandboxed verify step (jb.ops.recheck) writes a marker file for a specialized variant in place
of its outputs; the trusted recheck accepts the marker (a forged marker is worth exactly a
refusal, which the candidate could have made) and judges every variant that has outputs.
"""

from __future__ import annotations

import json
import pathlib

MARKER_DIR = "outputs"


def structure_mismatch(reference, out) -> str | None:
    """Why ``out`` is not an answer at this shape (structure or shapes differ), or None."""
    import jax

    rdef, odef = jax.tree_util.tree_structure(reference), jax.tree_util.tree_structure(out)
    if rdef != odef:
        return f"returns output structure {odef}, the reference at this shape {rdef}"
    for i, (r, c) in enumerate(zip(jax.tree_util.tree_leaves(reference), jax.tree_util.tree_leaves(out))):
        rs, cs = tuple(getattr(r, "shape", ())), tuple(getattr(c, "shape", ()))
        if rs != cs:
            return f"output {i} has shape {cs}, the reference at this shape {rs}"
    return None


def specialize(record: dict, why: str) -> None:
    """Mark a variant trial record specialized (does not count against the candidate)."""
    record.update(ok=True, specialized=True, reason=f"specialized: {why}")


def summary(trials: list[dict]) -> dict:
    """``variants`` of a verify result: which ran and were judged, which were specialized."""
    vs = [t for t in trials if "variant" in t]
    judged = [{"override": t["variant"], "ok": bool(t["ok"])} for t in vs if not t.get("specialized")]
    special = [{"override": t["variant"], "reason": t["reason"]} for t in vs if t.get("specialized")]
    if not vs:
        status = "none"
    elif not special:
        status = "judged"
    elif not judged:
        status = "specialized"
    else:
        status = "partly_specialized"
    return {"status": status, "judged": judged, "specialized": special}


def _marker(out_dir: pathlib.Path, name: str) -> pathlib.Path:
    return pathlib.Path(out_dir) / MARKER_DIR / f"{name}.specialized.json"


def save_marker(out_dir: pathlib.Path, name: str, reason: str) -> None:
    path = _marker(out_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"reason": str(reason)[:2000]}))


def load_marker(out_dir: pathlib.Path, name: str) -> str | None:
    """The reason a sandboxed verify step gave for a specialized variant, or None (no marker, or
    not a small JSON object with a string reason)."""
    path = _marker(out_dir, name)
    try:
        if not path.is_file() or path.stat().st_size > 4096:
            return None
        data = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    reason = data.get("reason") if isinstance(data, dict) else None
    return reason if isinstance(reason, str) else None
