#!/usr/bin/env bash
# Installs the build tree into a temporary prefix and builds a consumer of
# the installed package twice: with pkg-config and with find_package(pccl).
#   install_consumer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD=$1 SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null
for f in include/pccl.h include/ccoip.h include/ccoip_inet.h lib/libpccl.so lib/libpccl.a \
  lib/pkgconfig/pccl.pc lib/cmake/pccl/pcclConfig.cmake bin/ccoip_master; do
  [[ -e "$TMP/prefix/$f" ]] || { echo "missing $f"; exit 1; }
done
# pkg-config, shared and static.
export PKG_CONFIG_PATH="$TMP/prefix/lib/pkgconfig"
cc -std=c11 "$SRC/examples/hello_allreduce.c" $(pkg-config --cflags --libs pccl) \
  -Wl,-rpath,"$TMP/prefix/lib" -o "$TMP/hello_pc"
cc -std=c11 "$SRC/examples/hello_allreduce.c" $(pkg-config --cflags pccl) \
  "$TMP/prefix/lib/libpccl.a" -lnng -lcrypto -lpthread -lm -o "$TMP/hello_static"
# find_package(pccl).
mkdir -p "$TMP/consumer"
cp "$SRC/examples/hello_allreduce.c" "$TMP/consumer/"
cat >"$TMP/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(pccl 0.1 REQUIRED)
add_executable(hello hello_allreduce.c)
target_link_libraries(hello PRIVATE pccl::pccl)
add_executable(hello_static hello_allreduce.c)
target_link_libraries(hello_static PRIVATE pccl::pccl_static)
CM
cmake -S "$TMP/consumer" -B "$TMP/consumer/build" -G Ninja -DCMAKE_PREFIX_PATH="$TMP/prefix" >/dev/null
cmake --build "$TMP/consumer/build" >/dev/null
# The installed master starts and stops.
"$TMP/prefix/bin/ccoip_master" --help >/dev/null
echo "install consumer: ok"
