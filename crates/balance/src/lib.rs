//! Client-side balancing on livecount backends' own load reports: a tower
//! [`Load`](tower::load::Load) ([`SessionLoad`]) read from each backend's `/load` or ORCA
//! stream, so a power-of-two-choices balancer in a proxy or a client sends new sessions to
//! the backend that has room, not to the one whose headers came back fastest.
//!
//! A streaming call (a gRPC stream, a WebSocket, a chat) gets its response headers at once
//! and then holds its backend for minutes; a client counting its own pending requests, or a
//! tonic channel (whose `Load` is always 0), cannot see that. A livecount backend counts its
//! open sessions and publishes them with its capacity and headroom (`livecount-report`);
//! this crate reads those reports on one task per backend ([`LoadFeed`], from a
//! [`LoadSource`]: [`HttpLoadSource`] for `/load`, `OrcaLoadSource` for ORCA) and hands
//! tower's balancer the [`LoadSignal`] chosen of each, as a [`LoadReading`]. A backend
//! without a fresh report reads as [`LoadReading::UNKNOWN`], never as free.
//!
//! # Usage
//!
//! ```toml
//! [dependencies]
//! livecount-balance = "0.1"
//! tower = { version = "0.5", features = ["balance", "discover", "util"] }
//! ```
//!
//! # Examples
//!
//! A client balancing on the backends' reports ([`HttpLoadSource`] polls each backend's
//! `/load`, the agent's [`livecount_report::ServedReport`], with hyper's HTTP/1 client;
//! [`BackendLoad`] is the part of it a balancer routes on, [`LoadSignal`] the figure of it
//! compared):
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use livecount_balance::{HttpLoadSource, LoadFeed, LoadSignal, SessionLoad};
//! use std::time::Duration;
//! use tower::{Service, ServiceExt, balance::p2c::Balance, discover::ServiceList};
//!
//! let backends = ["10.0.0.1:9000", "10.0.0.2:9000"].map(|addr| {
//!     let source = HttpLoadSource::new(addr.parse().unwrap(), Duration::from_secs(1));
//!     let feed = LoadFeed::spawn(source, LoadSignal::Occupancy, Duration::from_secs(3));
//!     SessionLoad::new(tower::service_fn(move |_: ()| async move { Ok::<_, std::io::Error>(addr) }), feed)
//! });
//! let mut balance = Balance::new(ServiceList::new(backends));
//! let chosen = balance.ready().await.unwrap().call(()).await.unwrap();
//! # let _ = chosen;
//! # }
//! ```
//!
#![cfg_attr(
    feature = "orca",
    doc = r#"
The same on each backend's ORCA out-of-band stream (feature `orca`), the way a gRPC client
balances long streams (`docs/lb/tower-p2c.md` in the repository runs it against three
agents):

```no_run
# #[tokio::main(flavor = "current_thread")]
# async fn main() {
use livecount_balance::{LoadFeed, LoadSignal, OrcaLoadSource, SessionLoad};
use std::time::Duration;
use tower::{Service, ServiceExt, balance::p2c::Balance, discover::ServiceList};

let backends = ["10.0.0.1:50051", "10.0.0.2:50051"].map(|addr| {
    let source = OrcaLoadSource::new(addr.parse().unwrap(), Duration::from_millis(500));
    let feed = LoadFeed::spawn(source, LoadSignal::Occupancy, Duration::from_secs(2));
    // In production: a service that opens the stream on this backend's tonic channel.
    SessionLoad::new(tower::service_fn(move |_: ()| async move { Ok::<_, std::io::Error>(addr) }), feed)
});
let mut balance = Balance::new(ServiceList::new(backends));
let chosen = balance.ready().await.unwrap().call(()).await.unwrap();
# let _ = chosen;
# }
```
"#
)]
//!
//! Any other source plugs in as a [`LoadSource`], or through a
//! `tokio::sync::mpsc::Receiver<BackendLoad>` (a relay, a test).
//!
//! # Feature flags
//!
//! * `orca`: `OrcaLoadSource`, a [`LoadSource`] holding a backend's ORCA out-of-band
//!   stream (`xds.service.orca.v3.OpenRcaService`) open over a tonic channel
//!   (`livecount-report`'s generated client, tonic's `channel`). Without it the crate needs
//!   only tower, tokio and hyper's HTTP/1 client.
//!
//! # Comparison with alternatives
//!
//! tower's own loads are the client's view: `PendingRequests` counts requests until their
//! response headers by default (`CompleteOnResponse`), and `PeakEwma` times them, so a
//! stream that answers at once and then holds its backend for minutes weighs nothing.
//! tonic's channels report a constant `Load` of 0, so a p2c balancer over them is random.
//! [`SessionLoad`] reads the backend's own count of open sessions, as every client of that
//! backend sees it. gRPC's weighted round robin and Envoy's client-side weighted round robin
//! read the same ORCA reports, as weights (headroom in thousandths of a session);
//! [`LoadSignal::ActiveWithRoom`] says why open sessions, not that weight, is the signal for
//! p2c over equal backends.
//!
//! # Correctness
//!
//! * `#![forbid(unsafe_code)]`.
//! * `tests/balance.rs`: a p2c balancer over two `/load` servers sends all 100 requests to
//!   the less loaded one, follows the reports when they change, and never picks a backend
//!   whose report is stale or missing over one with a fresh report; [`HttpLoadSource`]
//!   reads what `livecount-report`'s router serves; [`SessionLoad`] is ready exactly when
//!   its backend is. Unit tests: any HTTP/1 framing, within the poll's timeout and its
//!   64 KiB bounds, and every bad response an `InvalidData` error, never a load; a report
//!   fresh until `max_age` after it was taken, a repeated sequence refreshing nothing and a
//!   restart counting; no [`LoadSignal`] ever NaN or negative.
//! * `tests/orca_source.rs` (feature `orca`): `OrcaLoadSource` against a real
//!   `livecount_report::OrcaService` served by tonic on loopback: a report's fields arrive,
//!   draining is seen as the stream ends OK, the source reconnects after the server
//!   restarts on the same port, a dead or silent address never hangs it, and a p2c balancer
//!   on ORCA-fed loads sends work where there is room.
//! * End to end (`crates/server/tests/tower_p2c_e2e.rs`, `#[ignore]`d, run by
//!   `scripts/test.sh`): sessions over three agents, one hot, and a SIGTERM'd agent taken
//!   out of discovery when its ORCA stream ends.
//!
//! # Performance
//!
//! [`SessionLoad::load`](tower::load::Load) (one per backend per p2c pick) is
//! [`LoadFeed::load`]: two atomic loads and a clock read, no lock, no allocation. Each feed
//! runs one tokio task; [`HttpLoadSource`] opens one short connection per poll, and
//! `OrcaLoadSource` holds one stream open per backend. How well it places sessions (three
//! agents with one hot, on loopback on 2 cores; ballpark): `results/lb/tower-p2c/REPORT.md`
//! in the repository.
//!
//! # Implementation notes
//!
//! A [`LoadFeed`] publishes the latest reading and its freshness deadline in two atomics
//! (Release / Acquire), so a reader sees a deadline with its reading or a later one; its
//! task is aborted when the last handle drops. A poll of [`HttpLoadSource`] drives its
//! hyper connection inside the poll's own future, so its timeout drops the connection too.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod backend_load;
mod feed;
mod load;
#[cfg(feature = "orca")]
mod orca_source;
mod source;

pub use backend_load::{BackendLoad, LoadSignal};
pub use feed::{LoadFeed, LoadReading};
pub use load::SessionLoad;
#[cfg(feature = "orca")]
pub use orca_source::OrcaLoadSource;
pub use source::{HttpLoadSource, LoadSource};
