#!/usr/bin/env bash
# usage: benches/scripts/eval_walltime.sh <checkout> <label>
# `jb eval` wall time in a checkout (its target/release/jb and cache/pyenv): 12p tiny and 8p cpu, each
# on a fresh cache, then with the candidate edited (its steps rerun, baselines cached), then cached.
set -u
tree=$1; label=$2
jb=$tree/target/release/jb
cd $tree
for spec in "12p_RMSNorm tiny candidates/12p_RMSNorm/rmsnorm_pallas.py" "8p_GEMM cpu candidates/8p_GEMM/gemm_pallas.py"; do
  set -- $spec
  wl=$1; scale=$2; k=$3
  rm -rf /tmp/wt-cache-$label; mkdir -p /tmp/wt-cache-$label
  export JB_PYENV=$tree/cache/pyenv
  cp $k /tmp/cand-$label.py
  s=$(date +%s.%N); JB_CACHE_DIR=/tmp/wt-cache-$label $jb eval -w $wl -k /tmp/cand-$label.py --scale $scale > /tmp/wt-$label-$wl-cold.log 2>&1; rc=$?; e=$(date +%s.%N)
  echo "$label $wl $scale cold rc=$rc $(echo "$e - $s" | bc) s"
  echo "# touched" >> /tmp/cand-$label.py
  s=$(date +%s.%N); JB_CACHE_DIR=/tmp/wt-cache-$label $jb eval -w $wl -k /tmp/cand-$label.py --scale $scale > /tmp/wt-$label-$wl-warm.log 2>&1; rc=$?; e=$(date +%s.%N)
  echo "$label $wl $scale warm(candidate changed, baselines cached) rc=$rc $(echo "$e - $s" | bc) s"
  s=$(date +%s.%N); JB_CACHE_DIR=/tmp/wt-cache-$label $jb eval -w $wl -k /tmp/cand-$label.py --scale $scale > /tmp/wt-$label-$wl-cached.log 2>&1; rc=$?; e=$(date +%s.%N)
  echo "$label $wl $scale fully cached rc=$rc $(echo "$e - $s" | bc) s"
done
