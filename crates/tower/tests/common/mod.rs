//! Helpers shared by the integration tests: test bodies, bounded waits, reason checks.

#![allow(dead_code)] // each test file uses a different part

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use livecount_session::{EndReason, SessionTracker};
use tokio::sync::mpsc;

/// A body fed by a channel: each message is one frame (or an error); dropping the sender ends it.
#[derive(Debug)]
pub(crate) struct ChannelBody {
    frames: mpsc::UnboundedReceiver<Result<Frame<Bytes>, io::Error>>,
}

pub(crate) type FrameSender = mpsc::UnboundedSender<Result<Frame<Bytes>, io::Error>>;

pub(crate) fn channel_body() -> (FrameSender, ChannelBody) {
    let (tx, frames) = mpsc::unbounded_channel();
    (tx, ChannelBody { frames })
}

impl ChannelBody {
    /// A body of the one frame `frame` resolves to.
    pub(crate) fn from_stream(
        frame: impl Future<Output = Frame<Bytes>> + Send + 'static,
    ) -> ChannelBody {
        let (tx, body) = channel_body();
        tokio::spawn(async move {
            let _ = tx.send(Ok(frame.await));
        });
        body
    }
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        self.frames.poll_recv(cx)
    }
}

/// What a body's `poll_frame` is ready with.
pub(crate) type Polled<B> = Option<Result<Frame<<B as Body>::Data>, <B as Body>::Error>>;

/// Polls `body` once: `None` if it is pending.
pub(crate) fn poll_frame_now<B: Body>(body: Pin<&mut B>) -> Option<Polled<B>> {
    match body.poll_frame(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(frame) => Some(frame),
        Poll::Pending => None,
    }
}

/// Waits (10 s at most, polling every 5 ms) until `done` holds; panics naming `what` if not.
pub(crate) async fn settle(mut done: impl FnMut() -> bool, what: &str) {
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting for: {what}");
}

/// The tracker saw exactly one session, and it ended for `reason`.
pub(crate) fn assert_only(tracker: &SessionTracker, reason: EndReason) {
    let s = tracker.snapshot();
    assert!(s.is_consistent());
    assert_eq!(
        (s.started, s.ended, s.active),
        (1, 1, 0),
        "one session, ended: {s:?}"
    );
    assert_eq!(
        s.ended_by(reason),
        1,
        "ended {reason}, got {:?}",
        s.ended_by_reason
    );
}

/// One HTTP/1.1 exchange on a fresh connection (`Connection: close`): the whole response.
pub(crate) async fn http_exchange(addr: std::net::SocketAddr, method: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request =
            format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.unwrap();
        String::from_utf8(response).unwrap()
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .expect("a response in time")
}
