"""jb's Python side: the worker that compiles, verifies and profiles JAX/Pallas code for jb."""
