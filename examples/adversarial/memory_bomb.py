# target: 8p_GEMM
# expect: crashed
# exploit: allocates memory without bound while being traced; jb's memory limit kills the worker
def workload(a, b):
    hog = []
    while True:
        hog.append(b"\x01" * (256 * 2**20))  # touched pages, not lazily zeroed ones
