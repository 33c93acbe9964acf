//! A proptest model of `SessionService`: random programs of requests started, their futures
//! and bodies polled, asked for their end, dropped, failing — on a tracker capped at a random
//! number of sessions (or not capped), where a start at the cap is answered 503 by the layer
//! without calling the service — against a plain count of active sessions, refusals and
//! endings per reason, compared after every step.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame};
use livecount_session::{EndReason, SessionTracker};
use livecount_tower::SessionService;
use livecount_tower::body::SessionBody;
use livecount_tower::future::ResponseFuture;
use proptest::prelude::*;
use tower::Service;

/// What one request's inner service and body will do.
#[derive(Clone, Debug)]
struct Script {
    inner_err: bool,
    server_error: bool,
    /// `true`: a data frame, `false`: an error.
    items: Vec<bool>,
}

/// Ready after being polled once; then the script's response or error.
struct YieldOnce(Option<Script>, bool);

impl Future for YieldOnce {
    type Output = Result<Response<ScriptBody>, io::Error>;

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        if !std::mem::replace(&mut self.1, true) {
            return Poll::Pending;
        }
        let script = self.0.take().expect("polled after completion");
        if script.inner_err {
            return Poll::Ready(Err(io::Error::other("inner")));
        }
        let mut response = Response::new(ScriptBody(script.items.into()));
        if script.server_error {
            *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        }
        Poll::Ready(Ok(response))
    }
}

/// Yields its items at once, in order; at its end when none are left.
struct ScriptBody(VecDeque<bool>);

impl Body for ScriptBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        Poll::Ready(self.0.pop_front().map(|data| match data {
            true => Ok(Frame::data(Bytes::from_static(b"x"))),
            false => Err(io::Error::other("body")),
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Start(Script),
    Poll(usize),
    AskEnd(usize),
    Drop(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let items = prop::collection::vec(prop::bool::weighted(0.8), 0..4);
    let script = (
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.25),
        items,
    )
        .prop_map(|(inner_err, server_error, items)| Script {
            inner_err,
            server_error,
            items,
        });
    prop_oneof![
        2 => script.prop_map(Op::Start),
        4 => any::<usize>().prop_map(Op::Poll),
        1 => any::<usize>().prop_map(Op::AskEnd),
        1 => any::<usize>().prop_map(Op::Drop),
    ]
}

type Future_ = Pin<Box<ResponseFuture<YieldOnce>>>;
type Body_ = Pin<Box<SessionBody<ScriptBody>>>;

/// The real request and the model's view of it.
enum Real {
    Waiting(Future_),
    Streaming(Body_),
}

struct Model {
    script: Script,
    polled_future: bool,
    /// Items left in the body once there is one.
    left: VecDeque<bool>,
    outcome: EndReason,
    ended: bool,
}

#[derive(Default)]
struct Reference {
    active: u64,
    refused: u64,
    ended: BTreeMap<EndReason, u64>,
}

impl Reference {
    fn end(&mut self, model: &mut Model, reason: EndReason) {
        if !std::mem::replace(&mut model.ended, true) {
            self.active -= 1;
            *self.ended.entry(reason).or_default() += 1;
        }
    }
}

fn run(cap: Option<u64>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let tracker: SessionTracker =
        cap.map_or_else(SessionTracker::new, SessionTracker::with_max_sessions);
    let inner =
        tower::service_fn(|request: Request<Script>| YieldOnce(Some(request.into_body()), false));
    let mut service = SessionService::new(inner, tracker.clone());
    let mut cx = Context::from_waker(Waker::noop());
    let mut live: Vec<(Real, Model)> = Vec::new();
    let mut reference = Reference::default();
    for op in ops {
        match op {
            Op::Start(script) => {
                assert!(service.poll_ready(&mut cx).is_ready());
                let mut future = Box::pin(service.call(Request::new(script.clone())));
                if cap.is_some_and(|cap| reference.active >= cap) {
                    // Refused: answered at once, nothing counted but the refusal.
                    let Poll::Ready(Ok(response)) = future.as_mut().poll(&mut cx) else {
                        return Err(TestCaseError::fail("a refusal is answered at once"));
                    };
                    prop_assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
                    prop_assert!(response.body().session().is_none());
                    reference.refused += 1;
                    check(&tracker, &reference)?;
                    continue;
                }
                reference.active += 1;
                let model = Model {
                    script,
                    polled_future: false,
                    left: VecDeque::new(),
                    outcome: EndReason::Completed,
                    ended: false,
                };
                live.push((Real::Waiting(future), model));
            }
            Op::Poll(i) if !live.is_empty() => {
                let i = i % live.len();
                let (real, model) = &mut live[i];
                match real {
                    Real::Waiting(future) => match future.as_mut().poll(&mut cx) {
                        Poll::Pending => {
                            prop_assert!(!model.polled_future);
                            model.polled_future = true;
                        }
                        Poll::Ready(Err(_)) => {
                            prop_assert!(model.script.inner_err && model.polled_future);
                            reference.end(model, EndReason::Failed);
                            live.swap_remove(i);
                        }
                        Poll::Ready(Ok(response)) => {
                            prop_assert!(!model.script.inner_err && model.polled_future);
                            model.left = model.script.items.iter().copied().collect();
                            model.outcome = if model.script.server_error {
                                EndReason::Failed
                            } else {
                                EndReason::Completed
                            };
                            *real = Real::Streaming(Box::pin(response.into_body()));
                        }
                    },
                    Real::Streaming(body) => {
                        let Poll::Ready(frame) = body.as_mut().poll_frame(&mut cx) else {
                            return Err(TestCaseError::fail("script bodies are never pending"));
                        };
                        match (frame, model.left.pop_front()) {
                            (None, None) => reference.end(model, model.outcome),
                            (Some(Ok(_)), Some(true)) if model.left.is_empty() => {
                                reference.end(model, model.outcome)
                            }
                            (Some(Ok(_)), Some(true)) => {}
                            (Some(Err(_)), Some(false)) => reference.end(model, EndReason::Failed),
                            (frame, expected) => {
                                return Err(TestCaseError::fail(format!(
                                    "{frame:?} where {expected:?}"
                                )));
                            }
                        }
                    }
                }
            }
            Op::AskEnd(i) if !live.is_empty() => {
                let n = live.len();
                let (real, model) = &mut live[i % n];
                if let Real::Streaming(body) = real {
                    prop_assert_eq!(body.is_end_stream(), model.left.is_empty());
                    if model.left.is_empty() {
                        reference.end(model, model.outcome);
                    }
                }
            }
            Op::Drop(i) if !live.is_empty() => {
                let (real, mut model) = live.swap_remove(i % live.len());
                drop(real);
                let reason = match model.outcome {
                    EndReason::Completed => EndReason::Cancelled,
                    failure => failure,
                };
                reference.end(&mut model, reason);
            }
            _ => {}
        }
        check(&tracker, &reference)?;
    }
    drop(live);
    prop_assert_eq!(tracker.active(), 0);
    Ok(())
}

fn check(tracker: &SessionTracker, reference: &Reference) -> Result<(), TestCaseError> {
    let s = tracker.snapshot();
    prop_assert!(s.is_consistent());
    prop_assert_eq!(s.active, reference.active);
    prop_assert_eq!(s.refused, reference.refused);
    for reason in EndReason::ALL {
        let expected = reference.ended.get(&reason).copied().unwrap_or(0);
        prop_assert_eq!(s.ended_by(reason), expected, "{}", reason);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_service_ends_each_request_as_the_model_says(
        cap in prop::option::of(0..5u64),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        run(cap, ops)?;
    }
}
