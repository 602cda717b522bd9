#!/usr/bin/env bash
# The emulated long-haul testbed (issue 23, docs/wan.md): one network
# namespace per peer and one for the master, every path between two of them
# through the delay line (bench/wan/delayline.c) and, for its rate, an htb
# class on the sender's side. Runs as root; only addresses inside its own
# namespaces (10.77.0.0/24); nothing in the host's namespace is touched.
#
#   scripts/wan-testbed.sh up --peers N --rtt-ms X [--rate-mbit R] [--matrix FILE]
#                             [--jitter-ms J] [--loss-pct P] [--seed S]
#                             [--queue-ms Q] [--clock epoll|spin] [--offload]
#                             [--nat I,J,...] [--name NAME] [--build DIR]
#   scripts/wan-testbed.sh down [--name NAME]         idempotent; cleans up after a crash too
#   scripts/wan-testbed.sh exec PEER [--name NAME] -- CMD...   PEER: m (master), 0..N-1 or p0..
#   scripts/wan-testbed.sh addr PEER [--name NAME]    the node's address
#   scripts/wan-testbed.sh status [--name NAME]       namespaces, qdiscs, the delay line's stats
#
# Nodes: the master "m" (namespace NAME-m, 10.77.0.1) and peers p0..p(N-1)
# (NAME-p<i>, 10.77.0.(10+i)). Each namespace holds lo and one TUN device,
# wan0, carrying its address (/32) and the route to 10.77.0.0/24; the delay
# line, one process in the host's namespace, holds every wan0 and forwards a
# packet from one to another after the pair's one-way delay (RTT/2, plus
# optional jitter and loss). The rate of a pair is an htb class (with a bfifo
# of --queue-ms of that rate) on the sender's wan0 matched on the destination
# address: so each directed pair is its own bottleneck.
# --matrix FILE: lines "A B RTT_MS [RATE_MBIT]" (A, B: m or p<i>; symmetric),
# overriding --rtt-ms / --rate-mbit for that pair; '#' starts a comment.
# --rate-mbit 0 (default): no rate limit, only the delay line's own ceiling.
# --nat I,J: peers p<I>, p<J> are behind NAT: an nftables ruleset in their namespace drops
# every new inbound connection (SYNs vanish, as at a NAT without port forwarding); they can
# dial out (replies are established traffic).
# --name (default "wan"): several testbeds may coexist under different names.
# State (pid, log, stats) in /run/pccl-wan/NAME. The delay line's binary:
# $PCCL_DELAYLINE, else DIR/bench/wan/pccl-delayline (--build, default build/rel).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

NAME=wan
CMD=${1:-}
[[ $# -gt 0 ]] && shift
PEERS=2
RTT_MS=0
RATE=0
MATRIX=
JITTER_MS=0
LOSS=0
SEED=1
QUEUE_MS=20
CLOCK=epoll
OFFLOAD=0
NAT=
BUILD=$ROOT/build/rel
PEER=
if [[ $CMD == exec || $CMD == addr ]]; then
  PEER=${1:-}
  [[ $# -gt 0 ]] && shift
fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --peers) PEERS=$2; shift 2 ;;
    --rtt-ms) RTT_MS=$2; shift 2 ;;
    --rate-mbit) RATE=$2; shift 2 ;;
    --matrix) MATRIX=$2; shift 2 ;;
    --jitter-ms) JITTER_MS=$2; shift 2 ;;
    --loss-pct) LOSS=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --queue-ms) QUEUE_MS=$2; shift 2 ;;
    --clock) CLOCK=$2; shift 2 ;;
    --offload) OFFLOAD=1; shift ;;
    --nat) NAT=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "wan-testbed: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $NAME =~ ^[a-zA-Z0-9_]{1,20}$ ]] || { echo "wan-testbed: bad --name $NAME" >&2; exit 2; }
STATE=/run/pccl-wan/$NAME

die() { echo "wan-testbed: $*" >&2; exit 1; }

# node index (0 = master, 1 + i = peer i) -> namespace, address
ns_of() { if [[ $1 -eq 0 ]]; then echo "$NAME-m"; else echo "$NAME-p$(($1 - 1))"; fi; }
addr_of() { if [[ $1 -eq 0 ]]; then echo 10.77.0.1; else echo "10.77.0.$((9 + $1))"; fi; }
# m | master | p<i> | <i>  -> node index
node_index() {
  case $1 in
    m|master) echo 0 ;;
    p[0-9]*) echo $((${1#p} + 1)) ;;
    [0-9]*) echo $(($1 + 1)) ;;
    *) die "unknown node $1 (m, p<i> or <i>)" ;;
  esac
}

our_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$NAME-(m|p[0-9]+)\$" || true; }

down() {
  if [[ -f $STATE/delayline.pid ]]; then
    local pid
    pid=$(cat "$STATE/delayline.pid")
    # Only the delay line we started (the pid may have been reused after a crash).
    if [[ -n $pid && $(cat "/proc/$pid/comm" 2>/dev/null) == pccl-delayline ]]; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 50); do [[ -d /proc/$pid ]] || break; sleep 0.1; done
      [[ -d /proc/$pid ]] && kill -KILL "$pid" 2>/dev/null
      sleep 0.1
      [[ -f $STATE/stats ]] && { echo "wan-testbed: delay line stats:"; grep '^total' "$STATE/stats" || true; }
    fi
  fi
  local ns
  for ns in $(our_namespaces); do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$STATE"
}

rate_of_pair() { # a b -> Mbit/s (0: none)
  local a=$1 b=$2
  if [[ -n $MATRIX ]]; then
    local r
    r=$(awk -v a="$a" -v b="$b" '{sub(/#.*/, "")} NF >= 4 && (($1 == a && $2 == b) || ($1 == b && $2 == a)) {r = $4} END {print r}' "$MATRIX")
    [[ -n $r ]] && { echo "$r"; return; }
  fi
  echo "$RATE"
}
rtt_of_pair() { # a b -> ms
  local a=$1 b=$2
  if [[ -n $MATRIX ]]; then
    local r
    r=$(awk -v a="$a" -v b="$b" '{sub(/#.*/, "")} NF >= 3 && (($1 == a && $2 == b) || ($1 == b && $2 == a)) {r = $3} END {print r}' "$MATRIX")
    [[ -n $r ]] && { echo "$r"; return; }
  fi
  echo "$RTT_MS"
}
name_of() { if [[ $1 -eq 0 ]]; then echo m; else echo "p$(($1 - 1))"; fi; }

up() {
  [[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, TUN)"
  [[ $PEERS =~ ^[0-9]+$ && $PEERS -ge 1 && $PEERS -le 32 ]] || die "--peers 1..32"
  [[ $CLOCK == epoll || $CLOCK == spin ]] || die "--clock epoll|spin"
  [[ -z $MATRIX || -r $MATRIX ]] || die "cannot read --matrix $MATRIX"
  local dl=${PCCL_DELAYLINE:-$BUILD/bench/wan/pccl-delayline}
  [[ -x $dl ]] || die "$dl is missing (cmake --build $BUILD --target pccl-delayline)"
  [[ -c /dev/net/tun ]] || die "no /dev/net/tun"
  down >/dev/null
  mkdir -p "$STATE"
  local nodes=$((PEERS + 1)) i j vnet=""
  [[ $OFFLOAD -eq 1 ]] && vnet=vnet_hdr
  local args=()
  for i in $(seq 0 $((nodes - 1))); do
    local ns addr
    ns=$(ns_of "$i")
    addr=$(addr_of "$i")
    ip netns add "$ns" || die "cannot create namespace $ns"
    # IPv6 off: the delay line routes IPv4 only (no stray solicitations).
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip -n "$ns" link set lo up
    # shellcheck disable=SC2086
    ip -n "$ns" tuntap add dev wan0 mode tun $vnet || die "cannot create a TUN device in $ns"
    ip -n "$ns" addr add "$addr/32" dev wan0
    # The TUN drops (no back-pressure) when its ring, txqueuelen packets, is
    # full while the delay line is busy: a deep ring absorbs bursts.
    ip -n "$ns" link set wan0 txqueuelen 10000
    ip -n "$ns" link set wan0 up
    ip -n "$ns" route add 10.77.0.0/24 dev wan0 src "$addr"
    args+=(--node "$ns:wan0:$addr")
  done
  local p
  for p in ${NAT//,/ }; do
    [[ $p =~ ^[0-9]+$ && $p -lt $PEERS ]] || die "--nat: no peer $p"
    command -v nft >/dev/null || die "--nat needs nft (nftables; scripts/install-deps.sh)"
    ip netns exec "$(ns_of $((p + 1)))" nft -f - <<'NFT' || die "cannot load the NAT rules in p$p"
table inet pccl_nat {
  chain input {
    type filter hook input priority 0; policy accept;
    ct state established,related accept
    iif "lo" accept
    ct state new drop
  }
}
NFT
  done
  # Per directed pair: one-way delay = RTT / 2 (microseconds).
  : >"$STATE/pairs"
  for i in $(seq 0 $((nodes - 1))); do
    for j in $(seq 0 $((nodes - 1))); do
      [[ $i -eq $j ]] && continue
      local rtt
      rtt=$(rtt_of_pair "$(name_of "$i")" "$(name_of "$j")")
      awk -v i="$i" -v j="$j" -v r="$rtt" -v jt="$JITTER_MS" -v l="$LOSS" \
        'BEGIN { printf "%d %d %.1f %.1f %s\n", i, j, r * 500, jt * 1000, l }' >>"$STATE/pairs"
    done
  done
  # Rates: htb on each sender's wan0, one class per destination.
  for i in $(seq 0 $((nodes - 1))); do
    local ns
    ns=$(ns_of "$i")
    local have_root=0
    for j in $(seq 0 $((nodes - 1))); do
      [[ $i -eq $j ]] && continue
      local rate
      rate=$(rate_of_pair "$(name_of "$i")" "$(name_of "$j")")
      awk -v r="$rate" 'BEGIN { exit !(r > 0) }' || continue
      if [[ $have_root -eq 0 ]]; then
        # Unmatched traffic (none expected) goes to class 1:1, unlimited.
        tc -n "$ns" qdisc add dev wan0 root handle 1: htb default 1
        tc -n "$ns" class add dev wan0 parent 1: classid 1:1 htb rate 100gbit burst 1mb cburst 1mb \
          quantum 60000
        have_root=1
      fi
      # burst: 1 ms at the rate (>= 16 KiB), so the timer's granularity does
      # not cap it; the queue: --queue-ms at the rate (>= 128 KiB), the
      # bottleneck's buffer TCP fills.
      local burst limit
      burst=$(awk -v r="$rate" 'BEGIN { b = r * 1e6 / 8 / 1000; if (b < 16384) b = 16384; printf "%d", b }')
      limit=$(awk -v r="$rate" -v q="$QUEUE_MS" 'BEGIN { b = r * 1e6 / 8 * q / 1000; if (b < 131072) b = 131072; printf "%d", b }')
      tc -n "$ns" class add dev wan0 parent 1: classid "1:$((10 + j))" htb rate "${rate}mbit" \
        ceil "${rate}mbit" burst "$burst" cburst "$burst" quantum 60000
      tc -n "$ns" qdisc add dev wan0 parent "1:$((10 + j))" bfifo limit "$limit"
      tc -n "$ns" filter add dev wan0 parent 1: protocol ip prio 1 u32 \
        match ip dst "$(addr_of "$j")/32" flowid "1:$((10 + j))"
    done
  done
  local dlargs=(--pairs "$STATE/pairs" --seed "$SEED" --clock "$CLOCK" --ready "$STATE/ready"
    --stats "$STATE/stats")
  [[ $OFFLOAD -eq 1 ]] && dlargs+=(--offload)
  setsid "$dl" "${args[@]}" "${dlargs[@]}" >"$STATE/delayline.log" 2>&1 </dev/null &
  echo $! >"$STATE/delayline.pid"
  for _ in $(seq 100); do
    [[ -f $STATE/ready ]] && break
    [[ -d /proc/$(cat "$STATE/delayline.pid") ]] || break
    sleep 0.05
  done
  if [[ ! -f $STATE/ready ]]; then
    cat "$STATE/delayline.log" >&2
    down >/dev/null
    die "the delay line did not start"
  fi
  {
    echo "peers $PEERS"
    echo "rtt_ms $RTT_MS"
    echo "rate_mbit $RATE"
    echo "matrix ${MATRIX:-none}"
    echo "jitter_ms $JITTER_MS loss_pct $LOSS seed $SEED queue_ms $QUEUE_MS clock $CLOCK offload $OFFLOAD"
  } >"$STATE/config"
  echo "wan-testbed: up '$NAME': master $(ns_of 0) $(addr_of 0), peers" \
    "$(for i in $(seq 1 "$PEERS"); do printf '%s %s  ' "$(ns_of "$i")" "$(addr_of "$i")"; done)"
  echo "wan-testbed: rtt ${RTT_MS} ms, rate $([[ $RATE == 0 ]] && echo unlimited || echo "$RATE Mbit/s")" \
    "${MATRIX:+, matrix $MATRIX}, delay line pid $(cat "$STATE/delayline.pid")"
}

case $CMD in
  up) up ;;
  down) down ;;
  exec)
    [[ -n $PEER ]] || die "exec PEER -- CMD..."
    [[ $# -gt 0 ]] || die "exec PEER -- CMD..."
    ns=$(ns_of "$(node_index "$PEER")")
    exec ip netns exec "$ns" "$@"
    ;;
  addr)
    [[ -n $PEER ]] || die "addr PEER"
    addr_of "$(node_index "$PEER")"
    ;;
  status)
    our_namespaces
    [[ -f $STATE/config ]] && cat "$STATE/config"
    if [[ -f $STATE/delayline.pid ]]; then
      pid=$(cat "$STATE/delayline.pid")
      if [[ $(cat "/proc/$pid/comm" 2>/dev/null) == pccl-delayline ]]; then
        kill -USR1 "$pid"
        sleep 0.2
        cat "$STATE/stats" 2>/dev/null || true
      else
        echo "delay line not running"
      fi
    fi
    ;;
  *) sed -n '2,33p' "$0"; exit 2 ;;
esac
