# Shared by the wan tests (sourced): skip (exit 77, ctest SKIP_RETURN_CODE)
# with a clear message where a testbed cannot be made, and always tear down.
# Each test names its testbed after its own pid, so tests never share one.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TB=$ROOT/scripts/wan-testbed.sh
skip() {
  echo "SKIP: $* (the wan tests need root, network namespaces and /dev/net/tun; docs/wan.md)"
  exit 77
}
wan_require() { # command...
  [[ $(id -u) -eq 0 ]] || skip "not root"
  command -v ip >/dev/null || skip "no ip (iproute2)"
  command -v tc >/dev/null || skip "no tc (iproute2)"
  [[ -c /dev/net/tun ]] || skip "no /dev/net/tun"
  local c
  for c in "$@"; do command -v "$c" >/dev/null || skip "no $c (scripts/install-deps.sh)"; done
  local probe="wprobe$$"
  ip netns add "$probe" 2>/dev/null || skip "cannot create a network namespace"
  if ! ip -n "$probe" tuntap add dev wan0 mode tun 2>/dev/null; then
    ip netns del "$probe" 2>/dev/null
    skip "cannot create a TUN device in a namespace"
  fi
  ip netns del "$probe"
}
# wan_up NAME ARGS...: brings a testbed up and tears it down when the test exits.
wan_up() {
  local name=$1
  shift
  trap '"$TB" down --name '"$name"' >/dev/null 2>&1 || true' EXIT
  trap 'exit 130' INT TERM
  "$TB" up --name "$name" --build "$BUILD" "$@"
}
