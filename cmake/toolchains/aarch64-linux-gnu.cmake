# Cross build for aarch64 Linux with Debian's cross toolchain (g++-aarch64-linux-gnu) and the arm64
# multiarch -dev packages (libgtest-dev:arm64, libfmt-dev:arm64, libutf8proc-dev:arm64; see
# scripts/setup.sh). Test binaries run under qemu-user: ctest and gtest_discover_tests go through
# CMAKE_CROSSCOMPILING_EMULATOR, so `ctest --preset neon` executes the NEON kernels on an x86 host.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Headers of arch-independent packages (nlohmann-json, CLI11) stay in /usr/include; libraries and CMake
# package files come from the multiarch folders only.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# No -L /usr/aarch64-linux-gnu: the binaries run with the multiarch loader and libraries (libc6:arm64,
# /lib/ld-linux-aarch64.so.1), so loader and libc come from one package. Mixing the cross toolchain's
# loader (2.36-8cross1) with the multiarch libc (2.36-9+deb12u14) hung every pthread_create.
find_program(MINFER_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${MINFER_QEMU_AARCH64})
