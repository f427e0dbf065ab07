"""Trace parsing (jb.trace): synthetic TPU/GPU device-plane traces in the documented Chrome-trace
format, and a real XLA:CPU trace."""

from __future__ import annotations

import gzip
import json

import jax
import jax.numpy as jnp
import pytest

from jb import trace


def _meta(pid, name, threads):
    out = [{"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}}]
    for tid, tname in threads.items():
        out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": tname}})
    return out


def _x(pid, tid, name, ts, dur, **args):
    e = {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": ts, "dur": dur}
    if args:
        e["args"] = args
    return e


def tpu_trace(durations, module="jit_workload", devices=2):
    """A TPU-shaped trace: host plane with host-side jit_* events, device planes with XLA Modules/Ops."""
    events = _meta(1, "/host:CPU", {10: "python", 11: "TraceMe"})
    for d in range(devices):
        events += _meta(100 + d, f"/device:TPU:{d}", {1: "Steps", 2: "XLA Modules", 3: "XLA Ops"})
    t = 1000.0
    for i, dur in enumerate(durations):
        # Host-side events that must never count (dispatch, TraceMe with the module's name).
        events.append(_x(1, 10, "PjitFunction(workload)", t - 50, 40.0))
        events.append(_x(1, 11, module, t - 45, 30.0))
        events.append(_x(1, 10, f"{module}(5)", t - 40, 5000.0))
        for d in range(devices):
            skew = 3.0 * d
            events.append(_x(100 + d, 2, f"{module}(5)", t + skew, dur, run_id=str(i)))
            events.append(_x(100 + d, 3, "fusion.1", t + skew, dur / 2, hlo_module=module, run_id=str(i)))
            events.append(_x(100 + d, 3, "convolution.2", t + skew + dur / 2, dur / 2, hlo_module=module, run_id=str(i)))
        # An unrelated module on the device (e.g. an input-generation program) between iterations.
        events.append(_x(100, 2, "jit_resample(9)", t + dur + 10, 77.0))
        t += dur + 500
    return {"displayTimeUnit": "ns", "traceEvents": events}


def test_tpu_device_modules_line_one_event_per_iteration():
    durs = [100.0, 120.0, 110.0, 130.0]
    timing = trace.per_iteration(trace.events_from_chrome(tpu_trace(durs)), module="jit_workload")
    assert timing.source == "device_modules"
    assert timing.samples_ms == pytest.approx([d / 1e3 for d in durs])  # device 0 only, host events ignored


def test_device_modules_without_module_name_takes_jit_events_of_device_only():
    durs = [50.0, 60.0]
    timing = trace.per_iteration(trace.events_from_chrome(tpu_trace(durs, devices=1)), module=None)
    assert timing.source == "device_modules"
    # jit_resample is also a device module: without a module filter it counts; with one it does not.
    assert len(timing.samples_ms) == 4
    assert len(trace.per_iteration(trace.events_from_chrome(tpu_trace(durs, devices=1)), "jit_workload").samples_ms) == 2


def test_gpu_device_ops_grouped_by_run_id_when_no_modules_line():
    events = _meta(1, "/host:CPU", {10: "python"}) + _meta(200, "/device:GPU:0", {5: "Stream #13(compute)"})
    t = 0.0
    expected = []
    for run in range(3):
        events.append(_x(1, 10, "jit_workload", t, 999.0))  # host-side: ignored
        events.append(_x(200, 5, "gemm_kernel", t + 10, 40.0, hlo_module="jit_workload", run_id=run))
        events.append(_x(200, 5, "loop_fusion", t + 60, 15.0, hlo_module="jit_workload", run_id=run))
        events.append(_x(200, 5, "other_kernel", t + 80, 500.0, hlo_module="jit_other", run_id=run))
        expected.append((60 + 15 - 10) / 1e3)
        t += 1000
    timing = trace.per_iteration(trace.events_from_chrome({"traceEvents": events}), module="jit_workload")
    assert timing.source == "device_ops"
    assert timing.samples_ms == pytest.approx(expected)


def test_cpu_thunks_grouped_by_run_id_and_filtered_by_module():
    events = _meta(1, "/host:CPU", {10: "python", 20: "tf_XLAPjRtCpuClient/1", 21: "tf_XLAEigen/2"})
    expected = []
    t = 0.0
    for run in (7, 8, 9):
        events.append(_x(1, 10, "PjitFunction(workload)", t, 2000.0))
        events.append(_x(1, 20, "ynn_fusion", t + 5, 100.0, hlo_module="jit_workload", run_id=str(run), hlo_op="ynn_fusion"))
        events.append(_x(1, 21, "wrapped_tanh", t + 50, 200.0, hlo_module="jit_workload", run_id=str(run)))
        events.append(_x(1, 20, "ThunkExecutor::Execute (wait for completion)", t + 260, 1.0, run_id=str(run)))
        events.append(_x(1, 20, "callback_fusion", t + 300, 900.0, hlo_module="jit_callback_body", run_id=str(run + 100)))
        expected.append((250 - 5) / 1e3)
        t += 5000
    timing = trace.per_iteration(trace.events_from_chrome({"traceEvents": events}), module="jit_workload")
    assert timing.source == "cpu_thunks"
    assert timing.samples_ms == pytest.approx(expected)
    assert trace.modules_seen(trace.events_from_chrome({"traceEvents": events})) == ["jit_callback_body", "jit_workload"]


def test_no_usable_events():
    events = _meta(1, "/host:CPU", {10: "python"}) + [_x(1, 10, "jit_workload", 0, 10.0)]
    timing = trace.per_iteration(trace.events_from_chrome({"traceEvents": events}), module="jit_workload")
    assert timing.source == "none" and timing.samples_ms == []


def test_chrome_gz_roundtrip(tmp_path):
    path = tmp_path / "host.trace.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump(tpu_trace([10.0, 20.0], devices=1), fh)
    timing = trace.per_iteration(trace.load(path), "jit_workload")
    assert timing.samples_ms == pytest.approx([0.01, 0.02])


def test_real_cpu_trace(tmp_path):
    f = jax.jit(lambda x, y: jnp.tanh(x @ y).sum(0))
    x = jnp.ones((128, 128))
    compiled = f.lower(x, x).compile()
    jax.block_until_ready(compiled(x, x))
    with jax.profiler.trace(str(tmp_path / "warm")):
        jax.block_until_ready(compiled(x, x))
    with jax.profiler.trace(str(tmp_path / "t")):
        for _ in range(4):
            jax.block_until_ready(compiled(x, x))
    files = trace.find_trace_files(tmp_path / "t")
    assert "xplane" in files and "json" in files
    module = compiled.as_text().split()[1].rstrip(",")
    for path in (files["xplane"], files["json"]):
        timing = trace.per_iteration(trace.load(path), module=module)
        assert timing.source == "cpu_thunks"
        assert len(timing.samples_ms) == 4
        assert all(0 < s < 1000 for s in timing.samples_ms)
