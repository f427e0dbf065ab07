#!/usr/bin/env bash
# Malicious archives, before (0a0f33d) and after (main): exit code, what was written, peak memory.
set -u
# usage: benches/scripts/archive_cases.sh <old jb> (run from the checkout): malicious archives made by
# tests/archive_attacks.rs write_measurement_cases, verified and imported by the old and this jb
BEFORE=$(realpath $1); ROOT=$(pwd)
C=/tmp/arch-cases; rm -rf $C
cd $ROOT && JB_CASES_DIR=$C JB_BEFORE_BIN=$BEFORE cargo test --release --test archive_attacks write_measurement_cases -- --ignored > /tmp/arch-cases.log 2>&1 || { echo "case writer failed"; tail -20 /tmp/arch-cases.log; exit 1; }
printf "| case | binary | verify exit | verify peak MiB | import exit | import peak MiB | import s | written |\n|---|---|---|---|---|---|---|---|\n"
for case in $C/*.tar.zst; do
  name=$(basename $case .tar.zst)
  for label in before after; do
    if [ $label = before ]; then jb=$BEFORE; else jb=$ROOT/target/release/jb; fi
    W=/tmp/arch-work; rm -rf $W; cp -a $C/project $W; rm -f $C/pwned.db $W/../escape.txt /tmp/escape.txt
    cd $W
    /usr/bin/time -f "%e %M" -o /tmp/t.v $jb archive verify $case > /tmp/v.out 2>&1; vrc=$?; read ve vm < <(tail -1 /tmp/t.v)
    before_sum=$(sqlite3 cache/jb.sqlite "select group_concat(status) from actions" 2>/dev/null | md5sum | cut -c1-8)
    /usr/bin/time -f "%e %M" -o /tmp/t.i $jb archive import $case > /tmp/i.out 2>&1; irc=$?; read ie im < <(tail -1 /tmp/t.i)
    written=""
    [ -e $C/pwned.db ] && written="$written pwned.db created (SQL ran);"
    [ -e /tmp/escape.txt ] && written="$written ../escape.txt written;"
    hacked=$(sqlite3 cache/jb.sqlite "select count(*) from actions where status='hacked'" 2>/dev/null)
    [ "${hacked:-0}" != "0" ] && written="$written $hacked actions set to 'hacked';"
    med=$(sqlite3 cache/jb.sqlite "select json_extract(result,'$.median_ms') from actions where step_id like 'baseline/profile[workload=8p_GEMM%'" 2>/dev/null | head -1)
    [ "$med" = "0.536" ] && written="$written 8p XLA median now 0.536 ms;"
    [ -z "$written" ] && written="nothing"
    echo "| $name | $label | $vrc | $((vm/1024)) | $irc | $((im/1024)) | $ie | $written |"
  done
done
