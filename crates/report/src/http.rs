//! `/load` (JSON) and `/metrics` (Prometheus text) as an axum [`Router`].

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::{LoadBoard, prometheus};

/// A router serving the board's latest report as `GET /load` (the [`LoadReport`](crate::LoadReport)
/// as JSON, plus `age_ms`) and `GET /metrics` (Prometheus text). Merge it into a service's
/// own router or serve it on a scrape port.
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
        .route("/load", get(load))
        .route("/metrics", get(metrics))
        .with_state(board)
}

async fn load(State(board): State<Arc<LoadBoard>>) -> Response {
    let report = board.latest();
    match serde_json::to_value(&*report) {
        Ok(mut value) => {
            value["age_ms"] = report.age_ms().into();
            axum::Json(value).into_response()
        }
        Err(e) => (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode the report: {e}\n"),
        )
            .into_response(),
    }
}

async fn metrics(State(board): State<Arc<LoadBoard>>) -> Response {
    let body = prometheus::render(&board.latest());
    ([(header::CONTENT_TYPE, prometheus::CONTENT_TYPE)], body).into_response()
}
