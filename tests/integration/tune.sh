#!/usr/bin/env bash
# The group-wide tuner over real processes (docs/algorithms.md): `pccl-tune --local N` tunes
# N peers (1 KiB .. 64 KiB, one timed run each) and every member must print the same table
# hash; the table names the world and 7 tuned sizes; then `--load` installs that file in a
# fresh run without timing and the table the members hold is byte-identical to the file.
#   tune.sh PCCL_TUNE N
set -u
TUNE=$1
N=${2:-3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() {
  echo "FAIL: $*" >&2
  cat "$TMP"/*.out >&2 2>/dev/null
  exit 1
}
timeout 60 "$TUNE" --local "$N" --max 65536 --iters 1 --out "$TMP/table.txt" >"$TMP/tune.out" \
  2>"$TMP/tune.log" || fail "pccl-tune --local $N (rc $?): $(tail -5 "$TMP/tune.log")"
hashes=$(grep -o "rank [0-9]*/$N table [0-9a-f]*" "$TMP/tune.out" | awk '{print $4}' | sort -u)
[[ $(grep -c "rank [0-9]*/$N table" "$TMP/tune.out") -eq $N ]] || fail "not $N members reported"
[[ $(echo "$hashes" | wc -l) -eq 1 ]] || fail "members hold different tables: $hashes"
grep -q "^world $N:" "$TMP/table.txt" || fail "no row for world $N"
row=$(grep "^world $N:" "$TMP/table.txt" | cut -d: -f2)
tuned=$(echo "$row" | tr ' ' '\n' | grep -c -E '^(relay|direct|ring|ring_striped)$')
autos=$(echo "$row" | tr ' ' '\n' | grep -c '^auto$')
[[ $tuned -eq 7 && $autos -eq 12 ]] || fail "expected 7 tuned sizes and 12 auto: $row"
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
