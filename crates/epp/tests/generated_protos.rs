//! The Rust code generated from `proto/` is committed under `src/generated/`, so building
//! the crate never needs `protoc`. This test regenerates it and checks the committed copy
//! is current, with the `protoc` that `protoc-bin-vendored` ships (or `$PROTOC`, if set).
//!
//! After editing a `.proto`, regenerate with:
//!
//! ```text
//! LIVECOUNT_REGENERATE_PROTOS=1 cargo test -p livecount-epp --test generated_protos
//! ```

#[test]
fn committed_generated_code_matches_the_protos() {
    livecount_support::protos::assert_current(
        env!("CARGO_MANIFEST_DIR"),
        "livecount-epp",
        // The `.proto` files compiled, relative to `proto/`.
        &["envoy/service/ext_proc/v3/external_processor.proto"],
        // The files generated, one per protobuf package.
        &[
            "envoy.config.core.v3.rs",
            "envoy.r#type.v3.rs",
            "envoy.service.ext_proc.v3.rs",
        ],
    );
}
