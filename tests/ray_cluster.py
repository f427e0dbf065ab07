"""A local Ray cluster for tests/ray.rs: a head and worker nodes with distinct custom resources.

Run inside a private network namespace (``unshare -n``, loopback up) so that nothing leaves the
machine. Prints one JSON line ``{"address": ..., "nodes": {name: node_id}}`` when the cluster is
up, then obeys lines on stdin: ``kill NODE_ID`` (remove that node, as if its machine died; prints
``killed NAME``), ``add SPEC`` (one more worker node; prints ``added NAME NODE_ID``), ``quit``.

Usage: python tests/ray_cluster.py SPEC ...   (the first one is the head)
SPEC: NAME:RESOURCES_JSON, optionally followed by |ENV_JSON: environment variables of that node's
processes only (e.g. its own JB_RAY_NODE_DIR, or JB_BWRAP for a node without a working sandbox).
"""

import contextlib
import json
import os
import sys

from ray.cluster_utils import Cluster

OBJECT_STORE = 80 * 1024 * 1024


def parse(arg: str):
    spec, _, env = arg.partition("|")
    name, _, res = spec.partition(":")
    res = json.loads(res or "{}")
    cpus = res.pop("CPU", 1)
    return name, cpus, res, json.loads(env or "{}")


@contextlib.contextmanager
def environment(env: dict):
    """The node's processes (raylet, then its workers) inherit this process's environment."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main() -> int:
    specs = [parse(a) for a in sys.argv[1:]]
    head_name, head_cpus, head_res, head_env = specs[0]
    common = {"object_store_memory": OBJECT_STORE, "include_dashboard": False}
    with environment(head_env):
        cluster = Cluster(initialize_head=True,
                          head_node_args={"num_cpus": head_cpus, "resources": head_res, **common})
    nodes = {head_name: cluster.head_node}
    for name, cpus, res, env in specs[1:]:
        with environment(env):
            nodes[name] = cluster.add_node(num_cpus=cpus, resources=res, object_store_memory=OBJECT_STORE)
    cluster.wait_for_nodes()
    print(json.dumps({"address": cluster.address, "nodes": {n: x.node_id for n, x in nodes.items()}}), flush=True)
    for line in sys.stdin:
        cmd = line.split(maxsplit=1)
        if not cmd:
            continue
        if cmd[0] == "add":
            name, cpus, res, env = parse(cmd[1].strip())
            with environment(env):
                nodes[name] = cluster.add_node(num_cpus=cpus, resources=res, object_store_memory=OBJECT_STORE)
            cluster.wait_for_nodes()
            print(f"added {name} {nodes[name].node_id}", flush=True)
        elif cmd[0] == "kill":
            cmd = line.split()
            for name, node in list(nodes.items()):
                if node.node_id == cmd[1] and node is not cluster.head_node:
                    cluster.remove_node(node, allow_graceful=False)
                    del nodes[name]
                    print(f"killed {name}", flush=True)
                    break
            else:
                print(f"no such worker node {cmd[1]}", flush=True)
        elif cmd[0] == "quit":
            break
    cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
