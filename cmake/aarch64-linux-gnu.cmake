# aarch64-linux-gnu.cmake: a cross build for 64-bit Arm Linux with Debian's
# gcc-aarch64-linux-gnu, against the arm64 libraries of a multiarch install
# (libpcre2-dev:arm64, libcjson-dev:arm64; scripts/setup-deps --aarch64).
# ctest and the build's own checks run the programs under qemu-user.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)

# pkg-config answers for arm64 only (the .pc files of the multiarch packages)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
