# lib.sh: what the device run scripts share, sourced by bench/device-runs/*-NAME/run.sh from their pack
# (scripts/device-packs.sh copies it into every .gpu-NAME/). The scripts before 2026-12-12 repeat this preamble
# each; they are kept as they ran.
#   . "$PACK/lib.sh"; dr_init NAME      unpack $PACK/pack.txz into D=/tmp/NAME, logs in O=/tmp/NAMElogs, the
#                                       summary S=$OUT/summary.txt, T0; LD_LIBRARY_PATH and CLOVER_SOURCE_DIR set;
#                                       the start line (pack commit, CPUs, the GPU) said
#   has X                               X is in $STEPS
#   say TEXT / el                       a summary line (also printed) / seconds since T0
#   tst NAME TAG LIMIT [ENV...]         bin/NAME with ENV under a time limit: rc, seconds, its last line said
#   dr_synth35 [--no-diffusion]         the 35B-A3B synthetic file in the background: F (the path), SPID (wait)
#   dr_ar_file                          AR=/tmp/synth35-ar.gguf, the 35B-A3B file without the diffusion record
#                                       (serve's AR runs), made in the foreground unless an earlier script made it
#   dr_mrun LABEL LIMIT CMD...          CMD under LIMIT (cut to what is left of DR_LIMIT, default 585 s) with the
#                                       GPU's memory sampled every 100 ms: rc, seconds and the peak said
#   dr_serve FILE ENVS N TOKENS ROUNDS TAG   `clover serve --device cuda` of FILE with ENVS (assignments, may be
#                                       empty), then 2026-12-14-serve25/serve_load.py's N chat requests one at a time
#                                       and at once, ROUNDS times (the ratio, the answers compared): said
#   dr_ids FILE.json                    "N ids, hash H" of `clover run --json`'s ids (H: the first 12 hex digits of
#                                       the md5 of the list as python prints it, as earlier scripts hashed them),
#                                       or "no ids: WHY", so a failed run never reads as equal to another
#   dr_ids_cmp A.json B.json TAG        "TAG ids: equal (N)" or the first position where they differ
#   dr_preview LABEL [ENV...]           bench_cuda_preview --reps 3 on F with ENV: its coreset / no-coreset preview,
#                                       commit and block-diffusion figures said on one line (the sweeps' form)
#   dr_run_ids TAG [ENV...]             `clover run --device cuda` of F, diffusion and --ar (ids 11..40, 64 tokens)
#                                       with ENV: both ids' hashes said against the references
#   dr_backend                          bench_cuda_backend on F in what is left of DR_LIMIT: its figures said
#   dr_memcheck BIN CASES LIMIT         compute-sanitizer memcheck of $D/bin/BIN's cases CASES (CLOVER_TEST_ONLY):
#                                       its error summary said (nothing where compute-sanitizer is missing)
#   dr_ab_ar VAR "VALS" "NS" [ENV...]   bench_batch --mode ar (prompt 32, gen 96) at each N of NS for each value of
#                                       VAR, alternating, ROUNDS (2) rounds, ENV added: each line said (the AR A/B
#                                       the scripts since 2027-01-20 wrote as their own loops)
#   dr_end                              the end line; the logs as $OUT/logs.tgz
dr_init() {
    DR_NAME=$1
    R=${OUT:-/tmp/out}; mkdir -p "$R"; S=$R/summary.txt
    O=/tmp/${DR_NAME}logs; rm -rf "$O"; mkdir -p "$O"
    D=/tmp/$DR_NAME; rm -rf "$D"; mkdir -p "$D"
    T0=$(date +%s)
    tar xJf "$PACK/pack.txz" -C "$D" || { echo "unpack failed" | tee "$S"; exit 2; }
    export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
    say "start $(date -u +%T) steps: ${STEPS:-} pack $(cat "$PACK/COMMIT" 2>/dev/null); $(nproc) CPUs"
    timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm --format=csv,noheader 2>&1 | tee -a "$S"
}
has() { [[ " ${STEPS:-} " == *" $1 "* ]]; }
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
tst() {
    local n=$1 tag=$2 lim=$3; shift 3
    [ -x "$D/bin/$n" ] || { say "test $n: not in the pack"; return; }
    local s=$(date +%s); env "$@" timeout "$lim" "$D/bin/$n" > "$O/t_${n}_$tag.log" 2>&1; local rc=$?
    say "test $n ($tag${*:+: $*}) rc=$rc $(( $(date +%s) - s ))s $(tail -1 "$O/t_${n}_$tag.log")"
    [ $rc = 0 ] || grep -E "FAIL|differ|error|not finite|not taken|CHECK" "$O/t_${n}_$tag.log" | head -8 | tee -a "$S"
}
dr_synth35() {
    local tag=${1:+-ar}
    F=/tmp/synth35$tag.gguf
    ( [ -s "$F" ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b "$@" -o "$F.part" \
        > "$O/synth.log" 2>&1 && mv "$F.part" "$F"; } ) &
    SPID=$!
}
dr_ar_file() {
    AR=/tmp/synth35-ar.gguf
    [ -s $AR ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $AR.part \
        > "$O/synth-ar.log" 2>&1 && mv $AR.part $AR; }
}
dr_mrun() {
    local label=$1 lim=$2; shift 2
    local left=$(( ${DR_LIMIT:-585} - $(el) )); [ "$lim" -gt "$left" ] && lim=$left
    [ "$lim" -lt 10 ] && { say "== $label skipped: $left s left"; return 1; }
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$O/mem_$label.txt" 2>/dev/null &
    local mp=$! s=$(date +%s)
    timeout -k 3 "$lim" "$@" > "$O/$label.log" 2>&1; local rc=$?
    kill $mp 2>/dev/null; wait $mp 2>/dev/null
    local cmd="$*"
    say "== $label rc=$rc $(( $(date +%s) - s ))s, GPU peak $(sort -n "$O/mem_$label.txt" | tail -1) MiB: ${cmd:0:200}"
    return $rc
}
dr_serve() {
    local file=$1 envs=$2 n=$3 tok=$4 rounds=$5 tag=$6 log=$O/serve-$6.log
    env $envs "$D/bin/clover" serve -m "$file" --device cuda --port 0 --max-batch 16 --sessions 1 --ctx 1024 > "$log" 2>&1 &
    local pid=$! port=""
    for _ in $(seq 1 240); do
        port=$(grep -o 'listening on http://[^:]*:[0-9]*' "$log" | grep -o '[0-9]*$')
        [ -n "$port" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.25
    done
    if [ -n "$port" ]; then
        for round in $(seq 1 "$rounds"); do
            [ "$(el)" -lt 500 ] || { say "serve $tag: no time for round $round"; break; }
            local r=$(timeout 120 python3 bench/device-runs/2026-12-14-serve25/serve_load.py "$port" "$n" "$tok" "$O/serve-$tag-$round.json" 2>&1)
            say "serve $tag${envs:+ ($envs)} round $round ($n x $tok):"; echo "$r" | tee -a "$S"
        done
    else say "serve $tag: did not start: $(tail -2 "$log")"; fi
    kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
}
dr_preview() {
    local lab=$1; shift
    env "$@" timeout 60 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/p_$lab.log" 2>&1; local rc=$?
    local l=$(grep -E "^(preview 32 rows, first|commit|block)" "$O/p_$lab.log" | \
        awk '{for (i = 2; i <= NF; i++) if ($i == "ms" || $i == "tok/s") { printf "%s ", $(i - 1); break }}')
    say "p rc=$rc $lab ($*): coreset/nocoreset/commit ms, block tok/s: $l"
}
dr_run_ids() {
    local tag=$1; shift
    env CLOVER_NOTHING=1 "$@" timeout 60 "$D/bin/clover" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 \
        --ignore-eos --no-visual --json > "$O/run_$tag.json" 2> "$O/run_$tag.err"
    env CLOVER_NOTHING=1 "$@" timeout 60 "$D/bin/clover" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 \
        --ignore-eos --no-visual --json > "$O/ar_$tag.json" 2> "$O/ar_$tag.err"
    say "clover run $tag${*:+ ($*)}: diffusion $(dr_ids "$O/run_$tag.json"), --ar $(dr_ids "$O/ar_$tag.json") (dac8ccfd8b1c / 55bedcfef53b)"
}
dr_backend() {
    local left=$(( ${DR_LIMIT:-585} - $(el) - 10 ))
    [ $left -gt 30 ] || { say "bench_cuda_backend: no time ($left s)"; return; }
    timeout $left "$D/bin/bench_cuda_backend" $F > "$O/backend.log" 2>&1
    say "== bench_cuda_backend rc=$? at +$(el)s"
    grep -vE "^(model|device) " "$O/backend.log" | cut -c1-160 | head -20 | tee -a "$S"
}
dr_memcheck() {
    command -v compute-sanitizer > /dev/null || { say "memcheck $1: no compute-sanitizer"; return; }
    local s=$(date +%s)
    CLOVER_TEST_ONLY=$2 timeout "$3" compute-sanitizer --tool memcheck --error-exitcode 9 "$D/bin/$1" \
        > "$O/memcheck_$1.log" 2>&1
    say "memcheck $1 ($2) rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_$1.log" | tail -1)"
}
# A switch's A/B: for each of ROUNDS (3) rounds, each value of $2 ("0 1"): the stacked 16-sequence diffusion pass
# (bench_batch) and the prompt of 512 and the chunk commit after it (bench_cuda_backend --prompt-only 1).
dr_ab() {
    local var=$1 vals=$2 r v
    for r in $(seq 1 ${ROUNDS:-3}); do
        for v in $vals; do
            [ "$(el)" -lt "${DR_LIMIT:-585}" ] || return
            env "$var=$v" timeout 90 "$D/bin/bench_batch" $F --device cuda --mode diffusion --n 16 --prompt 32 \
                --gen 64 > "$O/bd_${v}_$r.log" 2>&1
            say "b rc=$? diffusion n 16 $var=$v: $(grep -E '^ +16 ' "$O/bd_${v}_$r.log" | tail -1 | cut -c1-110)"
            env "$var=$v" timeout 90 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/pp_${v}_$r.log" 2>&1
            say "   $var=$v prompt: $(grep -E '^prompt of 512|^32-row chunk commit' "$O/pp_${v}_$r.log" | cut -c1-60 | tr -s ' ' | tr '\n' ';')"
        done
    done
}
# The AR step's A/B (see the header): rounds outer, values, then row counts inner, so drift falls on every value.
dr_ab_ar() {
    local var=$1 vals=$2 ns=$3 r v n; shift 3
    for r in $(seq 1 ${ROUNDS:-2}); do
        for v in $vals; do
            for n in $ns; do
                [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 40 )) ] || return
                env "$@" "$var=$v" timeout 60 "$D/bin/bench_batch" $F --device cuda --mode ar --n $n --prompt 32 \
                    --gen 96 > "$O/ar_${v}_${n}_$r.log" 2>&1
                say "b$r rc=$? AR n $n $var=$v: $(grep -E "^ +$n " "$O/ar_${v}_${n}_$r.log" | tail -1 | cut -c1-110)"
            done
        done
    done
}
# The stacked diffusion pass under the kernel tracer (PDL off; the environment $2.. added): its top $TOP (8) kernels.
dr_trace_d16() {
    local tag=$1; shift
    env "$@" CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$O/trace_$tag.txt LD_PRELOAD=$D/bin/libclover_kernel_trace.so \
        timeout 200 "$D/bin/bench_batch" $F --device cuda --mode diffusion --prompt 32 --gen 64 --n 16 \
        > "$O/dbatch_trace_$tag.log" 2>&1
    say "== bench_batch --mode diffusion --n 16 under the tracer (PDL off${*:+, $*}) rc=$? at +$(el)s"
    [ -f $O/trace_$tag.txt ] || return
    c++filt < $O/trace_$tag.txt > $O/trace_$tag.dm.txt && rm -f $O/trace_$tag.txt
    grep -E "^== window 0:" $O/trace_$tag.dm.txt | head -1 | tee -a "$S"
    awk '$0 ~ "^== window 0:" {f++; next} /^== window/{if (f) exit} f == 1' $O/trace_$tag.dm.txt | head -${TOP:-8} | \
        cut -c1-150 | tee -a "$S"
}
# Every test_cuda_* binary (test_cuda_matmul in its parts a, b, d; test_moe_fast left out: untouched, long).
dr_cuda_tests() {
    local A="test_bad_arguments,test_act_quantize_bytes,test_decode_types,test_chunk_types,test_chunk_thin,test_exact,test_exact_multi,test_chunk_multi,test_chunk_seg,test_row_invariance,test_few_rows,test_mma_rows,test_igemm_wide,test_q8_rows32,test_mmv_stream,test_mmv_lane,test_stream32"
    local B="test_moe_decode,test_moe_chunk,test_moe_igw,test_moe_persist,test_moe_tall,test_moe_many_experts,test_moe_dec32"
    local DD="test_glu,test_glu_quant,test_multi,test_graph_capture,test_pdl_rows,test_pdl_rows_passes,test_norm_q8" t
    tst test_cuda_matmul a 150 CLOVER_TEST_ONLY=$A
    tst test_cuda_matmul b 150 CLOVER_TEST_ONLY=$B
    tst test_cuda_matmul d 120 CLOVER_TEST_ONLY=$DD
    for t in test_cuda_ops test_cuda_moe_tiles test_cuda_ig_x2 test_cuda_preview test_cuda_batch test_cuda_attention \
        test_cuda_gdn test_cuda_backend test_cuda_engine test_cuda_split test_cuda_gpumem; do
        tst $t all 100
    done
}
dr_end() {
    say "end $(date -u +%T) ($(el)s)"
    (cd "$O" && tar czf "$R/logs.tgz" .)
}
dr_ids() {
    python3 - "$1" <<'PY' 2>&1 | tail -1
import hashlib, json, sys
try:
    ids = json.load(open(sys.argv[1])).get('ids') or []
except Exception as e:
    print("no ids: %s" % str(e)[:100]); sys.exit(0)
print("%d ids, hash %s" % (len(ids), hashlib.md5((str(ids) + "\n").encode()).hexdigest()[:12]) if ids else "no ids")
PY
}
dr_ids_cmp() {
    python3 - "$1" "$2" "$3" <<'PY' 2>&1 | tail -1 | tee -a "$S"
import json, sys
try:
    a, b = (json.load(open(p)).get('ids') or [] for p in sys.argv[1:3])
except Exception as e:
    print("%s ids: cannot compare: %s" % (sys.argv[3], str(e)[:100])); sys.exit(0)
if not a or not b:
    print("%s ids: cannot compare: %d / %d ids" % (sys.argv[3], len(a), len(b))); sys.exit(0)
d = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
print("%s ids: %s (%d / %d ids)" % (sys.argv[3], "equal" if a == b else "first difference at %s" %
      (d if d is not None else min(len(a), len(b))), len(a), len(b)))
PY
}
