# target: 12p_RMSNorm
# expect: compile_error
# exploit: none - raises while being imported (error_class "import")
raise RuntimeError("this candidate fails at import time")


def workload(x, scale):  # pragma: no cover
    return x
