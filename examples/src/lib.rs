//! Runnable examples of keel: see `examples/`.
