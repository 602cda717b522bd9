#!/usr/bin/env bash
# The packaging checks (docs/packaging.md), CI tier `packaging`:
#   scripts/test-packaging.sh BUILD_DIR
# BUILD_DIR is a built native tree (CI: build/ci-native); its libpccl, ccoip_master and
# install rules are reused, so nothing but the Rust `bundled` build compiles libpccl again.
#   1. wheel: pip wheel (offline) -> py3-none-<platform> wheel holding libpccl, ccoip_master and
#      their non-system libraries with RUNPATH $ORIGIN; installed into a fresh venv, the
#      reference Python hello world runs with 3 peers and the wheel's master, exact results;
#      PCCL_LIBRARY still overrides the bundled library.
#   2. Rust: cargo test --features bundled in a clean target dir (libpccl built by build.rs,
#      linked statically): the ABI test and the hello example.
#   3. deb: cpack -> pccl_<v>_<arch>.deb: its file list, control fields and conffiles; dpkg -x
#      into a scratch dir; pkg-config against it; the reference C++ hello world compiled with
#      that pkg-config and run (master + 3 peers, the package's ccoip_master); the unit checked
#      with systemd-analyze; install / remove / purge with dpkg in a scratch admin dir
#      (--root, scripts chrootless: the machine's own dpkg database is not touched).
#   4. Go: bindings/go/test.sh through pkg-config against the extracted package.
# Any failing check fails the script. Logs and artifacts: BUILD_DIR/packaging.
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$1" && pwd)
WORK="$BUILD/packaging"
PY=${PYTHON:-/usr/bin/python3}
JOBS=${JOBS:-$(nproc)}
REF_MD=${PCCL_REFERENCE_EXAMPLES:-/work/shared/reference/pccl-examples.md}
rm -rf "$WORK"
mkdir -p "$WORK"
T0=$SECONDS
step() { echo "=== packaging: $* ($((SECONDS - T0))s)"; }
die() {
  echo "packaging: FAIL: $*" >&2
  exit 1
}
for f in bindings/libpccl/libpccl.so master/ccoip_master CPackConfig.cmake; do
  [[ -e "$BUILD/$f" ]] || die "$BUILD/$f is missing (configure and build the tree first)"
done
command -v patchelf >/dev/null || die "patchelf is missing (scripts/install-deps.sh)"

# ---------------------------------------------------------------- 1. wheel
step "wheel"
PCCL_WHEEL_BUILD_DIR="$BUILD" CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$PY" -m pip wheel -q \
  --no-index --no-build-isolation --no-deps -w "$WORK/wheel" "$ROOT/bindings/python" \
  >"$WORK/wheel.log" 2>&1 || { cat "$WORK/wheel.log"; die "pip wheel"; }
PLAT=$("$PY" -c 'import sysconfig; print(sysconfig.get_platform().replace("-", "_").replace(".", "_"))')
WHL=$(ls "$WORK"/wheel/pccl-*-py3-none-"$PLAT".whl 2>/dev/null) || die "no py3-none-$PLAT wheel: $(ls "$WORK/wheel")"
"$PY" - "$WHL" <<'EOF' || die "wheel contents"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = set(z.namelist())
need = {"pccl/__init__.py", "pccl/_native/libpccl.so", "pccl/_native/ccoip_master",
        "pccl/_native/libnng.so.1"}
missing = need - names
assert not missing, f"missing {sorted(missing)}"
wheel = z.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
assert "Root-Is-Purelib: false" in wheel, wheel
ep = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
assert "ccoip_master = pccl._bin:ccoip_master" in ep, ep
mode = z.getinfo("pccl/_native/ccoip_master").external_attr >> 16
assert mode & 0o111, oct(mode)
print("wheel:", sys.argv[1].rsplit("/", 1)[1], "bundles",
      ", ".join(sorted(n.rsplit("/", 1)[1] for n in names if "/_native/" in n)))
EOF
VENV="$WORK/venv"
"$PY" -m venv --system-site-packages "$VENV"
"$VENV/bin/python" -m pip install -q --no-index "$WHL" >"$WORK/pip-install.log" 2>&1 ||
  { cat "$WORK/pip-install.log"; die "pip install of the wheel"; }
NATIVE=$(echo "$VENV"/lib/python3*/site-packages/pccl/_native)
for f in "$NATIVE"/*; do
  [[ $(patchelf --print-rpath "$f") == '$ORIGIN' ]] || die "$f: RUNPATH is not \$ORIGIN"
  deps=$(ldd "$f")
  if grep -q "not found" <<<"$deps"; then die "$f: $(grep 'not found' <<<"$deps")"; fi
done
# Only the system libraries docs/packaging.md names may come from outside the wheel.
outside=$(ldd "$NATIVE/libpccl.so" "$NATIVE/ccoip_master" | awk '/=>/ {print $3}' |
  grep -v "^$NATIVE/" | grep -Ev '/(libc|libm|libpthread|libdl|librt|libcrypto|libssl)\.so' || true)
[[ -z "$outside" ]] || die "the wheel's binaries load system libraries it should bundle: $outside"
# (grep reads whole outputs from variables: with pipefail, grep -q closing a pipe early would
# fail the writer with SIGPIPE)
help=$("$VENV/bin/ccoip_master" --help) || die "ccoip_master console script"
grep -q "usage: ccoip_master" <<<"$help" || die "ccoip_master console script: $help"
env -u PYTHONPATH -u LD_LIBRARY_PATH PCCL_LIBRARY="$BUILD/bindings/libpccl/libpccl.so" \
  "$VENV/bin/python" -c 'import pccl, sys; sys.exit(pccl.library_path() != sys.argv[1])' \
  "$BUILD/bindings/libpccl/libpccl.so" || die "PCCL_LIBRARY does not override the bundled library"
timeout 180 "$VENV/bin/python" "$ROOT/tests/packaging/wheel_hello.py" "$VENV" "$WORK/wheel-hello" ||
  die "the Python hello world over the wheel"

# ---------------------------------------------------------------- 2. Rust, bundled
step "rust bundled"
if command -v cargo >/dev/null; then
  # pccl-sys's tests (the ABI check against include/pccl.h) and the safe crate's hello example
  # (a master and 3 peers in one process) over the static libpccl; the bindings tier runs the
  # safe crate's own tests over the shared library.
  (cd "$ROOT/bindings/rust" && export CARGO_TARGET_DIR="$WORK/rust-target" PCCL_LOG_LEVEL=error &&
    timeout 280 cargo test --offline -p pccl-sys --features bundled -j"$JOBS" >"$WORK/rust.log" 2>&1 &&
    timeout 200 cargo build --offline -p pccl --features bundled -j"$JOBS" --example hello \
      >>"$WORK/rust.log" 2>&1) ||
    { tail -60 "$WORK/rust.log"; die "cargo test --features bundled"; }
  grep -E "^test result" "$WORK/rust.log" | awk '{p += $4; f += $6} END {print "rust bundled:", p, "passed,", f, "failed"}'
  if ! grep -q "^test result: ok. [1-9]" "$WORK/rust.log"; then die "no Rust test ran"; fi
  hello=$(ls "$WORK"/rust-target/debug/examples/hello 2>/dev/null) || die "no hello example built"
  deps=$(ldd "$hello")
  if grep -q libpccl <<<"$deps"; then die "bundled: $hello links libpccl dynamically"; fi
  out=$(timeout 60 "$hello") || die "bundled hello example failed"
  grep -q "^all 3 peers hold shared state [0-9a-f]\{16\}$" <<<"$out" || die "bundled hello example: $out"
  echo "rust bundled: hello example (static libpccl): $(tail -1 <<<"$out")"
else
  die "cargo is missing"
fi

# ---------------------------------------------------------------- 3. Debian package
step "deb"
cpack --config "$BUILD/CPackConfig.cmake" -B "$WORK/deb" >"$WORK/cpack.log" 2>&1 ||
  { cat "$WORK/cpack.log"; die "cpack"; }
DEB=$(ls "$WORK"/deb/pccl_*.deb) || die "no pccl_*.deb"
dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's|^\./|/|' >"$WORK/deb.files"
for f in /usr/lib/libpccl.so /usr/lib/libpccl.so.0 /usr/lib/libpccl.a /usr/lib/pkgconfig/pccl.pc \
  /usr/lib/cmake/pccl/pcclConfig.cmake /usr/include/pccl.h /usr/include/pccl_types.h \
  /usr/include/ccoip.h /usr/include/ccoip_inet.h /usr/bin/ccoip_master \
  /usr/lib/systemd/system/ccoip-master.service /etc/pccl/master.env; do
  grep -qx "$f" "$WORK/deb.files" || die "the package lacks $f"
done
if grep -Ev '^/(usr|etc/pccl)(/|$)|^/etc/$' "$WORK/deb.files"; then die "files outside /usr and /etc/pccl"; fi
[[ $(dpkg-deb -f "$DEB" Package) == pccl ]] || die "package name"
grep -q "libnng1" <<<"$(dpkg-deb -f "$DEB" Depends)" || die "Depends lacks libnng1: $(dpkg-deb -f "$DEB" Depends)"
grep -qx /etc/pccl/master.env <<<"$(dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles)" ||
  die "/etc/pccl/master.env is not a conffile"
echo "deb: $(basename "$DEB"), $(wc -l <"$WORK/deb.files") entries, Depends: $(dpkg-deb -f "$DEB" Depends)"
X="$WORK/extracted"
dpkg -x "$DEB" "$X"
export PKG_CONFIG_PATH="$X/usr/lib/pkgconfig"
flags=$(pkg-config --cflags --libs pccl) || die "pkg-config pccl against the package"
[[ $(pkg-config --variable=libdir pccl) -ef "$X/usr/lib" ]] || die "pkg-config libdir: $flags"
[[ $(pkg-config --variable=includedir pccl) -ef "$X/usr/include" ]] || die "pkg-config includedir: $flags"
[[ $(pkg-config --modversion pccl) == "$(dpkg-deb -f "$DEB" Version)" ]] || die "pkg-config version"
# The reference C++ hello world against the package: compiled with pkg-config's flags only.
if [[ -f "$REF_MD" ]]; then
  mkdir -p "$WORK/hello-cpp"
  awk '/^```c\+\+/{on=1; next} /^```/{if(on){exit}} on' "$REF_MD" >"$WORK/hello-cpp/hello_world.cpp"
  grep -q pcclSynchronizeSharedState "$WORK/hello-cpp/hello_world.cpp" || die "no C++ hello world in $REF_MD"
  # shellcheck disable=SC2086
  g++ -std=c++20 -include cassert -Wall "$WORK/hello-cpp/hello_world.cpp" -o "$WORK/hello-cpp/hello_world" \
    $flags -Wl,-rpath,"$X/usr/lib" || die "the C++ hello world does not build against the package"
  deps=$(ldd "$WORK/hello-cpp/hello_world")
  grep -q "libpccl.so.0 => $X/usr/lib/libpccl.so.0" <<<"$deps" ||
    die "the C++ hello world does not load the package's libpccl: $(grep pccl <<<"$deps")"
  echo "deb: C++ hello world compiled with: $flags"
  # ...and run: master + 3 peers (hello_world_run.sh rebuilds it the same way against the package)
  rc=0
  bash "$ROOT/tests/integration/hello_world_run.sh" "$REF_MD" "$X/usr/include" "$X/usr/lib/libpccl.so" \
    "$WORK/hello-cpp-run" "$X/usr/bin/ccoip_master" >"$WORK/hello-cpp-run.log" 2>&1 || rc=$?
  if [[ $rc == 77 ]]; then
    echo "deb: C++ hello world run SKIPPED: $(tail -1 "$WORK/hello-cpp-run.log")"
  elif [[ $rc != 0 ]]; then
    cat "$WORK/hello-cpp-run.log"
    die "the C++ hello world over the package's library and master"
  else
    echo "deb: $(tail -1 "$WORK/hello-cpp-run.log")"
  fi
else
  echo "deb: C++ hello world SKIPPED: $REF_MD not found"
fi
# The unit: systemd's own check, with ExecStart pointed at the extracted binary.
if command -v systemd-analyze >/dev/null; then
  sed "s|ExecStart=/usr/bin/ccoip_master|ExecStart=$X/usr/bin/ccoip_master|" \
    "$X/usr/lib/systemd/system/ccoip-master.service" >"$WORK/ccoip-master.service"
  grep -q "^ExecStart=$X/usr/bin/ccoip_master --listen \${PCCL_MASTER_LISTEN}" "$WORK/ccoip-master.service" ||
    die "unexpected ExecStart in the unit"
  systemd-analyze verify "$WORK/ccoip-master.service" || die "systemd-analyze verify"
fi
grep -q "^PCCL_MASTER_LISTEN=tcp://" "$X/etc/pccl/master.env" || die "master.env has no listen address"
# install, remove (the edited conffile stays), purge (nothing stays) in a scratch dpkg root
D="$WORK/dpkg-root"
mkdir -p "$D/var/lib/dpkg/info" "$D/var/lib/dpkg/updates"
: >"$D/var/lib/dpkg/status"
dpkgr() { dpkg --root="$D" --force-script-chrootless --force-depends "$@" >>"$WORK/dpkg.log" 2>&1; }
dpkgr -i "$DEB" || { cat "$WORK/dpkg.log"; die "dpkg -i"; }
[[ -x "$D/usr/bin/ccoip_master" && -e "$D/usr/lib/libpccl.so.0" ]] || die "dpkg -i installed no files"
echo "# edited by the operator" >>"$D/etc/pccl/master.env"
dpkgr -r pccl || { cat "$WORK/dpkg.log"; die "dpkg -r"; }
left=$(cd "$D" && find . -not -path './var/lib/dpkg*' -type f)
[[ $left == "./etc/pccl/master.env" ]] || die "after dpkg -r, expected only the edited conffile: $left"
dpkgr -P pccl || { cat "$WORK/dpkg.log"; die "dpkg -P"; }
left=$(cd "$D" && find . -mindepth 1 -not -path './var' -not -path './var/lib' -not -path './var/lib/dpkg*')
[[ -z $left ]] || die "after dpkg -P, left behind: $left"
echo "deb: dpkg install / remove (conffile kept) / purge (nothing left) ok"

# ---------------------------------------------------------------- 4. Go through pkg-config
step "go via pkg-config"
if command -v go >/dev/null; then
  unset PKG_CONFIG_PATH
  mkdir -p "$BUILD/go/cache"
  PCCL_GO_CACHE="$BUILD/go/cache" bash "$ROOT/bindings/go/test.sh" "$X/usr" >"$WORK/go.log" 2>&1 ||
    { tail -40 "$WORK/go.log"; die "Go tests through pkg-config against the package"; }
  grep -q "pkg-config pccl: -I$X/usr" "$WORK/go.log" || { cat "$WORK/go.log"; die "Go did not use the package's pccl.pc"; }
  grep "^ok\|all tests passed" "$WORK/go.log"
else
  die "go is missing"
fi
step "all ok"
