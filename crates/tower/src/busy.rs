//! [`Busy`]: whether a connection has a request in flight, so that a server at its bound
//! on pending connections sheds connections still waiting for a request head first.
//!
//! [`BusyService`] wraps the application's tower service as the hyper service of one
//! connection: hyper calls it once a request head has fully arrived, and the connection
//! is busy from then until the response body is dropped (hyper drops it once it has
//! written the last frame, or when the connection closes). Between requests, an idle
//! keep-alive connection is waiting for its next head and is not busy.
//!
//! The accept loop sheds a connection through the same shared state ([`Busy::shed`]): the
//! connection's task closes it, answering first if no request head of it has reached the
//! service (see `serve_connection` in the server).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::sync::Notify;
use tower::ServiceExt;
use tower::util::Oneshot;

use crate::map_response::{MapResponse, MapResponseFuture};

/// Whether one connection has a request in flight, whether it ever had one, and whether
/// the accept loop has shed it; clones share it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Busy(Arc<Requests>);

#[derive(Debug, Default)]
struct Requests {
    in_flight: AtomicUsize,
    ever: AtomicBool,
    /// Notified once, when the accept loop sheds the connection.
    shed: Notify,
}

impl Busy {
    /// Whether a request head has arrived whose response body is not yet dropped.
    pub(crate) fn is_busy(&self) -> bool {
        // Relaxed: a hint for choosing whom to shed, read by the task that polls the
        // connection at shutdown; nothing is published with it.
        self.0.in_flight.load(Ordering::Relaxed) > 0
    }

    /// Whether a request head has ever arrived (so a response may have been written).
    pub(crate) fn ever_busy(&self) -> bool {
        // Relaxed: see `is_busy`.
        self.0.ever.load(Ordering::Relaxed)
    }

    /// Asks the connection's task to close it (the task may not be waiting yet: the
    /// permit is kept until it does).
    pub(crate) fn shed(&self) {
        self.0.shed.notify_one();
    }

    /// Resolves once the connection has been shed.
    pub(crate) async fn shed_requested(&self) {
        self.0.shed.notified().await;
    }

    fn enter(&self) -> BusyGuard {
        // Relaxed: see `is_busy`.
        self.0.ever.store(true, Ordering::Relaxed);
        self.0.in_flight.fetch_add(1, Ordering::Relaxed);
        BusyGuard(Arc::clone(&self.0))
    }
}

/// One request in flight; dropping it ends the request.
#[derive(Debug)]
pub(crate) struct BusyGuard(Arc<Requests>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        // Relaxed: see `Busy::is_busy`.
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

// === impl BusyService ===

/// The application's service as one connection's hyper service, marking it [`Busy`]
/// while a request is in flight.
#[derive(Debug, Clone)]
pub(crate) struct BusyService<S> {
    inner: S,
    busy: Busy,
}

impl<S> BusyService<S> {
    pub(crate) fn new(inner: S, busy: Busy) -> Self {
        Self { inner, busy }
    }

    /// Whether this connection has a request in flight.
    pub(crate) fn busy(&self) -> &Busy {
        &self.busy
    }
}

impl<S, B, R> hyper::service::Service<Request<R>> for BusyService<S>
where
    S: tower::Service<Request<R>, Response = Response<B>> + Clone,
{
    type Response = Response<BusyBody<B>>;
    type Error = S::Error;
    /// The application's response future; its response body keeps the connection busy.
    type Future = MapResponseFuture<Oneshot<S, Request<R>>, BusyGuard>;

    fn call(&self, request: Request<R>) -> Self::Future {
        let guard = self.busy.enter();
        MapResponseFuture::new(self.inner.clone().oneshot(request), guard)
    }
}

// === impl BusyGuard as the response's rewrite ===

impl<B> MapResponse<Response<B>> for BusyGuard {
    type Output = Response<BusyBody<B>>;

    /// The response, its body holding the guard.
    fn map_response(self, response: Response<B>) -> Response<BusyBody<B>> {
        response.map(|inner| BusyBody { inner, guard: self })
    }
}

// === impl BusyBody ===

pin_project! {
    /// The application's response body, keeping the connection busy until dropped.
    #[derive(Debug)]
    pub(crate) struct BusyBody<B> {
        #[pin]
        inner: B,
        guard: BusyGuard,
    }
}

impl<B: Body> Body for BusyBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::service::Service as _;

    #[tokio::test]
    async fn busy_from_the_call_until_the_body_is_dropped() {
        let busy = Busy::default();
        let app = tower::service_fn(|_: Request<()>| async {
            Ok::<_, std::convert::Infallible>(Response::new(String::from("body")))
        });
        let service = BusyService::new(app, busy.clone());
        assert!(!busy.is_busy() && !busy.ever_busy());
        let future = service.call(Request::new(()));
        assert!(busy.is_busy(), "from the call (the head has arrived)");
        let response = future.await.unwrap();
        assert!(busy.is_busy(), "while the body is being written");
        drop(response);
        assert!(!busy.is_busy(), "idle again once the body is dropped");
        drop(service.call(Request::new(())));
        assert!(!busy.is_busy(), "a dropped response future ends it too");
        assert!(busy.ever_busy());
    }

    #[tokio::test]
    async fn a_shed_before_the_task_waits_is_kept() {
        let busy = Busy::default();
        busy.shed();
        let waited = tokio::time::timeout(std::time::Duration::from_secs(5), busy.shed_requested());
        assert!(waited.await.is_ok());
    }
}
