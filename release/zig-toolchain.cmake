# CMake toolchain of memrun's portable binary (release/make): zig's clang
# and its own libc++, linked against the symbols of an old glibc, so that
# the binary runs on every current glibc distribution. MEMRUN_TOOLS is the
# folder release/make wrote the zig wrappers to (cc, c++, ar, ranlib: each
# `zig CMD -target x86_64-linux-gnu.GLIBC`); MEMRUN_DEPS the prefix it
# built the libraries into. Nothing is taken from the host's /usr: its
# headers are of a newer glibc and its libraries of libstdc++.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_TRY_COMPILE_PLATFORM_VARIABLES MEMRUN_TOOLS MEMRUN_DEPS)
set(CMAKE_C_COMPILER ${MEMRUN_TOOLS}/cc)
set(CMAKE_CXX_COMPILER ${MEMRUN_TOOLS}/c++)
set(CMAKE_AR ${MEMRUN_TOOLS}/ar CACHE FILEPATH "")
set(CMAKE_RANLIB ${MEMRUN_TOOLS}/ranlib CACHE FILEPATH "")
# GNU strip, as the wheel's build (GCC's) strips: the same bytes. CMake
# would take llvm-strip for a clang where one is installed.
find_program(CMAKE_STRIP NAMES strip REQUIRED)
set(CMAKE_FIND_ROOT_PATH ${MEMRUN_DEPS})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} ${MEMRUN_DEPS}/lib/pkgconfig:${MEMRUN_DEPS}/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
