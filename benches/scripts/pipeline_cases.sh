#!/usr/bin/env bash
# Malicious pipelines, before (0a0f33d) and after (main): exit code, what was written, peak memory.
set -u
# usage: benches/scripts/pipeline_cases.sh <old jb> <new jb>: malicious pipelines, exit code, what was written, peak memory
BEFORE=$(realpath $1); AFTER=$(realpath $2)
printf "| case | binary | exit | s | peak MiB | written / first line of stderr |\n|---|---|---|---|---|---|\n"
mk() { # $1 dir
  rm -rf $1; mkdir -p $1/pipelines $1/src $1/out
}
for label in before after; do
  if [ $label = before ]; then jb=$BEFORE; else jb=$AFTER; fi
  run() { # name, dir
    rm -f /tmp/pwned-outside; cd $2; /usr/bin/time -f "%e %M" -o /tmp/pt $jb build all > /tmp/p.out 2>&1; rc=$?; read e m < <(tail -1 /tmp/pt)
    w=""; [ -e $2/PWNED ] && w="PWNED created;"; [ -e /tmp/pwned-outside ] && w="$w /tmp/pwned-outside created;"
    msg=$(grep -m1 -i "error" /tmp/p.out | cut -c1-110)
    echo "| $1 | $label | $rc | $e | $((m/1024)) | ${w:-nothing written} ${msg:+— $msg} |"
  }
  D=/tmp/pc-inject; mk $D
  touch "$D/src/a;touch PWNED;.txt" "$D/src/\$(touch PWNED).txt"
  printf 'steps:\n  n:\n    kind: command\n    foreach: [{match: "src/{name}.txt"}]\n    inputs: ["src/{name}.txt"]\n    run: "wc -c src/{name}.txt"\n' > $D/pipelines/p.yaml
  run "file names with ; and \$( ) in run:" $D
  D=/tmp/pc-dotdot; mk $D
  printf 'steps:\n  n:\n    kind: command\n    inputs: ["../../etc/hostname"]\n    outputs: ["../../tmp/pwned-outside"]\n    run: "cp ../../etc/hostname ../../tmp/pwned-outside"\n' > $D/pipelines/p.yaml
  run "../ input and output paths" $D
  D=/tmp/pc-newline; mk $D
  touch "$D/src/bad
name.txt" "$D/src/ok.txt"
  printf 'steps:\n  n:\n    kind: command\n    foreach: [{match: "src/{name}.txt"}]\n    inputs: ["src/{name}.txt"]\n    run: "true"\n' > $D/pipelines/p.yaml
  run "file name with a newline" $D
  D=/tmp/pc-deep; mk $D
  python3 -c "print('steps: ' + '['*100000 + ']'*100000)" > $D/pipelines/p.yaml
  run "100k-deep YAML" $D
done
