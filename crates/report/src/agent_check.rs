//! The HAProxy agent-check responder: a TCP server that writes the latest report's
//! [`agent_reply`](crate::LoadReport::agent_reply) (`up ready N%` or `drain`) and closes.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::LoadBoard;

/// Longest time one reply may take to write: a checker that does not read is cut off.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// Replies in flight at once; connections beyond are closed unanswered (HAProxy checks
/// each server every `inter`, so more than a handful at once is not a balancer).
pub const MAX_IN_FLIGHT: usize = 64;

/// Serves agent-check on `listener` until the returned future is dropped: every connection
/// gets the latest report's reply and is closed. Each write is bounded by
/// [`WRITE_TIMEOUT`] and at most [`MAX_IN_FLIGHT`] replies are pending, so a hostile
/// client can hold neither a task nor a socket for long. HAProxy reads the reply as a
/// weight (`up ready 40%`) or a state (`drain`).
///
/// ```no_run
/// # async fn run(board: std::sync::Arc<livecount_report::LoadBoard>) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:9101").await?;
/// tokio::spawn(livecount_report::serve_agent_check(listener, board));
/// # Ok(()) }
/// ```
pub async fn serve_agent_check(listener: TcpListener, board: Arc<LoadBoard>) {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    loop {
        let (mut conn, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of descriptors and the like: back off instead of spinning.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&in_flight).try_acquire_owned() else {
            continue; // dropped: closed unanswered
        };
        let reply = board.latest().agent_reply();
        tokio::spawn(async move {
            let write = async {
                conn.write_all(reply.as_bytes()).await?;
                conn.shutdown().await
            };
            let _ = tokio::time::timeout(WRITE_TIMEOUT, write).await;
            drop(permit);
        });
    }
}
