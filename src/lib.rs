//! jb: a content-addressed build executor for accelerator-kernel benchmarks.
