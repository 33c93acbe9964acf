//! ORCA's protobuf messages and service, generated from `proto/` by `tonic-prost-build`.
//!
//! The `*.rs` files beside this one are generated and committed, so building the crate
//! needs no `protoc`; do not edit them. After changing a `.proto`, regenerate them with
//! (needs `protoc`, e.g. `apt-get install protobuf-compiler`):
//!
//! ```text
//! LIVECOUNT_REGENERATE_PROTOS=1 cargo test -p livecount-report --test generated_protos -- --ignored
//! ```
//!
//! The same test, without the variable, fails when the committed files are stale. The
//! module tree mirrors the protobuf packages, which the generated code relies on
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

/// Packages of the cncf/xds API.
pub mod xds {
    /// Data types.
    pub mod data {
        /// ORCA.
        pub mod orca {
            /// `xds.data.orca.v3`: the ORCA load report.
            pub mod v3 {
                include!("xds.data.orca.v3.rs");
            }
        }
    }
    /// Services.
    pub mod service {
        /// ORCA.
        pub mod orca {
            /// `xds.service.orca.v3`: out-of-band load reporting (`OpenRcaService`).
            pub mod v3 {
                include!("xds.service.orca.v3.rs");
            }
        }
    }
}
