#!/usr/bin/env bash
# Measurements of --executor ray (figures for docs/ray.md and the closing note of issue 15).
#   tests/ray_bench.sh scaling N [STEPS]   32 (STEPS) command steps each holding a device for 1 s (`sleep 1`) on a
#                                  cluster of a head and N nodes with one `device` resource each
#   tests/ray_bench.sh overhead    20 trivial command steps one after another (-j 1), local vs
#                                  on a 1-node cluster (as a task and on a judge): ms per step
#   tests/ray_bench.sh export [RUNS]  candidate exports one after another (-j 1), 1 then 6 steps
#                                  (workload 12p, tiny scale), locally (this machine's sandbox) vs
#                                  as sandboxed Ray tasks on a 1-node cluster: ms per export and
#                                  the difference, RUNS times (default 3)
# Runs the cluster and jb inside a private network namespace (loopback only; needs root).
# Uses target/debug/jb and cache/pyenv (with `jb setup --with ray`) of this checkout.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
jb=${JB:-$repo/target/debug/jb}
py=$repo/cache/pyenv/bin/python
work=$(mktemp -d)
trap 'echo quit > "$work/ctl" 2>/dev/null || true; sleep 3; kill "$holder" 2>/dev/null || true; rm -rf "$work"' EXIT

start_cluster() { # node specs...
  mkfifo "$work/ctl"
  sleep 100000 > "$work/ctl" &
  holder=$!
  JB_RAY_NODE_DIR=$work/nodes RAY_USAGE_STATS_ENABLED=0 unshare -n sh -c \
    "ip link set lo up && exec $py -u $repo/tests/ray_cluster.py $(printf "'%s' " "$@")" \
    < "$work/ctl" > "$work/cluster.out" 2> "$work/cluster.err" &
  cluster_pid=$!
  for _ in $(seq 600); do [ -s "$work/cluster.out" ] && break; sleep 0.5; done
  address=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['address'])" "$work/cluster.out")
}

in_ns() { nsenter --net=/proc/$cluster_pid/ns/net -- "$@"; }

project() { # n_steps run resources
  local dir=$work/proj
  rm -rf "$dir"; mkdir -p "$dir/pipelines"
  local vals; vals=$(seq -s, 1 "$1")
  cat > "$dir/pipelines/p.yaml" <<EOF
steps:
  s:
    kind: command
    foreach: [{values: {i: [$vals]}}]
    resources: $3
    outputs: ["out/s{i}.txt"]
    run: "$2; echo {i} > out/s{i}.txt"
EOF
  echo "$dir"
}

wall() { # dir args... -> build wall seconds from --json
  local dir=$1; shift
  (cd "$dir" && "$@" --json > "$work/b.json" 2> "$work/b.err") || { cat "$work/b.err" >&2; exit 1; }
  $py -c "import json,sys; v=json.load(open(sys.argv[1])); assert v['ran']==len(v['steps']), v; print(round(v['wall_ms']/1e3, 2))" "$work/b.json"
}

case "${1:-}" in
  scaling)
    n=${2:-4}; steps=${3:-32}
    specs=('head:{"CPU": 1}')
    for i in $(seq "$n"); do specs+=("n$i:{\"CPU\": 1, \"device\": 1}"); done
    start_cluster "${specs[@]}"
    dir=$(project "$steps" "sleep 1" "{device: 1}")
    export JB_RAY_TRACE=$work/trace
    t=$(wall "$dir" in_ns "$jb" --pyenv "$repo/cache/pyenv" --cache-dir "$work/c" --executor ray --ray-address "$address" build)
    # Steady state: from the first judge ready to the last answer (the driver's timeline).
    s=$($py -c "
import sys
ev = [l.split(' ', 1) for l in open(sys.argv[1]).read().splitlines()]
first = min(float(t) for t, e in ev if e.startswith('judge ready'))
last = max(float(t) for t, e in ev if e.startswith('answer'))
conn = min(float(t) for t, e in ev if e == 'connected')
print(f'{last - first:.2f} s (driver connected after {conn:.2f} s, first judge ready after {first:.2f} s)')" "$work/trace")
    echo "scaling: $n node(s) with one device each, $steps steps x sleep 1: wall ${t} s; steady state $s"
    ;;
  overhead)
    # Per-step cost = (wall of 21 steps - wall of 1 step) / 20, one step at a time (-j 1):
    # connecting to the cluster and starting a judge are paid once and cancel out.
    start_cluster 'head:{"CPU": 1}' 'n1:{"CPU": 1, "device": 1}'
    for mode in local task judge; do
      res="{}"; [ $mode = judge ] && res="{device: 1}"
      for n in 1 21; do
        dir=$(project $n "true" "$res")
        if [ $mode = local ]; then
          t[$n]=$(wall "$dir" "$jb" --pyenv "$repo/cache/pyenv" --cache-dir "$work/c-$mode-$n" build -j 1)
        else
          t[$n]=$(wall "$dir" in_ns "$jb" --pyenv "$repo/cache/pyenv" --cache-dir "$work/c-$mode-$n" --executor ray --ray-address "$address" build -j 1)
        fi
      done
      $py -c "import sys; a,b=map(float,sys.argv[1:3]); print(f'overhead: {sys.argv[3]}: 1 step {a:.2f} s, 21 steps {b:.2f} s -> {(b-a)/20*1e3:.0f} ms per step')" "${t[1]}" "${t[21]}" $mode
    done
    ;;
  export)
    runs=${2:-3}
    start_cluster 'head:{"CPU": 0}' 'n1:{"CPU": 1, "device": 1}'
    export JB_PYTHON_DIR=$repo/python
    export_project() { # n_candidates tag
      local dir=$work/exp-$2-$1
      rm -rf "$dir"; mkdir -p "$dir/pipelines" "$dir/candidates" "$dir/workloads"
      cp -r "$repo/workloads/12p_RMSNorm" "$dir/workloads/"
      for i in $(seq "$1"); do
        { cat "$repo/candidates/12p_RMSNorm/rmsnorm_pallas.py"; echo "# bench $2 $i"; } > "$dir/candidates/c$i.py"
      done
      printf '%s\n' 'steps:' '  export:' '    kind: export' '    foreach: [{match: "candidates/{candidate}.py"}]' \
        '    params:' '      workload: "workloads/12p_RMSNorm"' '      impl: {kind: candidate, path: "candidates/{candidate}.py"}' \
        > "$dir/pipelines/x.yaml"
      echo "$dir"
    }
    common=(--scale tiny --backend cpu --pyenv "$repo/cache/pyenv")
    declare -A per
    for r in $(seq "$runs"); do
      for mode in local ray; do
        for n in 1 6; do
          dir=$(export_project $n "$mode$r")
          if [ $mode = local ]; then
            t[$n]=$(wall "$dir" "$jb" "${common[@]}" --cache-dir "$work/e-$mode-$r-$n" build -j 1)
          else
            t[$n]=$(wall "$dir" in_ns "$jb" "${common[@]}" --cache-dir "$work/e-$mode-$r-$n" --executor ray --ray-address "$address" build -j 1)
          fi
        done
        per[$mode]=$($py -c "import sys; a,b=map(float,sys.argv[1:3]); print(f'{(b-a)/5*1e3:.0f}')" "${t[1]}" "${t[6]}")
      done
      echo "export run $r: local ${per[local]} ms per export, ray ${per[ray]} ms per export -> overhead $((per[ray] - per[local])) ms"
    done
    ;;
  *) echo "usage: $0 scaling N | overhead | export [RUNS]" >&2; exit 2 ;;
esac
