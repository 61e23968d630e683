#!/bin/bash
# Issue 26, on the dev box after each `gpu_run.sh train` call: take what came
# back from the device ($OUT, copied by the `run` tool under its files_at
# folder) into the checkout, so that the next call resumes from it.
#
#   bash tools/train/take_back.sh FILES_AT [NAME]
#
#   FILES_AT/ckpt/*     -> .gpu-train/ckpt/             (ignored, carried: ~28 MB of 8-bit shards)
#   FILES_AT/train.log  -> tools/train/runs/NAME.log    (every run's log, committed)
#
# One checkpoint location only: the working tree travels with every call, and
# two copies would count twice against the call's 64 MiB. Once a session (not
# after every call: each saved checkpoint adds ~28 MB to the history), keep it
# in git with `tools/train/ckpt_git.sh save`, so training resumes on any machine
# (`ckpt_git.sh restore` brings it back).
set -eu
cd "$(dirname "$0")/../.."
src=${1:?usage: take_back.sh FILES_AT [NAME]}
name=${2:-h200-$(date -u +%Y%m%d-%H%M)}
[ -f "$src/ckpt/state.json" ] || { echo "take_back: $src/ckpt/state.json missing: nothing to resume from" >&2; exit 1; }
CK=.gpu-train/ckpt
rm -rf $CK.new
mkdir -p $CK.new
cp "$src"/ckpt/state.json "$src"/ckpt/weights-*.safetensors $CK.new/
rm -rf $CK
mv $CK.new $CK
mkdir -p tools/train/runs
[ -f "$src/train.log" ] && cp "$src/train.log" "tools/train/runs/$name.log"
# the call's self-distillation rows, read by the next call instead of decoding again
# (delete .gpu-train/sd-rows.pt to decode fresh ones from the newer weights)
[ -f "$src/sd-rows.pt" ] && cp "$src/sd-rows.pt" .gpu-train/sd-rows.pt
step=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["step"])' $CK/state.json)
echo "take_back: $CK at step $step; log in tools/train/runs/$name.log"
du -sh $CK
