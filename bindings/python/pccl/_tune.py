"""The group-wide algorithm tuner on a Communicator (docs/algorithms.md): pcclTune,
pcclTuneSave, pcclTuneLoad, pcclGetAlgorithm."""

import ctypes
import os

from . import _lib as L
from ._errors import error_for
from ._types import Algorithm, DataType, TuneKind


def _check(rc, fn):
    if rc != 0:
        raise error_for(rc, fn)


class TuneMixin:
    """Communicator methods of the tuner. Every member calls tune / tune_load with the same
    arguments and no op in flight; afterwards every member holds the same table."""

    def tune(self, *, iterations=0, warmup=0, min_bytes=0, max_bytes=0,
             kinds=TuneKind.ALL_REDUCE):
        """Times every algorithm at every size class (1 KiB .. 256 MiB — 16 MiB per block for
        the kinds other than the all-reduce — or min_bytes .. max_bytes; iterations timed runs
        after warmup, 0: 3 and 1) for each kind in kinds (TuneKind flags); the master installs
        the median winner per size for the group. Raises the PCCLError of a failed op."""
        o = L.CTuneOptions.init()
        o.iterations, o.warmup = int(iterations), int(warmup)
        o.min_bytes, o.max_bytes = int(min_bytes), int(max_bytes)
        o.kinds = int(kinds)
        _check(L.lib().pcclTune(self._handle(), ctypes.byref(o)), "pcclTune")

    def tune_save(self, path):
        """Writes the group's table (as this member holds it) to a text file."""
        _check(L.lib().pcclTuneSave(self._handle(), os.fsencode(path)), "pcclTuneSave")

    def tune_load(self, path):
        """Installs the table of a file tune_save wrote, for the group's world size."""
        _check(L.lib().pcclTuneLoad(self._handle(), os.fsencode(path)), "pcclTuneLoad")

    def get_algorithm(self, count, dtype=DataType.FLOAT):
        """The Algorithm an AUTO all-reduce of count elements of dtype runs now."""
        out = L.c_enum()
        _check(L.lib().pcclGetAlgorithm(self._handle(), int(count), int(dtype),
                                        ctypes.byref(out)), "pcclGetAlgorithm")
        return Algorithm(out.value)
