"""The export op and the ``exported`` impl kind (issue 10): honest programs round-trip and are judged
like the candidate itself; artifacts that do not match the workload, or carry what a judge must
not run, are rejected with reasons naming what was found."""

from __future__ import annotations

import json
import pathlib
import shutil

import jax
import jax.numpy as jnp
import pytest

from jb import artifact, guard
from jb.impl import resolve
from jb.ops import common, export
from jb.workload import load_workload
from trust_support import FIXTURES, GEMM, RMSNORM, ROOT, judge

HONEST_RMSNORM = ROOT / "candidates" / "12p_RMSNorm" / "rmsnorm_pallas.py"
STATIC_PYTREE = FIXTURES / "workloads" / "static_pytree"


def export_here(candidate: pathlib.Path, workload: pathlib.Path, out: pathlib.Path, **extra) -> dict:
    """The export op in this process (for harness fixtures and the repository's honest candidates)."""
    snapshot = guard.baseline()
    try:
        return export.run({"workload": str(workload), "scale": "tiny", "out_dir": str(out),
                           "impl": {"kind": "candidate", "path": str(candidate)}, **extra})
    finally:
        guard.restore(snapshot)


@pytest.fixture(scope="module")
def rmsnorm_export(tmp_path_factory):
    out = tmp_path_factory.mktemp("rmsnorm")
    result = export_here(HONEST_RMSNORM, RMSNORM, out)
    return result, out / "export"


def test_export_writes_index_and_one_program_per_shape(rmsnorm_export):
    result, folder = rmsnorm_export
    assert result["status"] == "ok", result
    assert result["has_pallas_call"] is True and result["interpret_mode"] == "generic"
    assert result["trust"] == "unsandboxed" and result["platform"] == "cpu"
    index = json.loads((folder / "index.json").read_text())
    wl = load_workload(RMSNORM, "tiny")
    assert len(index["programs"]) == 1 + len(artifact.variant_overrides(wl))
    for entry in index["programs"]:
        assert (folder / entry["file"]).is_file()
    base = index["programs"][0]
    assert base["variant"] is None and base["in_avals"] == [[[2, 16, 256], "bfloat16"], [[256], "bfloat16"]]


def test_interpret_mode_pallas_exports_to_plain_hlo(rmsnorm_export):
    _, folder = rmsnorm_export
    exported = jax.export.deserialize(bytearray((folder / "program-0.jaxexport").read_bytes()))
    scan = artifact.scan_module(exported, "cpu")
    assert scan.ok and scan.custom_calls == [] and scan.ops > 0, scan
    assert scan.has_pallas_call is False  # nothing in the artifact shows the kernel on CPU


def test_judge_verifies_compiles_and_profiles_the_exported_program(rmsnorm_export):
    _, folder = rmsnorm_export
    verdict = judge("verify", RMSNORM, folder)
    assert verdict["status"] == "correct", verdict
    assert verdict["trust"] == "artifact" and verdict["pallas_evidence"] == "claimed"
    assert verdict["has_pallas_call"] is True
    compiled = judge("compile", RMSNORM, folder)
    assert compiled["status"] == "ok" and compiled["trust"] == "artifact", compiled
    profiled = judge("profile", RMSNORM, folder)
    assert profiled["status"] == "ok" and len(profiled["samples_ms"]) == 3, profiled


def test_exported_dir_may_be_the_export_out_dir(rmsnorm_export):
    _, folder = rmsnorm_export
    verdict = judge("compile", RMSNORM, folder.parent)
    assert verdict["status"] == "ok", verdict


def test_dispatch_names_shapes_without_program(rmsnorm_export):
    _, folder = rmsnorm_export
    wl = load_workload(RMSNORM, "tiny")
    impl = resolve({"kind": "exported", "path": str(folder)}, wl, "cpu", True)
    x = jnp.zeros((3, 5, 7), jnp.bfloat16)
    with pytest.raises(common.CandidateFailure) as info:
        impl.fn(x, jnp.zeros((7,), jnp.bfloat16))
    assert info.value.status == "compile_error" and "bfloat16[3, 5, 7]" in info.value.message


def test_static_argument_and_pytree_output_round_trip(tmp_path):
    result = export_here(FIXTURES / "candidates" / "static_pytree_pallas.py", STATIC_PYTREE, tmp_path)
    assert result["status"] == "ok", result
    verdict = judge("verify", STATIC_PYTREE, tmp_path / "export")
    assert verdict["status"] == "correct", verdict


def test_tpu_interpret_kernel_is_not_exportable(tmp_path):
    result = export_here(FIXTURES / "candidates" / "prng_rmsnorm.py", RMSNORM, tmp_path)
    assert result["status"] == "not_exportable", result
    assert result["error"] and result["reasons"]


def test_import_error_is_a_compile_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('broken at import')\n")
    result = export_here(bad, RMSNORM, tmp_path / "out")
    assert result["status"] == "compile_error" and result["error_class"] == "import", result


def test_candidate_code_never_runs_in_the_judge(tmp_path):
    """A workload that raises unless it is being exported still gets judged: the judge never calls it."""
    src = (HONEST_RMSNORM.read_text()
           + "\n\n_honest = workload\n\n\ndef workload(*args):\n"
           + "    import sys\n    f = sys._getframe()\n    while f is not None:\n"
           + "        if f.f_code.co_filename.endswith('ops/export.py'):\n            return _honest(*args)\n"
           + "        f = f.f_back\n    raise RuntimeError('candidate code ran outside the export stage')\n")
    path = tmp_path / "only_in_export.py"
    path.write_text(src)
    assert export_here(path, RMSNORM, tmp_path / "out")["status"] == "ok"
    assert judge("verify", RMSNORM, tmp_path / "out" / "export")["status"] == "correct"
    assert judge("profile", RMSNORM, tmp_path / "out" / "export")["status"] == "ok"


def test_sandboxed_env_sets_trust(tmp_path, monkeypatch):
    monkeypatch.setenv("JB_SANDBOXED", "1")
    result = export_here(HONEST_RMSNORM, RMSNORM, tmp_path)
    assert result["trust"] == "sandboxed"
    snapshot = guard.baseline()
    try:
        from jb.ops import compile as compile_op

        r = compile_op.run({"workload": str(RMSNORM), "scale": "tiny", "run": False,
                            "impl": {"kind": "candidate", "path": str(HONEST_RMSNORM)}})
    finally:
        guard.restore(snapshot)
    assert r["trust"] == "sandboxed"
    monkeypatch.delenv("JB_SANDBOXED")
    assert judge("compile", RMSNORM, tmp_path / "export", run=False)["trust"] == "artifact"
    from jb.ops import compile as compile_op

    assert compile_op.run({"workload": str(RMSNORM), "scale": "tiny", "run": False})["trust"] == "trusted"


# ---------------------------------------------------------------------------------------------
# Forged artifacts: what an export stage under the candidate's control could leave


def write_program(folder: pathlib.Path, fn, args, name="program-0.jaxexport", variant=None, static_argnums=(),
                  disabled=(), claim=True, extra_entries=()) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    exp = jax.export.export(jax.jit(fn, static_argnums=static_argnums), platforms=["cpu"], disabled_checks=list(disabled))(*args)
    (folder / name).write_bytes(bytes(exp.serialize()))
    entries = [{"file": name, "variant": variant, "has_pallas_call": claim}, *extra_entries]
    (folder / "index.json").write_text(json.dumps(index_of(entries)))


def index_of(entries) -> dict:
    """An export index of the contract's shape (jb.contract.ExportIndex) listing ``entries``."""
    from jb import contract

    programs = [{"in_avals": [], "static": {}, **e} for e in entries]
    return {"format": contract.EXPORT_INDEX_FORMAT, "platform": "cpu", "backend": "cpu", "scale": "tiny",
            "jax": jax.__version__, "programs": programs, "failed": []}


def rms_args(dtype=jnp.bfloat16):
    return (jax.ShapeDtypeStruct((2, 16, 256), dtype), jax.ShapeDtypeStruct((256,), dtype))


def judge_rejects(folder: pathlib.Path, fragment: str, workload=RMSNORM) -> dict:
    verdict = judge("verify", workload, folder)
    assert verdict["status"] == "rejected", verdict
    assert any(fragment in r for r in verdict["reasons"]), verdict["reasons"]
    return verdict


def test_wrong_input_dtype_is_rejected(tmp_path):
    wl = load_workload(RMSNORM, "tiny")
    write_program(tmp_path, wl.fn, rms_args(jnp.float32))
    judge_rejects(tmp_path, "differ from the workload's")


def test_wrong_output_structure_is_incorrect_not_rejected(tmp_path):
    """An honest but wrong kernel (extra output) is judged like in-process: incorrect, with a note."""
    wl = load_workload(RMSNORM, "tiny")
    write_program(tmp_path, lambda x, s: (wl.fn(x, s), x), rms_args())
    verdict = judge("verify", RMSNORM, tmp_path)
    assert verdict["status"] == "incorrect", verdict
    assert any("output structure" in n for n in verdict["notes"]), verdict["notes"]


def test_missing_and_escaping_program_files_are_rejected(tmp_path):
    wl = load_workload(RMSNORM, "tiny")
    write_program(tmp_path, wl.fn, rms_args())
    index = json.loads((tmp_path / "index.json").read_text())
    index["programs"][0]["file"] = "../program-0.jaxexport"
    (tmp_path / "index.json").write_text(json.dumps(index))
    judge_rejects(tmp_path, "not a plain file name")
    (tmp_path / "program-0.jaxexport").write_bytes(b"not a program")
    index["programs"][0]["file"] = "program-0.jaxexport"
    (tmp_path / "index.json").write_text(json.dumps(index))
    judge_rejects(tmp_path, "cannot be deserialized")


def test_pure_xla_program_needs_the_pallas_claim(tmp_path):
    wl = load_workload(RMSNORM, "tiny")
    write_program(tmp_path, wl.fn, rms_args(), claim=False)
    verdict = judge("verify", RMSNORM, tmp_path)
    assert verdict["status"] == "rejected" and any("no pallas_call" in r for r in verdict["reasons"]), verdict


def forge(folder: pathlib.Path, honest_fn, module_fn, args) -> None:
    """An artifact whose header is honest_fn's and whose module is module_fn's lowering (as an export
    stage under the candidate's control could write, bypassing jax.export's own refusals)."""
    import dataclasses

    from jax._src.export import _export

    honest = jax.export.export(jax.jit(honest_fn), platforms=["cpu"])(*args)
    module = jax.jit(module_fn).lower(*args).compiler_ir("stablehlo")
    forged = dataclasses.replace(honest, mlir_module_serialized=_export._module_to_bytecode(module))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "program-0.jaxexport").write_bytes(bytes(forged.serialize()))
    (folder / "index.json").write_text(json.dumps(index_of([
        {"file": "program-0.jaxexport", "variant": None, "has_pallas_call": True}])))


def test_host_callback_in_artifact_is_rejected(tmp_path):
    wl = load_workload(RMSNORM, "tiny")

    def with_callback(x, s):
        return jax.pure_callback(lambda a, b: a, jax.ShapeDtypeStruct(x.shape, x.dtype), x, s)

    with pytest.raises(Exception):  # jax.export itself refuses: the export stage says not_exportable
        jax.export.export(jax.jit(with_callback), platforms=["cpu"])(*rms_args())
    forge(tmp_path, wl.fn, with_callback, rms_args())
    verdict = judge_rejects(tmp_path, "host callbacks in the program")
    assert any("callback" in r for r in verdict["reasons"])


def test_unknown_custom_call_outfeed_and_external_function_are_rejected(tmp_path):
    from jax._src.lib.mlir import ir

    wl = load_workload(RMSNORM, "tiny")
    exp = jax.export.export(jax.jit(wl.fn), platforms=["cpu"])(*rms_args())
    text = exp.mlir_module()
    # Splice an unknown custom call into the body of main, as a hand-made artifact could.
    marker = "    return "
    at = text.index(marker)
    text = text[:at] + (
        '    %jb_cc = stablehlo.custom_call @my_native_kernel(%arg0) : (tensor<2x16x256xbf16>) -> tensor<2x16x256xbf16>\n'
        '    %jb_tok = stablehlo.create_token : !stablehlo.token\n'
        '    %jb_out = "stablehlo.outfeed"(%arg0, %jb_tok) {outfeed_config = ""} : (tensor<2x16x256xbf16>, !stablehlo.token) -> !stablehlo.token\n'
    ) + text[at:]
    text = text.replace("  func.func public @main", "  func.func private @jb_external(tensor<2xf32>) -> tensor<2xf32>\n  func.func public @main", 1)
    from jax._src.interpreters import mlir as jmlir

    with jmlir.make_ir_context():
        module = ir.Module.parse(text)

    class Fake:
        def mlir_module(self):
            return str(module)

    scan = artifact.scan_module(Fake(), "cpu")
    assert any("outside the cpu allow-list: my_native_kernel" in r for r in scan.reasons), scan.reasons
    assert any("host transfers" in r and "outfeed" in r for r in scan.reasons), scan.reasons
    assert any("without a body" in r and "jb_external" in r for r in scan.reasons), scan.reasons


def test_constant_rules():
    expected = artifact.Signature([((2, 16, 256), "bfloat16")], [((2, 16, 256), "bfloat16")], None, None)
    big = {"shape": [8192], "dtype": "bf16", "size": 8192, "bytes": 16384, "splat": False}
    huge = {"shape": [65536], "dtype": "f32", "size": 65536, "bytes": 262144, "splat": False}
    splat = {**huge, "splat": True}
    small = {"shape": [2048], "dtype": "bf16", "size": 2048, "bytes": 4096, "splat": False}
    assert artifact.constant_reasons([splat], expected) == ([], [])
    assert "as big as input 0" in artifact.constant_reasons([big], expected)[1][0]
    assert "larger than" in artifact.constant_reasons([huge], expected)[1][0]
    assert artifact.constant_reasons([small], expected)[1] == []
    assert "total 8192 elements" in artifact.constant_reasons([small] * 4, expected)[1][0]


def test_gemm_honest_candidate_round_trips(tmp_path):
    candidate = ROOT / "candidates" / "8p_GEMM" / "gemm_pallas.py"
    assert export_here(candidate, GEMM, tmp_path)["status"] == "ok"
    assert judge("verify", GEMM, tmp_path / "export")["status"] == "correct"


def test_requested_variants_are_exported_and_judged(tmp_path):
    """Held-out shapes a request names (verify's ``variants``) go to the export op and the impl spec."""
    variants = [{"emb_dim": 384}]
    result = export_here(ROOT / "examples" / "adversarial" / "hardcoded_shape.py", RMSNORM, tmp_path, variants=variants)
    assert result["status"] == "ok", result
    exported_variants = [p["variant"] for p in result["programs"]] + [f["variant"] for f in result["failed"]]
    assert {"emb_dim": 384} in exported_variants
    spec = {"kind": "exported", "path": str(tmp_path / "export"), "variants": variants}
    from jb.ops import verify

    verdict = verify.run({"workload": str(RMSNORM), "scale": "tiny", "impl": spec, "variants": variants,
                          "trials": [{"seed": 1, "dist": "normal"}]})
    assert verdict["status"] == "incorrect", verdict
    assert any("variant=" in r for r in verdict["reasons"]), verdict["reasons"]
    # Without the spec's variants the judge never loads a program for an undeclared shape.
    wl = load_workload(RMSNORM, "tiny")
    if {"emb_dim": 384} not in artifact.variant_overrides(wl):
        impl = resolve({"kind": "exported", "path": str(tmp_path / "export")}, wl, "cpu", True)
        assert impl.ok and any("not one of the workload's shapes" in n for n in impl.facts["notes"]), impl
        with pytest.raises(common.CandidateFailure):
            impl.fn(jnp.zeros((2, 16, 384), jnp.bfloat16), jnp.zeros((384,), jnp.bfloat16))


def test_judge_cache_follows_file_content(rmsnorm_export, tmp_path):
    """A pooled judge reuses inspected programs only while every file is byte-identical."""
    _, folder = rmsnorm_export
    copy_dir = tmp_path / "export"
    shutil.copytree(folder, copy_dir)
    wl = load_workload(RMSNORM, "tiny")
    first = resolve({"kind": "exported", "path": str(copy_dir)}, wl, "cpu", True)
    again = resolve({"kind": "exported", "path": str(copy_dir)}, wl, "cpu", True)
    assert first.ok and again.fn is first.fn
    (copy_dir / "program-0.jaxexport").write_bytes(b"swapped after inspection")
    swapped = resolve({"kind": "exported", "path": str(copy_dir)}, wl, "cpu", True)
    assert swapped.status == "rejected" and any("cannot be deserialized" in r for r in swapped.reasons), swapped


def test_the_judges_program_cache_hits_across_a_candidates_steps(tmp_path):
    """compile, verify and profile each get their own copy of the export folder: the same content
    in another folder is the same cache entry (the same fn), a changed program is not."""
    from jb import exported

    wl = load_workload(RMSNORM, "tiny")
    write_program(tmp_path / "compile", wl.fn, rms_args())
    shutil.copytree(tmp_path / "compile", tmp_path / "verify")
    fn_a, _ = exported.resolve_cached(tmp_path / "compile", wl, "cpu")
    fn_b, _ = exported.resolve_cached(tmp_path / "verify", wl, "cpu")
    assert fn_a is fn_b
    write_program(tmp_path / "other", lambda x, s: wl.fn(x, s) * 2, rms_args())
    fn_c, _ = exported.resolve_cached(tmp_path / "other", wl, "cpu")
    assert fn_c is not fn_a
