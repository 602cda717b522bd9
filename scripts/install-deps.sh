#!/usr/bin/env bash
# Installs the Debian packages pccl needs, only those that are missing.
# Nothing is downloaded from anywhere but Debian's archive.
#
#   scripts/install-deps.sh            build + test toolchain (default)
#   scripts/install-deps.sh --print    list the packages, install nothing
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build pkg-config gcc g++ clang clang-format libclang-rt-14-dev python3
  # libraries
  libnng-dev libxxhash-dev libcriterion-dev
  # authenticated runs: HMAC-SHA-256 from OpenSSL's libcrypto (transport/pt_auth.c)
  libssl-dev
  # WASM build of the core and its tests
  emscripten nodejs
  # schema/ codec generator and its independent check
  protobuf-compiler python3-protobuf
  # bindings (issue 8): Python (ctypes, numpy, torch, pytest, sklearn's digits), Go
  python3-numpy python3-pytest python3-torch python3-sklearn golang-go
  python3-venv python3-pip python3-setuptools python3-wheel
  # the TLS integration test makes a self-signed certificate
  openssl
  # packaging (docs/packaging.md): $ORIGIN RUNPATHs in the wheel; the .deb's Depends (dpkg-shlibdeps)
  patchelf dpkg-dev
  # reference systems the all-reduce benchmark runs side by side (bench/), and its plot
  openmpi-bin libopenmpi-dev python3-matplotlib
  # the WAN testbed (issue 23, docs/wan.md): namespaces, TUN, htb; its RTT and ceiling probes
  iproute2 iputils-ping iperf3
  # peers behind NAT in the testbed: nftables rules inside a peer's namespace (tests/wan/nat.sh)
  nftables
)

# Rust: the machine's rustup toolchain when present, else Debian's cargo.
if ! command -v cargo >/dev/null 2>&1; then PACKAGES+=(cargo); fi

if [[ "${1:-}" == "--print" ]]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
