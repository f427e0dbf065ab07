"""A local Ray cluster for tests/ray.rs: a head and worker nodes with distinct custom resources.

Run inside a private network namespace (``unshare -n``, loopback up) so that nothing leaves the
machine. Prints one JSON line ``{"address": ..., "nodes": {name: node_id}}`` when the cluster is
up, then obeys lines on stdin: ``kill NODE_ID`` (remove that node, as if its machine died; prints
``killed NAME``), ``quit``.

Usage: python tests/ray_cluster.py NAME:RESOURCES_JSON ...   (the first one is the head)
"""

import json
import sys

from ray.cluster_utils import Cluster


def main() -> int:
    specs = []
    for arg in sys.argv[1:]:
        name, _, res = arg.partition(":")
        res = json.loads(res or "{}")
        cpus = res.pop("CPU", 1)
        specs.append((name, cpus, res))
    head_name, head_cpus, head_res = specs[0]
    common = {"object_store_memory": 80 * 1024 * 1024, "include_dashboard": False}
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": head_cpus, "resources": head_res, **common})
    nodes = {head_name: cluster.head_node}
    for name, cpus, res in specs[1:]:
        nodes[name] = cluster.add_node(num_cpus=cpus, resources=res, object_store_memory=common["object_store_memory"])
    cluster.wait_for_nodes()
    print(json.dumps({"address": cluster.address, "nodes": {n: x.node_id for n, x in nodes.items()}}), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "kill":
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
