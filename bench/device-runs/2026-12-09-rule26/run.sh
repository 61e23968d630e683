#!/usr/bin/env bash
# rule26, 2026-12-09: the causal-fallback decoding rule (src/engine/generate_causal.c, --rule causal) on CUDA.
# The rule lives in the engine and uses only the backend contract (preview, commit with a causal pick,
# checkpoint save/restore), so CUDA runs it unchanged; this run checks that on the H200. No CUDA code changed.
#   EXTRA_BINS="test_causal_rule" scripts/device-packs.sh build rule26      (a CUDA build of the branch)
#   run(command="bash .gpu-rule26/run.sh", carry=[".gpu-rule26"], timeout_s=300)          <= 4 minutes
# Steps:
#  t  test_causal_rule: its sessions are created with device auto, so on the H200 both the engine and the
#     oracle run on CUDA (the oracle's fresh sessions: one per pass and per fallback; CI runs it on the CPU).
#  c  the demo model (models/clover-demo-q8_0.gguf), the first 8 held-out prompts, greedy, thinking off,
#     96 tokens, --rule causal at 0.95 and 0.9: --device cuda against --device cpu, ids compared, and the
#     passes / causal steps; then tokens per second, threshold rule vs causal rule, on CUDA.
# Predictions (before any run):
#  - t: 7 passed, 0 failed (coverage line as on the CPU: ~15 fallbacks at row 0, ~175 at later rows). Risk:
#    the tiny model's CUDA confidences differ from the CPU's in the last bits, which changes nothing here
#    since engine and oracle both run on CUDA.
#  - c: 16 of 16 answers identical to the CPU's, or a first difference only where a confidence sits within
#    ~1e-3 of the threshold or a top-2 near-tie (8-bit activations; the CPU and CUDA products differ in the
#    last bits). Passes + causal steps per answer as on the CPU (2.29 tokens a pass, 1.52 counting the steps,
#    at 0.95 on the dev VM with f32; q8_0 within a few %).
#  - speed (CUDA, one request): the causal rule ~0.7-0.9x the threshold rule's tok/s at 0.95: a fallback at
#    row f > 0 costs a checkpoint save (once a block), a commit of f rows and a restore; at row 0 nothing.
set -uo pipefail
PACK=${PACK:-.gpu-rule26}
R=${OUT:-/tmp/out}; mkdir -p "$R"
D=/tmp/rule26; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
tar xJf "$PACK/pack.txz" -C "$D" || { echo "unpack failed" | tee "$R/summary.txt"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
say "start $(date -u +%T) pack $(cat "$PACK/COMMIT" 2>/dev/null); $(nproc) CPUs"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader 2>&1 | tee -a "$S"
C=$D/bin/clover
say "== t: test_causal_rule (device auto: CUDA) [predicted: 7 passed, 0 failed]"
timeout 120 "$D/bin/test_causal_rule" > "$R/test_causal_rule.log" 2>&1; say "rc $?"
tail -10 "$R/test_causal_rule.log" | tee -a "$S"
M=models/clover-demo-q8_0.gguf
say "== c: --rule causal, CUDA vs CPU, 8 prompts x 2 thresholds [predicted: 16 of 16 identical]"
same=0; n=0
mapfile -t PROMPTS < <(grep -v '^#' tools/train/heldout.txt | grep . | head -8)
for t in 0.95 0.9; do
  for p in "${PROMPTS[@]}"; do
    a=$(timeout 60 "$C" run -m "$M" -p "$p" --no-think -n 96 --json --no-visual --rule causal --threshold $t --device cuda 2>>"$R/c.err")
    b=$(timeout 60 "$C" run -m "$M" -p "$p" --no-think -n 96 --json --no-visual --rule causal --threshold $t --device cpu 2>>"$R/c.err")
    line=$(python3 - "$a" "$b" <<'PY'
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:3])
d = next((i for i, (x, y) in enumerate(zip(a["ids"], b["ids"])) if x != y), None)
same = a["ids"] == b["ids"]
print(("same" if same else f"DIFF at {d if d is not None else min(len(a['ids']), len(b['ids']))}"),
      len(a["ids"]), a["stats"]["passes"], a["stats"].get("causal_steps", 0), "| cpu", len(b["ids"]),
      b["stats"]["passes"], b["stats"].get("causal_steps", 0), "| cuda tok/s %.0f" % a["stats"]["gen_tok_s"])
PY
)
    n=$((n + 1)); [[ $line == same* ]] && same=$((same + 1))
    say "$t ${p:0:40}: $line"
  done
done
say "c: $same of $n identical"
say "== speed on CUDA: 'Tell me a short story about a dog.' 96 tokens [predicted: causal 0.7-0.9x threshold]"
for r in threshold causal; do
  timeout 60 "$C" run -m "$M" -p "Tell me a short story about a dog." --no-think -n 96 --no-visual --rule $r \
    --threshold 0.95 --device cuda 2>&1 | tail -1 | tee -a "$S"
done
say "end $(date -u +%T), $(( $(date +%s) - T0 )) s"
