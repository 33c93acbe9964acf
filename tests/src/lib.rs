//! Integration tests for livecount live under `tests/`.
