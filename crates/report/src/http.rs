//! `/load` (JSON), `/metrics` (Prometheus text), `/prequal` (a Prequal probe reply) and
//! `/ready` (readiness: 503 once draining) as an axum [`Router`].

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

use crate::{LATENCY_US_HEADER, LoadBoard, PrequalProbe, RIF_HEADER, ServedReport, prometheus};

/// A router serving the board's latest report as `GET /load` (a [`ServedReport`]: the
/// [`LoadReport`](crate::LoadReport)'s fields as JSON, plus `age_ms`), `GET /metrics`
/// (Prometheus text) and `GET /prequal`, and readiness as `GET /ready` ([`READY_PATH`]).
/// Merge it into a service's own router or serve it on a scrape port.
///
/// `/ready` answers `200 ready` until the board drains
/// ([`LoadBoard::is_draining`]), then `503 draining` with `Retry-After: 1`: the readiness
/// probe Kubernetes (and any balancer with an HTTP health check) reads to stop sending new
/// sessions, while the open ones finish.
///
/// `/prequal` answers a Prequal probe from the same report: the [`PrequalProbe`] as JSON
/// plus the report's `sequence` and `age_ms`, e.g.
/// `{"rif":12,"latency_ms":41.5,"samples":64,"samples_used":16,"sequence":310,"age_ms":420}`
/// (`latency_ms` is `null` when no fresh sample is near `rif`), and the same in the
/// headers prequal-rs's `HttpProber` reads: [`RIF_HEADER`] and [`LATENCY_US_HEADER`]
/// (whole microseconds, `0` when unknown). A board built without
/// [`prequal`](crate::LoadBoardBuilder::prequal) answers `404 Not Found`, so a prober
/// counts the probe failed instead of reading a made-up latency.
///
/// ```
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # let config = livecount_capacity::CapacityConfig::new(0.8, 2.0, Duration::from_secs(1), Duration::from_secs(1)).unwrap();
/// let board = Arc::new(livecount_report::LoadBoard::new("b1", config));
/// let app: axum::Router = axum::Router::new()
///     .route("/", axum::routing::get(|| async { "hello" }))
///     .merge(livecount_report::router(board));
/// ```
pub fn router<S: Clone + Send + Sync + 'static>(board: Arc<LoadBoard>) -> Router<S> {
    Router::new()
        .route(ServedReport::PATH, get(load))
        .route("/metrics", get(metrics))
        .route("/prequal", get(prequal))
        .route(READY_PATH, get(ready))
        .with_state(board)
}

/// The readiness endpoint of [`router`]: `200` until the board drains, `503` from then on.
pub const READY_PATH: &str = "/ready";

async fn ready(State(board): State<Arc<LoadBoard>>) -> Response {
    if board.is_draining() {
        let retry = [(header::RETRY_AFTER, "1")];
        (StatusCode::SERVICE_UNAVAILABLE, retry, "draining\n").into_response()
    } else {
        (StatusCode::OK, "ready\n").into_response()
    }
}

/// `GET /load`: the latest report as a [`ServedReport`] (a report that cannot be encoded
/// is a `500` with the reason, by `axum::Json`).
async fn load(State(board): State<Arc<LoadBoard>>) -> Response {
    axum::Json(ServedReport::of(&board.latest())).into_response()
}

async fn metrics(State(board): State<Arc<LoadBoard>>) -> Response {
    let body = prometheus::render(&board.latest());
    ([(header::CONTENT_TYPE, prometheus::CONTENT_TYPE)], body).into_response()
}

/// The `/prequal` body: the probe and which report it came from.
#[derive(Serialize)]
struct PrequalReply {
    #[serde(flatten)]
    probe: PrequalProbe,
    sequence: u64,
    age_ms: u64,
}

async fn prequal(State(board): State<Arc<LoadBoard>>) -> Response {
    let report = board.latest();
    let Some(probe) = report.prequal else {
        let why = "no Prequal estimator: this load board was built without one\n";
        return (StatusCode::NOT_FOUND, why).into_response();
    };
    let headers = [
        (RIF_HEADER, probe.header_rif().to_string()),
        (LATENCY_US_HEADER, probe.header_latency_us().to_string()),
    ];
    let reply = PrequalReply {
        probe,
        sequence: report.sequence,
        age_ms: report.age_ms(),
    };
    (headers, axum::Json(reply)).into_response()
}
