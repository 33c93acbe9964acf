//! The agent's protobuf messages and gRPC service (`livecount.agent.v1`), generated from `proto/` by `tonic-prost-build`.
//!
//! The `*.rs` files beside this one are generated and committed, so building the crate
//! needs no `protoc`; do not edit them. After changing a `.proto`, regenerate them with
//! (needs `protoc`, e.g. `apt-get install protobuf-compiler`):
//!
//! ```text
//! LIVECOUNT_REGENERATE_PROTOS=1 cargo test -p livecount-server --test generated_protos -- --ignored
//! ```
//!
//! The same test, without the variable, fails when the committed files are stale.
//! The module tree mirrors the protobuf packages, which the generated code relies on
//! (`super::super::…` paths between packages).

// Generated code: not ours to document or lint.
#![allow(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    clippy::all,
    clippy::pedantic,
    rustdoc::all
)]

/// livecount's own packages.
pub mod livecount {
    /// The agent.
    pub mod agent {
        /// `livecount.agent.v1`: sessions over gRPC (`Agent/Converse`).
        pub mod v1 {
            include!("livecount.agent.v1.rs");
        }
    }
}
