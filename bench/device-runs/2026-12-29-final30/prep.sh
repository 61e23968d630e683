#!/usr/bin/env bash
# prep.sh (final30): started in the background at the top of a device call, so that llama.cpp's CPU build (~2-4
# minutes on the host) and the --no-diffusion 35B-A3B synth run beside the call's GPU items instead of after them;
# run.sh's step l waits for /tmp/llama-cpu/done. Nothing timed runs beside it except GPU work.
#   run(command="(bash bench/device-runs/2026-12-29-final30/prep.sh &); ITEMS='... final30:l,b' bash .gpu-seq/run.sh")
PACK=${PACK:-.gpu-seq}
mkdir -p /tmp/llama-cpu; L=/tmp/llama-cpu/prep.log; T0=$(date +%s)
{
  if [ -s "$PACK/llama-src.txz" ]; then
    mkdir -p /tmp/llama-cpu-src && tar xJf "$PACK/llama-src.txz" -C /tmp/llama-cpu-src &&
    cmake -S /tmp/llama-cpu-src/llama.cpp -B /tmp/llama-cpu -DGGML_CUDA=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON \
      -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
      -DGGML_AVX_VNNI=ON -DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON -DGGML_AMX_BF16=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON \
      -DLLAMA_OPENSSL=OFF -DCMAKE_BUILD_TYPE=Release > /tmp/llama-cpu/cmake.log 2>&1 &&
    nice -n 10 timeout 300 cmake --build /tmp/llama-cpu -j10 --target llama-bench > /tmp/llama-cpu/build.log 2>&1
    echo "llama-bench build rc=$? at $(( $(date +%s) - T0 ))s"
  else echo "no $PACK/llama-src.txz"; fi
} > $L 2>&1 &
B=$!
P=/tmp/final30-prep; rm -rf $P; mkdir -p $P; tar xJf "$PACK/pack.txz" -C $P
A=/tmp/synth35-ar.gguf
# the diffusion file first (the call's first item writes it under a time limit): the AR synth after it
for _ in $(seq 1 90); do [ -s /tmp/synth35.gguf ] && break; sleep 2; done
[ -s $A ] || { LD_LIBRARY_PATH=$P/lib nice -n 5 timeout 250 $P/bin/clover synth --preset qwen3.5-35b-a3b --no-diffusion \
  -t 4 -o $A.part > /tmp/llama-cpu/synth-ar.log 2>&1 && mv $A.part $A; }
echo "AR synth at $(( $(date +%s) - T0 ))s: $(ls -la $A 2>&1 | awk '{print $5}')" >> /tmp/llama-cpu/synth-ar.log
wait $B
touch /tmp/llama-cpu/done
