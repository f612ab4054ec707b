# Read after CMake's Darwin platform rules (CMAKE_USER_MAKE_RULES_OVERRIDE_C).
# Platform/Darwin.cmake sets the rpath flag only if `sw_vers` (absent on a
# Linux host) reports macOS >= 10.5; without it the dylib would get its
# build directory as install name instead of @rpath/libeliza.dylib.
set(CMAKE_SHARED_LIBRARY_RUNTIME_C_FLAG "-Wl,-rpath,")
