#!/usr/bin/env bash
# PCCL 1.0's own C/C++ test programs, built as an outside user builds them
# against an installed pccl, and run against pccl's ccoip_master:
#   tests/c99_compat        compiled as C99 with -Wall -Wextra -Wpedantic -Werror, run
#   tests/basic_reduce_test compiled as C++20, 2 peers run, a 3rd joins mid-run
#   tests/concurrent_reduce_test  the same
# No warning may come from pccl's headers (-Wall -Wextra), and the programs get no warning with
# pccl's headers that they do not get with PCCL 1.0's own (compiled side by side). A run passes when
# no peer exits or prints "Error:"/"failed", every peer completes at least
# --steps steps, and the newcomer is admitted and completes its own.
#
# Usage: scripts/pccl10-c.sh PCCL10_CHECKOUT [BUILD_DIR] [--steps N] [--timeout S]
#   COMPILE_ONLY=1: stop after compiling (and running c99_compat)
#   PCCL10_CHECKOUT  a checkout of PCCL 1.0 (its tests/ and log/ folders are used
#                    in place; nothing of it is copied into pccl)
#   BUILD_DIR        a configured and built pccl tree (default build/release)
# Needs port 48148 free on 127.0.0.1 (PCCL's programs hard-code it) and about
# 7 GiB of memory (basic_reduce_test allocates 2 GiB per peer). Outside CI: it
# needs PCCL 1.0's sources, which this project does not ship.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

PCCL10=${1:?usage: scripts/pccl10-c.sh PCCL10_CHECKOUT [BUILD_DIR] [--steps N] [--timeout S]}
shift
BUILD=build/release
if [[ $# -gt 0 && $1 != --* ]]; then BUILD=$1; shift; fi
STEPS=3
TIMEOUT=240
while [[ $# -gt 0 ]]; do
  case $1 in
    --steps) STEPS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
PCCL10=$(cd "$PCCL10" && pwd)
BUILD=$(cd "$BUILD" && pwd)
for f in tests/c99_compat/enforce_c99_compat.c tests/basic_reduce_test/main.cpp \
         tests/concurrent_reduce_test/main.cpp; do
  [[ -f $PCCL10/$f ]] || { echo "not a PCCL 1.0 checkout: $PCCL10/$f missing" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/pccl10-c.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

echo "== install pccl from $BUILD into $WORK/prefix"
cmake --build "$BUILD" >/dev/null
cmake --install "$BUILD" --prefix "$WORK/prefix" >/dev/null
PREFIX=$WORK/prefix
LIBDIR=$(dirname "$(find "$PREFIX" -name 'libpccl.so' | head -1)")
export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

FAILED=0
fail() { echo "FAIL: $*"; FAILED=1; }

compile() { # NAME COMPILER ARGS...
  local name=$1
  shift
  if ! "$@" >"$WORK/$name.build.log" 2>&1; then
    cat "$WORK/$name.build.log"
    fail "$name does not compile against pccl"
    return 1
  fi
  if grep -E "(pccl|ccoip|ccoip_inet)\.h:[0-9]+" "$WORK/$name.build.log" >/dev/null; then
    cat "$WORK/$name.build.log"
    fail "$name: warnings from pccl's headers"
    return 1
  fi
  # The same source against PCCL 1.0's own headers: pccl's may add no warning to the program's
  # (a struct with extra fields would add missing-initializer warnings to every initializer).
  local ref=("${@/#-I$PREFIX\/include/-I$PCCL10/include}")
  ref=("${ref[@]/#-o/-c}")
  local args=()
  for a in "${ref[@]}"; do
    case $a in -L* | -l* | "$WORK/$name") ;; *) args+=("$a") ;; esac
  done
  "${args[@]}" -o /dev/null -I"$PCCL10/ccoip/public_include" >"$WORK/$name.pccl10.log" 2>&1 || true
  local extra
  extra=$(comm -23 <(grep 'warning:' "$WORK/$name.build.log" | sort -u) \
    <(grep 'warning:' "$WORK/$name.pccl10.log" | sort -u))
  if [[ -n $extra ]]; then
    echo "$extra"
    fail "$name: warnings with pccl's headers that PCCL 1.0's headers do not give"
    return 1
  fi
  echo "ok: $name compiles ($(grep -c 'warning:' "$WORK/$name.build.log" || true) warning(s) of its own, the same with PCCL 1.0's headers; none from pccl's)"
}

echo "== compile"
compile c99_compat cc -std=c99 -Wall -Wextra -Wpedantic -Werror -I"$PREFIX/include" \
  "$PCCL10/tests/c99_compat/enforce_c99_compat.c" -o "$WORK/c99_compat" -L"$LIBDIR" -lpccl
for t in basic_reduce_test concurrent_reduce_test; do
  (cd "$PCCL10/tests/$t" && compile "$t" c++ -std=c++20 -O2 -Wall -Wextra -I"$PREFIX/include" \
    main.cpp -o "$WORK/$t" -L"$LIBDIR" -lpccl -lpthread) || true
done
[[ $FAILED -eq 0 ]] || exit 1

echo "== run c99_compat"
"$WORK/c99_compat" && echo "ok: c99_compat" || fail "c99_compat exited $?"

count() { grep -c "$2" "$1" 2>/dev/null || true; }

run_program() { # NAME DONE_PATTERN
  local name=$1 done_re=$2
  echo "== run $name: 2 peers, a 3rd joins after $STEPS steps; $STEPS steps each"
  "$ROOT/$(realpath --relative-to="$ROOT" "$BUILD")/master/ccoip_master" \
    --listen tcp://127.0.0.1:48148 --log-level WARN >"$WORK/$name.master.log" 2>&1 &
  local master=$!
  PIDS+=("$master")
  sleep 0.5
  if ! kill -0 "$master" 2>/dev/null; then
    cat "$WORK/$name.master.log"
    fail "$name: the master did not start (port 48148 busy?)"
    return
  fi
  local peers=()
  for k in 0 1; do
    "$WORK/$name" >"$WORK/$name.peer$k.log" 2>&1 &
    peers+=("$!")
    PIDS+=("$!")
  done
  local t0=$SECONDS joined=0
  while ((SECONDS - t0 < TIMEOUT)); do
    sleep 1
    local dead=0
    for p in "${peers[@]}"; do kill -0 "$p" 2>/dev/null || dead=1; done
    if ((dead)); then break; fi
    if ((joined == 0)) && (($(count "$WORK/$name.peer0.log" "$done_re") >= STEPS)); then
      "$WORK/$name" >"$WORK/$name.peer2.log" 2>&1 &
      peers+=("$!")
      PIDS+=("$!")
      joined=1
      echo "   newcomer started after $((SECONDS - t0)) s"
    fi
    if ((joined)); then
      local all=1
      for k in 0 1 2; do
        (($(count "$WORK/$name.peer$k.log" "$done_re") >= (k == 2 ? STEPS : 2 * STEPS))) || all=0
      done
      ((all)) && break
    fi
  done
  for k in 0 1 2; do
    local log=$WORK/$name.peer$k.log n
    n=$(count "$log" "$done_re")
    local want=$((k == 2 ? STEPS : 2 * STEPS))
    if grep -E "Error:|failed" "$log" >/dev/null; then
      grep -E "Error:|failed" "$log" | head -3
      fail "$name peer $k reported an error"
    elif ! kill -0 "${peers[$k]:-0}" 2>/dev/null; then
      tail -5 "$log" 2>/dev/null || true
      fail "$name peer $k exited (or never started)"
    elif ((n < want)); then
      fail "$name peer $k completed $n steps, wanted $want, in ${TIMEOUT}s"
    else
      echo "ok: $name peer $k completed $n steps"
    fi
  done
  for p in "${peers[@]}" "$master"; do kill -9 "$p" 2>/dev/null || true; done
  wait "${peers[@]}" "$master" 2>/dev/null || true
}

[[ ${COMPILE_ONLY:-0} == 1 ]] && exit $FAILED
run_program basic_reduce_test "All reduce finished"
run_program concurrent_reduce_test "All reduces finished sucessfully"

echo "logs: $WORK"
if ((FAILED)); then
  echo "PCCL 1.0 C programs against pccl: FAILED"
  exit 1
fi
echo "PCCL 1.0 C programs against pccl: all passed"
