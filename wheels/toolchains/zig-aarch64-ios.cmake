# iOS 13 arm64 (device), static library only: the closest build to Xcode's
# that runs on Linux. zig has the Darwin libc headers but adds them only for
# macOS targets, so they are named here; nothing is linked.
set(CMAKE_SYSTEM_NAME iOS)
set(CMAKE_SYSTEM_PROCESSOR arm64)
set(CMAKE_OSX_ARCHITECTURES "" CACHE STRING "set by -target")
set(CMAKE_OSX_DEPLOYMENT_TARGET "" CACHE STRING "set by -target")
# CMake's iOS platform insists on a sysroot named like an SDK; an empty one
# does, as zig supplies the headers.
set(_eliza_fake_sdk "${CMAKE_BINARY_DIR}/zig-ios-sdk/iPhoneOS.sdk")
file(MAKE_DIRECTORY "${_eliza_fake_sdk}")
set(CMAKE_OSX_SYSROOT "${_eliza_fake_sdk}" CACHE PATH "empty stand-in SDK")
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(ELIZA_ZIG_TARGET aarch64-ios.13.0)
include(${CMAKE_CURRENT_LIST_DIR}/zig-common.cmake)
execute_process(COMMAND ${_eliza_wheels}/zig env OUTPUT_VARIABLE _eliza_zig_env)
string(REGEX MATCH "lib_dir\"? *[=:] *\"([^\"]+)\"" _m "${_eliza_zig_env}")
set(CMAKE_C_FLAGS_INIT "${CMAKE_C_FLAGS_INIT} -isystem ${CMAKE_MATCH_1}/libc/include/any-darwin-any")
