# target: 8p_GEMM
# expect: timeout
# exploit: never returns (busy loop while being traced); jb's wall-clock timeout kills the worker
def workload(a, b):
    while True:
        pass
