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

#[test]
fn committed_generated_code_matches_the_protos() {
    livecount_support::protos::assert_current(
        env!("CARGO_MANIFEST_DIR"),
        "livecount-report",
        // The `.proto` files compiled, relative to `proto/`.
        &[
            "xds/data/orca/v3/orca_load_report.proto",
            "xds/service/orca/v3/orca.proto",
        ],
        // The files generated, one per protobuf package.
        &["xds.data.orca.v3.rs", "xds.service.orca.v3.rs"],
    );
}
