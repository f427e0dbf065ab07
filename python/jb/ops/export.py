"""``export``: the untrusted stage. Import a candidate and serialize its program with ``jax.export``.

This op is the only one that runs a candidate's Python when jb judges by artifact: it runs in a
fresh worker inside the sandbox (``JB_SANDBOXED=1``), with ``out_dir`` a scratch directory outside
the cache. For the scale's shapes and each of the workload's shape variants it exports
``jax.jit(candidate.workload, static_argnums=STATIC_ARGNUMS)`` (plus ``args.variants``, CONFIG overrides
as the verify op takes them) for the backend's platform at the
workload's abstract input shapes (``jax.ShapeDtypeStruct``; static arguments fixed), and writes
``out_dir/export/index.json`` plus one ``program-<i>.jaxexport`` per shape. Nothing it writes is
trusted: the judge (impl kind ``exported``, jb.exported) re-derives every signature from the
workload and inspects every program (jb.artifact) before running it.

Export without the device: with ``backend`` ``tpu`` or ``gpu`` while this process's JAX runs on
CPU (jb starts the export worker with ``JAX_PLATFORMS=cpu``), the programs are exported for the
target's platform (``tpu``, ``cuda``) under an abstract device of ``device_kind`` (the fingerprint's;
jb.platforms), so the stage never opens the accelerator and can run beside a judge that owns it.
Pallas kernels are then lowered natively (Mosaic TPU, Mosaic GPU), never interpreted.

Result: status ``ok`` | ``not_exportable`` (the program cannot be serialized: host callbacks, e.g.
TPU interpret mode on CPU; jb then runs the whole evaluation sandboxed) | ``compile_error`` (import,
signature, trace or lowering failure, as the compile op classifies them) | ``rejected`` (it tampered
with the harness, jb.guard); ``reasons``, ``error_class``, ``error``, ``programs`` [{file, variant,
in_avals}], ``failed`` [{variant, status, error_class, error}] (variants that did not export),
``has_pallas_call`` (from the traced jaxpr: the untrusted stage's claim), ``interpret_mode``,
``platform``, ``target``, ``device_kind``, ``export_ms``, ``trust`` (``sandboxed`` when JB_SANDBOXED=1, else ``unsandboxed``).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import time

import jax

from jb import artifact, contract, guard, platforms
from jb import interpret as interp
from jb.ops import common

INDEX = "index.json"
FORMAT = contract.EXPORT_INDEX_FORMAT
_perf_counter = time.perf_counter

# Messages of jax.export's own refusals (the program is valid but cannot be serialized).
NOT_EXPORTABLE_MARKERS = (
    "serialization error", "Cannot serialize", "custom calls whose targets", "host_callbacks",
    "keepalive", "effects", "callback", "not supported for serialization", "Cannot export",
)


class NotExportable(Exception):
    pass


def sandbox_trust() -> str:
    return "sandboxed" if os.environ.get("JB_SANDBOXED") == "1" else "unsandboxed"


def _disabled_checks(platform: str) -> list:
    """Serialize whatever custom calls the program has (Pallas kernels' carry no compatibility
    guarantee): the judge, not this untrusted stage, decides which are allowed (jb.artifact)."""
    return [jax.export.DisabledSafetyCheck.custom_call("ALL")]


def _export_one(fn, shape: artifact.Shape, req: common.Request, platform: str):
    """(Exported, jaxpr report, interpret mode) for ``fn`` at ``shape``; raises CandidateFailure/NotExportable."""
    mode = req.interpret_mode
    static = shape.wl.static_argnums
    jitted = jax.jit(fn, static_argnums=static)
    stage = "trace"
    try:
        with platforms.target_context(req.target or "cpu", req.device_kind), interp.context(mode):
            traced = jitted.trace(*shape.args)
            report = common.jaxpr_report(traced.jaxpr)
            stage = "lower"
            exported = jax.export.export(jitted, platforms=[platform], disabled_checks=_disabled_checks(platform))(*shape.args)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit from candidate code included
        interp.reset_after_error(mode)
        text = f"{type(exc).__name__}: {exc}"
        if stage == "lower" and any(m in text for m in NOT_EXPORTABLE_MARKERS):
            raise NotExportable(common.error_tail(exc)) from exc
        if mode == "generic" and interp.should_retry_tpu(exc):
            raise NotExportable(
                "needs the TPU interpreter (host callbacks), which cannot be exported: " + common.error_tail(exc)
            ) from exc
        raise common.classify(exc, stage) from exc
    if report["host_callbacks"]:
        raise NotExportable(f"host callbacks in the traced program: {', '.join(report['host_callbacks'])}")
    return exported, report, mode


def _describe_static(value):
    return value if isinstance(value, (int, float, bool, str)) or value is None else repr(value)


def _canonical_locations(out: pathlib.Path, project_root: str | None) -> None:
    """Source locations in the serialized programs without the folders of this machine and run
    (the sandbox's scratch folder, which holds the candidate, the project, jb's sources): the same
    candidate exports to the same bytes wherever and whenever it runs (locally or on any Ray
    node), so the steps that judge it keep their keys (early cutoff). This worker is fresh and
    serves this one request."""
    import jb

    pkg = os.path.dirname(os.path.dirname(jb.__file__))
    roots = {str(out.parent), pkg, os.path.realpath(pkg)}
    if project_root:
        roots |= {str(project_root), os.path.realpath(project_root)}
    alts = sorted((re.escape(r.rstrip("/") + "/") for r in roots if r and r != "/"), key=len, reverse=True)
    jax.config.update("jax_hlo_source_file_canonicalization_regex", "^(?:" + "|".join(alts) + ")")


def run(args: dict) -> dict:
    t0 = _perf_counter()
    req = common.Request.from_args(args, export=True)
    wl = req.workload()
    out = req.out_dir()
    if out is None:
        raise ValueError("export needs 'out_dir'")
    dest = out / "export"
    dest.mkdir(parents=True, exist_ok=True)
    _canonical_locations(out, args.get("project_root"))
    # Without the device (JAX on CPU, the backend an accelerator): the target's platform and kind.
    platform = platforms.export_platform(req.target) if req.target else artifact.export_platform(req.backend)
    device_kind = platforms.kind(req.device_kind, req.target).device_kind if req.target else None
    shapes = artifact.shapes(wl, args.get("variants") or ())  # before the candidate is imported
    result = {
        "status": None, "reasons": [], "error_class": None, "error": None, "programs": [], "failed": [],
        "has_pallas_call": None, "interpret_mode": None, "platform": platform, "scale": req.scale,
        "backend": req.backend, "trust": sandbox_trust(), "export_ms": None,
        "target": req.target, "device_kind": device_kind, "local_backend": common.default_backend(),
    }
    snapshot = guard.baseline()
    impl = req.impl(wl)
    result["impl"] = {"kind": impl.kind, "name": impl.name, "config": impl.config}
    try:
        _export_all(impl, shapes, req, platform, dest, result, device_kind)
    finally:
        reasons = guard.check(snapshot)
        if reasons:
            guard.restore(snapshot)
            result.update(status="rejected", reasons=reasons + result["reasons"], tainted=True)
        result["export_ms"] = (_perf_counter() - t0) * 1e3
    return result


def _export_all(impl, shapes, req, platform, dest: pathlib.Path, result: dict, device_kind: str | None = None) -> None:
    if not impl.ok:
        result.update(status=impl.status, error_class=impl.error_class, error=impl.error)
        return
    programs, failed, claims, modes = [], [], [], set()
    for i, shape in enumerate(shapes):
        fn = shape.wl.fn if impl.kind == "xla" else impl.fn  # the reference reads its variant's CONFIG
        try:
            exported, report, mode = _export_one(fn, shape, req, platform)
        except NotExportable as exc:
            result.update(status="not_exportable", error_class="export", error=str(exc))
            result["reasons"].append(f"cannot be exported{_where(shape)}: {str(exc)[:300]}")
            return
        except common.CandidateFailure as failure:
            if shape.variant is None:
                result.update(failure.as_result())
                return
            failed.append({"variant": shape.variant, **failure.as_result()})
            continue
        name = f"program-{i}.jaxexport"
        (dest / name).write_bytes(bytes(exported.serialize()))
        claims.append(report["has_pallas_call"])
        if report["has_pallas_call"]:
            modes.add(mode)
        programs.append({
            "file": name,
            "variant": shape.variant,
            "in_avals": [[list(s), d] for s, d in artifact.avals_of(exported.in_avals)],
            "static": {str(k): _describe_static(v) for k, v in shape.static.items()},
            "has_pallas_call": report["has_pallas_call"],
            "interpret_mode": mode if report["has_pallas_call"] else None,
        })
    index = contract.ExportIndex(
        format=FORMAT, platform=platform, backend=req.backend, scale=req.scale, jax=jax.__version__,
        programs=[contract.ExportedProgram(**p) for p in programs], failed=failed,
        jaxlib=_jaxlib_version(), device_kind=device_kind,
    )
    (dest / INDEX).write_text(json.dumps(contract.encode(index), indent=1) + "\n")
    result.update(
        status="ok", programs=[{k: p[k] for k in ("file", "variant", "in_avals")} for p in programs], failed=failed,
        has_pallas_call=bool(claims) and all(claims),
        interpret_mode=(sorted(m for m in modes if m) or [None])[0],
    )


def _jaxlib_version() -> str | None:
    try:
        import jaxlib

        return jaxlib.__version__
    except (ImportError, AttributeError):  # pragma: no cover
        return None


def _where(shape: artifact.Shape) -> str:
    return "" if shape.variant is None else f" (variant {shape.variant})"
