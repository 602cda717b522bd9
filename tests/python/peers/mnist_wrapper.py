"""Runs a training script as __main__ and then prints a hash of its shared state.

The script is not modified for this: pccl.SharedState is wrapped so that the
instances it creates are remembered; after the script returns, each one's
tensors are hashed (sha256 over name and bytes, in name order) and printed as
  SHARED_STATE_HASH <hex> revision <R>
"""

import ctypes
import hashlib
import runpy
import sys

import pccl

_states = []
_orig_init = pccl.SharedState.__init__


def _init(self, *args, **kwargs):
    _orig_init(self, *args, **kwargs)
    _states.append(self)


pccl.SharedState.__init__ = _init


def state_hash(state):
    h = hashlib.sha256()
    for ti in sorted(state.tensor_infos, key=lambda t: t.name):
        h.update(ti.name.encode("utf-8") + b"\0")
        h.update(ctypes.string_at(ti.data_ptr, ti.numel * ti.dtype.size))
    return h.hexdigest()


if __name__ == "__main__":
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
    for st in _states:
        print(f"SHARED_STATE_HASH {state_hash(st)} revision {st.revision} tensors {len(st)}",
              flush=True)
