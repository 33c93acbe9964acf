//! x
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod body;
mod future;
mod layer;
#[cfg(feature = "axum")]
mod websocket;

pub use body::SessionBody;
pub use future::ResponseFuture;
pub use layer::{CountAll, Predicate, SessionLayer, SessionService};
#[cfg(feature = "axum")]
pub use websocket::{
    DEFAULT_CLOSE_TIMEOUT, IntoEndReason, TrackedSocket, WebSocketSessions, tracked_upgrade,
};
