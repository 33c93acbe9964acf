//! x
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod body;
mod feed;
mod future;
mod layer;
mod load;
mod report;
mod source;
#[cfg(feature = "axum")]
mod websocket;

pub use body::SessionBody;
pub use feed::{LoadFeed, LoadMetric};
pub use future::ResponseFuture;
pub use layer::{CountAll, Predicate, SessionLayer, SessionService};
pub use load::SessionLoad;
pub use report::{BackendLoad, Metric};
pub use source::{HttpLoadSource, LoadSource};
#[cfg(feature = "axum")]
pub use websocket::{
    DEFAULT_CLOSE_TIMEOUT, IntoEndReason, TrackedSocket, WebSocketSessions, tracked_upgrade,
};
