//! [`SessionLoad`]: a service whose tower `Load` is its backend's reported load.

use std::task::{Context, Poll};

use tower::load::Load;
use tower_service::Service;

use crate::feed::{LoadFeed, LoadReading};

/// Wraps a client service to one backend so that its [`Load`] is that backend's own report
/// (through a [`LoadFeed`]), not the client's view of it: a tower `p2c::Balance` over
/// `SessionLoad`s sends new work to the backend with fewer sessions (or the lower share of
/// its capacity in use), and never to one whose report is stale or missing while another
/// has a fresh one.
///
/// Calls pass through unchanged. Between two reports the metric does not move, so a client
/// sending many requests per report interval herds onto the less loaded backend until the
/// next report; keep the interval short, or combine with a client-side load.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use livecount_balance::{BackendLoad, LoadFeed, LoadReading, LoadSignal, SessionLoad};
/// use std::time::Duration;
/// use tower::load::Load;
///
/// let (reports, source) = tokio::sync::mpsc::channel(1);
/// // In production: HttpLoadSource::new(backend_addr, Duration::from_secs(1)).
/// let feed = LoadFeed::spawn(source, LoadSignal::Occupancy, Duration::from_secs(3));
/// let backend = SessionLoad::new(tower::service_fn(|r: u32| async move { Ok::<_, ()>(r) }), feed);
/// assert_eq!(backend.load(), LoadReading::UNKNOWN);
/// reports.send(BackendLoad::new(1, 30, 120.0)).await.unwrap();
/// while !backend.load().is_known() {
///     tokio::task::yield_now().await;
/// }
/// assert_eq!(backend.load(), LoadReading::new(0.25));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct SessionLoad<S> {
    inner: S,
    feed: LoadFeed,
}

impl<S> SessionLoad<S> {
    /// `inner`, loaded as `feed` reads.
    pub fn new(inner: S, feed: LoadFeed) -> Self {
        SessionLoad { inner, feed }
    }

    /// The feed the load is read from.
    pub fn feed(&self) -> &LoadFeed {
        &self.feed
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S> Load for SessionLoad<S> {
    type Metric = LoadReading;

    fn load(&self) -> LoadReading {
        self.feed.load()
    }
}

impl<S: Service<R>, R> Service<R> for SessionLoad<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, request: R) -> Self::Future {
        self.inner.call(request)
    }
}
