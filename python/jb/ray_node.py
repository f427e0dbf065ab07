"""What runs on a Ray node for jb (``--executor ray``): files by content hash, judges, commands.

This module is shipped to the nodes by value (``ray.cloudpickle.register_pickle_by_value``), so
it imports nothing of jb and nothing outside the standard library at module level: a node needs
jb's pinned Python environment with Ray, not a copy of the project. Everything else a step needs
(the worker package ``python/jb``, workloads, baselines, a candidate file) arrives as a manifest
``{relative path: digest}`` whose blobs are in Ray's object store; each node keeps blobs under
``$JB_RAY_NODE_DIR`` (default ``<tmp>/jb-ray-node``) keyed by digest and materializes one
read-only project tree per manifest, so a file travels to a node once.

A judge (``Judge``) is a long-lived Ray actor holding one accelerator (or one CPU slot). It runs
jb's own worker (``python -m jb.worker``, line-delimited JSON) as a child process: pooled for
trusted implementations, a fresh one per request for untrusted candidates, exactly like the local
executor. It also runs ``command`` steps that hold a device, so a device is never shared.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

# The worker protocol's version: ``jb.contract.WORKER_PROTOCOL``, spelled here because this module
# imports nothing of jb (python/tests/test_contract.py checks that the two agree).
WORKER_PROTOCOL = 2
WORKER_MAX_REQUESTS = 40
STDERR_LINES = 40


def node_dir() -> str:
    return os.environ.get("JB_RAY_NODE_DIR") or os.path.join(tempfile.gettempdir(), "jb-ray-node")


def _node_identity() -> dict:
    import ray  # available on every node (it runs this)

    ctx = ray.get_runtime_context()
    return {"node_id": ctx.get_node_id(), "node_ip": ray.util.get_node_ip_address(), "pid": os.getpid()}


def _blob_path(digest: str) -> str:
    return os.path.join(node_dir(), "blobs", digest[:2], digest)


def _ensure_blobs(blob_refs: dict) -> None:
    """Fetch the blobs this node does not have yet (one object-store read per digest)."""
    import ray

    missing = {d: r for d, r in blob_refs.items() if not os.path.exists(_blob_path(d))}
    if not missing:
        return
    values = ray.get(list(missing.values()))
    for digest, data in zip(missing.keys(), values):
        path = _blob_path(digest)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)


def materialize(manifest_id: str, manifest: dict, blob_refs: dict) -> str:
    """The project tree of a manifest on this node (built once per manifest, then reused).

    ``manifest`` ({path: digest}) and ``blob_refs`` ({digest: ObjectRef}) arrive as Ray resolved
    them (top-level task arguments); the blobs themselves are fetched only when missing here.
    """
    root = os.path.join(node_dir(), "roots", manifest_id)
    if os.path.exists(os.path.join(root, ".complete")):
        return root
    _ensure_blobs(blob_refs)
    os.makedirs(os.path.dirname(root), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f"{manifest_id}.", dir=os.path.dirname(root))
    for rel, digest in manifest.items():
        dest = os.path.join(tmp, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(_blob_path(digest), dest)
    open(os.path.join(tmp, ".complete"), "w").close()
    try:
        os.rename(tmp, root)
    except OSError:  # another process on this node built it first
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def _scratch(prefix: str) -> str:
    """A fresh folder under this node's work area."""
    base = os.path.join(node_dir(), "work")
    os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def _collect(folder: str) -> dict:
    """Every file under ``folder``, by path relative to it (traces and other step outputs)."""
    files = {}
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as f:
                files[os.path.relpath(p, folder).replace(os.sep, "/")] = f.read()
    return files


def _collect_regular(folder: str) -> dict:
    """The regular files under ``folder`` by relative path; links are neither followed nor kept
    (what a sandboxed step wrote is untrusted)."""
    import stat

    files = {}
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            p = os.path.join(dirpath, name)
            try:
                fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as f:
                if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    files[os.path.relpath(p, folder).replace(os.sep, "/")] = f.read()
    return files


def _rewrite(value, roots: dict):
    """Replace driver paths (the project root, shipped external files) by this node's copies."""
    if isinstance(value, str):
        for driver_path, node_path in roots.items():
            if value == driver_path or value.startswith(driver_path.rstrip("/") + "/"):
                return node_path + value[len(driver_path):]
        return value
    if isinstance(value, list):
        return [_rewrite(v, roots) for v in value]
    if isinstance(value, dict):
        return {k: _rewrite(v, roots) for k, v in value.items()}
    return value


class _Worker:
    """One ``python -m jb.worker`` child speaking the worker protocol."""

    def __init__(self, root: str, env: dict, argv: list | None = None, preexec_fn=None, pass_fds=()):
        """``argv``: how to start the worker (default: this interpreter, outside any sandbox,
        with ``env`` added to this process's environment); with ``argv`` the worker gets
        ``env`` as its whole environment."""
        self.root = root
        if argv is None:
            full_env = dict(os.environ)
            full_env.update(env)
            full_env["PYTHONPATH"] = os.path.join(root, "python")
            full_env["PYTHONDONTWRITEBYTECODE"] = "1"
            full_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            argv = [sys.executable, "-u", "-m", "jb.worker"]
        else:
            full_env = dict(env)
        self.proc = subprocess.Popen(
            argv, cwd=root, env=full_env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, bufsize=1, start_new_session=True, preexec_fn=preexec_fn, pass_fds=tuple(pass_fds),
        )
        self.requests = 0
        self.next_id = 1
        self.stderr = []
        self.lines = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self):
        for line in self.proc.stdout:
            with self.cv:
                self.lines.append(line)
                self.cv.notify_all()
        with self.cv:
            self.lines.append(None)
            self.cv.notify_all()

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))
            del self.stderr[:-STDERR_LINES]

    def read(self, accept, timeout: float, watch=None):
        """The next protocol message that ``accept`` takes; None on timeout, raises on death.
        ``watch()``, called about once a second while waiting, raises to give up (a limit)."""
        deadline = time.monotonic() + timeout
        watched = time.monotonic()
        while True:
            if watch is not None and time.monotonic() - watched >= 1.0:
                watched = time.monotonic()
                watch()
            with self.cv:
                if not self.lines:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    self.cv.wait(min(left, 1.0))
                    continue
                line = self.lines.pop(0)
            if line is None:
                raise RuntimeError(f"worker died (exit {self.proc.wait()})")
            try:
                msg = json.loads(line)
            except ValueError:
                self.stderr.append(f"[stdout] {line.rstrip()}")
                continue
            if accept(msg):
                return msg

    def request(self, op: str, args: dict, timeout: float, watch=None):
        rid = self.next_id
        self.next_id += 1
        self.requests += 1
        self.proc.stdin.write(json.dumps({"id": rid, "op": op, "args": args, "protocol": WORKER_PROTOCOL}) + "\n")
        self.proc.stdin.flush()
        return self.read(lambda m: m.get("id") == rid, timeout, watch)

    def tail(self) -> str:
        return "\n".join(self.stderr[-STDERR_LINES:])

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()


def _start_worker(root: str, env: dict, timeout: float = 300.0, argv: list | None = None,
                  preexec_fn=None, pass_fds=()) -> _Worker:
    w = _Worker(root, env, argv, preexec_fn, pass_fds)
    try:
        ready = w.read(lambda m: m.get("event") == "ready", timeout)
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}: {w.tail()}") from None
    if ready is None:
        w.kill()
        raise RuntimeError(f"worker did not start within {timeout:.0f} s: {w.tail()}")
    return w


def run_command(spec: dict, inputs_root: str | None) -> dict:
    """A ``command`` step in a fresh folder holding its declared inputs; its outputs come back."""
    work = _scratch("cmd.")
    try:
        if inputs_root:
            shutil.copytree(inputs_root, work, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
        out_dir = os.path.join(work, ".jb_out")
        os.makedirs(out_dir, exist_ok=True)
        for o in spec["outputs"]:
            os.makedirs(os.path.dirname(os.path.join(work, o)) or work, exist_ok=True)
        env = dict(os.environ)
        env.update(spec.get("env") or {})
        env["JB_OUT_DIR"] = out_dir
        ident = _node_identity()
        env["JB_RAY_NODE_ID"] = ident["node_id"]
        t0 = time.perf_counter()
        with open(os.path.join(out_dir, ".stdout"), "wb") as so, open(os.path.join(out_dir, ".stderr"), "wb") as se:
            proc = subprocess.Popen(["sh", "-c", spec["script"]], cwd=work, env=env, stdin=subprocess.DEVNULL,
                                    stdout=so, stderr=se, start_new_session=True)
            try:
                code = proc.wait(timeout=spec.get("timeout_s"))
                timed_out = False
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                code, timed_out = None, True
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the group
        except OSError:
            pass
        duration_ms = (time.perf_counter() - t0) * 1e3
        with open(os.path.join(out_dir, ".stderr"), "rb") as f:
            stderr_tail = "\n".join(f.read().decode("utf-8", "replace").splitlines()[-20:])
        outputs = {}
        missing = []
        if code == 0:
            for o in spec["outputs"]:
                p = os.path.join(work, o)
                if os.path.isfile(p):
                    with open(p, "rb") as f:
                        outputs[o] = f.read()
                else:
                    missing.append(o)
        return {"exit_code": code, "timed_out": timed_out, "duration_ms": duration_ms, "stderr_tail": stderr_tail,
                "outputs": outputs, "missing": missing, "node": ident}
    finally:
        shutil.rmtree(work, ignore_errors=True)


class Judge:
    """A long-lived judge on one device (or CPU slot) of a node. Ray runs one call at a time."""

    def __init__(self, env: dict):
        self.env = dict(env)
        self.pool = None  # the pooled worker for trusted implementations
        self.fingerprint = None
        self.fingerprint_root = None

    def ready(self) -> dict:
        return _node_identity()

    def _pooled(self, root: str) -> _Worker:
        if self.pool is not None and (self.pool.root != root or self.pool.requests >= WORKER_MAX_REQUESTS
                                      or self.pool.proc.poll() is not None):
            self.pool.kill()
            self.pool = None
        if self.pool is None:
            self.pool = _start_worker(root, self.env)
        return self.pool

    def node_fingerprint(self, manifest_id, manifest, blob_refs) -> dict:
        """This node's environment fingerprint (jb's ``fingerprint`` op), measured once."""
        root = materialize(manifest_id, manifest, blob_refs)
        if self.fingerprint is None or self.fingerprint_root != root:
            msg = self._pooled(root).request("fingerprint", {}, 300.0)
            if msg is None or not msg.get("ok"):
                raise RuntimeError(f"fingerprint failed on this node: {msg}")
            fp = {k: (v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))
                  for k, v in msg["result"].items() if k not in ("status", "worker_pid", "duration_ms")}
            self.fingerprint, self.fingerprint_root = fp, root
        return {"fingerprint": self.fingerprint, "node": _node_identity()}

    def run_op(self, req: dict, manifest, blob_refs) -> dict:
        """One worker op (compile, verify, profile, ...) for the driver."""
        node = _node_identity()
        root = materialize(req["manifest_id"], manifest, blob_refs)
        expect = req.get("expect_fingerprint")
        if expect:
            fp = self.node_fingerprint(req["manifest_id"], manifest, blob_refs)["fingerprint"]
            diff = {k: [fp.get(k), v] for k, v in expect.items() if fp.get(k) != v}
            if diff:
                return {"mismatch": diff, "node": node}
        out_dir = _scratch("op.")
        try:
            roots = {req["project_root"]: root, **{k: os.path.join(root, v) for k, v in req.get("external", {}).items()}}
            args = _rewrite(req["args"], roots)
            args["out_dir"] = out_dir
            args["project_root"] = root
            fresh = bool(req.get("fresh"))
            t0 = time.perf_counter()
            worker = _start_worker(root, self.env) if fresh else self._pooled(root)
            try:
                msg = worker.request(req["op"], args, float(req.get("timeout_s") or 1800))
            except (RuntimeError, OSError, ValueError) as exc:
                tail = worker.tail()
                worker.kill()
                if not fresh:
                    self.pool = None
                return {"failure": "crashed", "message": str(exc), "stderr_tail": tail, "node": node}
            tail = worker.tail()
            if msg is None:
                worker.kill()
                if not fresh:
                    self.pool = None
                return {"failure": "timeout", "message": f"no answer within {req.get('timeout_s')} s; worker killed",
                        "stderr_tail": tail, "node": node}
            if fresh:
                worker.kill()
            return {"response": msg, "stderr_tail": tail if fresh else "", "files": _collect(out_dir), "node": node,
                    "elapsed_ms": (time.perf_counter() - t0) * 1e3}
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)

    def run_command(self, spec: dict, manifest_id, manifest, blob_refs) -> dict:
        """A ``command`` step that holds this judge's device."""
        root = materialize(manifest_id, manifest, blob_refs) if manifest_id else None
        return run_command(spec, root)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.kill()
            self.pool = None


def command_task(spec: dict, manifest_id, manifest, blob_refs) -> dict:
    """A ``command`` step that holds no device: a plain Ray task (retried by Ray if its node dies)."""
    root = materialize(manifest_id, manifest, blob_refs) if manifest_id else None
    return run_command(spec, root)
