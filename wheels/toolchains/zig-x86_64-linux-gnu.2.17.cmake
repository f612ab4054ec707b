# x86_64 Linux against glibc 2.17 symbols: a manylinux2014 library built on
# any Linux host. Not marked as cross compiling: the result runs here.
set(ELIZA_ZIG_TARGET x86_64-linux-gnu.2.17)
include(${CMAKE_CURRENT_LIST_DIR}/zig-common.cmake)
