# 32-bit ARM Linux (armv7-a, hard float, musl, static executables): the
# closest stand-in for Android's armeabi-v7a that runs here (tests under
# plain qemu-arm). Catches 32-bit size_t / long assumptions.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7-a)
set(ELIZA_ZIG_TARGET arm-linux-musleabihf)
include(${CMAKE_CURRENT_LIST_DIR}/zig-common.cmake)
set(CMAKE_C_FLAGS_INIT "${CMAKE_C_FLAGS_INIT} -mcpu=generic+v7a+neon+vfp4")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-arm)
