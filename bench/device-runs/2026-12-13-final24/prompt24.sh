#!/usr/bin/env bash
# 2026-12-04 session, call 6 (issue 24's prompt bar): is the shared expert's side stream (last session, decode's
# -0.23 ms) what took prompt 512 from 5,173 (2026-12-06) to ~5,003 tok/s? bench_cuda_backend --prompt-only 1 with
# the side stream on / off (the only switch of the changes since then that acts on 512-row chunks), each twice
# alternating, then llama-bench pp512 -r 5 in the same call.
#   run(command="bash .gpu-final24/prompt24.sh", carry=[".gpu-final24"]) with the pack of run.sh
# Prediction: side off ~+1-3% on prompt 512 if the side stream contends with the 512-row chunk products; else equal.
set -uo pipefail
PACK=${PACK:-.gpu-final24}
. "$PACK/lib.sh"
dr_init prompt24
dr_synth35 --no-diffusion
wait $SPID
for c in on off on off; do
  env $([ $c = off ] && echo CLOVER_CUDA_SHEXP_SIDE=0) timeout 60 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/p_$c.log" 2>&1
  say "side $c rc=$? at +$(el)s: $(grep -E 'prompt of 512' "$O/p_$c.log" | sed -E 's/ +/ /g')"
done
[ -s "$PACK/llama.txz" ] && tar xJf "$PACK/llama.txz" -C "$D"
LD_LIBRARY_PATH=$D/llama:/usr/local/cuda/lib64:$D/lib timeout 90 "$D/llama/llama-bench" -m $F -ngl 99 -fa 1 -p 512 -n 0 -r 5 -o csv > $O/llama-pp.csv 2> $O/llama-pp.err
say "llama-bench pp512 rc=$?: $(python3 -c "import csv,sys;r=list(csv.DictReader(open(sys.argv[1])));print(r[0]['avg_ts'], '+-', r[0]['stddev_ts'])" $O/llama-pp.csv 2>/dev/null)"
dr_end
