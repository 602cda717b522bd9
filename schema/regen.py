#!/usr/bin/python3
"""Regenerates the committed C codec in schema/gen/ from schema/ccoip.proto.

    schema/regen.py            write schema/gen/ccoip_pb.{h,c}
    schema/regen.py --check    regenerate into a temporary directory and fail
                               (exit 1, with a diff) if schema/gen/ differs

The check is the ctest schema_codegen_up_to_date. It needs protoc and
Debian's python3-protobuf (for the plugin, schema/gen.py); builds do not.
"""
import argparse
import difflib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUTS = ["ccoip_pb.h", "ccoip_pb.c"]


def generate(protoc, out_dir):
    subprocess.run([protoc, f"--plugin=protoc-gen-ccoip={os.path.join(HERE, 'gen.py')}",
                    f"--ccoip_out={out_dir}", f"-I{HERE}", os.path.join(HERE, "ccoip.proto")],
                   check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--protoc", default=shutil.which("protoc") or "protoc")
    a = ap.parse_args()
    gen_dir = os.path.join(HERE, "gen")
    with tempfile.TemporaryDirectory() as tmp:
        generate(a.protoc, tmp)
        if not a.check:
            os.makedirs(gen_dir, exist_ok=True)
            for name in OUTPUTS:
                shutil.copyfile(os.path.join(tmp, name), os.path.join(gen_dir, name))
            print(f"regen: wrote {', '.join(OUTPUTS)} to {gen_dir}")
            return 0
        stale = 0
        for name in OUTPUTS:
            want = open(os.path.join(tmp, name), encoding="utf-8").read().splitlines(True)
            path = os.path.join(gen_dir, name)
            have = open(path, encoding="utf-8").read().splitlines(True) if os.path.exists(
                path) else []
            if want != have:
                stale += 1
                sys.stdout.writelines(difflib.unified_diff(have, want, f"committed/{name}",
                                                           f"regenerated/{name}", n=2))
        if stale:
            print(f"regen: schema/gen/ is stale ({stale} file(s)): run schema/regen.py")
            print("0 passed, 1 failed")
            return 1
        print("regen: schema/gen/ matches schema/ccoip.proto and schema/gen.py")
        print("1 passed, 0 failed")
        return 0


if __name__ == "__main__":
    sys.exit(main())
