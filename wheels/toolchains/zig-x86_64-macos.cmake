# macOS 10.13 x86_64 (the macosx_10_13_x86_64 wheel).
set(CMAKE_SYSTEM_NAME Darwin)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_OSX_ARCHITECTURES "" CACHE STRING "set by -target")
set(CMAKE_OSX_DEPLOYMENT_TARGET "" CACHE STRING "set by -target")
set(ELIZA_ZIG_TARGET x86_64-macos.10.13)
include(${CMAKE_CURRENT_LIST_DIR}/zig-common.cmake)
# CMake turns on @rpath install names only when sw_vers reports macOS >= 10.5;
# on a Linux host the rules file below says so.
set(CMAKE_USER_MAKE_RULES_OVERRIDE_C ${CMAKE_CURRENT_LIST_DIR}/zig-darwin-rules.cmake)
