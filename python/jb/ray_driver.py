"""jb's Ray driver (``jb ... --executor ray``): one process per jb run, beside jb on the driver machine.

jb (Rust) keeps planning, keys, the cache and the run database; it starts this process and sends it
the steps that must run, one JSON object per line on stdin::

    {"id": 7, "op": "worker"|"sandboxed"|"command"|"fingerprint"|"nodes", "args": {...}}

and reads one JSON line per answer on stdout (answers come in completion order, matched by id)::

    {"id": 7, "ok": true, "result": {...}}   or   {"id": 7, "ok": false, "error": "..."}

Every request carries ``"protocol"`` (``jb.contract.RAY_PROTOCOL``) and so does the ready line; the
shapes are ``jb.contract``'s (``src/contract/ray.rs`` on the Rust side).

First line: ``{"event": "ready", ...}`` once connected, or ``{"event": "error", "message": ...}``.

Where steps run: Python worker ops (compile, verify, profile, ...) and ``command`` steps that hold
a device go to judges (``jb.ray_node.Judge`` actors, one per unit of the device resource, or
``--cpu-slots`` per node on a cluster without it); other ``command`` steps are plain Ray tasks;
candidate code (``sandboxed``: the export stage) is a Ray task that runs a fresh worker in jb's
bubblewrap sandbox on the node (``jb.ray_sandbox``; the policy comes from jb with the request).
Files travel by content hash (``jb.ray_node``). A judge lost with its node: the step is sent to
another judge (at most ``--max-attempts`` tries in all) and a replacement judge is requested; Ray
retries a lost command task itself (``max_retries``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import socket
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

from jb import contract

PROJECT_DIRS = ("workloads", "tokamax_baselines")
_T0 = time.monotonic()


def trace(event: str) -> None:
    """With JB_RAY_TRACE=FILE, a timeline of the driver (seconds since it started) for measurements."""
    path = os.environ.get("JB_RAY_TRACE")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{time.monotonic() - _T0:.3f} {event}\n")
SKIP_PARTS = ("__pycache__", ".pytest_cache")


def _take_stdout():
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", buffering=1, encoding="utf-8", closefd=True)


def check_reachable(address: str, timeout: float = 5.0) -> str | None:
    """A reason when ``host:port`` accepts no TCP connection (``auto`` and ``ray://`` are not checked)."""
    if address in ("", "auto", "local") or "://" in address or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return None
    except (OSError, ValueError) as exc:
        return str(exc)


class Shipper:
    """Puts file contents into Ray's object store once per digest; manifests name them by path."""

    def __init__(self):
        self.lock = threading.Lock()
        self.stat_cache = {}  # abs path -> ((mtime_ns, size), digest)
        self.blobs = {}  # digest -> ObjectRef
        self.manifests = {}  # manifest id -> (manifest ref, blob refs ref)

    def digest(self, path: str) -> str:
        import ray

        st = os.stat(path)
        sig = (st.st_mtime_ns, st.st_size)
        with self.lock:
            hit = self.stat_cache.get(path)
            if hit and hit[0] == sig:
                return hit[1]
        with open(path, "rb") as f:
            data = f.read()
        d = hashlib.sha256(data).hexdigest()
        with self.lock:
            self.stat_cache[path] = (sig, d)
            if d not in self.blobs:
                self.blobs[d] = ray.put(data)
        return d

    def ship(self, files: dict) -> tuple:
        """``files``: {relative path on the node: absolute path here} -> (manifest id, refs)."""
        import ray

        manifest = {rel: self.digest(p) for rel, p in sorted(files.items())}
        mid = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:32]
        with self.lock:
            hit = self.manifests.get(mid)
            if hit is None:
                blob_refs = {d: self.blobs[d] for d in set(manifest.values())}
                hit = (ray.put(manifest), ray.put(blob_refs))
                self.manifests[mid] = hit
        return mid, hit[0], hit[1]


def _walk(base: str, rel_dir: str) -> dict:
    files = {}
    top = os.path.join(base, rel_dir)
    for dirpath, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if d not in SKIP_PARTS]
        for n in names:
            if n.endswith((".pyc", ".tmp")):
                continue
            p = os.path.join(dirpath, n)
            files[os.path.relpath(p, base).replace(os.sep, "/")] = p
    return files


def project_files(root: str, python_dir: str | None) -> dict:
    """The worker package (from jb's python folder, which need not be in the project) and the
    project's workloads and baselines, by their path on the node."""
    files = {}
    for d in PROJECT_DIRS:
        files.update(_walk(root, d))
    python_dir = python_dir or os.path.join(root, "python")
    for rel, path in _walk(python_dir, "jb").items():
        files[f"python/{rel}"] = path
    return files


MAX_SHIPPED_DIR_FILES = 1000


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def referenced_paths(value, root: str, external: dict, relative: dict) -> None:
    """Files a step's arguments name besides the project's own trees (candidates, exported
    programs): absolute paths outside the project -> ``external`` {path: node folder}; relative
    files inside it -> ``relative`` {relative path: path}."""
    if isinstance(value, str):
        if os.path.isabs(value):
            if _inside(value, root) or value in ("/", "/tmp") or _inside(root, value):
                if _inside(value, root) and os.path.isfile(value):
                    relative[os.path.relpath(value, root)] = value
                return
            if os.path.isfile(value) or (os.path.isdir(value) and
                                         sum(len(f) for _, _, f in os.walk(value)) <= MAX_SHIPPED_DIR_FILES):
                external[value] = "_ext/" + hashlib.sha256(value.encode()).hexdigest()[:16]
        elif value not in ("", ".") and ".." not in value.split("/") and os.path.isfile(os.path.join(root, value)):
            relative[value] = os.path.join(root, value)
    elif isinstance(value, list):
        for v in value:
            referenced_paths(v, root, external, relative)
    elif isinstance(value, dict):
        for v in value.values():
            referenced_paths(v, root, external, relative)


def resolve_device_resource(name: str, totals: dict) -> str:
    """``auto``: the accelerator resource the cluster has (TPU, then GPU, then a custom ``device``)."""
    if name != "auto":
        return name
    for candidate in ("TPU", "GPU", "device"):
        if totals.get(candidate, 0) >= 1:
            return candidate
    return "device"


class NoJudges(RuntimeError):
    pass


class Judges:
    """The judge actors and a queue of idle ones."""

    # How long a step waits for a judge while none is ready at all (all lost, none placeable).
    NO_JUDGE_WAIT_S = 300.0

    def __init__(self, cls, device_resource: str, cpu_slots: int, env: dict, max_attempts: int):
        self.cls = cls
        self.device_resource = device_resource
        self.cpu_slots = cpu_slots
        self.env = env
        self.max_attempts = max_attempts
        self.lock = threading.Lock()
        self.idle = queue.Queue()
        self.ready = 0  # judges that answered `ready` and are not lost or retired
        self.options = None

    def _ensure_started(self):
        import ray

        with self.lock:
            if self.options is not None:
                return
            total = ray.cluster_resources()
            if total.get(self.device_resource, 0) >= 1:
                n = int(total[self.device_resource])
                self.options = {"num_cpus": 0, "resources": {self.device_resource: 1}}
            else:
                alive = [x for x in ray.nodes() if x.get("Alive")]
                n = max(1, len(alive) * self.cpu_slots)
                self.options = {"num_cpus": 1, "scheduling_strategy": "SPREAD"}
            trace(f"starting {n} judges")
            for _ in range(n):
                self._spawn_locked()

    def _spawn_locked(self):
        actor = self.cls.options(max_restarts=0, **self.options).remote(self.env)
        threading.Thread(target=self._await_ready, args=(actor,), daemon=True).start()

    def _await_ready(self, actor):
        import ray

        try:
            ray.get(actor.ready.remote())
        except Exception:  # noqa: BLE001 - a judge that cannot start is one fewer judge
            return
        trace("judge ready")
        with self.lock:
            self.ready += 1
        self.idle.put(actor)

    def _lost(self):
        """A judge died (usually with its node): ask for a replacement wherever Ray can place it."""
        with self.lock:
            self.ready -= 1
            self._spawn_locked()

    def _take(self):
        waited = 0.0
        while True:
            try:
                return self.idle.get(timeout=5.0)
            except queue.Empty:
                with self.lock:
                    none_ready = self.ready <= 0
                waited = waited + 5.0 if none_ready else 0.0
                if waited >= self.NO_JUDGE_WAIT_S:
                    raise NoJudges(f"no judge on the cluster for {waited:.0f} s (no node with a free "
                                   f"`{self.device_resource}` resource, or all judges were lost)") from None

    def call(self, submit):
        """Run ``submit(actor) -> ObjectRef`` on an idle judge; another judge if this one dies
        or its node's environment differs from the keys' (``mismatch`` in the answer)."""
        import ray
        from ray.exceptions import RayActorError

        self._ensure_started()
        errors = []
        result = None
        for attempt in range(1, self.max_attempts + 1):
            actor = self._take()
            try:
                result = ray.get(submit(actor))
            except RayActorError as exc:
                errors.append(f"judge lost ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})")
                self._lost()
                continue
            except BaseException:
                self.idle.put(actor)
                raise
            if isinstance(result, dict) and result.get("mismatch"):
                # Back to the end of the queue (a stale cached fingerprint makes every judge
                # disagree: then the step fails after a few tries, and no judge is lost).
                errors.append(f"judge on node {result.get('node', {}).get('node_id')} has another environment")
                self.idle.put(actor)
                continue
            self.idle.put(actor)
            if isinstance(result, dict):
                result["attempts"] = attempt
                if errors:
                    result["retried_after"] = errors
            return result
        if isinstance(result, dict) and result.get("mismatch"):
            result["attempts"] = self.max_attempts
            return result
        raise NoJudges(f"gave up after {self.max_attempts} attempts: " + "; ".join(errors))


class SandboxTasks:
    """Sandboxed Ray tasks (one CPU each, anywhere): a task lost with its node or worker process
    is sent again (``max_attempts`` tries in all; Ray places it on a live node), never answered as
    the candidate's failure."""

    def __init__(self, remote_fn, max_attempts: int):
        self.fn = remote_fn
        self.max_attempts = max_attempts

    def call(self, req: dict, mref, bref) -> dict:
        import ray
        from ray.exceptions import (NodeDiedError, ObjectLostError, OwnerDiedError, RaySystemError,
                                    WorkerCrashedError)

        lost = (WorkerCrashedError, NodeDiedError, ObjectLostError, OwnerDiedError, RaySystemError)
        errors = []
        for attempt in range(1, self.max_attempts + 1):
            ref = self.fn.options(num_cpus=1, max_retries=0).remote(req, mref, bref)
            try:
                result = ray.get(ref)
            except lost as exc:
                errors.append(f"task lost ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})")
                trace(f"sandboxed task lost: {errors[-1]}")
                continue
            result["attempts"] = attempt
            if errors:
                result["retried_after"] = errors
            return result
        raise NoJudges(f"gave up after {self.max_attempts} attempts: " + "; ".join(errors))


class Driver:
    def __init__(self, opts, out):
        import ray

        from jb import ray_node, ray_sandbox

        ray.cloudpickle.register_pickle_by_value(ray_node)
        self.ray = ray
        self.out = out
        self.out_lock = threading.Lock()
        self.opts = opts
        self.env = json.loads(opts.env or "{}")
        self.shipper = Shipper()
        ray.cloudpickle.register_pickle_by_value(ray_sandbox)
        self.command_task = ray.remote(ray_node.command_task)
        self.sandboxed = SandboxTasks(ray.remote(ray_sandbox.run), opts.max_attempts)
        self.judges = Judges(ray.remote(ray_node.Judge), opts.device_resource, opts.cpu_slots, self.env,
                             opts.max_attempts)

    def send(self, msg: dict):
        line = json.dumps(msg, allow_nan=False, default=str)
        with self.out_lock:
            self.out.write(line + "\n")
            self.out.flush()

    def handle(self, req: dict):
        rid = req.get("id")
        trace(f"request {rid} {req.get('op')}")
        try:
            op = req.get("op")
            args = req.get("args") or {}
            fn = {"worker": self.op_worker, "sandboxed": self.op_sandboxed, "command": self.op_command,
                  "fingerprint": self.op_fingerprint, "nodes": self.op_nodes}.get(op)
            if fn is None:
                raise ValueError(f"unknown op {op!r}")
            result = fn(args)
            trace(f"answer {rid}")
            self.send({"id": rid, "ok": True, "result": result})
        except Exception as exc:  # noqa: BLE001 - every failure is an answer
            self.send({"id": rid, "ok": False, "error": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc()[-4000:]})

    # -- ops ------------------------------------------------------------------------------------

    def op_nodes(self, args):
        ray = self.ray
        nodes = [{"node_id": n["NodeID"], "address": n.get("NodeManagerAddress"), "alive": n.get("Alive"),
                  "resources": n.get("Resources", {})} for n in ray.nodes()]
        return {"nodes": nodes, "total": ray.cluster_resources(), "available": ray.available_resources(),
                "device_resource": self.opts.device_resource}

    def _project(self, root: str, python_dir: str | None, extra: dict | None = None,
                 relative: dict | None = None):
        files = project_files(root, python_dir)
        files.update(relative or {})
        for path, rel in (extra or {}).items():
            if os.path.isdir(path):
                for k, v in _walk(path, ".").items():
                    files[f"{rel}/{k[2:] if k.startswith('./') else k}"] = v
            else:
                files[f"{rel}/{os.path.basename(path)}"] = path
        return self.shipper.ship(files)

    def op_fingerprint(self, args):
        mid, mref, bref = self._project(args["project_root"], args.get("python_dir"))
        return self.judges.call(lambda a: a.node_fingerprint.remote(mid, mref, bref))

    def _op_request(self, args):
        """A worker op's request for a node, and the object refs of its files."""
        root = args["project_root"]
        external, relative = {}, {}
        referenced_paths(args["args"], root, external, relative)
        external.pop(args.get("out_dir", ""), None)
        mid, mref, bref = self._project(root, args.get("python_dir"), external, relative)
        node_external = {}
        for path, rel in external.items():
            # A file keeps its name under its folder on the node; a folder becomes the folder.
            node_external[path] = rel if os.path.isdir(path) else f"{rel}/{os.path.basename(path)}"
        req = {"manifest_id": mid, "project_root": root, "external": node_external, "op": args["op"],
               "args": args["args"], "fresh": args.get("fresh", False), "timeout_s": args.get("timeout_s"),
               "expect_fingerprint": args.get("expect_fingerprint") or {}}
        return req, mref, bref

    def op_worker(self, args):
        req, mref, bref = self._op_request(args)
        res = self.judges.call(lambda a: a.run_op.remote(req, mref, bref))
        return self._files_back(res, args["out_dir"])

    def op_sandboxed(self, args):
        """Candidate code (the export stage) in jb's sandbox on a node: a Ray task (``jb.ray_sandbox``)."""
        req, mref, bref = self._op_request(args)
        req.update(sandbox=args["sandbox"], memory_mb=args.get("memory_mb"))
        res = self.sandboxed.call(req, mref, bref)
        return self._files_back(res, args["out_dir"])

    def _files_back(self, res: dict, out_dir: str) -> dict:
        """Write the files a node sent back into the step's out_dir; the answer names them."""
        files = res.pop("files", {}) or {}
        names = []
        for rel, data in files.items():
            if os.path.isabs(rel) or ".." in rel.split("/"):
                raise ValueError(f"a node sent back a file outside the step's folder: {rel!r}")
            dest = os.path.join(out_dir, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(data)
            names.append(rel)
        res["files"] = sorted(names)
        return res

    def op_command(self, args):
        root = args["project_root"]
        inputs = {rel: os.path.join(root, rel) for rel in args.get("inputs", [])}
        mid = mref = bref = None
        if inputs:
            mid, mref, bref = self.shipper.ship(inputs)
        spec = {"script": args["script"], "env": args.get("env") or {}, "outputs": args.get("outputs") or [],
                "timeout_s": args.get("timeout_s")}
        resources = {k: float(v) for k, v in (args.get("resources") or {}).items()}
        dev = self.opts.device_resource
        holds_device = resources.pop("device", 0) > 0 or resources.get(dev, 0) > 0
        if holds_device:
            resources.pop(dev, None)
            res = self.judges.call(lambda a: a.run_command.remote(spec, mid, mref, bref))
        else:
            missing = [r for r in resources if r != "cpu" and self.ray.cluster_resources().get(r, 0) < resources[r]]
            if missing:
                raise ValueError(f"no node of the cluster offers the resources {missing} this step asks for")
            num_cpus = resources.pop("cpu", 1.0)
            ref = self.command_task.options(num_cpus=num_cpus, resources=resources,
                                            max_retries=self.opts.max_attempts - 1).remote(spec, mid, mref, bref)
            res = self.ray.get(ref)
        outputs = res.pop("outputs", {}) or {}
        for rel, data in outputs.items():
            dest = os.path.join(root, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            tmp = f"{dest}.jb-ray.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, dest)
        res["outputs"] = sorted(outputs)
        return res


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m jb.ray_driver")
    p.add_argument("--address", required=True)
    p.add_argument("--device-resource", default="auto")
    p.add_argument("--cpu-slots", type=int, default=1)
    p.add_argument("--max-attempts", type=int, default=3)
    p.add_argument("--env", default="{}", help="JSON object: environment of the workers on the nodes")
    opts = p.parse_args()
    out = _take_stdout()

    def fail(message: str) -> int:
        out.write(json.dumps({"event": "error", "message": message}) + "\n")
        out.flush()
        return 3

    why = check_reachable(opts.address)
    if why is not None:
        return fail(f"cannot reach the Ray cluster at {opts.address}: {why}")
    try:
        import ray
    except ImportError:
        return fail("Ray is not installed in jb's Python environment (run `jb setup --with ray`)")
    try:
        ray.init(address=opts.address, log_to_driver=False, logging_level="ERROR")
    except Exception as exc:  # noqa: BLE001
        return fail(f"cannot connect to the Ray cluster at {opts.address}: {type(exc).__name__}: {exc}")
    opts.device_resource = resolve_device_resource(opts.device_resource, ray.cluster_resources())
    trace("connected")
    driver = Driver(opts, out)
    driver.send(contract.encode(contract.RayReady(
        "ready", os.getpid(), ray.__version__, dict(ray.cluster_resources()),
        len([n for n in ray.nodes() if n.get("Alive")]), contract.RAY_PROTOCOL)))
    pool = ThreadPoolExecutor(max_workers=256)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = contract.encode(contract.parse_request(contract.RayRequest, line, boundary="ray request"))
        except contract.ContractError as exc:
            driver.send({"id": exc.request_id, "ok": False, "error": f"bad request: {exc}"})
            continue
        if req["op"] == "shutdown":
            break
        pool.submit(driver.handle, req)
    pool.shutdown(wait=False, cancel_futures=True)
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
