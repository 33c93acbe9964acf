//! The Rust code generated from `proto/` is committed under `src/generated/`, so building
//! the crate never needs `protoc`. This test regenerates it and checks the committed copy
//! is current, with the `protoc` that `protoc-bin-vendored` ships (or `$PROTOC`, if set):
//! it always runs, and fails loudly on a platform the vendored binaries do not cover,
//! instead of passing without a `protoc`.
//!
//! After editing a `.proto`, regenerate with:
//!
//! ```text
//! LIVECOUNT_REGENERATE_PROTOS=1 cargo test -p livecount-report --test generated_protos
//! ```

use std::path::{Path, PathBuf};

/// The `.proto` files compiled, relative to `proto/`.
const PROTOS: &[&str] = &[
    "xds/data/orca/v3/orca_load_report.proto",
    "xds/service/orca/v3/orca.proto",
];

/// The files generated, one per protobuf package.
const GENERATED: &[&str] = &["xds.data.orca.v3.rs", "xds.service.orca.v3.rs"];

/// `$PROTOC` if set, else the vendored `protoc` for this platform.
fn protoc() -> PathBuf {
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

fn generate(out: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    let protos: Vec<PathBuf> = PROTOS.iter().map(|p| root.join(p)).collect();
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc());
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // Clients stay generic over the transport: the crate's tonic has no `channel`.
        .build_transport(false)
        .emit_rerun_if_changed(false)
        .out_dir(out)
        .compile_with_config(config, &protos, &[root])
        .expect("protoc compiles proto/");
}

#[test]
fn committed_generated_code_matches_the_protos() {
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/generated");
    let dir = std::env::temp_dir().join(format!("livecount-protos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    generate(&dir);
    let regenerate = std::env::var_os("LIVECOUNT_REGENERATE_PROTOS").is_some();
    let mut stale = Vec::new();
    for name in GENERATED {
        let fresh = std::fs::read_to_string(dir.join(name)).expect("generated");
        if regenerate {
            std::fs::write(committed.join(name), &fresh).unwrap();
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
         LIVECOUNT_REGENERATE_PROTOS=1 cargo test -p livecount-report --test generated_protos"
    );
}
