//! [`Traffic`]: a counted request's view of its session's limits, and [`RequestLimits`]: a layer's
//! limits as the session table's [`Limits`], armed on each request's session.
//!
//! The limits are held by the tracker's one sweeper over the session table
//! (`livecount_session`'s `Session::hold_to`): no registry of requests here, no timer or
//! task per request. A request's bodies tell the session's slot what passes (a relaxed
//! add or store on the session's own line, no clock read) through its `EndHandle`.

use std::fmt;
use std::time::Duration;

use livecount::Counter;
use livecount_session::{EndCause, EndHandle, EndReason, Limits, Session};

use crate::limits::{Limit, StreamLimits};

/// What a request's future and bodies share: a handle on its session, whose slot carries
/// the traffic the sweeper reads and the cause of a limit's end.
pub(crate) struct Traffic<C: Counter, M> {
    handle: EndHandle<C, M>,
}

impl<C: Counter, M> Traffic<C, M> {
    /// A frame passed, in either direction.
    #[inline]
    pub(crate) fn active(&self) {
        self.handle.note_frame();
    }

    /// The client sent something (a request frame, or the end of its request): the
    /// first-frame timeout no longer applies.
    #[inline]
    pub(crate) fn heard(&self) {
        self.handle.note_heard();
    }

    /// The response body is being polled: the transport took its last frame.
    #[inline]
    pub(crate) fn polled(&self) {
        self.handle.note_written();
    }

    /// The response body handed a frame to the transport.
    #[inline]
    pub(crate) fn yielded(&self) {
        self.handle.note_frame();
        self.handle.note_writing();
    }

    /// Ends the session for `limit`, if no other cause claimed it first; `true` if this
    /// ended it. `limit` is one of the edge's own causes (a message too large, a reset, a
    /// lost connection).
    pub(crate) fn end(&self, limit: Limit) -> bool {
        limit
            .cause()
            .is_some_and(|cause| self.handle.end_for(cause))
    }

    /// The limit that ended the session, if one did: the session's cause, confirmed by the
    /// reason it ended with; or `Shutdown` for a session ended `Shutdown` from elsewhere
    /// (a drain's deadline: cut with `UNAVAILABLE`, so the client reconnects elsewhere).
    pub(crate) fn ended_by(&self, reason: Option<EndReason>) -> Option<Limit> {
        let reason = reason?;
        match self.handle.ended_by() {
            Some(cause) => Some(Limit::of(cause)),
            None if reason == EndReason::Shutdown => Some(Limit::Shutdown),
            None => None,
        }
    }
}

impl<C: Counter, M> Clone for Traffic<C, M> {
    fn clone(&self) -> Self {
        Traffic {
            handle: self.handle.clone(),
        }
    }
}

impl<C: Counter, M> fmt::Debug for Traffic<C, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Traffic")
            .field("handle", &self.handle)
            .finish()
    }
}

/// A layer's limits, as the session table holds them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RequestLimits {
    /// Every limit but the client's deadline, which is per request.
    limits: Limits,
    /// Whether a request needs a traffic even with no time limit (the message limit).
    sized: bool,
}

impl RequestLimits {
    /// A request_limits for `limits`; `None` if no limit needs one.
    pub(crate) fn new(limits: &StreamLimits) -> Option<Self> {
        if !limits.timed() && limits.max_request_message.is_none() {
            return None;
        }
        Some(RequestLimits {
            limits: Limits {
                max_session: limits.max_session,
                deadline: None,
                idle: limits.idle_timeout,
                first_frame: limits.first_frame_timeout,
                write: limits.write_timeout,
                ..Limits::default()
            },
            sized: limits.max_request_message.is_some(),
        })
    }

    /// Holds the session of a request whose client set `grpc_timeout` (if any) to the
    /// layer's limits; `None` (no limits for it) outside a tokio runtime.
    pub(crate) fn arm<C, M>(
        &self,
        session: &Session<C, M>,
        grpc_timeout: Option<Duration>,
    ) -> Option<Traffic<C, M>>
    where
        C: Counter + Send + Sync + 'static,
        M: Send + Sync + 'static,
    {
        tokio::runtime::Handle::try_current().ok()?;
        let limits = Limits {
            deadline: grpc_timeout,
            ..self.limits
        };
        let timed = limits.shortest().is_some();
        if (timed && session.hold_to(limits)) || (!timed && self.sized) {
            return Some(Traffic {
                handle: session.handle(),
            });
        }
        None
    }
}

impl Limit {
    /// The session's cause for this limit, if it is one a session can end by.
    pub(crate) fn cause(self) -> Option<EndCause> {
        Some(match self {
            Limit::MaxSession => EndCause::MaxSession,
            Limit::GrpcTimeout => EndCause::Deadline,
            Limit::Idle => EndCause::Idle,
            Limit::FirstFrame => EndCause::FirstFrame,
            Limit::Stall => EndCause::Stall,
            Limit::TooLarge => EndCause::TooLarge,
            Limit::Reset => EndCause::Reset,
            Limit::Lost => EndCause::Lost,
            Limit::AtCapacity | Limit::Draining | Limit::Shutdown => return None,
        })
    }

    /// The limit a session's cause stands for.
    pub(crate) fn of(cause: EndCause) -> Limit {
        match cause {
            EndCause::MaxSession => Limit::MaxSession,
            EndCause::Deadline => Limit::GrpcTimeout,
            EndCause::Idle => Limit::Idle,
            EndCause::FirstFrame => Limit::FirstFrame,
            EndCause::Stall => Limit::Stall,
            EndCause::TooLarge => Limit::TooLarge,
            EndCause::Reset => Limit::Reset,
            // `EndCause` is non-exhaustive: a cause this version does not know is a loss.
            _ => Limit::Lost,
        }
    }
}
