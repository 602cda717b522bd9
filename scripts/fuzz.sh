#!/usr/bin/env bash
# Builds every libFuzzer target of tests/fuzz/ with clang + ASan + UBSan and
# runs each for a share of the given time, then reports executions and
# findings. Not part of CI (scripts/test.sh replays the seed corpora instead).
#
#   scripts/fuzz.sh [TOTAL_SECONDS] [PARALLEL]
#     TOTAL_SECONDS  fuzzing CPU time summed over all targets (default 600)
#     PARALLEL       targets run at the same time (default: number of cores)
#
# Seeds come from tests/fuzz/corpus/<target> (read-only); new inputs go to
# build-fuzz/corpus/<target>, crashes to build-fuzz/artifacts/<target>/.
# A finding is reproduced with: build-fuzz/fuzz_<target> <artifact file>.
# Exit status: 0 when no target found anything.
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${1:-600}
PARALLEL=${2:-$(nproc)}
OUT=build-fuzz
TARGETS=(ctrl_p2m ctrl_m2p pb_messages data_header algo_table master peer trace transport)
PER=$((TOTAL / ${#TARGETS[@]}))
CFLAGS=(-std=c11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
        -fno-sanitize-recover=all -Iinclude -Icore -Icore/internal -Ischema/gen)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

mkdir -p "$OUT"
for t in "${TARGETS[@]}"; do
  # Every target links the whole core (the master target needs the state
  # machines; the codec targets only use the codec, the rest is dead code);
  # transport runs a real master and peer (the runtime, nng, threads).
  extra=()
  [[ $t == transport ]] && extra=(-Itransport transport/*.c -lnng -lcrypto -lpthread)
  clang "${CFLAGS[@]}" "tests/fuzz/fuzz_$t.c" schema/gen/ccoip_pb.c core/*.c "${extra[@]}" -lm \
    -o "$OUT/fuzz_$t"
  mkdir -p "$OUT/corpus/$t" "$OUT/artifacts/$t"
done
echo "fuzz: ${#TARGETS[@]} targets, ${PER}s each, ${PARALLEL} at a time, ASan+UBSan"

run_one() {
  local t=$1
  "$OUT/fuzz_$t" -max_total_time="$PER" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$OUT/artifacts/$t/" \
    "$OUT/corpus/$t" "tests/fuzz/corpus/$t" >"$OUT/fuzz_$t.log" 2>&1 || true
}
running=0
for t in "${TARGETS[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [[ $running -ge $PARALLEL ]]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

total_execs=0
findings=0
for t in "${TARGETS[@]}"; do
  log="$OUT/fuzz_$t.log"
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  secs=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  corpus=$(find "$OUT/corpus/$t" -type f | wc -l)
  found=$(find "$OUT/artifacts/$t" -type f | wc -l)
  total_execs=$((total_execs + ${execs:-0}))
  findings=$((findings + found))
  printf 'fuzz: %-12s %12s execs (%s/s), coverage %s, corpus +%s, findings %s\n' \
    "$t" "${execs:-0}" "${secs:-0}" "${cov:-0}" "$corpus" "$found"
  if [[ $found -gt 0 ]]; then grep -m1 -A15 'ERROR\|==ERROR\|deadly signal' "$log" || true; fi
done
echo "fuzz: total ${total_execs} executions in ${TOTAL}s of fuzzing, ${findings} finding(s)"
[[ $findings -eq 0 ]]
