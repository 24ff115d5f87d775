//! Fuzz target bodies, shared by `fuzz/` (libFuzzer) and the corpus replay test.
