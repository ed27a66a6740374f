"""The stand-in CUDA driver (tests/fake_cuda.c) as the Python tests use it.

Its "device memory" is host memory, so a device pointer is read and
written here with ctypes. ``StandIn`` loads the same .so path collgen loads
(dlopen hands back the same handle, so the counters are collgen's), and is
imported by conftest.py and by the rank processes of test_bootstrap.py.
"""

import ctypes

# The FAKE_CUDA_* settings the stand-in reads at every query; cleared so
# that every test sees 2 devices with full P2P at sm_90.
SETTINGS = ("FAKE_CUDA_DEVICES", "FAKE_CUDA_SM", "FAKE_CUDA_NO_P2P", "FAKE_CUDA_NO_P2P_PAIRS",
            "FAKE_CUDA_VMM_NO_FD")


class Stats(ctypes.Structure):
    """The leading counters of fake_cuda_stats_t (tests/fake_cuda.h)."""
    _fields_ = [(name, ctypes.c_long) for name in (
        "launches", "copies", "uploads", "upload_bytes", "vmm_handles", "ipc_open",
        "module_loads", "ctx_switches", "wrong_context")]


class StandIn:
    """The stand-in driver at ``path``: memory and counters."""

    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.lib.fake_cuda_stats.restype = ctypes.POINTER(Stats)
        self.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        self.lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        self.lib.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
        self.lib.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
        self.lib.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        self._call("cuInit", 0)

    def _call(self, name, *args):
        """Calls a driver function; a nonzero CUresult fails the test."""
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            raise RuntimeError(f"stand-in {name} returned {rc}")

    @property
    def stats(self):
        """The live counters (a Stats over the library's own struct)."""
        return self.lib.fake_cuda_stats().contents

    def reset_stats(self):
        """Zeroes every counter (as the C host-path tests do between cases)."""
        s = self.stats
        for name, _ in Stats._fields_:
            setattr(s, name, 0)

    def use_device(self, device):
        """Makes ``device``'s primary context current on this thread."""
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        self._call("cuDeviceGet", ctypes.byref(dev), device)
        self._call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        self._call("cuCtxSetCurrent", ctx)

    def alloc(self, device, nbytes, poison=0xAB):
        """``nbytes`` of ``device``'s memory (cuMemAlloc), every byte ``poison``."""
        self.use_device(device)
        p = ctypes.c_uint64()
        self._call("cuMemAlloc_v2", ctypes.byref(p), nbytes)
        ctypes.memset(p.value, poison, nbytes)
        return p.value

    def free(self, ptr):
        """Frees memory of alloc()."""
        self._call("cuMemFree_v2", ptr)

    @staticmethod
    def read(ptr, nbytes):
        """The bytes at a stand-in device pointer."""
        return ctypes.string_at(ptr, nbytes)

    @staticmethod
    def write(ptr, data):
        """Writes ``data`` (bytes) at a stand-in device pointer."""
        ctypes.memmove(ptr, data, len(data))


class DeviceArray:
    """A minimal __cuda_array_interface__ (version 3) object over stand-in
    memory, as CuPy or Numba would hand one to collgen."""

    def __init__(self, ptr, shape, typestr="<u2", strides=None):
        self.__cuda_array_interface__ = {
            "version": 3, "data": (ptr, False), "shape": tuple(shape), "typestr": typestr,
            "strides": strides}
