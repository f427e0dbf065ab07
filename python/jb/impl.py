"""Resolve an implementation spec ({xla | candidate | baseline | exported}) to a callable.

``{"kind": "xla"}``: the workload's own ``workload`` function (the reference, compiled by XLA).
``{"kind": "candidate", "path": P}``: ``P`` imported as a fresh module; its ``workload``.
``{"kind": "baseline", "path": "tokamax_baselines/<wl>/baseline.py", "config": {...}}``: the adapter's
``unsupported(backend)`` -> status ``unsupported``, ``invalid(config, wl.config)`` -> ``invalid``,
else ``make(config, wl.config, interpret)``; ``config`` is merged over the adapter's ``DEFAULTS``.
``{"kind": "exported", "path": DIR}``: the programs the export stage serialized into DIR, inspected
and dispatched on input shapes by jb.exported; the candidate's code is never imported. A program
that fails inspection makes the Impl ``rejected`` with ``reasons``.

``trust`` says how far a result made with the Impl can be believed: ``trusted`` (xla, baseline: jb's
own code), ``artifact`` (exported: judged on an inspected program), ``sandboxed`` (candidate code
in this process, inside jb's sandbox: ``JB_SANDBOXED=1``), ``unsandboxed`` (candidate code in this
process without a sandbox).

A failure that is the implementation's fault is returned as an ``Impl`` with ``status`` set
(``compile_error`` with ``error_class`` ``import``/``signature``/``baseline``); only harness bugs raise.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import traceback
from typing import Any, Callable

from jb.workload import Workload, load_module

KINDS = ("xla", "candidate", "baseline", "exported")


@dataclasses.dataclass
class Impl:
    kind: str
    name: str
    fn: Callable | None = None
    status: str | None = None  # None: usable; else unsupported | invalid | compile_error
    error_class: str | None = None
    error: str | None = None
    config: dict | None = None
    module: Any = None
    reasons: list = dataclasses.field(default_factory=list)  # why it is rejected (exported)
    facts: dict | None = None  # what the artifact shows (exported; see jb.exported._facts)

    @property
    def trust(self) -> str:
        return trust_level(self.kind)

    @property
    def ok(self) -> bool:
        return self.status is None and self.fn is not None


class SpecError(ValueError):
    """A malformed impl spec: the caller's (harness) error, reported as ok:false."""


def trust_level(kind: str) -> str:
    if kind == "exported":
        return "artifact"
    if kind == "candidate":
        return "sandboxed" if os.environ.get("JB_SANDBOXED") == "1" else "unsandboxed"
    return "trusted"


def _library_dirs() -> tuple[str, ...]:
    """Folders whose frames say nothing to a kernel author: jb's, the installed packages' and
    the standard library's."""
    import sysconfig

    dirs = {str(pathlib.Path(__file__).resolve().parent)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(str(pathlib.Path(p).resolve()))
    return tuple(d.rstrip("/") + "/" for d in dirs)


def _author_frames(exc: BaseException, keep: int = 3) -> list[traceback.FrameSummary]:
    """The innermost ``keep`` frames of the exception's traceback that are the author's code
    (not jb's, jax's or the standard library's)."""
    skip = _library_dirs()
    frames = []
    for f in traceback.extract_tb(exc.__traceback__):
        name = f.filename or ""
        if name.startswith("<") or not name.startswith("/"):
            continue
        try:
            resolved = str(pathlib.Path(name).resolve())
        except OSError:
            resolved = name
        if resolved.startswith(skip) or "/site-packages/" in resolved:
            continue
        frames.append(f)
    return frames[-keep:]


def error_tail(exc: BaseException, limit: int = 2000) -> str:
    """The error a kernel author reads: the innermost frames of their own code in the traceback
    (file, line, source) and the exception with its message, at most ``limit`` characters (the
    message's head is kept: its first lines say what went wrong)."""
    message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    # JAX's note on its filtered frames is boilerplate, the same for every error.
    cut = message.find("For simplicity, JAX has removed its internal frames")
    if cut > 0:
        message = message[:cut].rstrip().rstrip("-").rstrip()
    frames = _author_frames(exc)
    head = ""
    if frames:
        head = "Traceback (innermost frames of the candidate's code):\n" + "".join(
            traceback.format_list(frames)
        )
    if len(head) > limit // 2:
        head = head[-(limit // 2):]
    room = limit - len(head)
    if len(message) > room:
        message = message[: max(room - 2, 0)] + " \u2026"
    return head + message


def resolve(spec: dict | None, wl: Workload, backend: str, interpret: bool) -> Impl:
    spec = dict(spec or {"kind": "xla"})
    kind = spec.get("kind", "xla")
    if kind == "xla":
        return Impl(kind="xla", name=f"{wl.name}:xla", fn=wl.fn, module=wl.module)
    if kind not in KINDS:
        raise SpecError(f"unknown impl kind {kind!r}; expected one of {KINDS}")
    path = spec.get("path")
    if not path:
        raise SpecError(f"impl kind {kind!r} needs a 'path'")
    path = pathlib.Path(path)
    if kind == "exported":
        if not path.is_dir():
            raise SpecError(f"impl path {str(path)!r} is not a directory")
        return _exported(path, wl, backend, spec.get("variants") or ())
    if not path.is_file():
        raise SpecError(f"impl path {str(path)!r} is not a file")
    if kind == "candidate":
        return _candidate(path)
    return _baseline(path, spec.get("config") or {}, wl, backend, interpret)


def _candidate(path: pathlib.Path) -> Impl:
    name = path.stem
    try:
        module = load_module(path, "jb_candidate")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import is the candidate's fault too
        return Impl("candidate", name, status="compile_error", error_class="import", error=error_tail(exc))
    fn = getattr(module, "workload", None)
    if not callable(fn):
        return Impl(
            "candidate", name, status="compile_error", error_class="signature",
            error=f"{path.name} defines no callable `workload(*inputs)`", module=module,
        )
    return Impl("candidate", name, fn=fn, module=module)


def _exported(path: pathlib.Path, wl: Workload, backend: str, variants) -> Impl:
    from jb import exported

    name = path.parent.name if path.name == "export" else path.name
    try:
        fn, facts = exported.resolve_cached(path, wl, backend, variants)
    except exported.ArtifactError as exc:
        return Impl("exported", name, status="rejected", error_class="artifact", error=str(exc)[-2000:], reasons=exc.reasons)
    return Impl("exported", name, fn=fn, facts=facts)


def _baseline(path: pathlib.Path, config: dict, wl: Workload, backend: str, interpret: bool) -> Impl:
    name = path.parent.name
    try:
        module = load_module(path, "jb_baseline")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001
        return Impl("baseline", name, status="compile_error", error_class="import", error=error_tail(exc))
    track = baseline_track(module, backend)
    merged = {**(track["defaults"] or {}), **config}
    impl = Impl("baseline", name, config=merged, module=module)
    unsupported = track["unsupported"]
    reason = unsupported(backend) if callable(unsupported) else None
    if reason:
        impl.status, impl.error = "unsupported", str(reason)
        return impl
    invalid = track["invalid"]
    reason = invalid(dict(config), dict(wl.config)) if callable(invalid) else None
    if reason:
        impl.status, impl.error = "invalid", str(reason)
        return impl
    try:
        impl.fn = track["make"](dict(config), dict(wl.config), bool(interpret))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001
        impl.status, impl.error_class, impl.error = "compile_error", "baseline", error_tail(exc)
    return impl


def baseline_track(module, backend: str) -> dict:
    """The adapter's functions for ``backend``: on ``gpu`` its Mosaic GPU track (``GPU_DEFAULTS``,
    ``gpu_invalid``, ``gpu_make``; ``GPU_UNSUPPORTED``, the reason, where it has none), else
    ``DEFAULTS``/``unsupported``/``invalid``/``make`` (the TPU kernels, interpreted on CPU)."""
    if backend == "gpu":
        make = getattr(module, "gpu_make", None)
        if not callable(make):
            why = getattr(module, "GPU_UNSUPPORTED", None) or "this baseline has no GPU kernel (no gpu_make)"
            return {"defaults": {}, "unsupported": lambda _b: why, "invalid": None, "make": None}
        return {"defaults": getattr(module, "GPU_DEFAULTS", None), "unsupported": getattr(module, "gpu_unsupported", None),
                "invalid": getattr(module, "gpu_invalid", None), "make": make}
    return {"defaults": getattr(module, "DEFAULTS", None), "unsupported": getattr(module, "unsupported", None),
            "invalid": getattr(module, "invalid", None), "make": module.make}
