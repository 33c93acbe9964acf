//! x
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod body;
mod future;
mod layer;

pub use body::SessionBody;
pub use future::ResponseFuture;
pub use layer::{CountAll, Predicate, SessionLayer, SessionService};
