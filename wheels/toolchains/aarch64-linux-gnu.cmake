# Cross-compiles libeliza for 64-bit ARM Linux with Debian's
# gcc-aarch64-linux-gnu, and runs the C tests through qemu user mode:
#
#   cmake -S . -B build-arm64 -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=wheels/toolchains/aarch64-linux-gnu.cmake
#   cmake --build build-arm64 && ctest --test-dir build-arm64
#
# ELIZA_AARCH64_SYSROOT names the target's libc tree (the qemu -L root too).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(ELIZA_AARCH64_SYSROOT "/usr/aarch64-linux-gnu" CACHE PATH "aarch64 libc tree for linking and for qemu -L")

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_FIND_ROOT_PATH ${ELIZA_AARCH64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# ctest (and add_test commands) run target binaries through qemu.
find_program(ELIZA_QEMU_AARCH64 qemu-aarch64)
if(ELIZA_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${ELIZA_QEMU_AARCH64} -L ${ELIZA_AARCH64_SYSROOT})
endif()
