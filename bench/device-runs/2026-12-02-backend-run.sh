#!/usr/bin/env bash
# Issue 25's device run (not yet run: written on the dev VM, which has no GPU).
# Builds and packs nothing: PACK is a folder made by scripts/gpu-pack.sh (bin/ +
# lib/, or those two inside PACK/pack.tgz when the binaries were stripped and
# tarred to fit the carry limit). Run from the source root (the fixtures live
# there); outputs go to $OUT (default /tmp/backend-run), summary.txt first.
#
#   bash bench/device-runs/2026-12-02-backend-run.sh PACK [STEPS]
#
# STEPS (default "tests serve batch"; each fits one 10-minute device call):
#   tests  every test_cuda_* of the pack (test_cuda_batch: a sequence alone ==
#          the same inside batches of 1..16 mixed AR / diffusion / lossless).
#   serve  `clover serve --device cuda` on the 35B-A3B synthetic files (made
#          here by clover synth into /tmp, kept for the next call while the
#          machine stays warm): 16 chat requests (128 tokens, greedy, ignore
#          EOS) one at a time, then the same 16 at once; aggregate tokens/s of
#          each, the ratio, and whether every answer is identical. The bar
#          (issue 25): concurrent >= 8x sequential for the --no-diffusion file
#          (AR), >= 4x for block diffusion, answers identical.
#          SERVE_N / SERVE_TOKENS override the 16 requests and 128 tokens;
#          SERVE_KINDS "ar" or "clover" serves one file only (default both).
#   batch  bench_batch --device cuda at 1, 2, 4, 8, 16, 32 requests (prompt 64,
#          gen 128), both modes, on the Clover 35B-A3B file.
set -uo pipefail
PACK=${1:?usage: $0 PACK [STEPS]}
STEPS=${2:-tests serve batch}
O=${OUT:-/tmp/backend-run}; mkdir -p "$O"
P=$PACK
if [ -f "$PACK/pack.tgz" ]; then
  P=/tmp/clover-pack; mkdir -p "$P"; tar xzf "$PACK/pack.tgz" -C "$P" || exit 2
fi
export LD_LIBRARY_PATH=$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CLOVER_SOURCE_DIR=${CLOVER_SOURCE_DIR:-$PWD}
S=$O/summary.txt
say() { echo "$*" | tee -a "$S"; }
say "start $(date -u +%T) steps: $STEPS"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tee -a "$S"

AR=/tmp/synth35-ar.gguf CL=/tmp/synth35-clover.gguf
synth() { # FILE [--no-diffusion]: once per warm machine
  [ -s "$1" ] && return 0
  timeout 300 "$P/bin/clover" synth --preset qwen3.5-35b-a3b ${2:-} -o "$1.part" > "$O/synth-$(basename "$1").log" 2>&1 &&
    mv "$1.part" "$1"
}

case " $STEPS " in *" tests "*)
  for t in "$P"/bin/test_cuda_*; do
    n=$(basename "$t"); t0=$(date +%s)
    timeout 240 "$t" > "$O/$n.log" 2>&1; rc=$?
    case $rc in 0) v=PASS ;; 77) v=SKIP ;; *) v="FAIL (exit $rc)" ;; esac
    say "$v $n $(( $(date +%s) - t0 ))s"
  done ;;
esac

cat > /tmp/serve_load.py <<'EOF'
# serve_load.py PORT N MAX_TOKENS OUT_JSON: N chat requests one at a time, then
# the same N at once; prints tokens/s of both, the ratio, and whether every
# answer of the concurrent run equals the sequential one.
import json, sys, threading, time, urllib.request
port, n, max_tokens, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=60) as r:
    model = json.load(r)["data"][0]["id"]
def ask(i, res):
    body = {"model": model, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "messages": [{"role": "user", "content": f"Request {i}: write about the sea, the wind and boat {i * 7}."}]}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t = time.time()
    with urllib.request.urlopen(req, timeout=900) as r:
        d = json.load(r)
    res[i] = (d["choices"][0]["message"]["content"], d["usage"]["completion_tokens"], time.time() - t)
seq, con = [None] * n, [None] * n
t = time.time()
for i in range(n): ask(i, seq)
t_seq = time.time() - t
th = [threading.Thread(target=ask, args=(i, con)) for i in range(n)]
t = time.time()
for x in th: x.start()
for x in th: x.join()
t_con = time.time() - t
tok_seq, tok_con = sum(r[1] for r in seq), sum(r[1] for r in con)
same = all(a[0] == b[0] for a, b in zip(seq, con))
r = {"sequential_tok_s": tok_seq / t_seq, "concurrent_tok_s": tok_con / t_con, "ratio": (tok_con / t_con) / (tok_seq / t_seq),
     "tokens": [tok_seq, tok_con], "seconds": [t_seq, t_con], "identical": same,
     "differing": [i for i in range(n) if seq[i][0] != con[i][0]]}
json.dump(r, open(out, "w"), indent=1)
print(f"sequential {r['sequential_tok_s']:.1f} tok/s, {n} concurrent {r['concurrent_tok_s']:.1f} tok/s, "
      f"ratio {r['ratio']:.2f}x, answers identical: {same}")
EOF

case " $STEPS " in *" serve "*)
  kinds=${SERVE_KINDS:-ar clover}
  case " $kinds " in *" ar "*) synth "$AR" --no-diffusion & ;; esac
  case " $kinds " in *" clover "*) synth "$CL" ;; esac
  wait
  for kind in $kinds; do
    M=$AR; bar=8; [ $kind = clover ] && M=$CL bar=4
    [ -s "$M" ] || { say "serve $kind: no model (synth failed: $O/synth-*.log)"; continue; }
    log=$O/serve-$kind.log
    "$P/bin/clover" serve -m "$M" --device cuda --port 0 --max-batch 16 --sessions 1 --ctx 1024 > "$log" 2>&1 &
    pid=$!
    port=""
    for _ in $(seq 1 600); do
      port=$(grep -o 'listening on http://[^:]*:[0-9]*' "$log" | grep -o '[0-9]*$')
      [ -n "$port" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.5
    done
    if [ -z "$port" ]; then say "serve $kind: did not start: $(tail -2 "$log")"; kill $pid 2>/dev/null; continue; fi
    grep 'on the .* backend' "$log" | tee -a "$S"
    r=$(timeout 500 python3 /tmp/serve_load.py "$port" "${SERVE_N:-16}" "${SERVE_TOKENS:-128}" "$O/serve-$kind.json" 2>&1)
    say "serve $kind (bar ${bar}x): $r"
    # the device memory while the server holds its sessions and the stacked executor (~2 GB at 512 rows)
    timeout 10 nvidia-smi --query-gpu=memory.used --format=csv,noheader 2>&1 | sed "s/^/serve $kind: GPU memory used /" | tee -a "$S"
    curl -s "http://127.0.0.1:$port/metrics" 2>/dev/null | grep '^clover_device' | tee -a "$S"
    kill -TERM $pid; wait $pid 2>/dev/null
  done ;;
esac

case " $STEPS " in *" batch "*)
  synth "$CL"
  timeout 500 "$P/bin/bench_batch" "$CL" --device cuda --n 1,2,4,8,16,32 --prompt 64 --gen 128 > "$O/bench_batch.log" 2>&1
  say "bench_batch rc=$?"; cat "$O/bench_batch.log" >> "$S" ;;
esac
say "end $(date -u +%T)"
