"""The Ray driver's and node module's helpers that need no cluster (tests/ray.rs runs a real one)."""

import os
import socket

from jb import ray_driver, ray_node


def test_device_resource_auto_prefers_accelerators():
    assert ray_driver.resolve_device_resource("auto", {"CPU": 8, "TPU": 4, "device": 1}) == "TPU"
    assert ray_driver.resolve_device_resource("auto", {"CPU": 8, "GPU": 2}) == "GPU"
    assert ray_driver.resolve_device_resource("auto", {"CPU": 8}) == "device"
    assert ray_driver.resolve_device_resource("TPU", {"CPU": 8}) == "TPU"


def test_unreachable_address_is_named_quickly():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    assert ray_driver.check_reachable(f"127.0.0.1:{port}", timeout=2) is not None
    assert ray_driver.check_reachable("auto") is None
    assert ray_driver.check_reachable("ray://head:10001") is None


def test_referenced_paths_ship_candidates_not_the_world(tmp_path):
    root = tmp_path / "proj"
    (root / "candidates").mkdir(parents=True)
    (root / "candidates" / "k.py").write_text("def workload(x): return x\n")
    outside = tmp_path / "elsewhere.py"
    outside.write_text("def workload(x): return x\n")
    exported = tmp_path / "exported"
    exported.mkdir()
    (exported / "index.json").write_text("{}")
    args = {
        "impl": {"kind": "candidate", "path": "candidates/k.py"},
        "pair": [{"kind": "exported", "path": str(exported)}],
        "other": [str(outside), str(root / "candidates" / "k.py"), "", ".", "../x", "/", str(tmp_path)],
        "workload": "workloads/none",
    }
    external, relative = {}, {}
    ray_driver.referenced_paths(args, str(root), external, relative)
    assert set(relative) == {"candidates/k.py"}
    assert set(external) == {str(outside), str(exported)}, "never the project's parents or /"
    assert all(v.startswith("_ext/") for v in external.values())


def test_node_rewrites_driver_paths(tmp_path):
    roots = {"/home/u/proj": "/tmp/node/roots/abc", "/home/u/k.py": "/tmp/node/roots/abc/_ext/1/k.py"}
    args = {"a": "/home/u/proj/workloads/w", "b": ["/home/u/k.py"], "c": "/home/u/project2/x", "d": 3}
    out = ray_node._rewrite(args, roots)
    assert out == {"a": "/tmp/node/roots/abc/workloads/w", "b": ["/tmp/node/roots/abc/_ext/1/k.py"],
                   "c": "/home/u/project2/x", "d": 3}


def test_command_runs_in_its_inputs_and_returns_declared_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("JB_RAY_NODE_DIR", str(tmp_path / "node"))
    monkeypatch.setattr(ray_node, "_node_identity", lambda: {"node_id": "n1", "node_ip": "127.0.0.1", "pid": 1})
    inputs = tmp_path / "inputs"
    (inputs / "src").mkdir(parents=True)
    (inputs / "src" / "in.txt").write_text("abc\n")
    spec = {"script": "mkdir -p out && rev < src/in.txt > out/r.txt && echo $JB_RAY_NODE_ID > out/n.txt",
            "outputs": ["out/r.txt", "out/n.txt", "out/missing.txt"], "env": {}, "timeout_s": 30}
    res = ray_node.run_command(spec, str(inputs))
    assert res["exit_code"] == 0
    assert res["outputs"] == {"out/r.txt": b"cba\n", "out/n.txt": b"n1\n"}
    assert res["missing"] == ["out/missing.txt"]
    res = ray_node.run_command({**spec, "script": "sleep 5", "timeout_s": 0.5}, None)
    assert res["timed_out"] and res["outputs"] == {}
    assert not os.listdir(tmp_path / "node" / "work"), "scratch folders are removed"


def test_sandbox_policy_expands_with_the_nodes_facts(tmp_path, monkeypatch):
    import sys

    from jb import ray_sandbox

    monkeypatch.setenv("JAX_TEST_PASSED", "1")
    policy = {"placeholders": {"root": "/@r@", "pyenv": "/@p@", "scratch": "/@s@"},
              "argv": ["--ro-bind", "/@r@", "/@r@", {"size": 5}, "--bind", "/@s@", "/@s@",
                       "--setenv", "PATH", "/@p@/bin:/usr/bin", {"base_prefix": True},
                       {"passed_env": ["JAX_TEST_"]}, {"devices": ["no-such-device-"]}]}
    argv = ray_sandbox.expand(policy, {"sized": False}, "/node/root", "/node/scratch")
    pyenv = ray_sandbox.pyenv()
    assert argv[:3] == ["--ro-bind", "/node/root", "/node/root"]
    assert "--size" not in argv
    assert ["--bind", "/node/scratch", "/node/scratch"] == argv[3:6]
    assert f"{pyenv}/bin:/usr/bin" in argv
    assert argv[argv.index("--ro-bind", 1) + 1] == os.path.realpath(sys.base_prefix)
    assert argv[-3:] == ["--setenv", "JAX_TEST_PASSED", "1"]
    assert "--size" in ray_sandbox.expand(policy, {"sized": True}, "/r", "/s")


def test_only_regular_files_come_back_from_a_sandbox(tmp_path):
    from jb.ray_node import _collect_regular

    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "index.json").write_text("{}")
    secret = tmp_path.parent / "node-secret.txt"
    secret.write_text("node secret")
    (tmp_path / "export" / "leak.jaxexport").symlink_to(secret)
    assert _collect_regular(str(tmp_path)) == {"export/index.json": b"{}"}
