#!/usr/bin/env bash
# Compiles and links PCCL's C++ "Hello World" (the first c++ block of the
# reference examples, unchanged) against include/pccl.h and libpccl.so:
#   g++ -std=c++20 -include cassert hello.cpp -lpccl
# The example is read from the reference document at test time (it is not
# part of this repository); without it the test is skipped (exit 77).
#
#   hello_world_compile.sh EXAMPLES_MD INCLUDE_DIR LIBPCCL_SO OUT_DIR
set -euo pipefail
MD=$1 INC=$2 LIB=$3 OUT=$4
if [[ ! -f "$MD" ]]; then echo "SKIP: $MD not found"; exit 77; fi
mkdir -p "$OUT"
awk '/^```c\+\+/{on=1; next} /^```/{if(on){exit}} on' "$MD" >"$OUT/hello_world.cpp"
grep -q "pcclSynchronizeSharedState" "$OUT/hello_world.cpp" || { echo "no example found"; exit 1; }
g++ -std=c++20 -include cassert -Wall -I"$INC" "$OUT/hello_world.cpp" -o "$OUT/hello_world" \
  -L"$(dirname "$LIB")" -lpccl -Wl,-rpath,"$(dirname "$LIB")"
echo "hello world compiled and linked: $OUT/hello_world"
