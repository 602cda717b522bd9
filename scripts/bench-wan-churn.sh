#!/usr/bin/env bash
# Churn at distance (issue 23, docs/wan.md "Churn at distance"): a group of
# --peers peers across the WAN testbed (scripts/wan-testbed.sh, --rtt-ms
# between every two nodes, --rate-mbit per pair) runs all-reduces in a loop
# (bench/wan/pccl_wan_churn.c); while op --kill-op is in flight (the victim
# printed its START line, then half its fastest op so far passed) the
# victim gets SIGKILL ("kill": the kernel closes its connections) or SIGSTOP
# for good ("stop": a hung machine, evicted by heartbeat silence after the
# master's --evict-ms). The survivors' op fails, they update the topology until
# the group is the survivors and run the next op, checked exactly and
# compared bit for bit across survivors (FNV-1a of the result). Runs as root.
#
#   scripts/bench-wan-churn.sh [--quick] [--peers 4] [--rtt-ms 50] [--rate-mbit 1000]
#       [--sizes "1M 64M"] [--modes "kill stop"] [--reps 3] [--evict-ms 2000]
#       [--heartbeat-ms 250] [--victim 1] [--kill-op 4] [--pool 0] [--no-offload]
#       [--build DIR] [--out DIR] [--name NAME]
#   scripts/bench-wan-churn.sh --summarize OUT/runs.tsv     (the table again, from the runs)
#
# Per run: recovery = the last survivor's next-op completion − the kill (one
# clock: CLOCK_REALTIME, shared by every namespace of the host, `date +%s%N`
# here); fail = the last survivor's failing op's return − the kill; group =
# the last survivor's pcclUpdateTopology that left the N − 1 survivors − the
# kill; next = the next op's own duration (longest survivor); bound =
# evict_ms + 3 RTT + 1 s. OUT/runs.tsv has every run, OUT/summary.md the table per scenario
# (min / median / max; "met" when the max is within the bound), OUT/<run>/
# the master's and peers' output and logs (PCCL_LOG_LEVEL, default WARN, for
# both). The script fails (exit 1) when a run fails — a peer's error, a wrong
# or differing result, no recovery within the budget — never on time.
# --quick: 1 MiB only, one repetition.
set -euo pipefail
CALLER_PWD=$PWD
cd "$(dirname "$0")/.."
ROOT=$(pwd)
TB=$ROOT/scripts/wan-testbed.sh

# summarize RUNS_TSV: the table per scenario (medians; min / median / max of the recovery; met
# when the max is within the bound; the 1-min load average's range over the runs).
summarize() {
  awk -F'\t' '
  NR == 1 { next }
  { key = $1 "\t" $2; if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
    ev[key] = $4; rtt[key] = $5; bd[key] = $6
    if (!(key in lmin) || $13 < lmin[key]) lmin[key] = $13
    if (!(key in lmax) || $13 > lmax[key]) lmax[key] = $13
    if ($14 != "ok") { bad[key]++; next }
    n[key]++; rec[key, n[key]] = $9; fl[key, n[key]] = $8; nx[key, n[key]] = $10
    gr[key, n[key]] = $15
    if ($7 == "yes") mid[key]++ }
  function stats(arr, key, cnt,   i, j, t, v) {
    for (i = 1; i <= cnt; i++) v[i] = arr[key, i] + 0
    for (i = 2; i <= cnt; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    S_MIN = v[1]; S_MAX = v[cnt]
    S_MED = cnt % 2 ? v[(cnt + 1) / 2] : (v[cnt / 2] + v[cnt / 2 + 1]) / 2
  }
  END {
    print "| scenario | size | evict_ms | RTT ms | bound ms | runs (mid-op) | failing op returns, median ms | survivors group, median ms | next op alone, median ms | recovery min / median / max ms | met? | load |"
    print "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for (k = 1; k <= nk; k++) {
      key = order[k]; split(key, p, "\t"); c = n[key] + 0
      if (c == 0) { printf "| %s | %s | %s | %s | %s | 0 (%d failed) | | | | | no | |\n", p[1], p[2], ev[key], rtt[key], bd[key], bad[key]; continue }
      stats(fl, key, c); f = S_MED; stats(gr, key, c); g = S_MED; stats(nx, key, c); x = S_MED
      stats(rec, key, c)
      printf "| %s (SIG%s) | %s | %s | %s | %s | %d (%d)%s | %.0f | %.0f | %.0f | %.0f / %.0f / %.0f | %s | %s–%s |\n",
        p[1], p[1] == "kill" ? "KILL" : "STOP", p[2], ev[key], rtt[key], bd[key], c, mid[key] + 0,
        bad[key] ? sprintf(", %d failed", bad[key]) : "", f, g, x, S_MIN, S_MED, S_MAX,
        (S_MAX <= bd[key] && !bad[key]) ? "met" : "**not met**", lmin[key], lmax[key]
    }
  }' "$1"
}

PEERS=4
RTT=50
RATE=1000
SIZES="1M 64M"
MODES="kill stop"
REPS=3
EVICT=2000
HB=250
VICTIM=1
KILL_OP=4
POOL=0
OFFLOAD=1
BUILD=$ROOT/build/rel
OUT=
NAME="wch$$"
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) SIZES=1M; REPS=1; shift ;;
    --peers) PEERS=$2; shift 2 ;;
    --rtt-ms) RTT=$2; shift 2 ;;
    --rate-mbit) RATE=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --evict-ms) EVICT=$2; shift 2 ;;
    --heartbeat-ms) HB=$2; shift 2 ;;
    --victim) VICTIM=$2; shift 2 ;;
    --kill-op) KILL_OP=$2; shift 2 ;;
    --pool) POOL=$2; shift 2 ;;
    --no-offload) OFFLOAD=0; shift ;;
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    --summarize) (cd "$CALLER_PWD" && summarize "$2"); exit 0 ;;
    *) sed -n '2,29p' "$0"; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "bench-wan-churn: needs root (network namespaces)" >&2; exit 2; }
MASTER=$BUILD/master/ccoip_master
PEER=$BUILD/bench/wan/pccl_wan_churn
for f in "$MASTER" "$PEER" "$BUILD/bench/wan/pccl-delayline"; do
  [[ -x $f ]] || { echo "bench-wan-churn: $f is missing (build it first)" >&2; exit 2; }
done
[[ $KILL_OP -ge 2 ]] || { echo "bench-wan-churn: --kill-op must be >= 2" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d /tmp/pccl-wan-churn.XXXXXX)}
mkdir -p "$OUT"
LOG_LEVEL=${PCCL_LOG_LEVEL:-WARN}
BOUND=$((EVICT + 3 * RTT + 1000))

PIDS=()
stop_all() {
  local p
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
cleanup() {
  stop_all
  "$TB" down --name "$NAME" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

args=(--peers "$PEERS" --rtt-ms "$RTT" --rate-mbit "$RATE" --name "$NAME" --build "$BUILD")
[[ $OFFLOAD -eq 1 ]] && args+=(--offload)
"$TB" up "${args[@]}" >"$OUT/testbed.log" 2>&1 || { cat "$OUT/testbed.log"; exit 1; }
MADDR=$("$TB" addr m --name "$NAME")
echo "# churn at distance: $PEERS peers, RTT $RTT ms, $RATE Mbit/s per pair, offload $OFFLOAD," \
  "victim $VICTIM at op $KILL_OP, evict_ms $EVICT, heartbeat_ms $HB, bound $BOUND ms;" \
  "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'); out $OUT"
printf 'mode\tbytes\trep\tevict_ms\trtt_ms\tbound_ms\tmid_op\tfail_ms\trecovery_ms\tnext_op_ms\tretries\tidentical\tload\tstatus\tgroup_ms\n' \
  >"$OUT/runs.tsv"

# now_ms: CLOCK_REALTIME in ms (for deadlines).
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# run_one MODE SIZE REP: one scenario; appends a row to runs.tsv; 0 or 1.
run_one() {
  local mode=$1 size=$2 rep=$3
  local dir="$OUT/$mode-$size-$rep" sig=KILL i
  [[ $mode == stop ]] && sig=STOP
  mkdir -p "$dir"
  PCCL_LOG_LEVEL=$LOG_LEVEL "$TB" exec m --name "$NAME" -- "$MASTER" --listen "tcp://$MADDR:0" \
    --print-port --evict-ms "$EVICT" --heartbeat-ms "$HB" --log-level "$LOG_LEVEL" \
    >"$dir/master.out" 2>"$dir/master.log" &
  local mpid=$!
  PIDS+=("$mpid")
  local port=
  for _ in $(seq 200); do
    port=$(sed -n 's/^PORT \([0-9]*\)$/\1/p' "$dir/master.out" 2>/dev/null)
    [[ -n $port ]] && break
    sleep 0.05
  done
  [[ -n $port ]] || { echo "run $mode $size $rep: the master did not report its port" >&2; return 1; }
  local -a ppid
  for i in $(seq 0 $((PEERS - 1))); do
    PCCL_LOG_LEVEL=$LOG_LEVEL "$TB" exec "p$i" --name "$NAME" -- "$PEER" \
      --url "tcp://$MADDR:$port" --index "$i" --world "$PEERS" --victim "$VICTIM" \
      --bytes "$size" --pool "$POOL" >"$dir/peer$i.out" 2>"$dir/peer$i.log" &
    ppid[i]=$!
    PIDS+=("${ppid[$i]}")
  done
  local vout="$dir/peer$VICTIM.out" deadline
  deadline=$(($(now_ms) + 120000))
  until grep -q "^START $KILL_OP " "$vout" 2>/dev/null; do
    if [[ $(now_ms) -gt $deadline ]] || ! kill -0 "${ppid[$VICTIM]}" 2>/dev/null; then
      echo "run $mode $size $rep: the victim never started op $KILL_OP" >&2
      return 1
    fi
    sleep 0.005
  done
  # Half the victim's fastest op so far (ops get faster as TCP's windows grow): the op is in
  # flight, not at its edge.
  local delay_ms
  delay_ms=$(awk '$1 == "DONE" { print $4 }' "$vout" | sort -n | head -n 1 |
    awk '{ printf "%d", $1 / 2000 }')
  sleep "$(awk -v d="$delay_ms" 'BEGIN { printf "%.3f", d / 1000 }')"
  local t_kill
  t_kill=$(date +%s%N)
  kill -s "$sig" "${ppid[$VICTIM]}"
  echo "KILL $sig $t_kill $delay_ms" >"$dir/kill"
  # Reap a killed victim here, quietly (bash would report "Killed" on its own).
  [[ $sig == KILL ]] && { wait "${ppid[$VICTIM]}" 2>/dev/null || true; }
  # Mid-op: the victim's last line is an op's START (op KILL_OP, or the next one).
  local mid=no
  sleep 0.01
  [[ $(tail -n 1 "$vout") == START* ]] && mid=yes
  local ok=1
  deadline=$(($(now_ms) + EVICT + 90000))
  for i in $(seq 0 $((PEERS - 1))); do
    [[ $i -eq $VICTIM ]] && continue
    while kill -0 "${ppid[$i]}" 2>/dev/null; do
      if [[ $(now_ms) -gt $deadline ]]; then
        echo "run $mode $size $rep: survivor $i did not end within the budget" >&2
        ok=0
        break 2
      fi
      sleep 0.05
    done
    if ! wait "${ppid[$i]}"; then
      echo "run $mode $size $rep: survivor $i failed: $(tail -n 3 "$dir/peer$i.log")" >&2
      ok=0
    fi
  done
  stop_all
  # The survivors' lines: the last FAIL and NEXT times, the longest next op, retries, hashes.
  local row
  row=$(for i in $(seq 0 $((PEERS - 1))); do
    [[ $i -eq $VICTIM ]] || sed "s/^/$i /" "$dir/peer$i.out"
  done | awk -v tk="$t_kill" -v n=$((PEERS - 1)) '
    $2 == "FAIL" && !(($1) in f) { f[$1] = 1; if ($4 > fail) fail = $4 }
    $2 == "SURVIVORS" && !(($1) in g) { g[$1] = 1; if ($3 > grp) grp = $3 }
    $2 == "NEXT" { cnt++; if ($4 > next_t) next_t = $4; if ($5 > dur) dur = $5;
                   if ($7 > retries) retries = $7; h[$8] = 1 }
    END {
      nh = 0; for (k in h) nh++
      printf "%s\t%.1f\t%.1f\t%d\t%s\t%d\t%s\n", fail ? sprintf("%.1f", (fail - tk) / 1e6) : "none",
        cnt == n ? (next_t - tk) / 1e6 : -1, dur / 1e3, retries,
        (cnt == n && nh == 1) ? "yes" : "no", cnt == n, grp ? sprintf("%.1f", (grp - tk) / 1e6) : "none"
    }')
  local fail_ms recovery next_ms retries identical complete group_ms
  IFS=$'\t' read -r fail_ms recovery next_ms retries identical complete group_ms <<<"$row"
  [[ $complete -eq 1 && $identical == yes ]] || ok=0
  local load status=ok
  load=$(cut -d' ' -f1 /proc/loadavg)
  [[ $ok -eq 1 ]] || status=FAILED
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$size" \
    "$rep" "$EVICT" "$RTT" "$BOUND" "$mid" "$fail_ms" "$recovery" "$next_ms" "$retries" \
    "$identical" "$load" "$status" "$group_ms" >>"$OUT/runs.tsv"
  echo "$mode $size rep $rep: mid-op $mid, fail +$fail_ms ms, survivors' group +$group_ms ms," \
    "recovery $recovery ms" \
    "(next op $next_ms ms, retries $retries), bound $BOUND ms, identical $identical," \
    "load $load: $status"
  [[ $ok -eq 1 ]]
}

S=0
for size in $SIZES; do
  for rep in $(seq "$REPS"); do
    for mode in $MODES; do
      run_one "$mode" "$size" "$rep" || S=1
    done
  done
done
"$TB" status --name "$NAME" 2>/dev/null | grep -i 'drops' >"$OUT/delayline.txt" || true

echo "load: $(uptime)" >"$OUT/load.txt"
summarize "$OUT/runs.tsv" | tee "$OUT/summary.md"
exit $S
