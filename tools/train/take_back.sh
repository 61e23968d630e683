#!/bin/bash
# Issue 26, on the dev box after each `gpu_run.sh train` call: take what came
# back from the device ($OUT, copied by the `run` tool under its files_at
# folder) into the checkout, so that the next call resumes from it.
#
#   bash tools/train/take_back.sh FILES_AT [NAME]
#
#   FILES_AT/ckpt/*     -> tools/train/checkpoint/      (tracked: ~29 MB of 8-bit shards)
#   FILES_AT/train.log  -> tools/train/runs/NAME.log    (every run's log, committed)
#
# One checkpoint location only: the working tree travels with every call
# (tracked files as they are on disk, committed or not), and two copies would
# count twice against the call's 64 MiB. Commit tools/train/checkpoint once a
# session (not after every call: each commit of the shards adds ~29 MB to the
# history), so that training resumes on any machine.
set -eu
cd "$(dirname "$0")/../.."
src=${1:?usage: take_back.sh FILES_AT [NAME]}
name=${2:-h200-$(date -u +%Y%m%d-%H%M)}
[ -f "$src/ckpt/state.json" ] || { echo "take_back: $src/ckpt/state.json missing: nothing to resume from" >&2; exit 1; }
rm -rf tools/train/checkpoint.new
mkdir -p tools/train/checkpoint.new
cp "$src"/ckpt/state.json "$src"/ckpt/weights-*.safetensors tools/train/checkpoint.new/
rm -rf tools/train/checkpoint
mv tools/train/checkpoint.new tools/train/checkpoint
mkdir -p tools/train/runs
[ -f "$src/train.log" ] && cp "$src/train.log" "tools/train/runs/$name.log"
step=$(python3 -c 'import json;print(json.load(open("tools/train/checkpoint/state.json"))["step"])')
echo "take_back: tools/train/checkpoint at step $step; log in tools/train/runs/$name.log"
du -sh tools/train/checkpoint
