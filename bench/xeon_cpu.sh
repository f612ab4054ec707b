#!/usr/bin/env bash
# The CPU speed proofs of #16, #17 and #19 on the lent GPU machine's host (a
# 16-core Xeon with AVX-512, idle), libeliza against a llama.cpp built there
# natively, 2 threads each, pinned, back to back (docs/llm.md, "Speed on the
# lent Xeon"; docs/kv_cache.md for the context sweep).
#
#   bench/xeon_cpu.sh STAGE...     from a checkout with build/libeliza.so
#
# Stages:
#   cpu      lscpu's model name, flags and core topology
#   prepare  llama.cpp CPU-only (GGML_NATIVE, libllama + llama-quantize) from
#            $LLAMA_SRC (a tar.xz of tests/tools/llama_cpp.py's src/), or
#            unpacked from $LLAMA_BIN (the tar.gz this stage leaves in
#            $OUT); the random-weight models of real shapes, made here while
#            llama.cpp builds: the Gemma 3 270M twin (bench/gpu_twin_model.py
#            expand $GEMMA_SKEL), Falcon-H1 0.1B and 0.5B (bench/falcon_h1_model.py,
#            all layers, Q8_0 and Q4_K)
#   gemma    #17: Gemma 3 270M twin, prefill 512 / decode 128, ELIZA_SIMD=avx512 and avx2
#   falcon   #16: Falcon-H1 0.1B / 0.5B, Q8_0 / Q4_K, prefill 256 / decode 64
#   kv       #19: decode after 512 / 4k / 16k tokens for each KV cache type
#            (bench/llm.py --sweep: prompts evaluated at once on disjoint
#            core pairs, then one decode at a time)
#
# Environment: WORK (default /tmp/xeon-cpuperf: llama.cpp, models, results/
# with each bench's JSON), OUT (llama-bin.tar.gz and results.tar.gz),
# PY_EXTRA (a folder with the gguf package, prepended to PYTHONPATH), BUDGET_S (seconds after which the remaining benches are
# skipped, default 420), ELIZA_LIBRARY (default build/libeliza.so).
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
W=${WORK:-/tmp/xeon-cpuperf}
OUT=${OUT:-$W/out}
BUDGET_S=${BUDGET_S:-420}
T0=$(date +%s)
mkdir -p "$W/models" "$W/results" "$OUT"
export ELIZA_LLAMA_CPP_DIR=$W/llama
export ELIZA_LIBRARY=${ELIZA_LIBRARY:-$REPO/build/libeliza.so}
export PYTHONPATH=$REPO/sdk${PY_EXTRA:+:$PY_EXTRA}${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
BIN=$W/llama/build/bin
M=$W/models
PY=${PYTHON:-python3}

log() { echo "[$(($(date +%s) - T0)) s] $*"; }
within_budget() {
    if [ $(($(date +%s) - T0)) -ge "$BUDGET_S" ]; then
        log "budget of $BUDGET_S s spent: skipping $*"
        return 1
    fi
}

# One CPU per physical core (the first thread of each), in core order.
one_per_core() {
    lscpu -p=CPU,CORE,SOCKET | grep -v '^#' | sort -t, -k3,3n -k2,2n -k1,1n | awk -F, '!seen[$2","$3]++ {print $1}'
}
CORES=$(one_per_core | paste -sd, -)
# Two cores for the single runs: the second and third (CPU 0 takes the
# interrupts), the first two on a machine of two.
if [ "$(echo "$CORES" | tr ',' '\n' | wc -l)" -ge 3 ]; then
    CPUS=${CPUS:-$(echo "$CORES" | cut -d, -f2,3)}
else
    CPUS=${CPUS:-$(echo "$CORES" | cut -d, -f1,2)}
fi

stage_cpu() {
    lscpu | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|L3 cache)'
    grep -o -w -E 'avx512[a-z_0-9]*|avx_vnni|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | paste -sd' ' -
    log "one CPU per core: $CORES; single runs on CPUs $CPUS"
    $PY -c 'import sys, numpy, torch, transformers; print(sys.version.split()[0], numpy.__version__,
        torch.__version__, transformers.__version__)' 
}

build_llama() {
    if [ -f "$BIN/libllama.so" ] && [ -x "$BIN/llama-quantize" ]; then
        log "llama.cpp already in $BIN"
    elif [ -n "${LLAMA_BIN:-}" ] && [ -f "$LLAMA_BIN" ]; then
        mkdir -p "$BIN" && tar -xzf "$LLAMA_BIN" -C "$BIN" && log "llama.cpp unpacked from $LLAMA_BIN"
    else
        mkdir -p "$W/llama" && tar -xJf "$LLAMA_SRC" -C "$W/llama" || return 1
        local gen=()
        command -v ninja >/dev/null && gen=(-G Ninja)
        cmake -S "$W/llama/src" -B "$W/llama/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
            -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
            -DLLAMA_BUILD_SERVER=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF >"$W/llama-cmake.log" 2>&1 ||
            { tail -20 "$W/llama-cmake.log"; return 1; }
        cmake --build "$W/llama/build" -j "$(nproc)" --target llama llama-quantize >"$W/llama-build.log" 2>&1 ||
            { tail -30 "$W/llama-build.log"; return 1; }
        grep -m3 -E 'GGML_AVX512|-march|Adding CPU backend variant' "$W/llama-cmake.log"
        log "llama.cpp built"
    fi
    (cd "$BIN" && tar -czf "$OUT/llama-bin.tar.gz" ./*.so* llama-quantize)
}

stage_prepare() {
    local twin=$M/gemma3-270m-twin.gguf
    [ -f "$twin" ] || $PY "$REPO/bench/gpu_twin_model.py" expand "$GEMMA_SKEL" "$twin" >"$W/twin.log" 2>&1 &
    local shape
    for shape in 0.1b 0.5b; do
        [ -f "$M/fh1-$shape/falcon-h1-q8_0.gguf" ] ||
            $PY "$REPO/bench/falcon_h1_model.py" "$M/fh1-$shape" --shape "$shape" --types q8_0 \
                >"$W/fh1-$shape.log" 2>&1 &
    done
    build_llama || log "llama.cpp: FAILED"
    wait
    log "models: $(cd "$M" && ls -1 ./*.gguf ./*/*.gguf 2>/dev/null | paste -sd' ' -)"
    for shape in 0.1b 0.5b; do
        tail -2 "$W/fh1-$shape.log" 2>/dev/null
        local q8=$M/fh1-$shape/falcon-h1-q8_0.gguf q4=$M/fh1-$shape/falcon-h1-q4_k.gguf
        if [ -f "$q8" ] && [ ! -f "$q4" ]; then
            "$BIN/llama-quantize" --allow-requantize "$q8" "$q4" Q4_K "$(nproc)" >/dev/null 2>&1 ||
                log "quantize $shape: FAILED"
        fi
    done
    tail -1 "$W/twin.log" 2>/dev/null
    ls -la "$M" "$M"/fh1-* 2>/dev/null | grep gguf
    log "prepared"
}

bench() {  # bench NAME ARGS...: one bench/llm.py run, a summary to the log, its JSON to results/NAME.json
    local name=$1
    shift
    within_budget "$name" || return 0
    log "bench/llm.py $*"
    $PY "$REPO/bench/llm.py" "$@" --json >"$W/results/$name.json" 2>"$W/$name.err" ||
        { log "$name: FAILED"; tail -20 "$W/$name.err"; return 0; }
    grep -E '^round|^context' "$W/$name.err"
    $PY - "$W/results/$name.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
a, b = r["libeliza"], r.get("llama.cpp")
line = f"  libeliza prefill {a['prefill_tok_s']:.1f} decode {a['decode_tok_s']:.1f} tok/s"
if b:
    line += (f" | llama.cpp prefill {b['prefill_tok_s']:.1f} decode {b['decode_tok_s']:.1f} tok/s"
             f" | ratio prefill {a['prefill_tok_s'] / b['prefill_tok_s']:.2f}x"
             f" decode {a['decode_tok_s'] / b['decode_tok_s']:.2f}x")
print(line)
for phase, key in (("decode ms/token", "profile_ms_per_token"), ("prefill ms", "prefill_profile_ms")):
    prof = {k: v for k, v in a[key].items() if v > 0}
    total = sum(prof.values())
    print(f"  {phase} {total:.2f}: " + ", ".join(f"{k} {v:.2f} ({100 * v / total:.0f}%)"
                                               for k, v in sorted(prof.items(), key=lambda kv: -kv[1])))
EOF
}

stage_gemma() {
    local simd
    for simd in avx512 avx2; do
        ELIZA_SIMD=$simd bench "gemma-$simd" --model "$M/gemma3-270m-twin.gguf" --threads 2 --cpus "$CPUS" \
            --prefill 512 --decode 128 --rounds 1 --llama-wait both
    done
}

stage_falcon() {
    local shape type
    for shape in 0.1b 0.5b; do
        for type in q8_0 q4_k; do
            bench "falcon-$shape-$type" --model "$M/fh1-$shape/falcon-h1-$type.gguf" --threads 2 --cpus "$CPUS" \
                --prefill 256 --decode 64 --rounds 1 --llama-wait active
        done
    done
}

stage_kv() {
    within_budget kv || return 0
    local n_cores
    n_cores=$(echo "$CORES" | tr ',' '\n' | wc -l)
    local groups=("f16,q8_0,q4_0,tbq4_0,tbq3_0")
    # Eight workers of two cores each; fewer cores: two sweeps.
    [ "$n_cores" -ge 16 ] || groups=("f16,q8_0" "q4_0,tbq4_0,tbq3_0")
    local g i=0
    for g in "${groups[@]}"; do
        i=$((i + 1))
        within_budget "kv $g" || return 0
        log "bench/llm.py --sweep $g"
        $PY "$REPO/bench/llm.py" --model "$M/gemma3-270m-twin.gguf" --threads 2 --prefill 64 --decode 32 \
            --sweep "$g" --sweep-contexts 512,4096,16384 --sweep-cpus "$CORES" >"$W/results/kv-$i.txt" 2>&1 ||
            log "kv $g: FAILED"
        cat "$W/results/kv-$i.txt"
    done
}

for s in "$@"; do
    "stage_$s"
done
tar -czf "$OUT/results.tar.gz" -C "$W" results
log "done"
