#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the README's second
# command and what CI (.ci/run) runs.
#
# Tiers and their budgets on a 2-core machine (the whole run stays < 30 min):
#   format   clang-format check                               1 min
#   native   gcc, -Werror, Release: unit + header + tidy + integration  8 min
#            (+ label wan, the WAN testbed: ~20 s as root, skipped otherwise)
#   clang    clang, -Werror: build + unit tests                5 min
#   asan     gcc, ASan+UBSan, -Werror: unit + simulation tests  12 min (7 measured)
#   integration  ASan+UBSan: master + peer processes on 127.0.0.1, hostile  4 min
#   soak     ASan+UBSan: 60 s churn soak + canary (ctest -L soak)  4 min
#   tsan     clang TSan: runtime build + 11 integration scenarios  7 min
#   wasm     emcc: unit tests, corpus, simulator under node    10 min
#   bindings Go (go test), Rust (cargo test --offline), Python (pytest) and the
#            cross-language ring, against the native tier's libpccl    10 min
#   packaging  wheel (3 peers over a fresh venv), Rust bundled, .deb (C++ hello world
#            against it, dpkg cycle in a scratch root), Go via pkg-config  5 min (2 measured)
# Later tiers (simulation sweep) get their own budgets here.
# Long soaks and fuzzing live outside CI: scripts/fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

scripts/install-deps.sh

JOBS=$(nproc)
export CTEST_OUTPUT_ON_FAILURE=1
declare -a SUMMARY=()
FAILED=0

tier() { # tier NAME BUDGET_SECONDS COMMAND...
  local name=$1 budget=$2
  shift 2
  local t0=$SECONDS
  echo "=== tier ${name} (budget ${budget}s) ==="
  if timeout --foreground "$budget" bash -c "$*"; then
    SUMMARY+=("${name}: ok in $((SECONDS - t0))s (budget ${budget}s)")
  else
    local rc=$?
    SUMMARY+=("${name}: FAILED (exit ${rc}) after $((SECONDS - t0))s (budget ${budget}s)")
    FAILED=1
  fi
}

configure_build_test() { # DIR CTEST_ARGS CMAKE_ARGS...
  local dir=$1 ctest_args=$2
  shift 2
  echo "cmake -S $ROOT -B $dir -G Ninja $*"
  cmake -S "$ROOT" -B "$dir" -G Ninja "$@" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; return 1; }
  cmake --build "$dir" -j "$JOBS"
  # shellcheck disable=SC2086
  ctest --test-dir "$dir" -j "$JOBS" $ctest_args
}
export -f configure_build_test
export ROOT JOBS

mkdir -p build
tier format 60 "scripts/check-format.sh"
tier native 480 "configure_build_test build/ci-native '-LE soak|bindings' -DPCCL_WERROR=ON -DCMAKE_BUILD_TYPE=Release"
tier clang 300 "configure_build_test build/ci-clang '-L unit' -DPCCL_WERROR=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release"
tier asan 720 "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  configure_build_test build/ci-asan '-L unit|sim -LE long' -DPCCL_WERROR=ON -DPCCL_SANITIZE=ON \
  -DCMAKE_BUILD_TYPE=Debug -DPCCL_BUILD_BENCH=OFF"
# Real processes on 127.0.0.1 (master + peers, kills, garbage), under
# ASan+UBSan, reusing the asan tier's build (its runtime targets included).
tier integration 240 "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  cmake --build build/ci-asan -j $JOBS && ctest --test-dir build/ci-asan -j $JOBS -L 'integration|hostile'"
# A 60 s churn soak (SIGKILL/SIGSTOP/restart of random peers) and its canary.
tier soak 240 "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  cmake --build build/ci-asan -j $JOBS && ctest --test-dir build/ci-asan -j $JOBS -L soak"
# The runtime under ThreadSanitizer (clang): integration scenarios, no report in our code.
tier tsan 420 "tests/integration/tsan.sh build/ci-tsan"
tier wasm 600 "NODE_PATH=/usr/share/nodejs configure_build_test build/ci-wasm '' -DPCCL_WERROR=ON \
  -DCMAKE_TOOLCHAIN_FILE=/usr/share/emscripten/cmake/Modules/Platform/Emscripten.cmake \
  -DCMAKE_CROSSCOMPILING_EMULATOR=/usr/bin/node -DCMAKE_BUILD_TYPE=Release \
  -DPCCL_NATIVE_CORPUS=$ROOT/build/ci-native/tests/pccl_corpus"

# The language bindings over the native tier's libpccl.so and ccoip_master.
tier bindings 600 "bash bindings/go/test.sh build/ci-native && bash bindings/rust/test.sh build/ci-native \
  && ctest --test-dir build/ci-native -L bindings --no-tests=error"
# The artifacts users install (docs/packaging.md), made from the native tier's tree.
tier packaging 300 "bash scripts/test-packaging.sh build/ci-native"

echo
echo "=== summary ==="
printf '  %s\n' "${SUMMARY[@]}"
echo "  total: $((SECONDS))s"
exit $FAILED
