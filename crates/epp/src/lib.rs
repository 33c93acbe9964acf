//! A session-aware endpoint picker for Envoy: an external processor (`ext_proc`) that
//! answers each new request — a gRPC stream, a WebSocket upgrade, a session — with the
//! backend to send it to, as the Gateway API Inference Extension's **Endpoint Picker
//! Protocol** has it (the header and `envoy.lb` metadata `x-gateway-destination-endpoint`,
//! a fallback list, 503 when nothing can take it).
//!
//! The choice is livecount's: power of two choices on the hybrid capacity model
//! ([`livecount_capacity::Standing`], the code the simulator's `hybrid_p2c` policy runs),
//! from each backend's own load report (its open sessions and its headroom by the model),
//! read over ORCA or `/load` by `livecount-balance`'s feeds, with the sessions this picker
//! placed since each report counted in. A backend whose report is older than the TTL is
//! unknown and never chosen; a draining one or one at its hard limit is passed over; when
//! none is left the request gets 503 with `Retry-After`.
//!
//! # Usage
//!
//! ```toml
//! [dependencies]
//! livecount-epp = "0.1"
//! ```
//!
//! ```no_run
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use livecount_epp::{BackendSpec, EndpointPicker, Picker, PickerConfig};
//! use std::sync::Arc;
//!
//! let backends = ["10.0.0.1:50051", "10.0.0.2:50051"]
//!     .map(|b| b.parse::<BackendSpec>())
//!     .into_iter()
//!     .collect::<Result<Vec<_>, _>>()?;
//! let picker = Arc::new(Picker::spawn(backends, PickerConfig::default())?);
//! tonic::transport::Server::builder()
//!     .add_service(EndpointPicker::new(picker).server())
//!     .serve("127.0.0.1:9002".parse()?)
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! The binary `livecount-epp` is that, with flags, a gRPC health service and a graceful
//! stop. Envoy's side (the `ext_proc` filter sending request headers only, the
//! `override_host` policy reading the metadata, falling back to Envoy's own policy when the
//! picker is down) is in `deploy/envoy/envoy-picker.yaml.in` and `docs/lb/endpoint-picker.md`
//! in the repository.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod backend;
pub mod generated;
mod own;
mod picker;
mod service;

pub use backend::{BackendSpec, BackendSpecError, Reports};
pub use picker::{
    MAX_FALLBACKS, MAX_REPORT_WAIT, Pick, Picker, PickerConfig, PickerError, PickerStats,
};
pub use service::{
    DEFAULT_FIRST_MESSAGE_TIMEOUT, DEFAULT_RETRY_AFTER, DESTINATION, EndpointPicker,
    METADATA_NAMESPACE, NO_ROOM_DETAILS, Responses, SUBSET_KEY, SUBSET_NAMESPACE,
};
