#!/usr/bin/env bash
# Builds Eliza.xcframework: the STATIC libeliza for
#   ios-arm64                    iPhone/iPad devices      (IOS_DEPLOYMENT_TARGET, default 13.0)
#   ios-arm64_x86_64-simulator   the iOS simulator
#   macos-arm64_x86_64           macOS                    (MACOSX_DEPLOYMENT_TARGET, default 11.0)
# each slice with eliza.h and a module map, so Swift says `import Eliza`.
#
#   ios/build-xcframework.sh            (on macOS with Xcode; output in build-ios/)
#
# One CMake build per architecture (the fast kernels are compiled per ISA,
# so a build targets one architecture), then lipo per platform and
# `xcodebuild -create-xcframework`. Last, the Swift sample is type-checked
# against the simulator slice and built and run against the macOS slice.
#
# Environment: ELIZA_IOS_OUT (default build-ios/), IOS_DEPLOYMENT_TARGET,
# MACOSX_DEPLOYMENT_TARGET, ELIZA_WERROR (ON|OFF), JOBS.
#   ELIZA_IOS_PROXY_TOOLCHAIN   a CMake toolchain file used instead of Xcode's
#       SDKs, for the device slice only (the check on a machine without Xcode:
#       zig cc for aarch64-ios13.0); lipo, xcodebuild and Swift are skipped.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${ELIZA_IOS_OUT:-$ROOT/build-ios}
IOS_MIN=${IOS_DEPLOYMENT_TARGET:-13.0}
MACOS_MIN=${MACOSX_DEPLOYMENT_TARGET:-11.0}
WERROR=${ELIZA_WERROR:-ON}
JOBS=${JOBS:-$(sysctl -n hw.ncpu 2>/dev/null || nproc 2>/dev/null || echo 2)}
GENERATOR=()
command -v ninja >/dev/null 2>&1 && GENERATOR=(-G Ninja)

# slice NAME CMAKE_ARGS...: builds libeliza.a into $OUT/build/NAME.
slice() {
  local name=$1
  shift
  echo "== $name"
  cmake -S "$ROOT" -B "$OUT/build/$name" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DELIZA_BUILD_TESTS=OFF -DELIZA_BUILD_STATIC=ON -DELIZA_WERROR="$WERROR" "$@"
  cmake --build "$OUT/build/$name" --target eliza_static -j "$JOBS"
}

# apple_slice NAME SYSTEM SDK ARCH MIN_OS
apple_slice() {
  slice "$1" -DCMAKE_SYSTEM_NAME="$2" -DCMAKE_OSX_SYSROOT="$3" -DCMAKE_SYSTEM_PROCESSOR="$4" \
    -DCMAKE_OSX_ARCHITECTURES="$4" -DCMAKE_OSX_DEPLOYMENT_TARGET="$5"
}

headers="$OUT/include"
rm -rf "$headers" && mkdir -p "$headers"
cp "$ROOT/include/eliza.h" "$ROOT/ios/module.modulemap" "$headers/"

if [ -n "${ELIZA_IOS_PROXY_TOOLCHAIN:-}" ]; then
  slice ios-arm64 -DCMAKE_TOOLCHAIN_FILE="$ELIZA_IOS_PROXY_TOOLCHAIN"
  echo "build-xcframework.sh: proxy build: $OUT/build/ios-arm64/libeliza.a (no lipo, no xcodebuild)"
  exit 0
fi

apple_slice ios-arm64 iOS iphoneos arm64 "$IOS_MIN"
apple_slice ios-sim-arm64 iOS iphonesimulator arm64 "$IOS_MIN"
apple_slice ios-sim-x86_64 iOS iphonesimulator x86_64 "$IOS_MIN"
apple_slice macos-arm64 Darwin macosx arm64 "$MACOS_MIN"
apple_slice macos-x86_64 Darwin macosx x86_64 "$MACOS_MIN"

lib="$OUT/lib"
rm -rf "$lib" && mkdir -p "$lib/ios" "$lib/ios-simulator" "$lib/macos"
cp "$OUT/build/ios-arm64/libeliza.a" "$lib/ios/"
lipo -create "$OUT/build/ios-sim-arm64/libeliza.a" "$OUT/build/ios-sim-x86_64/libeliza.a" \
  -output "$lib/ios-simulator/libeliza.a"
lipo -create "$OUT/build/macos-arm64/libeliza.a" "$OUT/build/macos-x86_64/libeliza.a" \
  -output "$lib/macos/libeliza.a"

rm -rf "$OUT/Eliza.xcframework"
xcodebuild -create-xcframework \
  -library "$lib/ios/libeliza.a" -headers "$headers" \
  -library "$lib/ios-simulator/libeliza.a" -headers "$headers" \
  -library "$lib/macos/libeliza.a" -headers "$headers" \
  -output "$OUT/Eliza.xcframework"

# The Swift sample against the module: type-checked for the simulator, built
# and run on this Mac.
xcf="$OUT/Eliza.xcframework"
sim=$(find "$xcf" -maxdepth 1 -type d -name 'ios-*simulator' | head -1)
mac=$(find "$xcf" -maxdepth 1 -type d -name 'macos-*' | head -1)
xcrun --sdk iphonesimulator swiftc -typecheck -target "arm64-apple-ios$IOS_MIN-simulator" \
  -I "$sim/Headers" "$ROOT/ios/Sample/ElizaSample.swift"
xcrun --sdk macosx swiftc -O -target "$(uname -m)-apple-macos$MACOS_MIN" -I "$mac/Headers" \
  -L "$mac" -leliza "$ROOT/ios/Sample/ElizaSample.swift" "$ROOT/ios/Sample/main.swift" \
  -o "$OUT/eliza-swift-sample"
"$OUT/eliza-swift-sample"
echo "build-xcframework.sh: wrote $xcf"
