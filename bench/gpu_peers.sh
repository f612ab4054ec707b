#!/usr/bin/env bash
# The GPU comparison of docs/gpu.md on a machine with the GPU: libeliza's
# Vulkan decode step (bench_gpu_llm) against llama.cpp's CUDA and Vulkan
# backends (llama-bench), on the same GGUF files, made there by
# bench/gpu_twin_model.py (random weights of real shapes and types).
#
#   bench/gpu_peers.sh BUNDLE OUT PHASE...
#
# BUNDLE holds what the machine lacks:
#   llama-src.tar.xz        llama.cpp's source (the llama-cpp-python==0.3.36 sdist's
#                           vendor/llama.cpp, as src/; models, docs, tests left out)
#   vkdebs/*.deb            Debian 12's glslc, libshaderc1, libvulkan-dev, spirv-headers
#                           (for llama.cpp's Vulkan build; unpacked under $WORK, not /;
#                           bookworm's glslc lacks coopmat and integer dot product, so
#                           that build has neither)
#   bin/test_gpu, bin/bench_gpu_llm   libeliza's, built with -DELIZA_BUILD_BENCH=ON
#   gpu_twin_model.py, gemma3-270m.skel.gguf (its `skeleton` of Gemma 3 270M Q4_K_M)
#   py/                     the gguf package (PYTHONPATH) where the machine has none
# The Vulkan loader must be there already (libvulkan.so.1; VK_DRIVER_FILES set),
# and libglvnd (libGLdispatch, libGLX: Debian's libglvnd0 libglx0 ...), which the
# NVIDIA ICD's libGLX_nvidia.so.0 loads (without it vkCreateInstance fails with
# VK_ERROR_INCOMPATIBLE_DRIVER).
#
# Phases, run in the order given: models; ours (test_gpu, bench_gpu_llm on
# each model: run them before the builds, which load every core); build
# (llama.cpp's llama-bench with -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
# and with -DGGML_VULKAN=ON, both at once, in their own session so they
# outlive this script; logs and done-markers in WORK); peers (waits for the
# builds until $BUILD_DEADLINE seconds after this script started, then
# llama-bench -ngl 99 -p 512 -n 128 -r 3 with each on each model; run
# `peers` again later if the builds were not done). WORK (default /tmp/gpu_peers) holds the builds and models.
set -u
BUNDLE=$(realpath "$1")
OUT=$(realpath "$2")
shift 2
WORK=${WORK:-/tmp/gpu_peers}
JOBS=${JOBS:-$(nproc)}
BUILD_DEADLINE=${BUILD_DEADLINE:-480}
START=$(date +%s)
MODELS="$WORK/gemma3-270m-twin-q4_k_m.gguf $WORK/llama-1.1b-twin-q4_k_m.gguf"
mkdir -p "$WORK" "$OUT"
cd "$WORK" || exit 1

log() { echo "[$(( $(date +%s) - START ))s] $*"; }

llama_cmake() {   # build dir, extra flags...
    local dir=$1
    shift
    cmake -S src -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF "$@" &&
        cmake --build "$dir" -j "$JOBS" --target llama-bench
}

phase_build() {
    local vk=$WORK/vkroot/usr
    log "build: unpacking llama.cpp and the Vulkan build tools"
    tar -xJf "$BUNDLE/llama-src.tar.xz" || return 1
    for f in "$BUNDLE"/vkdebs/*.deb; do dpkg -x "$f" "$WORK/vkroot"; done
    # Debian 12's Vulkan-Hpp (1.3.239) predates VK_EXT_layer_settings, which
    # ggml-vulkan.cpp passes to vkCreateInstance only to turn on the
    # validation layer's best-practice checks: create the instance without it.
    python3 - "$WORK/src/ggml/src/ggml-vulkan/ggml-vulkan.cpp" <<'PY'
import sys
path = sys.argv[1]
src = open(path).read()
a = src.index("    VkBool32 enable_best_practice = layer_settings;")
b = src.index("\n", src.index("vk::InstanceCreateInfo instance_create_info(", a))
plain = "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions);"
open(path, "w").write(src[:a] + plain + src[b:])
PY
    command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
    export -f llama_cmake
    export WORK JOBS
    setsid bash -c 'cd "$WORK"; t0=$(date +%s)
        llama_cmake build-cuda -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
        echo "cuda build: rc $? in $(( $(date +%s) - t0 )) s"; touch build-cuda.done' >"$WORK/build-cuda.log" 2>&1 &
    VK=$vk setsid bash -c 'cd "$WORK"; t0=$(date +%s)
        export LD_LIBRARY_PATH=$VK/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        llama_cmake build-vk -DGGML_VULKAN=ON -DVulkan_INCLUDE_DIR="$VK/include" \
            -DVulkan_LIBRARY="$(ldconfig -p | awk "/libvulkan.so.1 / {print \$NF; exit}")" \
            -DVulkan_GLSLC_EXECUTABLE="$VK/bin/glslc" -DCMAKE_PREFIX_PATH="$VK"
        echo "vulkan build: rc $? in $(( $(date +%s) - t0 )) s"; touch build-vk.done' >"$WORK/build-vk.log" 2>&1 &
    log "build: started (logs in WORK/build-cuda.log, WORK/build-vk.log)"
}

phase_models() {
    export PYTHONPATH=$BUNDLE/py${PYTHONPATH:+:$PYTHONPATH}
    log "models: Gemma 3 270M twin, TinyLlama-1.1B-shaped llama"
    python3 "$BUNDLE/gpu_twin_model.py" expand "$BUNDLE/gemma3-270m.skel.gguf" "$WORK/gemma3-270m-twin-q4_k_m.gguf" &&
        python3 "$BUNDLE/gpu_twin_model.py" llama1b "$WORK/llama-1.1b-twin-q4_k_m.gguf"
    log "models: done (rc $?)"
}

phase_ours() {
    log "ours: test_gpu with the validation layer"
    ELIZA_GPU_VALIDATION=1 "$BUNDLE/bin/test_gpu" 2>&1 | tail -40
    for m in $MODELS; do
        log "ours: bench_gpu_llm $(basename "$m")"
        "$BUNDLE/bin/bench_gpu_llm" "$m" 8 128 512 2>&1 | tee "$OUT/ours-$(basename "$m" .gguf).log"
    done
}

phase_peers() {
    while [ $(( $(date +%s) - START )) -lt "$BUILD_DEADLINE" ] &&
        ! { [ -f build-cuda.done ] && [ -f build-vk.done ]; }; do sleep 5; done
    for b in cuda vk; do
        cp "$WORK/build-$b.log" "$OUT/" 2>/dev/null
        [ -f "build-$b.done" ] || log "peers: the $b build is still running"
        tail -n 3 "$WORK/build-$b.log" 2>/dev/null
        local bench=$WORK/build-$b/bin/llama-bench
        if [ ! -x "$bench" ]; then
            log "peers: no llama-bench for $b"
            continue
        fi
        for m in $MODELS; do
            log "peers: llama-bench ($b) $(basename "$m")"
            "$bench" -m "$m" -ngl 99 -p 512 -n 128 -r 3 2>&1 | tee -a "$OUT/peers-$b.log" | grep -v "^ggml_\|^load"
        done
    done
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
for phase in "$@"; do "phase_$phase"; done
log "done"
