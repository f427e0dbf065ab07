import os
import pathlib
import shutil
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "python" / "tests"))

# One JAX persistent compilation cache per test run, shared by the run's pytest processes (the
# controller and its xdist workers), since many tests compile the same reference workloads. It is
# a fresh temporary folder (never the user's cache) made by the controller and removed at its end,
# handed to the xdist workers through xdist's own channel and set with jax.config, never through
# the environment: the subprocesses the tests start (worker processes that import candidate code)
# neither know nor use it, so no candidate can leave a program there for a judge to load.
_KEY = "jb_jax_cache_dir"


def _use_cache(folder: str) -> None:
    import jax

    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_configure(config):
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        if os.environ.get("JB_TEST_JAX_CACHE") == "0":  # to compare, or rule the cache out
            return
        config._jb_jax_cache = tempfile.mkdtemp(prefix="jb-test-jax-cache-")
        _use_cache(config._jb_jax_cache)
    elif workerinput.get(_KEY):
        _use_cache(workerinput[_KEY])


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist (controller side): each worker gets the run's cache folder."""
    node.workerinput[_KEY] = getattr(node.config, "_jb_jax_cache", None)


def pytest_unconfigure(config):
    folder = getattr(config, "_jb_jax_cache", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
