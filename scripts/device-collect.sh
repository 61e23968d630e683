#!/usr/bin/env bash
# device-collect.sh FROM [SEQ] : a seq call's outputs into the run records.
#
# FROM is the folder a device call wrote under $OUT (the run tool's files_at/.../seqN, read-only): its
# summary.txt (the seq runner's) and one folder per item, FROM/NAME. Each item folder is copied to
# bench/device-runs/*-NAME/out-SEQ/NAME (the newest run folder of that name), FROM/summary.txt beside it as
# out-SEQ/seq-summary.txt; stdout.txt is left out (its lines are in the summaries) and the copies made writable.
# SEQ defaults to FROM's base name. An existing out-SEQ/NAME is never overwritten (a second call of the same seq
# number is a mistake to see, not to paper over). Prints what it wrote, for `git add`.
set -euo pipefail
cd "$(dirname "$0")/.."
from=${1:?usage: device-collect.sh FROM [SEQ]}
seq=${2:-$(basename "$from")}
[ -d "$from" ] || { echo "device-collect: no folder $from" >&2; exit 2; }
n=0
for d in "$from"/*/; do
  name=$(basename "$d")
  run=$(ls -d bench/device-runs/*-"$name" 2>/dev/null | sort | tail -1 || true)
  if [ -z "$run" ]; then echo "device-collect: no bench/device-runs/*-$name for $d (skipped)" >&2; continue; fi
  dst=$run/out-$seq/$name
  if [ -e "$dst" ]; then echo "device-collect: $dst exists (skipped)" >&2; continue; fi
  mkdir -p "$dst"
  cp -R "$d". "$dst"/
  rm -f "$dst/stdout.txt"
  chmod -R u+w "$dst"
  [ -f "$from/summary.txt" ] && [ ! -e "$run/out-$seq/seq-summary.txt" ] &&
    cp "$from/summary.txt" "$run/out-$seq/seq-summary.txt" && chmod u+w "$run/out-$seq/seq-summary.txt"
  echo "$run/out-$seq"
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "device-collect: nothing copied from $from" >&2; exit 1; }
