# macOS 11 arm64 (the macosx_11_0_arm64 wheel). Apple's SDK is not needed:
# zig carries the libc headers and libSystem stubs.
set(CMAKE_SYSTEM_NAME Darwin)
set(CMAKE_SYSTEM_PROCESSOR arm64)
set(CMAKE_OSX_ARCHITECTURES "" CACHE STRING "set by -target")
set(CMAKE_OSX_DEPLOYMENT_TARGET "" CACHE STRING "set by -target")
set(ELIZA_ZIG_TARGET aarch64-macos.11.0)
include(${CMAKE_CURRENT_LIST_DIR}/zig-common.cmake)
# CMake turns on @rpath install names only when sw_vers reports macOS >= 10.5;
# on a Linux host the rules file below says so.
set(CMAKE_USER_MAKE_RULES_OVERRIDE_C ${CMAKE_CURRENT_LIST_DIR}/zig-darwin-rules.cmake)
