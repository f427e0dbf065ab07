# target: 8p_GEMM
# expect: crashed
# exploit: kills its own process (os._exit) while being traced; jb records the worker's death
import os


def workload(a, b):
    os._exit(3)
