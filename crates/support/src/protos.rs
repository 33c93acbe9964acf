//! Test support for the crates that commit generated gRPC code (`livecount-report`'s ORCA
//! messages, `livecount-server`'s agent protocol): regenerates it from the crate's `proto/`
//! with the `protoc` that `protoc-bin-vendored` ships (or `$PROTOC`) and checks the committed
//! copy under `src/generated/` is current. With `LIVECOUNT_REGENERATE_PROTOS` set it writes
//! the fresh code instead.

use std::path::{Path, PathBuf};

/// `$PROTOC` if set, else the vendored `protoc` for this platform; panics, saying so, on a
/// platform the vendored binaries do not cover (never a silent pass).
pub fn protoc() -> PathBuf {
    if let Some(protoc) = std::env::var_os("PROTOC") {
        return protoc.into();
    }
    protoc_bin_vendored::protoc_bin_path().unwrap_or_else(|e| {
        panic!(
            "no protoc: protoc-bin-vendored has none for this platform ({e}); \
             set PROTOC to a protoc binary"
        )
    })
}

/// Regenerates `protos` (relative to `<manifest_dir>/proto`) and asserts that the files
/// `generated` in `<manifest_dir>/src/generated` equal the fresh ones; `package` names the
/// crate in the regeneration hint.
///
/// # Panics
///
/// When the committed code is stale (unless `LIVECOUNT_REGENERATE_PROTOS` is set: then it is
/// rewritten), or `protoc` is missing or fails.
pub fn assert_current(manifest_dir: &str, package: &str, protos: &[&str], generated: &[&str]) {
    let root = Path::new(manifest_dir).join("proto");
    let committed = Path::new(manifest_dir).join("src/generated");
    let dir = std::env::temp_dir().join(format!("{package}-protos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let protos: Vec<PathBuf> = protos.iter().map(|p| root.join(p)).collect();
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc());
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // Clients stay generic over the transport: the crates' tonic has no `channel`.
        .build_transport(false)
        .emit_rerun_if_changed(false)
        .out_dir(&dir)
        .compile_with_config(config, &protos, &[root])
        .expect("protoc compiles proto/");
    let regenerate = std::env::var_os("LIVECOUNT_REGENERATE_PROTOS").is_some();
    let mut stale = Vec::new();
    for name in generated {
        let fresh = std::fs::read_to_string(dir.join(name)).expect("generated");
        if regenerate {
            std::fs::write(committed.join(name), &fresh).expect("src/generated is writable");
        } else if std::fs::read_to_string(committed.join(name))
            .ok()
            .as_deref()
            != Some(&fresh)
        {
            stale.push(*name);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        stale.is_empty(),
        "src/generated/{stale:?} differ from what proto/ generates; regenerate with \
         LIVECOUNT_REGENERATE_PROTOS=1 cargo test -p {package} --test generated_protos"
    );
}
