//! Helpers shared by the tests that read the bundled scenarios.

use std::path::{Path, PathBuf};

/// `crates/sim/scenarios`.
pub(crate) fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

/// Every bundled scenario file, sorted.
pub(crate) fn bundled() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(scenarios_dir())
        .expect("scenarios dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}
