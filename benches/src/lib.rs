//! Cross-crate benchmark support for livecount (contenders and workloads).
