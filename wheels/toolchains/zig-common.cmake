# Shared part of the zig-*.cmake toolchains: `zig cc -target ${ELIZA_ZIG_TARGET}`
# through the wrappers in wheels/ (zig from $ZIG, PATH, or `pip install ziglang`).
# The target goes into the initial flags, so compiler checks, try_compile,
# every compile and every link line carry it.
get_filename_component(_eliza_wheels "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(CMAKE_C_COMPILER "${_eliza_wheels}/zig-cc")
set(CMAKE_AR "${_eliza_wheels}/zig-ar" CACHE FILEPATH "zig ar")
set(CMAKE_RANLIB "${_eliza_wheels}/zig-ranlib" CACHE FILEPATH "zig ranlib")
set(CMAKE_C_FLAGS_INIT "-target ${ELIZA_ZIG_TARGET}")
set(CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ELIZA_ZIG_TARGET)
