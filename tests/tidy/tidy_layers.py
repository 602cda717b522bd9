#!/usr/bin/python3
"""tidy_layers: who may include whom (docs/architecture.md, "Layers").

Every project header lives in one folder; each layer of the tree may include
headers of the folders listed for it, and nothing else of the project (system
and third-party headers are not checked here; tidy_core.py bans the impure
ones in core/). The rules, lowest layer first:

  schema/gen        schema/gen, include/pccl_types.h
  core              core (its public headers), core/internal, schema/gen,
                    include/pccl_types.h
  sim               sim, core (public), schema/gen, include/pccl_types.h
  transport         transport, core (public), schema/gen, include
  bindings/libpccl  bindings/libpccl, transport, core (public), include
  master            transport, include
  bench             bench, core (public), include
  examples          include

core/internal is private to core: no other layer lists it. --self-test runs
the check on a tree made to break each kind of rule and fails if it does not
catch them (the canary).
"""
import argparse
import os
import re
import sys
import tempfile

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)

# Folders that hold project headers (a header's home is the first that has it).
HEADER_DIRS = ["include", "core/internal", "core", "schema/gen", "sim", "transport",
               "bindings/libpccl", "bench", "tests/common"]

# layer -> allowed (folder, only-these-headers or None for all).
RULES = {
    "schema/gen": [("schema/gen", None), ("include", {"pccl_types.h"})],
    "core": [("core", None), ("core/internal", None), ("schema/gen", None),
             ("include", {"pccl_types.h"})],
    "sim": [("sim", None), ("core", None), ("schema/gen", None), ("include", {"pccl_types.h"})],
    "transport": [("transport", None), ("core", None), ("schema/gen", None), ("include", None)],
    "bindings/libpccl": [("bindings/libpccl", None), ("transport", None), ("core", None),
                         ("include", None)],
    "master": [("transport", None), ("include", None)],
    "bench": [("bench", None), ("core", None), ("include", None)],
    "examples": [("include", None)],
}


def header_homes(root):
    homes = {}
    for d in HEADER_DIRS:
        p = os.path.join(root, d)
        if not os.path.isdir(p):
            continue
        for f in sorted(os.listdir(p)):
            if f.endswith(".h") and f not in homes:
                homes[f] = d
    return homes


def layer_files(root, layer):
    base = os.path.join(root, layer)
    for dirpath, dirs, files in os.walk(base):
        rel = os.path.relpath(dirpath, root)
        # A folder that is a layer of its own is checked as that layer.
        dirs[:] = [x for x in dirs
                   if os.path.join(rel, x).replace(os.sep, "/") not in RULES or
                   os.path.join(rel, x).replace(os.sep, "/") == "core/internal"]
        for f in sorted(files):
            if f.endswith((".c", ".h", ".cpp")):
                yield os.path.join(dirpath, f)


def check(root):
    homes = header_homes(root)
    problems = []
    for layer, allowed in RULES.items():
        for path in layer_files(root, layer):
            text = open(path, encoding="utf-8").read()
            for m in INCLUDE_RE.finditer(text):
                name = os.path.basename(m.group(1))
                home = homes.get(name)
                if home is None:
                    continue  # not a project header
                ok = any(home == d and (only is None or name in only) for d, only in allowed)
                if not ok:
                    line = text.count("\n", 0, m.start()) + 1
                    rel = os.path.relpath(path, root)
                    problems.append(f"{rel}:{line}: layer {layer} includes {name} (from {home})")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as d:
        files = {
            "include/pccl.h": "", "include/pccl_types.h": "",
            "core/ccoip_sm.h": '#include "pccl_types.h"\n',
            "core/internal/secret.h": "",
            "core/bad_core.c": '#include "pccl.h"\n#include "pt.h"\n',
            "transport/pt.h": '#include "pccl.h"\n#include "ccoip_sm.h"\n',
            "sim/bad_sim.c": '#include "secret.h"\n#include "pt.h"\n',
            "examples/bad_example.c": '#include "ccoip_sm.h"\n',
        }
        for rel, body in files.items():
            p = os.path.join(d, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as fh:
                fh.write(body)
        found = check(d)
        want = ["core/bad_core.c:1: layer core includes pccl.h",
                "core/bad_core.c:2: layer core includes pt.h",
                "sim/bad_sim.c:1: layer sim includes secret.h",
                "sim/bad_sim.c:2: layer sim includes pt.h",
                "examples/bad_example.c:1: layer examples includes ccoip_sm.h"]
        missing = [w for w in want if not any(p.startswith(w) for p in found)]
        spurious = [p for p in found if not any(p.startswith(w) for w in want)]
        if missing or spurious:
            print("tidy_layers self-test FAILED: missing", missing, "spurious", spurious)
            return 1
    print(f"tidy_layers self-test: the canary was caught ({len(want)} findings)")
    print("1 passed, 0 failed")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    problems = check(os.path.abspath(a.root))
    for p in problems:
        print(p)
    if problems:
        print(f"tidy_layers: {len(problems)} include(s) across layers")
        print("0 passed, 1 failed")
        return 1
    print("tidy_layers: every include stays within its layer's rules")
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
