//! [`health_service`]: gRPC health (`grpc.health.v1.Health`) that says `NOT_SERVING` once the
//! board drains.

use std::sync::Arc;

use tonic_health::ServingStatus;
use tonic_health::pb::health_server::{Health, HealthServer};

use crate::LoadBoard;

/// The gRPC health service (`grpc.health.v1.Health`, tonic-health's) for a server whose load
/// `board` publishes: the overall status (service name `""`) is `SERVING` until the board
/// publishes a draining tracker's snapshot ([`LoadBoard::is_draining`]), then `NOT_SERVING`, and `Watch` streams see the
/// change at once. Kubernetes' gRPC readiness probe and Envoy's gRPC health check read it to
/// stop sending new calls while the open ones finish.
///
/// # Panics
///
/// Outside a tokio runtime: it spawns the task that waits for the drain (one per call; it
/// ends when the board drains or is dropped).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::sync::Arc;
/// use livecount_capacity::CapacityConfig;
/// use livecount_report::{LoadBoard, health_service};
/// use livecount_session::SessionTracker;
///
/// let board = Arc::new(LoadBoard::new("b1", CapacityConfig::builder().build().unwrap()));
/// let health = health_service(&board); // `.add_service(health)` on the tonic server
/// let tracker = SessionTracker::new();
/// tracker.begin_drain();
/// board.publish(tracker.snapshot()); // now NOT_SERVING
/// # let _ = health;
/// # }
/// ```
pub fn health_service(board: &Arc<LoadBoard>) -> HealthServer<impl Health> {
    let (reporter, server) = tonic_health::server::health_reporter();
    let mut draining = board.draining_signal();
    tokio::spawn(async move {
        if draining.wait_for(|draining| *draining).await.is_ok() {
            reporter
                .set_service_status("", ServingStatus::NotServing)
                .await;
        }
    });
    server
}
