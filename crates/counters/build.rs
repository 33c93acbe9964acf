//! Emits `livecount_rseq`: one name for "`PerCpu` may take the restartable-sequence path",
//! which is x86-64 Linux outside the model checkers (under `livecount_loom` /
//! `livecount_shuttle` the CPU is a model variable and the critical section must not run).
//! The code says `#[cfg(livecount_rseq)]` instead of repeating the three conditions.
//!
//! Cargo hands a build script the target's cfgs, `RUSTFLAGS`' `--cfg`s included, as
//! `CARGO_CFG_*` variables (crossbeam's build script reads them the same way).

use std::env;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(livecount_rseq)");
    println!("cargo::rerun-if-changed=build.rs");
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let model = env::var_os("CARGO_CFG_LIVECOUNT_LOOM").is_some()
        || env::var_os("CARGO_CFG_LIVECOUNT_SHUTTLE").is_some();
    if arch == "x86_64" && os == "linux" && !model {
        println!("cargo::rustc-cfg=livecount_rseq");
    }
}
