//! The part of Envoy's external processing API the picker speaks, generated from `proto/`
//! by `tonic-prost-build`.
//!
//! The `*.rs` files beside this one are generated and committed, so building the crate
//! needs no `protoc`; do not edit them. After changing a `.proto`, regenerate them with:
//!
//! ```text
//! LIVECOUNT_REGENERATE_PROTOS=1 cargo test -p livecount-epp --test generated_protos
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

/// Packages of Envoy's API.
pub mod envoy {
    /// Configuration types.
    pub mod config {
        /// Core types.
        pub mod core {
            /// `envoy.config.core.v3`: headers and metadata.
            pub mod v3 {
                include!("envoy.config.core.v3.rs");
            }
        }
    }
    /// Common types.
    pub mod r#type {
        /// `envoy.type.v3`: the HTTP status.
        pub mod v3 {
            include!("envoy.r#type.v3.rs");
        }
    }
    /// Services.
    pub mod service {
        /// External processing.
        pub mod ext_proc {
            /// `envoy.service.ext_proc.v3`: the `ExternalProcessor` service.
            pub mod v3 {
                include!("envoy.service.ext_proc.v3.rs");
            }
        }
    }
}
