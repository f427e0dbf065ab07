"""Issue 20.2: the judge accepts only what jax's own exporter writes, and only operations and
custom-call targets on its explicit per-platform lists; every attribute that embeds data counts
against the constant budget."""

from __future__ import annotations

import dataclasses
import io
import json
import pathlib

import jax
import jax.numpy as jnp
import pytest

from jb import artifact
from jb.workload import load_workload
from trust_support import ADVERSARIAL, RMSNORM, export_in_worker, judge

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _ir():
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir

    return jmlir, ir


class _Text:
    """An exported program's module as the scan reads it (for modules jax would not serialize)."""

    def __init__(self, text: str):
        self.text = text

    def mlir_module(self):
        return self.text


def _module(body: str, args: str = "%arg0: tensor<4xf32>", result: str = "tensor<4xf32>") -> str:
    return ("module @m {\n  func.func public @main(" + args + ") -> (" + result + ") {\n" + body + "\n  }\n}\n")


@pytest.fixture(scope="module")
def stateful(tmp_path_factory):
    """The stateful hand-serialized attack, exported in a worker (its own process)."""
    out = tmp_path_factory.mktemp("stateful")
    answer, stderr = export_in_worker(ADVERSARIAL / "trust_stateful_artifact.py", RMSNORM, out)
    assert answer["result"]["status"] == "ok", (answer, stderr[-2000:])
    return out / "export"


def test_a_hand_serialized_stateful_artifact_is_rejected(stateful):
    verdict = judge("verify", RMSNORM, stateful)
    assert verdict["status"] == "rejected", verdict
    assert any("not written by jax's serializer" in r for r in verdict["reasons"]), verdict["reasons"]
    # jax itself still reads it (what made it dangerous): the format check is jb's.
    data = (stateful / "program-0.jaxexport").read_bytes()
    assert "rng_get_and_update_state" in jax.export.deserialize(bytearray(data)).mlir_module()


def test_a_forged_producer_does_not_make_raw_bytecode_portable(stateful):
    """The producer string rewritten to StableHLO's: the module's operations still give it away."""
    from jax._src.export import serialization_generated as fb

    data = (stateful / "program-0.jaxexport").read_bytes()
    module = bytes(fb.Exported.GetRootAsExported(data, 0).MlirModuleSerializedAsNumpy())
    at = module.index(b"\x00", 4)
    forged = b"ML\xefR" + module[4:5] + b"StableHLO_v1.18.0" + module[at:]
    reasons = artifact.module_format_reasons(forged)
    assert reasons and ("unversioned operations" in reasons[0] or "cannot be read" in reasons[0]), reasons
    assert artifact.module_format_reasons(b"not bytecode")[0].startswith("the module is not MLIR bytecode")


def test_an_honest_export_passes_the_format_check_and_a_foreign_version_does_not():
    exp = jax.export.export(jax.jit(lambda x: jnp.sin(x) * 2), platforms=["cpu"])(jax.ShapeDtypeStruct((4,), jnp.float32))
    data = bytes(exp.serialize())
    assert artifact.format_reasons(data) == []
    older = bytes(dataclasses.replace(exp).serialize(vjp_order=0))
    assert artifact.format_reasons(older) == []
    assert artifact.format_reasons(b"\x00" * 16)  # not jax's flatbuffer
    # The jax version recorded in the flatbuffer must be the judge's.
    patched = data.replace(jax.__version__.encode(), b"0.0.1" + b"x" * (len(jax.__version__) - 5), 1)
    if patched != data:
        assert any("serialized by jax" in r for r in artifact.format_reasons(patched))


def test_denied_and_unlisted_operations_are_refused():
    body = ("    %k = stablehlo.constant dense<[1, 2]> : tensor<2xui64>\n"
            "    %s, %b = \"stablehlo.rng_bit_generator\"(%k) {rng_algorithm = #stablehlo<rng_algorithm DEFAULT>} :"
            " (tensor<2xui64>) -> (tensor<2xui64>, tensor<4xui32>)\n"
            "    %t = stablehlo.create_token : !stablehlo.token\n"
            "    %i = stablehlo.dynamic_iota %c4, dim = 0 : (tensor<1xi64>) -> tensor<4xf32>\n"
            "    return %arg0 : tensor<4xf32>")
    body = "    %c4 = stablehlo.constant dense<4> : tensor<1xi64>\n" + body
    jmlir, ir = _ir()
    with jmlir.make_ir_context():
        text = str(ir.Module.parse(_module(body)))
    reasons = artifact.scan_module(_Text(text), "cpu").reasons
    joined = " | ".join(reasons)
    assert "stablehlo.rng_bit_generator is not allowed" in joined, reasons
    assert "stablehlo.create_token is not allowed" in joined and "tokens" in joined, reasons
    assert "outside the allow-list: stablehlo.dynamic_iota" in joined, reasons


def test_allocate_buffer_and_side_effects_are_refused_lapack_is_not():
    body = ("    %a = stablehlo.custom_call @AllocateBuffer() : () -> tensor<4xf32>\n"
            "    %b = stablehlo.custom_call @lapack_sgetrf_ffi(%arg0) {has_side_effect = true} : (tensor<4xf32>) -> tensor<4xf32>\n"
            "    return %a : tensor<4xf32>")
    jmlir, ir = _ir()
    with jmlir.make_ir_context():
        text = str(ir.Module.parse(_module(body)))
    reasons = artifact.scan_module(_Text(text), "cpu").reasons
    assert any("outside the cpu allow-list: AllocateBuffer" in r for r in reasons), reasons
    assert any("side effects: lapack_sgetrf_ffi" in r for r in reasons), reasons
    assert artifact.target_allowed("lapack_sgetrf_ffi", "cpu") and not artifact.target_allowed("AllocateBuffer", "cpu")
    assert artifact.target_allowed("tpu_custom_call", "tpu") and not artifact.target_allowed("tpu_custom_call", "cpu")


def test_data_in_any_attribute_counts_as_a_constant():
    blob = "x" * 200_000
    body = ("    %a = stablehlo.custom_call @lapack_sgetrf_ffi(%arg0) {backend_config = \"" + blob + "\"} :"
            " (tensor<4xf32>) -> tensor<4xf32>\n"
            "    return %a : tensor<4xf32>")
    jmlir, ir = _ir()
    with jmlir.make_ir_context():
        text = str(ir.Module.parse(_module(body)))
    scan = artifact.scan_module(_Text(text), "cpu")
    assert scan.constants and scan.constants[0]["bytes"] == len(blob) and "backend_config" in scan.constants[0]["in"]
    expected = artifact.Signature([((4,), "float32")], [((4,), "float32")], None, None)
    _, rejects = artifact.constant_reasons(scan.constants, expected)
    assert any("larger than" in r for r in rejects), rejects


def test_every_workload_reference_export_is_on_the_cpu_allow_list():
    """No honest program is refused: the 50 references, exported at their tiny shapes, pass."""
    refused = {}
    for w in sorted((ROOT / "workloads").iterdir()):
        if not (w / "workload.py").is_file():
            continue
        wl = load_workload(str(w), "tiny")
        sh = artifact.shapes(wl)[0]
        static = wl.static_argnums

        def call(*dyn, sh=sh, wl=wl):
            it = iter(dyn)
            return wl.fn(*[sh.args[i] if i in static else next(it) for i in range(len(sh.args))])

        exp = jax.export.export(jax.jit(call), platforms=["cpu"])(*sh.dynamic())
        data = bytes(exp.serialize())
        scan = artifact.scan_module(jax.export.deserialize(bytearray(data)), "cpu")
        why = artifact.format_reasons(data) + scan.reasons
        if why:
            refused[w.name] = why
    assert not refused, json.dumps(refused, indent=1)[:3000]
