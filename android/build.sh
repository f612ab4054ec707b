#!/usr/bin/env bash
# Builds libeliza for Android and packages it.
#
#   ANDROID_NDK=/path/to/ndk android/build.sh
#
# For each ABI (arm64-v8a armeabi-v7a x86_64; ANDROID_ABIS overrides) it
# configures android/CMakeLists.txt (libeliza + the JNI bridge) with the
# NDK's CMake toolchain for API level ANDROID_API (default 24), release,
# stripped, every LOAD segment aligned to 16 KB (Android 15+ devices with
# 16 KB pages), and produces under OUT (default build-android/):
#
#   jniLibs/<abi>/libeliza.so, libeliza_jni.so    drop into src/main/jniLibs
#   include/eliza.h                               the C ABI
#   eliza-<version>.aar                           AndroidManifest.xml, classes.jar
#                                                 (Java JNI layer; + Kotlin wrapper when
#                                                 kotlinc is on PATH), jni/<abi>/*.so and a
#                                                 prefab package, so a Gradle app with
#                                                 `buildFeatures { prefab = true }` can
#                                                 find_package(eliza REQUIRED CONFIG) and
#                                                 link eliza::eliza from its own C/C++.
#
# Environment:
#   ANDROID_NDK (or ANDROID_NDK_HOME, ANDROID_NDK_ROOT)   the NDK (r23+; r27+ recommended)
#   ANDROID_ABIS, ANDROID_API, ELIZA_ANDROID_OUT, ELIZA_WERROR (ON|OFF)
#   ELIZA_ANDROID_PROXY_TOOLCHAINS  "abi=toolchain.cmake ..." used instead of the
#       NDK's toolchain, one per ABI (the checks on a machine without an NDK:
#       Linux toolchains of the same CPUs stand in; every other step, flag and
#       file is unchanged)
#   ELIZA_JNI_INCLUDE               jni.h directories (;-list) for the proxy build
#   ELIZA_ANDROID_TESTS=ON          also build the C tests (run them with ctest
#       under an emulator; only meaningful for the proxy build)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${ELIZA_ANDROID_OUT:-$ROOT/build-android}
ABIS=${ANDROID_ABIS:-arm64-v8a armeabi-v7a x86_64}
API=${ANDROID_API:-24}
TESTS=${ELIZA_ANDROID_TESTS:-OFF}
WERROR=${ELIZA_WERROR:-ON}
PYTHON=${PYTHON:-python3}
VERSION=$(sed -n 's/^project(libeliza VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
[ -n "$VERSION" ] || { echo "build.sh: no version in CMakeLists.txt" >&2; exit 1; }

# 16 KB pages: every PT_LOAD aligned to 0x4000 (also fine on 4 KB devices).
PAGE_FLAGS="-Wl,-z,max-page-size=16384 -Wl,-z,common-page-size=16384"
# Release libraries carry no symbol table or debug info (the dynamic
# symbols, i.e. the eliza_* ABI, stay).
STRIP_FLAGS="-Wl,--strip-all"

PROXY=${ELIZA_ANDROID_PROXY_TOOLCHAINS:-}
if [ -n "$PROXY" ]; then
  ABIS=""
  for pair in $PROXY; do ABIS="$ABIS ${pair%%=*}"; done
  NDK_MAJOR=0          # abi.json "ndk": no NDK was used
  echo "build.sh: proxy build: $PROXY"
else
  NDK=${ANDROID_NDK:-${ANDROID_NDK_HOME:-${ANDROID_NDK_ROOT:-}}}
  if [ -z "$NDK" ] || [ ! -f "$NDK/build/cmake/android.toolchain.cmake" ]; then
    echo "build.sh: set ANDROID_NDK to an NDK (build/cmake/android.toolchain.cmake not found)" >&2
    exit 1
  fi
  NDK_MAJOR=$(sed -n 's/^Pkg.Revision *= *\([0-9]*\).*/\1/p' "$NDK/source.properties")
fi

# toolchain_args ABI: sets TOOLCHAIN (the file) and TOOLCHAIN_ARGS for one ABI.
toolchain_args() {
  if [ -n "$PROXY" ]; then
    TOOLCHAIN=""
    for pair in $PROXY; do [ "${pair%%=*}" = "$1" ] && TOOLCHAIN=${pair#*=}; done
    TOOLCHAIN_ARGS=(-DCMAKE_TOOLCHAIN_FILE="$TOOLCHAIN")
  else
    TOOLCHAIN="$NDK/build/cmake/android.toolchain.cmake"
    TOOLCHAIN_ARGS=(
      -DCMAKE_TOOLCHAIN_FILE="$TOOLCHAIN"
      -DANDROID_ABI="$1"
      -DANDROID_PLATFORM="android-$API"
      -DANDROID_STL=none                           # pure C: no libc++ to ship
      -DANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES=ON     # r27: 16 KB-compatible; PAGE_FLAGS for older NDKs
    )
  fi
}

GENERATOR=()
command -v ninja >/dev/null 2>&1 && GENERATOR=(-G Ninja)

rm -rf "$OUT/jniLibs" "$OUT/include" "$OUT/aar"
mkdir -p "$OUT/jniLibs" "$OUT/include"
cp "$ROOT/include/eliza.h" "$OUT/include/"

for abi in $ABIS; do
  echo "== $abi"
  build="$OUT/build/$abi"
  toolchain_args "$abi"
  # A build directory configured with another toolchain cannot be reused.
  if [ -f "$build/CMakeCache.txt" ] && ! grep -qF "CMAKE_TOOLCHAIN_FILE:FILEPATH=$TOOLCHAIN" "$build/CMakeCache.txt"; then
    rm -rf "$build"
  fi
  cmake -S "$ROOT/android" -B "$build" "${GENERATOR[@]}" "${TOOLCHAIN_ARGS[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_SHARED_LINKER_FLAGS="$PAGE_FLAGS $STRIP_FLAGS" \
    -DCMAKE_EXE_LINKER_FLAGS="$PAGE_FLAGS" \
    -DELIZA_BUILD_TESTS="$TESTS" -DELIZA_BUILD_STATIC="$TESTS" -DELIZA_WERROR="$WERROR" \
    -DELIZA_JNI_INCLUDE="${ELIZA_JNI_INCLUDE:-}"
  cmake --build "$build" -j "${JOBS:-$(nproc 2>/dev/null || echo 2)}"
  mkdir -p "$OUT/jniLibs/$abi"
  cp "$build/libs/libeliza.so" "$build/libs/libeliza_jni.so" "$OUT/jniLibs/$abi/"
done

# ---- the AAR -----------------------------------------------------------------
stage="$OUT/aar"
mkdir -p "$stage/prefab/modules/eliza/include" "$stage/META-INF/com/android/build/gradle"
cat > "$stage/AndroidManifest.xml" <<EOF
<?xml version="1.0" encoding="utf-8"?>
<manifest xmlns:android="http://schemas.android.com/apk/res/android" package="ai.eliza">
    <uses-sdk android:minSdkVersion="$API" />
</manifest>
EOF
: > "$stage/R.txt"
printf 'aarFormatVersion=1.0\naarMetadataVersion=1.0\nminCompileSdk=1\n' \
  > "$stage/META-INF/com/android/build/gradle/aar-metadata.properties"
cat > "$stage/prefab/prefab.json" <<EOF
{"schema_version": 2, "name": "eliza", "version": "$VERSION", "dependencies": []}
EOF
cat > "$stage/prefab/modules/eliza/module.json" <<EOF
{"export_libraries": [], "library_name": "libeliza", "android": {}}
EOF
cp "$ROOT/include/eliza.h" "$stage/prefab/modules/eliza/include/"
for abi in $ABIS; do
  mkdir -p "$stage/jni/$abi" "$stage/prefab/modules/eliza/libs/android.$abi"
  cp "$OUT/jniLibs/$abi/"*.so "$stage/jni/$abi/"
  cp "$OUT/jniLibs/$abi/libeliza.so" "$stage/prefab/modules/eliza/libs/android.$abi/"
  cat > "$stage/prefab/modules/eliza/libs/android.$abi/abi.json" <<EOF
{"abi": "$abi", "api": $API, "ndk": $NDK_MAJOR, "stl": "none", "static": false}
EOF
done

# classes.jar: the Java JNI layer, plus the Kotlin wrapper when kotlinc exists
# (without it, add android/src/main/kotlin to the app's sources).
classes="$OUT/classes"
rm -rf "$classes" && mkdir -p "$classes"
if command -v javac >/dev/null 2>&1; then
  javac -nowarn -Xlint:-options --release 8 -d "$classes" "$ROOT"/android/src/main/java/ai/eliza/*.java
  if command -v kotlinc >/dev/null 2>&1; then
    kotlinc -nowarn -jvm-target 1.8 -cp "$classes" -d "$classes" "$ROOT"/android/src/main/kotlin/ai/eliza/*.kt
  else
    echo "build.sh: no kotlinc: classes.jar holds the Java JNI layer only"
  fi
else
  echo "build.sh: no javac: classes.jar is empty"
fi

"$PYTHON" - "$stage" "$classes" "$OUT/eliza-$VERSION.aar" <<'EOF'
import sys, zipfile
from pathlib import Path
stage, classes, aar = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
def add(zf, name, data):
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)
jar = stage / "classes.jar"
with zipfile.ZipFile(jar, "w") as zf:
    add(zf, "META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\r\n\r\n")
    for p in sorted(classes.rglob("*")):
        if p.is_file() and p.relative_to(classes).as_posix() != "META-INF/MANIFEST.MF":
            add(zf, p.relative_to(classes).as_posix(), p.read_bytes())
with zipfile.ZipFile(aar, "w") as zf:
    for p in sorted(stage.rglob("*")):
        if p.is_file():
            add(zf, p.relative_to(stage).as_posix(), p.read_bytes())
print(f"build.sh: wrote {aar} ({aar.stat().st_size} bytes)")
EOF
