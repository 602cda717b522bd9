"""The ccoip_master executable a wheel carries (pccl/_native/ccoip_master).

The console script `ccoip_master` (pyproject.toml) and `python -m pccl._bin` replace this
process with it, so signals, exit status and output are the master's own. `python -m pccl.master`
instead runs a master inside Python over the same bundled libpccl.
"""

import os
import sys


def master_path():
    """Path of the bundled ccoip_master, or None when this package is not from a wheel."""
    p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native", "ccoip_master")
    return p if os.access(p, os.X_OK) else None


def ccoip_master(argv=None):
    exe = master_path()
    if exe is None:
        sys.stderr.write("ccoip_master: this pccl package has no bundled master "
                         "(install the wheel, docs/packaging.md)\n")
        return 127
    args = sys.argv[1:] if argv is None else list(argv)
    os.execv(exe, [exe, *args])
    return 127  # not reached: execv returns only by raising


if __name__ == "__main__":
    sys.exit(ccoip_master())
