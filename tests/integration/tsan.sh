#!/usr/bin/env bash
# ThreadSanitizer over the runtime: builds transport/, libpccl, ccoip_master
# and the integration peers with clang -fsanitize=thread, runs a subset of the
# integration scenarios (run.sh) with real processes on 127.0.0.1, and fails
# on any ThreadSanitizer report in our code. Debian's libnng is not
# instrumented: TSan cannot see its atomics, so it reports races between two
# accesses that nng's own code makes (through interceptors) on nng's objects.
# Those, and only those, are filtered here (see classify below: TSan's
# suppression syntax cannot say "both accesses made by libnng", and
# race:libnng.so would also hide races in our aio callbacks, which always run
# above nng frames); tsan.supp is passed for exact entries and must never name
# pccl code.
#
#   tests/integration/tsan.sh BUILD_DIR [SCENARIO...]
#
# SCENARIO: as run.sh takes them, one word with ':' between the arguments
# (default: allreduce:3 allreduce:4 kill-peer kill-peer-mid-op stop-peer
# master-death sync optimize:3 garbage ipc-allreduce:3 tls-allreduce:2;
# e.g. concurrent:3:2 runs "run.sh ... concurrent 3 2", a pool of 2).
# Then the collective set (coll.py: every kind exact at N = 3 with concurrent
# work objects, lists, all-to-all-v, PREMUL_SUM), unless COLL_SCENARIOS is empty.
# Exit: 0 clean; 1 a scenario failed or a report was printed; 2 build failed.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${1:?usage: tsan.sh BUILD_DIR [SCENARIO...]}
shift
SCENARIOS=("$@")
if [[ ${#SCENARIOS[@]} -eq 0 ]]; then
  SCENARIOS=(allreduce:3 allreduce:4 kill-peer kill-peer-mid-op stop-peer master-death sync
    optimize:3 garbage ipc-allreduce:3 tls-allreduce:2)
fi
JOBS=${JOBS:-2}
T0=$SECONDS

flags="-fsanitize=thread -fno-omit-frame-pointer -g -O1"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPCCL_WERROR=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DPCCL_BUILD_BENCH=OFF \
  "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" \
  "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread" "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread" \
  >"$BUILD.configure.log" 2>&1 || { cat "$BUILD.configure.log"; exit 2; }
cmake --build "$BUILD" -j "$JOBS" --target pccl ccoip_master itest_peer itest_coll_peer || exit 2
echo "tsan: built in $((SECONDS - T0)) s"

REPORTS=$(mktemp -d)
trap 'rm -rf "$REPORTS"' EXIT
# halt_on_error=0: a report does not change a process's behaviour (the
# scenario runs to its end); every report lands in $REPORTS/tsan.PID.
# exitcode=0: exit statuses stay the scenario's verdict; reports are counted
# from the files below.
export TSAN_OPTIONS="suppressions=$HERE/tsan.supp log_path=$REPORTS/tsan halt_on_error=0 \
exitcode=0 second_deadlock_stack=1 history_size=4 ${TSAN_OPTIONS:-}"
export PCCL_LOG_LEVEL=${PCCL_LOG_LEVEL:-WARN}
# Sanitized processes are slower: the scenario watchdog gets more time.
export PCCL_ITEST_BUDGET=${PCCL_ITEST_BUDGET:-90}
# ... and the heartbeat eviction bound too: a TSan process on a loaded 2-core
# machine can miss 1 s of heartbeats in a 64 MiB all-reduce (kill-peer-mid-op).
export PCCL_ITEST_EVICT_MS=${PCCL_ITEST_EVICT_MS:-3000}
FAILED=0
for sc in "${SCENARIOS[@]}"; do
  t=$SECONDS
  if "$HERE/run.sh" "$BUILD/master/ccoip_master" "$BUILD/tests/integration/itest_peer" \
    ${sc//:/ } >"$REPORTS/run.log" 2>&1; then
    echo "tsan: $sc: PASS in $((SECONDS - t)) s"
  else
    echo "tsan: $sc: FAILED in $((SECONDS - t)) s"
    tail -n 60 "$REPORTS/run.log"
    FAILED=1
  fi
done
for sc in ${COLL_SCENARIOS-exact}; do
  t=$SECONDS
  if python3 "$HERE/coll.py" --scenario "$sc" --world 3 --budget 120 \
    --master "$BUILD/master/ccoip_master" --peer "$BUILD/tests/integration/itest_coll_peer" \
    >"$REPORTS/run.log" 2>&1; then
    echo "tsan: coll-$sc: PASS in $((SECONDS - t)) s"
  else
    echo "tsan: coll-$sc: FAILED in $((SECONDS - t)) s"
    tail -n 60 "$REPORTS/run.log"
    FAILED=1
  fi
done
# Split every report file into reports; a report is nng-internal when it is
# a data race and, in each of its access stacks, frame #0 is an interceptor
# (a libc function without a source line) and frame #1 is in libnng.so
# (both conflicting accesses were made by nng's own, uninstrumented code: e.g. a mutex nng's reaper destroys after its
# reference count, an atomic TSan cannot see, dropped to 0). Anything else
# (a frame of ours doing an access, any other report type) counts.
classify() { # FILE: prints "ours N" and "nng N", and the counted reports
  awk '
    function flush() {
      if (!inrep) return
      if (israce && nsec > 0 && nsec == nngsec) { nng++; print "nngtop " top0 " / " top1 }
      else { ours++; printf "%s", buf }
      inrep = 0; buf = ""
    }
    /^==================$/ { flush(); next }
    /^WARNING: ThreadSanitizer:/ {
      flush(); inrep = 1; israce = ($0 ~ /data race/); nsec = 0; nngsec = 0; sec = 0
    }
    inrep {
      buf = buf $0 "\n"
      if ($0 ~ /^  [A-Za-z ]*(Write|Read|write|read) of size/) { nsec++; sec = 1; next }
      if (sec && $0 ~ /^    #0 /) {
        if (nsec == 1) top0 = $2; else top1 = $2
        icpt = ($3 == "<null>") # an interceptor: no source line (ours all have one)
      }
      if ($0 ~ /^  [A-Z]/) { sec = 0; next }
      if (sec && icpt && $0 ~ /^    #1 / && $0 ~ /\(libnng\.so/) nngsec++
    }
    END { flush(); print "ours " ours + 0; print "nng " nng + 0 }
  ' "$1"
}
# The filter must keep a race of ours: a canary report (our aio callback
# racing with an nng memcpy) has to count.
cat >"$REPORTS/canary" <<'EOF'
==================
WARNING: ThreadSanitizer: data race (pid=1)
  Write of size 8 at 0x7b0400000010 by thread T2:
    #0 cb_send /src/transport/pt_driver.c:360:35 (libpccl.so.0+0x11b8a)
    #1 <null> <null> (libnng.so.1+0x24108)

  Previous read of size 8 at 0x7b0400000010 by thread T3:
    #0 memcpy <null> (itest_peer+0x5b57e)
    #1 <null> <null> (libnng.so.1+0x2bd25)

SUMMARY: ThreadSanitizer: data race /src/transport/pt_driver.c:360:35 in cb_send
==================
EOF
if ! classify "$REPORTS/canary" | grep -q '^ours 1$'; then
  echo "tsan: the report filter dropped the canary race: fix classify"
  exit 2
fi
rm -f "$REPORTS/canary"
n=0
nng=0
: >"$REPORTS/nng.txt"
for f in "$REPORTS"/tsan.*; do
  [[ -e "$f" ]] || continue
  out=$(classify "$f")
  o=$(sed -n 's/^ours //p' <<<"$out")
  g=$(sed -n 's/^nng //p' <<<"$out")
  nng=$((nng + g))
  sed -n 's/^nngtop //p' <<<"$out" >>"$REPORTS/nng.txt"
  if [[ "$o" -gt 0 ]]; then
    n=$((n + o))
    echo "=== $f: $o reports in pccl's code"
    grep -v -E '^(ours|nng) [0-9]+$|^nngtop ' <<<"$out"
  fi
done
echo "tsan: $nng reports inside libnng only (both accesses by nng's own code), not counted:"
sort "$REPORTS/nng.txt" | uniq -c | sed 's/^/  accesses by /'
echo "tsan: ${#SCENARIOS[@]} scenarios, $n reports, $((SECONDS - T0)) s in all"
[[ $n -eq 0 && $FAILED -eq 0 ]] || exit 1
exit 0
