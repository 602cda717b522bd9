"""Builds the pccl wheel with libpccl and ccoip_master inside it (docs/packaging.md).

`pip wheel --no-index --no-build-isolation bindings/python` configures and builds the
repository's CMake project (targets pccl and ccoip_master only: no tests, no benchmarks) and
copies into pccl/_native/:
  libpccl.so, ccoip_master     this repository's library and master;
  libnng.so.1, libmbed*.so.*   the libraries they need that a Linux system does not always have,
                               found with ldd on the build machine.
Every ELF file there gets RUNPATH $ORIGIN (patchelf), so each finds the others next to it with no
environment variable, the way auditwheel repairs a wheel (done by hand here: auditwheel is not in
Debian and the network is off). glibc and OpenSSL's libcrypto stay system libraries (SYSTEM_LIBS).

PCCL_WHEEL_BUILD_DIR=DIR reuses an existing CMake build tree (CI reuses build/ci-native instead of
compiling libpccl a second time); without it the tree is <repository>/build/wheel.
PCCL_SOURCE_DIR overrides the repository root (default: two levels above this file).
"""

import os
import re
import shutil
import subprocess
import sysconfig

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no wheel package: sdist/install paths still work, only the tag is moot
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))

# Libraries every target system provides; anything else ldd reports is copied into the wheel.
# libcrypto/libssl stay out on purpose: OpenSSL gets security updates from the system.
SYSTEM_LIBS = re.compile(
    r"^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libresolv|libgcc_s|libstdc\+\+"
    r"|libcrypto|libssl|libz)\.so"
)


def _source_root():
    root = os.environ.get("PCCL_SOURCE_DIR") or os.path.normpath(os.path.join(HERE, "..", ".."))
    if not os.path.isfile(os.path.join(root, "include", "pccl.h")):
        raise SystemExit(f"pccl: {root} is not the pccl repository (set PCCL_SOURCE_DIR)")
    return root


def _run(cmd):
    print("pccl:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def _cmake_build(root):
    """Builds targets pccl and ccoip_master; returns the build tree."""
    reuse = os.environ.get("PCCL_WHEEL_BUILD_DIR")
    build = os.path.abspath(reuse) if reuse else os.path.join(root, "build", "wheel")
    if not reuse or not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        cmd = ["cmake", "-S", root, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
               "-DPCCL_BUILD_TESTS=OFF", "-DPCCL_BUILD_BENCH=OFF"]
        if shutil.which("ninja"):
            cmd += ["-G", "Ninja"]
        _run(cmd)
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    _run(["cmake", "--build", build, "--target", "pccl", "ccoip_master", "-j", jobs])
    return build


def _needed(path):
    """(soname, resolved path) of the non-system libraries ldd reports for path."""
    out = subprocess.run(["ldd", path], check=True, capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if not m or SYSTEM_LIBS.match(m.group(1)):
            continue
        if m.group(2) == "not":
            raise SystemExit(f"pccl: {path} needs {m.group(1)}, which is not installed")
        found.append((m.group(1), m.group(2)))
    return found


def bundle_native(build, dest):
    """Copies libpccl.so, ccoip_master and their non-system libraries into dest."""
    if not shutil.which("patchelf"):
        raise SystemExit("pccl: patchelf is needed to build the wheel (apt-get install patchelf)")
    os.makedirs(dest, exist_ok=True)
    lib = os.path.realpath(os.path.join(build, "bindings", "libpccl", "libpccl.so"))
    master = os.path.join(build, "master", "ccoip_master")
    shutil.copyfile(lib, os.path.join(dest, "libpccl.so"))
    shutil.copyfile(master, os.path.join(dest, "ccoip_master"))
    os.chmod(os.path.join(dest, "ccoip_master"), 0o755)
    # ldd resolves the whole closure, so one pass over the two top-level files suffices.
    bundled = {}
    for top in (lib, master):
        for soname, path in _needed(top):
            bundled.setdefault(soname, path)
    for soname, path in bundled.items():
        shutil.copyfile(os.path.realpath(path), os.path.join(dest, soname))
    for name in ["libpccl.so", "ccoip_master", *bundled]:
        f = os.path.join(dest, name)
        os.chmod(f, 0o755)
        # RUNPATH is per object (not inherited), so every file gets its own $ORIGIN.
        _run(["patchelf", "--set-rpath", "$ORIGIN", f])
    print(f"pccl: bundled {', '.join(sorted(bundled)) or 'no extra library'}", flush=True)


class BuildPyWithNative(build_py):
    def run(self):
        super().run()
        root = _source_root()
        bundle_native(_cmake_build(root), os.path.join(self.build_lib, "pccl", "_native"))


cmdclass = {"build_py": BuildPyWithNative}

if bdist_wheel is not None:

    class PlatformWheel(bdist_wheel):
        """py3-none-<platform>: any Python 3 (ctypes, no extension module), one platform."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = PlatformWheel



class NativeDistribution(Distribution):
    """Native files inside: installed into platlib, and the wheel's root is not purelib."""

    def has_ext_modules(self):
        return True


setup(cmdclass=cmdclass, distclass=NativeDistribution)
