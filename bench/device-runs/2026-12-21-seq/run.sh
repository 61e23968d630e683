#!/usr/bin/env bash
# Written in the 2026-12-05 07:04 session (no device that session: not run yet). Several prepared scripts' steps
# in ONE call with ONE pack, so that a session's 30 device minutes are not spent on a cold start, a pack and a
# 35B-A3B synth per script: each item runs `bench/device-runs/*-NAME/run.sh` (from the carried tree) with
# PACK=this pack, STEPS=the item's steps, OUT=$OUT/NAME (its own summary.txt and logs.tgz), under what is left of
# SEQ_LIMIT; the synthetic files in /tmp are made by the first script that needs them and reused by the rest.
#   cmake --build build -j2 && EXTRA_BINS="libclover_kernel_trace.so bench_backend bench_ops" scripts/device-packs.sh build seq
#   run(command="ITEMS='q8rows24:t attnfew24:t route24:t gdnhead25:t persist24:t' bash .gpu-seq/run.sh",
#       carry=[".gpu-seq"], timeout_s=600)
#   then, on the warm machine: ITEMS='q8rows24:b attnfew24:b persist24:b' ..., ITEMS='route24:b gdnhead25:k all24:b'
# ITEMS: NAME:STEPS, steps comma-separated (NAME:t,b); default the five forms' test steps.
# Predictions: each script's own (in its header).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
ITEMS=${ITEMS:-q8rows24:t attnfew24:t route24:t gdnhead25:t persist24:t}
LIMIT=${SEQ_LIMIT:-585}
T0=$(date +%s)
R=${OUT:-/tmp/out}; mkdir -p "$R"; S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
say "seq: start $(date -u +%T), pack $(cat "$PACK/COMMIT" 2>/dev/null), items: $ITEMS"
for it in $ITEMS; do
  name=${it%%:*} steps=${it#*:}; steps=${steps//,/ }
  left=$(( LIMIT - ($(date +%s) - T0) ))
  if [ "$left" -lt 40 ]; then say "seq: no time for $name ($steps): ${left}s left"; continue; fi
  f=$(ls -d bench/device-runs/*-"$name"/run.sh 2>/dev/null | sort | tail -1)
  if [ -z "$f" ]; then say "seq: no script for $name"; continue; fi
  say "== seq: $name ($f) steps '$steps', ${left}s left"
  mkdir -p "$R/$name"
  OUT=$R/$name STEPS="$steps" PACK=$PACK DR_LIMIT=$left timeout -k 5 "$left" bash "$f" > "$R/$name/stdout.txt" 2>&1
  say "seq: $name rc=$? at +$(( $(date +%s) - T0 ))s"
  sed 's/^/    /' "$R/$name/summary.txt" 2>/dev/null | tee -a "$S" > /dev/null
done
say "seq: end at +$(( $(date +%s) - T0 ))s"
