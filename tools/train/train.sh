#!/bin/sh
# One command for issue 16's model, fixed seed, resumable.
#
#   tools/train/train.sh prepare OUT     dev box: corpus from Debian packages + tokenizer
#                                        into OUT (< 64 MiB: carriable to the device)
#   tools/train/train.sh train OUT [ARGS] device: train (resumes from OUT/ckpt; each call
#                                        stops itself after --stop-after-min, default 9)
#   tools/train/train.sh export OUT GGUF  the final checkpoint -> HF form (OUT/hf) -> clover convert
#   tools/train/train.sh smoke OUT       the CPU proof: tiny geometry, a few steps, end to end
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-python3}
cmd=${1:?usage: train.sh prepare|train|export|smoke OUT ...}
out=${2:?usage: train.sh $cmd OUT ...}
shift 2
case "$cmd" in
prepare)
    "$PY" "$HERE/corpus.py" --out "$out/corpus"
    "$PY" "$HERE/tokenizer.py" --corpus "$out/corpus" --out "$out/tok"
    du -sh "$out" ;;
train)
    "$PY" "$HERE/train.py" --corpus "$out/corpus" --tok "$out/tok" --ckpt "$out/ckpt" \
        --geometry small --bf16 "$@" ;;
export)
    gguf=${1:?usage: train.sh export OUT GGUF [--type T]}
    shift
    "$PY" "$HERE/export_ckpt.py" --tok "$out/tok" --ckpt "$out/ckpt" --out "$out/hf" --geometry small
    "$ROOT/build/clover" convert "$out/hf" -o "$gguf" "$@" ;;
smoke)
    "$PY" "$HERE/corpus.py" --out "$out/corpus" --limit 300
    "$PY" "$HERE/tokenizer.py" --corpus "$out/corpus" --out "$out/tok" --vocab 1024
    OMP_NUM_THREADS=1 "$PY" "$HERE/train.py" --corpus "$out/corpus" --tok "$out/tok" \
        --ckpt "$out/ckpt" --geometry tiny --steps 8 --causal-steps 4 --ramp 2 --batch 2 \
        --seq 128 --block 16 --log-every 2 --eval-prompts 1 --eval-tokens 16 --lr 3e-3 --warmup 2
    "$PY" "$HERE/export_ckpt.py" --tok "$out/tok" --ckpt "$out/ckpt" --out "$out/hf" \
        --geometry tiny --block 16
    "$ROOT/build/clover" convert "$out/hf" -o "$out/smoke.gguf" --type f32
    "$ROOT/build/clover" run -m "$out/smoke.gguf" --no-think --max-tokens 32 --no-visual \
        -p 'What does "river" mean?' ;;
*) echo "train.sh: unknown command '$cmd' (prepare, train, export, smoke)" >&2; exit 2 ;;
esac
