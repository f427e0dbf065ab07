# target: 8p_GEMM
# expect: crashed
# exploit: segmentation fault (reads address 0 through ctypes) while being traced
import ctypes


def workload(a, b):
    ctypes.string_at(0)
    return a @ b
