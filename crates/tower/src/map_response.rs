//! [`MapResponseFuture`]: an inner service's response future whose response, once ready, is
//! rewritten by a [`MapResponse`] value chosen at `call`. The one shape of the response
//! futures of `BusyService` (the response body keeps the connection busy) and
//! `InbandOrcaService` (the response gets the load report).
//!
//! tower's own `MapResponse` and `futures`' `MapOk` take a closure, whose type a service
//! cannot name in its `type Future`; a value of a named type implementing [`MapResponse`]
//! can be named.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

/// What a service does to its inner service's response, decided when it was called.
pub(crate) trait MapResponse<T> {
    /// The response after the rewrite.
    type Output;

    /// Rewrites `response` (called once, when the inner future is ready with `Ok`).
    fn map_response(self, response: T) -> Self::Output;
}

pin_project! {
    /// The inner response future; its `Ok` response rewritten by `map`, its error passed
    /// on as is. Dropped before completing (or on an error), it drops `map` unused.
    pub(crate) struct MapResponseFuture<F, M> {
        #[pin]
        inner: F,
        map: Option<M>,
    }
}

impl<F, M> MapResponseFuture<F, M> {
    /// `inner`, whose response `map` will rewrite.
    pub(crate) fn new(inner: F, map: M) -> Self {
        Self {
            inner,
            map: Some(map),
        }
    }
}

impl<F, M> fmt::Debug for MapResponseFuture<F, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MapResponseFuture")
            .field("pending", &self.map.is_some())
            .finish_non_exhaustive()
    }
}

impl<F, M, T, E> Future for MapResponseFuture<F, M>
where
    F: Future<Output = Result<T, E>>,
    M: MapResponse<T>,
{
    type Output = Result<M::Output, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.inner.poll(cx))?;
        let map = this
            .map
            .take()
            .expect("MapResponseFuture polled after it completed");
        Poll::Ready(Ok(map.map_response(response)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends its text to the response, and counts itself dropped.
    struct Suffix(&'static str, std::rc::Rc<std::cell::Cell<u32>>);

    impl MapResponse<String> for Suffix {
        type Output = String;
        fn map_response(self, response: String) -> String {
            response + self.0
        }
    }

    impl Drop for Suffix {
        fn drop(&mut self) {
            self.1.set(self.1.get() + 1);
        }
    }

    #[tokio::test]
    async fn maps_ok_once_and_passes_errors_on() {
        let dropped = std::rc::Rc::new(std::cell::Cell::new(0));
        let ok = async { Ok::<_, ()>(String::from("a")) };
        let mapped = MapResponseFuture::new(ok, Suffix("b", dropped.clone())).await;
        assert_eq!(mapped, Ok(String::from("ab")));
        let err = async { Err::<String, _>("refused") };
        let failed = MapResponseFuture::new(err, Suffix("b", dropped.clone())).await;
        assert_eq!(failed, Err("refused"));
        assert_eq!(dropped.get(), 2, "each map used or dropped once");
    }
}
