import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

# the binding itself, for in-process tests
sys.path.insert(0, str(harness.BINDINGS))
if harness.lib_path():
    os.environ.setdefault("PCCL_LIBRARY", harness.lib_path())


@pytest.fixture
def procs(tmp_path):
    ps = harness.Procs(tmp_path)
    yield ps
    ps.close()


@pytest.fixture
def master_port(procs):
    return harness.start_master(procs)
