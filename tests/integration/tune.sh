#!/usr/bin/env bash
# The group-wide tuner over real processes (docs/algorithms.md): `pccl-tune --local N` tunes
# N peers (1 KiB .. 64 KiB, one timed run each) and every member must print the same table
# hash; the table names the world and 7 tuned sizes; then `--load` installs that file in a
# fresh run without timing and the table the members hold is byte-identical to the file.
# KINDS "all": every kind of the collective set is tuned too (a row per kind, the barrier's
# one size class), and loaded back alike.
#   tune.sh PCCL_TUNE N [KINDS]
set -u
TUNE=$1
N=${2:-3}
KINDS=${3:-all_reduce}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() {
  echo "FAIL: $*" >&2
  cat "$TMP"/*.out >&2 2>/dev/null
  exit 1
}
timeout 60 "$TUNE" --local "$N" --max 65536 --iters 1 --kinds "$KINDS" --out "$TMP/table.txt" \
  >"$TMP/tune.out" \
  2>"$TMP/tune.log" || fail "pccl-tune --local $N (rc $?): $(tail -5 "$TMP/tune.log")"
hashes=$(grep -o "rank [0-9]*/$N table [0-9a-f]*" "$TMP/tune.out" | awk '{print $4}' | sort -u)
[[ $(grep -c "rank [0-9]*/$N table" "$TMP/tune.out") -eq $N ]] || fail "not $N members reported"
[[ $(echo "$hashes" | wc -l) -eq 1 ]] || fail "members hold different tables: $hashes"
grep -q "^world $N:" "$TMP/table.txt" || fail "no row for world $N"
row=$(grep "^world $N:" "$TMP/table.txt" | cut -d: -f2)
count_row() { # KIND-PREFIX TUNED: the row has TUNED named entries, the rest auto
  local r t a
  r=$(grep "^$1world $N:" "$TMP/table.txt" | cut -d: -f2)
  t=$(echo "$r" | tr ' ' '\n' | grep -c -E '^(relay|direct|ring|ring_striped|halving_doubling)$')
  a=$(echo "$r" | tr ' ' '\n' | grep -c '^auto$')
  [[ $t -eq $2 && $a -eq $((19 - $2)) ]] || fail "${1:-all_reduce }row: expected $2 tuned: $r"
}
count_row "" 7
if [[ $KINDS == all ]]; then
  for k in broadcast reduce all_gather reduce_scatter all_to_all gather scatter; do
    count_row "$k " 7
  done
  count_row "barrier " 1
  grep -q -E "^broadcast world $N: .*(relay|ring)" "$TMP/table.txt" || fail "no broadcast row"
fi
cat "$TMP/table.txt"
timeout 60 "$TUNE" --local "$N" --load "$TMP/table.txt" --out "$TMP/loaded.txt" \
  >"$TMP/load.out" 2>"$TMP/load.log" || fail "pccl-tune --load (rc $?): $(tail -5 "$TMP/load.log")"
cmp -s "$TMP/table.txt" "$TMP/loaded.txt" || fail "the loaded table differs from the file"
loaded=$(grep -o "rank [0-9]*/$N table [0-9a-f]*" "$TMP/load.out" | awk '{print $4}' | sort -u)
[[ $(echo "$loaded" | wc -l) -eq 1 ]] || fail "members hold different tables after the load"
printf 'bad table\n' >"$TMP/bad.txt"
if timeout 60 "$TUNE" --local 2 --load "$TMP/bad.txt" >"$TMP/bad.out" 2>&1; then
  fail "a malformed table was accepted"
fi
grep -q "pcclTuneLoad failed: 3" "$TMP/bad.out" ||
  fail "a malformed table is not pcclInvalidArgument"
echo "PASS: tune $N"
