#!/usr/bin/env bash
# Runs PCCL 1.0's own Python tests, UNMODIFIED, against pccl's Python package (bindings/python):
#   scripts/pccl10-python.sh PCCL10_CHECKOUT_DIR BUILD_DIR
# PCCL10_CHECKOUT_DIR: an extracted PCCL 1.0 checkout (its python/tests are run from there, never
#   copied into this repository), e.g.
#     mkdir -p /tmp/pccl10 && git -C PCCL_MIRROR archive HEAD | tar -x -C /tmp/pccl10
# BUILD_DIR: a build tree of this repository with targets pccl and ccoip_master.
#
# For manual/outside use only (it needs a PCCL checkout, which we do not vendor): not part of CI.
# What runs, in order (a summary line per suite at the end; exit 0 when every one passed):
#   unit_tests            python -m pytest python/tests/unit_tests/pccl_test.py
#   numpy_only            ... numpy_only_tests/numpy_only_test.py in an interpreter that cannot
#                         import torch (python -S, a site dir holding numpy and pytest only)
#   pytorch_only          ... pytorch_only_tests/pytorch_only_test.py, likewise without numpy
#   basic_reduce          ... end_to_end/basic_reduce_test/basic_reduce_e2e_test.py
#   mnist_ddp             ... end_to_end/mnist_ddp/mnist_ddp_e2e_test.py (needs torchvision:
#                         Debian python3-torchvision; skipped with a note when it is missing)
#   stress_basic          stress_tests/basic_stress_test/stresstest_orchestrator.py and
#   stress_cross_step     stress_tests/cross_step_async_reduces_test/stresstest_orchestrator.py,
#                         each stopped (SIGTERM to its process group) after
#                         PCCL10_STRESS_SECONDS (default 120; the orchestrators run 8 h). They
#                         have no pass criterion of their own short of that; here a run passes
#                         when the orchestrator was still running at the limit, no process
#                         printed a Python traceback or "failed with:", every peer that ended
#                         did so with 0 or by the orchestrator's SIGKILL, and the peers made
#                         progress (cross_step: "Reduce completed" lines; basic: all-reduce
#                         steps, i.e. iterations that did not wait alone).
# Environment only (no test is edited): PYTHONPATH = bindings/python (+ a shim directory, below),
# PCCL_LIBRARY = BUILD_DIR's libpccl, BUILD_DIR/master on PATH (ccoip_master). PCCL's tests use
# the fixed port 48148: nothing else may listen there meanwhile.
#   - basic_stress_test/stresstest_peer.py imports `python.framework.pccl._pccl` (PCCL's package
#     by its path in PCCL's repository): the shim directory maps that name to pccl._pccl. It also
#     imports Optional and List from typing_extensions (>= 4.7 has them; Debian 12 ships 4.4):
#     when they are missing, the shim directory adds them to the installed typing_extensions.
#   - mnist_peer.py loads MNIST with torchvision from ./data (download=True, but nothing is
#     downloaded when the files are present): the suite runs in a scratch directory whose
#     data/MNIST/raw holds the checkout's python/tests/end_to_end/data/MNIST/raw files (.gz ones
#     decompressed). A checkout without train-images (e.g. a mirror without its large blobs)
#     fails that suite, unless PCCL10_MNIST_STANDIN=1: then train-images-idx3-ubyte is built
#     from the checkout's own t10k images (for each training label, a test image of that digit),
#     and the run says so.
# Other knobs: PYTHON (default /usr/bin/python3), PCCL10_ONLY="unit_tests basic_reduce ..." (a
# subset), PCCL10_KEEP=1 (keep the scratch directory; its path is printed).
set -u

if [[ $# -ne 2 ]]; then
    echo "usage: $0 PCCL10_CHECKOUT_DIR BUILD_DIR" >&2
    exit 2
fi
CHECKOUT=$(cd "$1" && pwd) || exit 2
BUILD=$(cd "$2" && pwd) || exit 2
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
T=$CHECKOUT/python/tests
STRESS_SECONDS=${PCCL10_STRESS_SECONDS:-120}
ONLY=${PCCL10_ONLY:-unit_tests numpy_only pytorch_only basic_reduce mnist_ddp stress_basic stress_cross_step}

for f in "$BUILD/bindings/libpccl/libpccl.so" "$BUILD/master/ccoip_master" "$T/unit_tests/pccl_test.py"; do
    [[ -e "$f" ]] || { echo "pccl10-python: $f is missing" >&2; exit 2; }
done
"$PY" -c 'import pytest, numpy, torch, typing_extensions' 2> /dev/null ||
    { echo "pccl10-python: $PY needs pytest, numpy, torch (Debian python3-pytest python3-numpy python3-torch)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/pccl10-python.XXXXXX)
cleanup() { [[ "${PCCL10_KEEP:-0}" == 1 ]] && echo "pccl10-python: kept $WORK" || rm -rf "$WORK"; }
trap cleanup EXIT

# --- environment -------------------------------------------------------------------------------
SHIM=$WORK/shim
mkdir -p "$SHIM/python/framework/pccl"
: > "$SHIM/python/__init__.py"
: > "$SHIM/python/framework/__init__.py"
cat > "$SHIM/python/framework/pccl/__init__.py" << 'EOF'
# PCCL's package by its path in PCCL's repository -> pccl's package (scripts/pccl10-python.sh)
import sys
import pccl
import pccl._pccl
sys.modules[__name__] = pccl
sys.modules[__name__ + "._pccl"] = pccl._pccl
EOF
# typing_extensions >= 4.7 re-exports typing's names, and basic_stress_test/stresstest_peer.py
# imports Optional and List from it; Debian 12's 4.4 does not: add them (only when missing)
if ! "$PY" -c 'from typing_extensions import Optional, List' 2> /dev/null; then
    cat > "$SHIM/typing_extensions.py" << 'EOF'
# Debian's typing_extensions plus typing's names, as typing_extensions >= 4.7 (scripts/pccl10-python.sh)
import importlib.machinery, importlib.util, os, sys, typing
_me = os.path.realpath(__file__)
_path = [p for p in sys.path
         if os.path.realpath(os.path.join(p or ".", "typing_extensions.py")) != _me]
_spec = importlib.machinery.PathFinder.find_spec(__name__, _path)
_mod = importlib.util.module_from_spec(_spec)
sys.modules[__name__] = _mod
_spec.loader.exec_module(_mod)
for _n in typing.__all__:
    if not hasattr(_mod, _n):
        setattr(_mod, _n, getattr(typing, _n))
EOF
    echo "pccl10-python: NOTE: the installed typing_extensions lacks typing's names (Optional, List):" \
        "a shim adds them (typing_extensions >= 4.7 has them)"
fi
export PYTHONPATH="$ROOT/bindings/python:$SHIM"
export PCCL_LIBRARY="$BUILD/bindings/libpccl/libpccl.so"
export PATH="$BUILD/master:$PATH"
export PYTHONDONTWRITEBYTECODE=1

# site directories for the numpy-only and torch-only interpreters (python -S: no dist-packages)
mksite() { # DIR MODULE...
    local dir=$1
    shift
    mkdir -p "$dir"
    env -u PYTHONPATH "$PY" - "$dir" "$@" << 'EOF'
import importlib.util, os, sys
dst = sys.argv[1]
for name in sys.argv[2:]:
    spec = importlib.util.find_spec(name)
    if spec is None:
        continue
    for p in (spec.submodule_search_locations or [spec.origin]):
        link = os.path.join(dst, os.path.basename(p))
        if not os.path.lexists(link):
            os.symlink(p, link)
EOF
}
PYTEST_MODS="pytest _pytest pluggy iniconfig packaging py attr exceptiongroup tomli"
mksite "$WORK/site-numpy" $PYTEST_MODS numpy
mksite "$WORK/site-torch" $PYTEST_MODS torch typing_extensions

# --- runner ------------------------------------------------------------------------------------
declare -A STATUS TIME
ORDER=()
port_free() {
    ! "$PY" -c 'import socket,sys; s=socket.socket(); s.settimeout(0.5); sys.exit(0 if s.connect_ex(("127.0.0.1",48148))==0 else 1)'
}
run_suite() { # NAME DIR TIMEOUT COMMAND...
    local name=$1 dir=$2 limit=$3
    shift 3
    [[ " $ONLY " == *" $name "* ]] || return 0
    ORDER+=("$name")
    if ! port_free; then
        echo "pccl10-python: port 48148 is in use before $name" >&2
    fi
    echo "=== $name: (cd $dir && $*)"
    local t0=$SECONDS rc=0
    (cd "$dir" && timeout -k 10 "$limit" "$@") > "$WORK/$name.log" 2>&1 || rc=$?
    TIME[$name]=$((SECONDS - t0))
    tail -n 3 "$WORK/$name.log"
    if [[ $rc -eq 0 ]]; then STATUS[$name]=PASS; else
        STATUS[$name]="FAIL (exit $rc)"
        tail -n 40 "$WORK/$name.log" | sed 's/^/    | /'
    fi
}
PYTEST=("$PY" -m pytest -p no:cacheprovider -q -rs)

run_suite unit_tests "$T/unit_tests" 300 "${PYTEST[@]}" pccl_test.py
run_suite numpy_only "$T/numpy_only_tests" 300 env PYTHONPATH="$WORK/site-numpy:$PYTHONPATH" \
    "$PY" -S -m pytest -p no:cacheprovider -q numpy_only_test.py
run_suite pytorch_only "$T/pytorch_only_tests" 300 env PYTHONPATH="$WORK/site-torch:$PYTHONPATH" \
    "$PY" -S -m pytest -p no:cacheprovider -q pytorch_only_test.py
run_suite basic_reduce "$T/end_to_end/basic_reduce_test" 900 "${PYTEST[@]}" basic_reduce_e2e_test.py

# --- mnist_ddp ---------------------------------------------------------------------------------
if [[ " $ONLY " == *" mnist_ddp "* ]]; then
    if ! "$PY" -c 'import torchvision' 2> /dev/null; then
        ORDER+=(mnist_ddp)
        STATUS[mnist_ddp]="SKIP (no torchvision: apt-get install python3-torchvision)"
        TIME[mnist_ddp]=0
    else
        MN=$WORK/mnist
        RAW=$MN/data/MNIST/raw
        SRC=$T/end_to_end/data/MNIST/raw
        mkdir -p "$RAW"
        missing=""
        for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
            if [[ -s "$SRC/$f" ]]; then
                ln -s "$SRC/$f" "$RAW/$f"
            elif [[ -s "$SRC/$f.gz" ]]; then
                gzip -dc "$SRC/$f.gz" > "$RAW/$f"
            else
                missing="$missing $f"
            fi
        done
        if [[ "$missing" == " train-images-idx3-ubyte" && "${PCCL10_MNIST_STANDIN:-0}" == 1 ]]; then
            echo "pccl10-python: NOTE: the checkout has no MNIST train-images; PCCL10_MNIST_STANDIN=1:" \
                "building them from its t10k images (one test image of the same digit per training label)"
            "$PY" - "$RAW" << 'EOF'
import os, struct, sys
raw = sys.argv[1]
def read(name):
    with open(os.path.join(raw, name), "rb") as f:
        return f.read()
labels_train = read("train-labels-idx1-ubyte")[8:]
test_images = read("t10k-images-idx3-ubyte")
test_labels = read("t10k-labels-idx1-ubyte")[8:]
n_test, rows, cols = struct.unpack(">III", test_images[4:16])
size = rows * cols
by_digit = {}
for i, d in enumerate(test_labels):
    by_digit.setdefault(d, []).append(i)
used = {d: 0 for d in by_digit}
out = [struct.pack(">IIII", 2051, len(labels_train), rows, cols)]
for d in labels_train:
    idx = by_digit[d][used[d] % len(by_digit[d])]
    used[d] += 1
    out.append(test_images[16 + idx * size:16 + (idx + 1) * size])
with open(os.path.join(raw, "train-images-idx3-ubyte"), "wb") as f:
    f.write(b"".join(out))
EOF
            missing=""
        fi
        if [[ -n "$missing" ]]; then
            ORDER+=(mnist_ddp)
            STATUS[mnist_ddp]="FAIL (MNIST files missing in $SRC:$missing; PCCL10_MNIST_STANDIN=1 builds train-images from t10k)"
            TIME[mnist_ddp]=0
        else
            run_suite mnist_ddp "$MN" 1800 "${PYTEST[@]}" "$T/end_to_end/mnist_ddp/mnist_ddp_e2e_test.py"
        fi
    fi
fi

# --- stress orchestrators ----------------------------------------------------------------------
run_stress() { # NAME DIR
    local name=$1 dir=$2
    [[ " $ONLY " == *" $name "* ]] || return 0
    ORDER+=("$name")
    echo "=== $name: (cd $dir && timeout -s TERM $STRESS_SECONDS $PY stresstest_orchestrator.py)"
    local t0=$SECONDS rc=0
    # timeout signals its whole process group: the orchestrator, the master and every peer
    (cd "$dir" && timeout -k 10 -s TERM "$STRESS_SECONDS" "$PY" stresstest_orchestrator.py) \
        > "$WORK/$name.log" 2>&1 || rc=$?
    TIME[$name]=$((SECONDS - t0))
    local verdict
    verdict=$("$PY" - "$WORK/$name.log" "$rc" "$name" << 'EOF'
import re, sys
log = open(sys.argv[1], errors="replace").read()
rc, name = int(sys.argv[2]), sys.argv[3]
problems = []
if rc != 124:
    problems.append(f"the orchestrator ended before the time limit (exit {rc})")
for pat in ("Traceback (most recent call last)", "failed with:", "considering test stuck"):
    n = log.count(pat)
    if n:
        problems.append(f"{n} x {pat!r}")
bad_ends = [m for m in re.findall(r"Peer PID=\d+ ended \(code=(-?\d+)\)", log) if m not in ("0", "-9")]
if bad_ends:
    problems.append(f"{len(bad_ends)} peers ended with an error (exit codes {sorted(set(bad_ends))})")
reduces = log.count("Reduce completed RX:")
steps = 0
its, waits = {}, {}
for pid, it in re.findall(r"\[PEER (\d+)\].*\(RANK=\d+, it=(\d+)\) update_topology\(\)", log):
    its.setdefault(pid, set()).add(int(it))
for pid in re.findall(r"\[PEER (\d+)\].*\) waiting\.\.\.", log):
    waits[pid] = waits.get(pid, 0) + 1
steps = sum(max(0, len(v) - waits.get(p, 0)) for p, v in its.items())
kills = log.count("KILLING peer")
spawned = log.count("Spawned peer")
if name == "stress_cross_step" and reduces == 0:
    problems.append("no 'Reduce completed' line")
if name == "stress_basic" and steps == 0:
    problems.append("no all-reduce step")
summary = f"peers spawned {spawned}, killed {kills}, 'Reduce completed' lines {reduces}, steps past world 1 {steps}"
print(("PASS; " if not problems else "FAIL: " + "; ".join(problems) + "; ") + summary)
EOF
)
    STATUS[$name]=$verdict
    echo "    $verdict"
    [[ "$verdict" == PASS* ]] || grep -n -B2 -A12 -E 'Traceback|failed with:' "$WORK/$name.log" | head -60 | sed 's/^/    | /'
}
run_stress stress_basic "$T/stress_tests/basic_stress_test"
run_stress stress_cross_step "$T/stress_tests/cross_step_async_reduces_test"

# --- summary -----------------------------------------------------------------------------------
echo
echo "PCCL 1.0 Python tests against pccl ($ROOT/bindings/python, $PCCL_LIBRARY):"
fail=0
for n in "${ORDER[@]}"; do
    printf '  %-18s %5ss  %s\n' "$n" "${TIME[$n]}" "${STATUS[$n]}"
    [[ "${STATUS[$n]}" == PASS* || "${STATUS[$n]}" == SKIP* ]] || fail=1
done
exit $fail
