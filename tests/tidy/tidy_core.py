#!/usr/bin/python3
"""tidy: core/ must stay pure and deterministic (DESIGN.md §2).

Two independent checks:
1. Source scan: no call to a banned function (clocks, randomness, environment,
   I/O, sockets, threads, nng) and no include of a banned header (the public
   API pccl.h among them: core/ and schema/ include pccl_types.h), outside
   comments and string literals.
2. Link scan: every symbol the core library leaves undefined must be on a
   short allowlist of pure libc/libm functions. This catches calls the source
   scan cannot see (macros, inline functions in headers).

3. Privacy scan (--root): core/internal/ holds the machines' structs and shared
   plumbing, private to core/ (docs/core.md "Layout"). No file outside core/
   may include one of its headers, and no public core/*.h may either (it would
   hand them on to every includer).

--self-test runs the checks on a deliberately impure snippet and fails if
they do not catch it (the canary).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

BANNED_CALLS = [
    # clocks
    "time", "clock", "clock_gettime", "gettimeofday", "timespec_get", "localtime", "gmtime",
    # randomness
    "rand", "srand", "random", "srandom", "drand48", "lrand48", "arc4random", "getrandom",
    # environment, processes
    "getenv", "secure_getenv", "setenv", "system", "exit", "fork", "exec", "getpid", "sleep",
    "usleep", "nanosleep",
    # I/O
    "printf", "fprintf", "vprintf", "vfprintf", "puts", "fputs", "putchar", "fopen", "fclose",
    "fread", "fwrite", "open", "close", "read", "write", "perror", "scanf", "fscanf",
    # sockets
    "socket", "connect", "bind", "listen", "accept", "send", "recv", "sendto", "recvfrom",
    "select", "poll", "epoll_wait",
]
BANNED_PREFIXES = ["pthread_", "nng_", "thrd_", "mtx_", "cnd_", "atomic_"]
BANNED_HEADERS = ["pccl.h", "stdio.h", "time.h", "pthread.h", "threads.h", "unistd.h", "sys/", "nng/",
                  "stdatomic.h", "signal.h", "fcntl.h", "netinet/", "arpa/"]

# Undefined symbols the core may leave for the C library: pure functions only.
ALLOWED_UNDEFINED = {
    "memcpy", "memmove", "memset", "memcmp", "bcmp", "memchr", "strlen", "strcmp", "strncmp", "strnlen", "abort",
    "__assert_fail", "__stack_chk_fail", "floor", "floorf", "ceil", "ceilf", "fabs", "fabsf",
    "sqrt", "sqrtf", "nearbyint", "rint", "trunc", "round", "ldexp", "frexp", "__memcpy_chk",
    "__memset_chk", "__memmove_chk",
    "_GLOBAL_OFFSET_TABLE_",
    # Heap use is deterministic; bounds on tables are a design rule (DESIGN.md §2 rule 4)
    # checked in review, and xxhash.h's unused state helpers reference these.
    "malloc", "calloc", "realloc", "free",
    # Sorting distinct keys (op indices) has one result whatever the libc's algorithm.
    "qsort",
}
ALLOWED_UNDEFINED_PREFIXES = ["__asan_", "__ubsan_", "__sanitizer_", "__tsan_", "__sancov_"]


def strip_comments_and_strings(text):
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def scan_sources(src_dir):
    problems = []
    call_re = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
    include_re = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
    for root, _, files in os.walk(src_dir):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(root, f)
            raw = open(path, encoding="utf-8").read()
            for m in include_re.finditer(raw):
                hdr = m.group(1)
                if any(hdr == b or (b.endswith("/") and hdr.startswith(b)) for b in BANNED_HEADERS):
                    line = raw.count("\n", 0, m.start()) + 1
                    problems.append(f"{path}:{line}: includes <{hdr}>")
            text = strip_comments_and_strings(raw)
            for lineno, line in enumerate(text.split("\n"), 1):
                if line.lstrip().startswith("#"):
                    continue
                for m in call_re.finditer(line):
                    name = m.group(1)
                    if name in BANNED_CALLS or any(name.startswith(p) for p in BANNED_PREFIXES):
                        problems.append(f"{path}:{lineno}: calls {name}()")
    return problems


SCAN_SKIP_DIRS = {".git", "node_modules", "__pycache__", "target"}


def scan_private_includes(root):
    """Includes of a core/internal/ header from outside core/, or from a public core/*.h."""
    root = os.path.abspath(root)
    internal_dir = os.path.join(root, "core", "internal")
    if not os.path.isdir(internal_dir):
        return [f"{internal_dir}: missing (the private headers of core/ live there)"]
    private = {f for f in os.listdir(internal_dir) if f.endswith(".h")}
    include_re = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
    problems = []
    core_dir = os.path.join(root, "core")
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SCAN_SKIP_DIRS and not d.startswith("build"))
        in_core = os.path.commonpath([dirpath, core_dir]) == core_dir
        if in_core and dirpath != core_dir:
            continue  # core/internal/ and below may include each other
        for f in sorted(files):
            if not f.endswith((".c", ".h", ".cc", ".cpp", ".hpp")):
                continue
            if in_core and not f.endswith(".h"):
                continue  # core's own sources see core/internal/
            path = os.path.join(dirpath, f)
            try:
                raw = open(path, encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            for m in include_re.finditer(raw):
                hdr = m.group(1)
                if os.path.basename(hdr) in private or "internal/" in hdr and "core" in hdr:
                    line = raw.count("\n", 0, m.start(1)) + 1
                    who = "public core header" if in_core else "outside core/"
                    problems.append(f"{path}:{line}: includes private <{hdr}> ({who})")
    return problems


def scan_library(lib, nm):
    out = subprocess.run([nm, "-u", "--format=posix", lib], check=True, capture_output=True,
                         text=True).stdout
    problems = []
    for line in out.splitlines():
        parts = line.split()
        if not parts or line.endswith(":"):
            continue
        sym = parts[0].split("@")[0]
        if sym in ALLOWED_UNDEFINED or any(sym.startswith(p) for p in ALLOWED_UNDEFINED_PREFIXES):
            continue
        if sym.startswith("ccoip_") or sym.startswith("XXH"):
            continue  # defined in another object of the same library
        problems.append(f"{lib}: references external symbol {sym}")
    # Symbols defined inside the archive are fine: drop those.
    defined = subprocess.run([nm, "--defined-only", "--format=posix", lib], check=True,
                             capture_output=True, text=True).stdout
    defined_syms = {l.split()[0] for l in defined.splitlines() if l and not l.endswith(":")}
    return [p for p in problems if p.rsplit(" ", 1)[1] not in defined_syms]


def self_test(nm):
    bad = """
#include <stdio.h>
#include <time.h>
#include "pccl.h"
/* printf( in a comment is fine */
static const char *s = "getenv(\\"X\\") in a string is fine";
int ccoip_bad(void) { printf("%d", rand()); return (int)time(0) + pthread_self(); }
"""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "bad.c"), "w") as fh:
            fh.write(bad)
        found = scan_sources(d)
        want = ["includes <stdio.h>", "includes <time.h>", "includes <pccl.h>", "calls printf()", "calls rand()",
                "calls time()", "calls pthread_self()"]
        missing = [w for w in want if not any(w in p for p in found)]
        spurious = [p for p in found if "getenv" in p]
        if missing or spurious:
            print("tidy self-test FAILED: missing", missing, "spurious", spurious)
            return 1
        obj = os.path.join(d, "bad.o")
        good = "int ccoip_bad(void);\nint puts(const char *);\nint ccoip_bad(void) { return puts(\"x\"); }\n"
        with open(os.path.join(d, "bad2.c"), "w") as fh:
            fh.write(good)
        subprocess.run(["cc", "-c", "-o", obj, os.path.join(d, "bad2.c")], check=True)
        lib_problems = scan_library(obj, nm)
        if not any("puts" in p for p in lib_problems):
            print("tidy self-test FAILED: link scan missed puts:", lib_problems)
            return 1
        # Privacy: a private header reached from outside core/ and from a public header.
        for sub in ("core/internal", "sim"):
            os.makedirs(os.path.join(d, "tree", sub))
        files = {
            "core/internal/x_internal.h": "int x;\n",
            "core/x.c": '#include "x_internal.h"\n',  # fine: core's own source
            "core/ccoip_x.h": '#include "x_internal.h"\n',
            "sim/s.c": '#include "ccoip_x.h"\n#include "x_internal.h"\n',
        }
        for rel, text in files.items():
            with open(os.path.join(d, "tree", rel), "w") as fh:
                fh.write(text)
        priv = scan_private_includes(os.path.join(d, "tree"))
        want = ["ccoip_x.h:1: includes private <x_internal.h> (public core header)",
                "s.c:2: includes private <x_internal.h> (outside core/)"]
        if len(priv) != 2 or not all(any(w in p for p in priv) for w in want):
            print("tidy self-test FAILED: privacy scan found", priv)
            return 1
    print("tidy self-test: the canary was caught (7 source findings, 1 link finding, "
          "2 private includes)")
    print("1 passed, 0 failed")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", action="append", default=[])
    ap.add_argument("--lib")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--root", help="source tree: check that core/internal/ stays private")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test(a.nm)
    problems = []
    for src in a.src:
        problems += scan_sources(src)
    if a.lib:
        problems += scan_library(a.lib, a.nm)
    if a.root:
        problems += scan_private_includes(a.root)
    for p in problems:
        print("tidy:", p)
    if problems:
        print(f"tidy: core/ is not pure: {len(problems)} finding(s)")
        print("0 passed, 1 failed")
        return 1
    print("tidy: core/ is pure (sources, link-level symbols" + (", private headers" if a.root else "") + " checked)")
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
