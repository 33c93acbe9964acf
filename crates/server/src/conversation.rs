//! One session's life, independent of the transport: frames in, frames out, and exactly
//! one ending — whichever of bye, close, disconnect, deadline, idle timeout, a stalled
//! writer, bad input or shutdown comes first.
//!
//! The session's own limits are the session crate's: the incoming frames run as a
//! [`TrackedStream`] with the maximum length as its deadline (`TimedOut`, close 1000) and
//! the idle timeout as its heartbeat (`Disconnected`, close 1008), and any end from
//! elsewhere (a transport's cancel or `grpc-timeout`, `end_all` at shutdown) wakes the
//! loop at once. [`TrackedStream::stopped`] says which of these it was, so each gets its
//! own close frame.
//!
//! No send blocks the conversation: the response streams from its own task, and frames
//! the loop itself answers with (`interrupted`) queue for room in a `select!` arm next to
//! the input, which keeps being read (and so the stream's timers keep running). When frames
//! wait and the transport takes none of them for [`Limits::write_timeout`], the client
//! stopped reading: the session ends `Disconnected`. The admission slot goes with the
//! session's end, before the last frames (`error`, close), which are best effort with a
//! short bound.

use std::collections::VecDeque;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use livecount_session::{EndHandle, EndReason, Phase, Session, StreamEnd, TrackedStream};
use tokio::sync::{OwnedSemaphorePermit, mpsc, watch};
use tokio::task::JoinHandle;

use crate::first_chunk_clock::{FirstChunkClock, FirstChunkTimer};
use crate::protocol::{ClientFrame, ServerFrame};

/// What the transport delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// A valid frame.
    Frame(ClientFrame),
    /// A frame that could not be understood; the text says why.
    Malformed(String),
    /// A message above the size limit.
    TooLarge,
    /// The client broke the transport's protocol (for WebSocket: RFC 6455 framing, 1002,
    /// or invalid UTF-8 in a text frame, 1007); the session fails with `code`.
    Violation {
        /// RFC 6455 close code: 1002 protocol error or 1007 invalid payload data.
        code: u16,
        /// Human-readable reason for the close frame.
        reason: &'static str,
    },
    /// The client closed the stream cleanly (close frame, end of the gRPC stream).
    Closed,
    /// The transport failed: reset, EOF without a close.
    Lost,
}

/// What to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// A protocol frame.
    Frame(ServerFrame),
    /// Close the stream with a WebSocket close code (gRPC maps it to a status).
    Close {
        /// RFC 6455 close code: 1000 normal, 1001 going away, 1002 protocol error,
        /// 1007 invalid data, 1008 policy (idle), 1009 too big.
        code: u16,
        /// Human-readable reason.
        reason: &'static str,
    },
}

/// Limits and costs a conversation runs under.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest session.
    pub max_session: Duration,
    /// Longest silence from the client.
    pub idle_timeout: Duration,
    /// Longest a frame may wait for the transport to take it (a client that stopped
    /// reading); the session then ends `Disconnected`.
    pub write_timeout: Duration,
    /// CPU burned per chunk.
    pub work: Duration,
    /// Pause between chunks.
    pub chunk_gap: Duration,
    /// End the session `Disconnected` as soon as the transport's writer is gone (the
    /// output channel closed). Right for WebSocket, whose writer task owns the socket. A
    /// transport that can tell why its writer went (gRPC: a reset is `Cancelled`, a lost
    /// connection `Disconnected`) sets `false` and says so through its incoming stream.
    pub end_when_writer_gone: bool,
}

/// The longest the final close frame may wait for room: the session has ended already,
/// so this bounds only how long its task lingers.
const CLOSE_BOUND: Duration = Duration::from_secs(1);

/// Most replies (`interrupted`) that may wait for room at once. A client that sends more
/// interrupts than this without reading a frame is not reading: the session ends
/// `Disconnected`, as a stall would, instead of queueing without bound.
const MAX_WAITING_REPLIES: usize = 16;

/// How a conversation ends: the reason, and the close frame to send (if any).
type Ending = (EndReason, Option<(u16, &'static str)>);

/// The ending for why the tracked input stopped: its own deadline (close 1000) or idle
/// limit (1008), or an end from elsewhere, which closes only for a shutdown (1001); the
/// transport that ended the session otherwise says why itself (gRPC: `CANCELLED`,
/// `DEADLINE_EXCEEDED`).
fn ending_for(stopped: StreamEnd) -> Ending {
    let close = match stopped {
        StreamEnd::Deadline => Some((1000, "max session length")),
        StreamEnd::Idle => Some((1008, "idle timeout")),
        StreamEnd::Elsewhere(EndReason::Shutdown) => Some(SHUTDOWN_CLOSE),
        // The input ends in `Lost` (see `converse`), so the source's own end is never
        // reached; `Finished` would mean a completed session with nothing more to say.
        _ => None,
    };
    (stopped.reason(), close)
}

/// The close frame of a shutdown.
const SHUTDOWN_CLOSE: (u16, &str) = (1001, "server shutting down");

/// The response being streamed.
#[derive(Debug)]
struct Response {
    id: u64,
    task: JoinHandle<()>,
    sent: Arc<AtomicU32>,
}

/// Burns CPU for `d` (a busy loop: this is the "model inference" of a speaking session).
pub fn burn(d: Duration) {
    let until = Instant::now() + d;
    let mut x = 0u64;
    while Instant::now() < until {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// `now + d`, saturating at a far future instead of overflowing (`Instant + Duration`
/// panics past the platform's range).
fn after(d: Duration) -> tokio::time::Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);
    tokio::time::Instant::now() + d.min(FAR)
}

// === impl Output ===

/// The conversation's end of the output channel: a sender that counts the frames it has
/// put in, so that [`StallWatch`] can tell how many the transport has taken out.
#[derive(Debug, Clone)]
struct Output {
    tx: mpsc::Sender<Outgoing>,
    put: Arc<AtomicU64>,
}

impl Output {
    fn new(tx: mpsc::Sender<Outgoing>) -> Self {
        Self {
            tx,
            put: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Sends `frame`, waiting for room; `Err` if the transport is gone.
    async fn send(&self, frame: Outgoing) -> Result<(), ()> {
        self.tx.send(frame).await.map_err(drop)?;
        self.counted();
        Ok(())
    }

    /// Notes one frame put in.
    fn counted(&self) {
        // Relaxed: the count is an estimate read next to the channel's length; a reader
        // that misses the latest send sees less progress, and the stall watch needs
        // progress over a whole write timeout, so a momentary lag cannot end a session.
        self.put.fetch_add(1, Ordering::Relaxed);
    }

    /// Frames waiting in the channel, and frames the transport has taken out so far.
    fn queued_and_taken(&self) -> (u64, u64) {
        let queued = (self.tx.max_capacity() - self.tx.capacity()) as u64;
        let put = self.put.load(Ordering::Relaxed);
        (queued, put.saturating_sub(queued))
    }
}

// === impl StallWatch ===

/// Decides that the client stopped reading: frames wait in the output channel and the
/// transport has taken none of them for the write timeout. A slow reader that takes
/// something now and then is progress, not a stall; a client that keeps sending (even
/// `speak`s that restart the response) does not reset it.
#[derive(Debug)]
struct StallWatch {
    limit: Duration,
    period: Duration,
    next_check: tokio::time::Instant,
    last_taken: u64,
    stuck_since: Option<tokio::time::Instant>,
}

impl StallWatch {
    fn new(limit: Duration) -> Self {
        // Checked four times per timeout: a stall is seen at most a quarter late.
        let period = (limit / 4).max(Duration::from_millis(10));
        Self {
            limit,
            period,
            next_check: after(period),
            last_taken: 0,
            stuck_since: None,
        }
    }

    /// Looks at `out` (at `next_check`); `true` once nothing was taken for the limit
    /// while something waited.
    fn stalled(&mut self, out: &Output) -> bool {
        let now = tokio::time::Instant::now();
        self.next_check = after(self.period);
        let (queued, taken) = out.queued_and_taken();
        if queued == 0 || taken > self.last_taken {
            self.last_taken = self.last_taken.max(taken);
            self.stuck_since = None;
            return false;
        }
        let since = *self.stuck_since.get_or_insert(now);
        now.duration_since(since) >= self.limit
    }
}

/// Streams response `id`: `chunks` chunks, then `done` (reported on `done`). A
/// `first_chunk` timer stops when the first chunk is handed to `out`.
fn spawn_response(
    id: u64,
    chunks: u32,
    limits: Limits,
    out: Output,
    done: mpsc::UnboundedSender<u64>,
    mut first_chunk: Option<FirstChunkTimer>,
) -> Response {
    let sent = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&sent);
    let task = tokio::spawn(async move {
        for seq in 0..chunks {
            if !limits.work.is_zero() {
                let work = limits.work;
                let _ = tokio::task::spawn_blocking(move || burn(work)).await;
            }
            // Waits for room without a bound of its own: the loop's stall watch ends the
            // session (and aborts this task) if the transport stops taking frames.
            if out
                .send(Outgoing::Frame(ServerFrame::Chunk { seq }))
                .await
                .is_err()
            {
                return;
            }
            if let Some(timer) = first_chunk.take() {
                timer.stop();
            }
            counter.store(seq + 1, Ordering::Release);
            // A zero gap does not sleep: tokio would round it up to its 1 ms timer tick.
            if !limits.chunk_gap.is_zero() {
                tokio::time::sleep(limits.chunk_gap).await;
            }
        }
        if out
            .send(Outgoing::Frame(ServerFrame::Done { chunks }))
            .await
            .is_ok()
        {
            let _ = done.send(id);
        }
    });
    Response { id, task, sent }
}

/// The state of one conversation between its frames.
#[derive(Debug)]
struct Conversation {
    /// The session, owned by the tracked input stream; this handle moves its phase and
    /// ends it for the endings the loop decides.
    handle: EndHandle,
    out: Output,
    limits: Limits,
    done: mpsc::UnboundedSender<u64>,
    response: Option<Response>,
    next_id: u64,
    /// Frames the loop answered with, waiting for room in `out`, oldest first.
    waiting: VecDeque<Outgoing>,
    /// A frame to send after the end, before the close frame (why the input failed).
    farewell: Option<ServerFrame>,
    /// Times the first response to its first chunk; taken by the first `speak`.
    first_chunk: Option<FirstChunkClock>,
}

impl Conversation {
    /// Handles what the transport delivered; `Some` ends the conversation.
    fn on_incoming(&mut self, msg: Incoming) -> Option<Ending> {
        match msg {
            Incoming::Frame(ClientFrame::Speak { chunks }) => {
                self.stop_response();
                self.next_id += 1;
                self.handle.set_phase(Phase::Generating);
                let (out, done) = (self.out.clone(), self.done.clone());
                let timer = self.first_chunk.take().map(FirstChunkClock::start);
                let response = spawn_response(self.next_id, chunks, self.limits, out, done, timer);
                self.response = Some(response);
            }
            Incoming::Frame(ClientFrame::Interrupt) => {
                let sent = self.stop_response();
                self.handle.set_phase(Phase::Listening);
                return self.reply(Outgoing::Frame(ServerFrame::Interrupted { sent }));
            }
            Incoming::Frame(ClientFrame::Idle) => {}
            Incoming::Frame(ClientFrame::Bye) => {
                return Some((EndReason::Completed, Some((1000, "bye"))));
            }
            Incoming::Malformed(message) => {
                self.farewell = Some(ServerFrame::Error { message });
                return Some((EndReason::Failed, Some((1007, "invalid frame"))));
            }
            Incoming::TooLarge => {
                return Some((EndReason::Failed, Some((1009, "message too big"))));
            }
            Incoming::Violation { code, reason } => {
                return Some((EndReason::Failed, Some((code, reason))));
            }
            Incoming::Closed => return Some((EndReason::Completed, None)),
            Incoming::Lost => return Some((EndReason::Disconnected, None)),
        }
        None
    }

    /// Sends `frame` now if there is room and nothing waits before it, else queues it for
    /// the loop's `reserve` arm; `Some` (disconnected) past [`MAX_WAITING_REPLIES`].
    fn reply(&mut self, frame: Outgoing) -> Option<Ending> {
        let frame = if self.waiting.is_empty() {
            match self.out.tx.try_send(frame) {
                Ok(()) => {
                    self.out.counted();
                    return None;
                }
                // A closed channel too: the `reserve` arm then ends the session.
                Err(mpsc::error::TrySendError::Full(frame))
                | Err(mpsc::error::TrySendError::Closed(frame)) => frame,
            }
        } else {
            frame
        };
        if self.waiting.len() == MAX_WAITING_REPLIES {
            // Interrupts faster than the client reads their answers.
            return Some((EndReason::Disconnected, None));
        }
        self.waiting.push_back(frame);
        None
    }

    /// Aborts the current response, returning the chunks it had sent.
    fn stop_response(&mut self) -> u32 {
        self.response.take().map_or(0, |r| {
            r.task.abort();
            r.sent.load(Ordering::Acquire)
        })
    }

    /// Response `id` has sent its `done`.
    fn on_done(&mut self, id: u64) {
        if self.response.as_ref().is_some_and(|r| r.id == id) {
            self.response = None;
            self.handle.set_phase(Phase::Listening);
        }
    }

    /// After the end: the farewell frame and the close, for at most [`CLOSE_BOUND`].
    async fn say_goodbye(&mut self, close: Option<(u16, &'static str)>) {
        let last_words = self.farewell.take().map(Outgoing::Frame).into_iter();
        let close = close.map(|(code, reason)| Outgoing::Close { code, reason });
        let out = &self.out;
        let goodbye = async {
            for frame in last_words.chain(close) {
                if out.send(frame).await.is_err() {
                    return;
                }
            }
        };
        let bound = CLOSE_BOUND.min(self.limits.write_timeout);
        let _ = tokio::time::timeout(bound, goodbye).await;
    }
}

/// Runs one session to its end and returns the reason it ended with (the first ending
/// wins: a session ended elsewhere, e.g. by `end_all` or the transport's handle, reports
/// that reason).
///
/// `incoming` ending without [`Incoming::Closed`] is a lost connection (`Disconnected`),
/// never a completed session. `slot` (the session's admission permit) is released right
/// after the session ends, before the last frames (an `error`, the close) are offered to
/// `out` for at most a second: a client that does not read holds neither the count nor
/// the slot.
///
/// With `first_chunk`, the first response's time to its first chunk is recorded (see
/// [`FirstChunkClock`]).
pub async fn converse<S>(
    session: Session,
    slot: Option<OwnedSemaphorePermit>,
    incoming: S,
    out: mpsc::Sender<Outgoing>,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
    first_chunk: Option<FirstChunkClock>,
) -> EndReason
where
    S: Stream<Item = Incoming> + Unpin,
{
    let handle = session.handle();
    let incoming = incoming.chain(futures_util::stream::once(async { Incoming::Lost }));
    let incoming =
        TrackedStream::new(session, incoming, limits.max_session).idle_timeout(limits.idle_timeout);
    let mut incoming = pin!(incoming);
    let mut stall = StallWatch::new(limits.write_timeout);
    let (done, mut done_rx) = mpsc::unbounded_channel();
    let out = Output::new(out);
    // The loop's own handle on `out` (the select arms borrow it while `c` changes).
    let room_in = out.clone();
    let mut c = Conversation {
        handle,
        out,
        limits,
        done,
        response: None,
        next_id: 0,
        waiting: VecDeque::new(),
        farewell: None,
        first_chunk,
    };
    let (reason, close) = loop {
        if *shutdown.borrow() {
            break (EndReason::Shutdown, Some(SHUTDOWN_CLOSE));
        }
        tokio::select! {
            msg = incoming.next() => match msg {
                Some(msg) => {
                    if let Some(ending) = c.on_incoming(msg) {
                        break ending;
                    }
                }
                // The stream stopped: its deadline, its idle limit, or an end from
                // elsewhere (it yields `None` only with a reason).
                None => break ending_for(incoming.stopped().unwrap_or(StreamEnd::Finished)),
            },
            room = room_in.tx.reserve(), if !c.waiting.is_empty() => match (room, c.waiting.pop_front()) {
                (Ok(room), Some(frame)) => {
                    room.send(frame);
                    room_in.counted();
                }
                _ => break (EndReason::Disconnected, None),
            },
            Some(id) = done_rx.recv() => c.on_done(id),
            () = tokio::time::sleep_until(stall.next_check) => {
                if stall.stalled(&room_in) {
                    // The client stopped reading: a dead peer for all we can tell.
                    break (EndReason::Disconnected, None);
                }
            }
            // The transport's writer is gone (a failed or timed-out write).
            () = room_in.tx.closed(), if limits.end_when_writer_gone => break (EndReason::Disconnected, None),
            changed = shutdown.changed() => {
                if changed.is_err() {
                    // The agent is gone without saying so: end as a shutdown would.
                    break (EndReason::Shutdown, Some(SHUTDOWN_CLOSE));
                }
            }
        }
    };
    c.stop_response();
    c.handle.end(reason);
    drop(slot);
    c.say_goodbye(close).await;
    c.handle.reason().unwrap_or(reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use livecount_report::PrequalEstimator;
    use livecount_session::SessionTracker;
    use tokio::sync::Semaphore;

    fn limits() -> Limits {
        Limits {
            max_session: Duration::from_secs(3600),
            idle_timeout: Duration::from_secs(3600),
            write_timeout: Duration::from_secs(2),
            work: Duration::ZERO,
            chunk_gap: Duration::ZERO,
            end_when_writer_gone: true,
        }
    }

    /// A conversation whose output nobody reads (a gRPC response stream the client's
    /// window keeps unpolled): frames in through the returned sender.
    struct Stalled {
        tracker: SessionTracker,
        slots: Arc<Semaphore>,
        frames: mpsc::UnboundedSender<Incoming>,
        ended: JoinHandle<EndReason>,
        unread: mpsc::Receiver<Outgoing>,
        _shutdown: watch::Sender<bool>,
    }

    fn stalled() -> Stalled {
        let tracker: SessionTracker = SessionTracker::new();
        let slots = Arc::new(Semaphore::new(1));
        let slot = Arc::clone(&slots).try_acquire_owned().unwrap();
        let (frames, rx) = mpsc::unbounded_channel();
        let incoming = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|msg| (msg, rx))
        });
        let (out, unread) = mpsc::channel(8);
        let shutdown = watch::channel(false).0;
        let session = tracker.start();
        let ended = tokio::spawn(converse(
            session,
            Some(slot),
            Box::pin(incoming),
            out,
            limits(),
            shutdown.subscribe(),
            None,
        ));
        Stalled {
            tracker,
            slots,
            frames,
            ended,
            unread,
            _shutdown: shutdown,
        }
    }

    /// Waits (in paused time) until the session has ended; returns how long it took.
    async fn ended_after(s: &Stalled) -> Duration {
        let start = tokio::time::Instant::now();
        while s.tracker.active() > 0 {
            assert!(start.elapsed() < Duration::from_secs(60), "never ended");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        start.elapsed()
    }

    /// Sends `frame` every 100 ms, as a client that keeps talking does.
    fn every_100ms(s: &Stalled, frame: ClientFrame) -> JoinHandle<()> {
        let frames = s.frames.clone();
        tokio::spawn(async move {
            while frames.send(Incoming::Frame(frame)).is_ok() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_response_nobody_reads_ends_disconnected_despite_heartbeats() {
        // `speak` as the heartbeat: each one restarts the response, whose send then
        // waits afresh; the stall is measured on what the transport takes, not per send.
        for heartbeat in [ClientFrame::Idle, ClientFrame::Speak { chunks: 10_000 }] {
            let s = stalled();
            s.frames
                .send(Incoming::Frame(ClientFrame::Speak { chunks: 10_000 }))
                .unwrap();
            let heartbeats = every_100ms(&s, heartbeat);
            let took = ended_after(&s).await;
            assert!(took < limits().write_timeout * 2, "{heartbeat:?}: {took:?}");
            assert_eq!(s.slots.available_permits(), 1, "the slot goes with the end");
            let snapshot = s.tracker.snapshot();
            assert_eq!(
                snapshot.ended_by(EndReason::Disconnected),
                1,
                "{snapshot:?}"
            );
            // The close frame finds no room either: a short bound, then the task is done.
            let reason = tokio::time::timeout(Duration::from_secs(2), s.ended).await;
            assert_eq!(reason.unwrap().unwrap(), EndReason::Disconnected);
            heartbeats.abort();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_taking_frames_is_not_a_stall() {
        let mut s = stalled();
        s.frames
            .send(Incoming::Frame(ClientFrame::Speak { chunks: 10_000 }))
            .unwrap();
        let heartbeats = every_100ms(&s, ClientFrame::Idle);
        // One frame per 0.9 write timeouts, for ten write timeouts: always behind, never
        // stuck for a whole write timeout.
        let pace = limits().write_timeout.mul_f64(0.9);
        for _ in 0..11 {
            tokio::time::sleep(pace).await;
            assert!(s.unread.recv().await.is_some());
        }
        assert_eq!(s.tracker.active(), 1, "{:?}", s.tracker.snapshot());
        heartbeats.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn an_interrupt_that_finds_no_room_does_not_block_the_timers() {
        let s = stalled();
        s.frames
            .send(Incoming::Frame(ClientFrame::Speak { chunks: 10_000 }))
            .unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await; // the output fills up
        s.frames
            .send(Incoming::Frame(ClientFrame::Interrupt))
            .unwrap();
        let took = ended_after(&s).await;
        assert!(took < limits().write_timeout * 2, "{took:?}");
        assert_eq!(s.slots.available_permits(), 1);
        let reason = tokio::time::timeout(Duration::from_secs(2), s.ended).await;
        assert_eq!(reason.unwrap().unwrap(), EndReason::Disconnected);
    }

    #[tokio::test(start_paused = true)]
    async fn the_idle_timeout_is_a_missed_heartbeat_disconnected() {
        let mut l = limits();
        l.idle_timeout = Duration::from_secs(1);
        let tracker: SessionTracker = SessionTracker::new();
        let (out, mut rx) = mpsc::channel(8);
        let shutdown = watch::channel(false).0;
        let reason = converse(
            tracker.start(),
            None,
            futures_util::stream::pending(),
            out,
            l,
            shutdown.subscribe(),
            None,
        )
        .await;
        assert_eq!(reason, EndReason::Disconnected);
        assert_eq!(
            rx.recv().await,
            Some(Outgoing::Close {
                code: 1008,
                reason: "idle timeout"
            })
        );
    }

    /// Runs `converse` over `incoming` with `l`; returns its task, the session's handle,
    /// the output's receiver and the shutdown sender.
    fn run(
        tracker: &SessionTracker,
        incoming: impl Stream<Item = Incoming> + Unpin + Send + 'static,
        l: Limits,
        room: usize,
    ) -> (
        JoinHandle<EndReason>,
        livecount_session::EndHandle,
        mpsc::Receiver<Outgoing>,
        watch::Sender<bool>,
    ) {
        let (out, rx) = mpsc::channel(room);
        let shutdown = watch::channel(false).0;
        let session = tracker.start();
        let handle = session.handle();
        let task = tokio::spawn(converse(
            session,
            None,
            incoming,
            out,
            l,
            shutdown.subscribe(),
            None,
        ));
        (task, handle, rx, shutdown)
    }

    /// The close frame among what the conversation sent, if any.
    async fn close_of(rx: &mut mpsc::Receiver<Outgoing>) -> Option<(u16, &'static str)> {
        while let Some(frame) = rx.recv().await {
            if let Outgoing::Close { code, reason } = frame {
                return Some((code, reason));
            }
        }
        None
    }

    #[tokio::test(start_paused = true)]
    async fn the_max_length_ends_timed_out_with_close_1000() {
        let mut l = limits();
        l.max_session = Duration::from_secs(5);
        let tracker: SessionTracker = SessionTracker::new();
        let (task, _, mut rx, _shutdown) = run(&tracker, futures_util::stream::pending(), l, 8);
        let start = tokio::time::Instant::now();
        assert_eq!(task.await.unwrap(), EndReason::TimedOut);
        assert!(
            start.elapsed() >= Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(close_of(&mut rx).await, Some((1000, "max session length")));
    }

    /// A transport's own end (gRPC's `grpc-timeout`, a reset) wakes the loop through the
    /// session, and the transport, not the loop, says why: no close frame.
    #[tokio::test(start_paused = true)]
    async fn an_end_from_the_transport_wins_and_sends_no_close() {
        for reason in [EndReason::TimedOut, EndReason::Cancelled] {
            let tracker: SessionTracker = SessionTracker::new();
            let (task, handle, mut rx, _shutdown) =
                run(&tracker, futures_util::stream::pending(), limits(), 8);
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(handle.end(reason));
            let ended = tokio::time::timeout(Duration::from_secs(1), task).await;
            assert_eq!(ended.expect("the end woke the loop").unwrap(), reason);
            assert_eq!(close_of(&mut rx).await, None, "{reason:?}");
            assert_eq!(tracker.snapshot().ended_by(reason), 1);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn end_all_at_shutdown_closes_1001() {
        let tracker: SessionTracker = SessionTracker::new();
        let (task, _, mut rx, _shutdown) =
            run(&tracker, futures_util::stream::pending(), limits(), 8);
        tokio::time::sleep(Duration::from_millis(50)).await;
        tracker.end_all(EndReason::Shutdown);
        assert_eq!(task.await.unwrap(), EndReason::Shutdown);
        assert_eq!(
            close_of(&mut rx).await,
            Some((1001, "server shutting down"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_shutdown_signal_closes_1001() {
        let tracker: SessionTracker = SessionTracker::new();
        let (task, _, mut rx, shutdown) =
            run(&tracker, futures_util::stream::pending(), limits(), 8);
        tokio::time::sleep(Duration::from_millis(50)).await;
        shutdown.send_replace(true);
        assert_eq!(task.await.unwrap(), EndReason::Shutdown);
        assert_eq!(
            close_of(&mut rx).await,
            Some((1001, "server shutting down"))
        );
        assert_eq!(tracker.snapshot().ended_by(EndReason::Shutdown), 1);
    }

    /// Input that just stops (no close frame, no `Closed`) is a lost connection.
    #[tokio::test(start_paused = true)]
    async fn input_that_ends_without_a_close_is_disconnected() {
        let tracker: SessionTracker = SessionTracker::new();
        let idle = futures_util::stream::iter([Incoming::Frame(ClientFrame::Idle)]);
        let (task, _, mut rx, _shutdown) = run(&tracker, idle, limits(), 8);
        assert_eq!(task.await.unwrap(), EndReason::Disconnected);
        assert_eq!(close_of(&mut rx).await, None);
        let clean = futures_util::stream::iter([Incoming::Closed]);
        let (task, _, _rx, _shutdown) = run(&tracker, clean, limits(), 8);
        assert_eq!(task.await.unwrap(), EndReason::Completed);
        assert_eq!(tracker.snapshot().ended_by(EndReason::Completed), 1);
    }

    /// With a reply waiting for room and no stall limit in reach, the input is still read
    /// and its deadline still runs: the session ends at its maximum length.
    #[tokio::test(start_paused = true)]
    async fn the_deadline_runs_while_a_reply_waits_for_room() {
        let mut l = limits();
        l.max_session = Duration::from_secs(3);
        l.write_timeout = Duration::from_secs(3600);
        let tracker: SessionTracker = SessionTracker::new();
        let (frames, rx) = mpsc::unbounded_channel();
        let incoming = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|msg| (msg, rx))
        });
        let (task, _, _unread, _shutdown) = run(&tracker, Box::pin(incoming), l, 1);
        frames
            .send(Incoming::Frame(ClientFrame::Speak { chunks: 10_000 }))
            .unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await; // the one slot fills
        frames
            .send(Incoming::Frame(ClientFrame::Interrupt))
            .unwrap();
        let start = tokio::time::Instant::now();
        let ended = tokio::time::timeout(Duration::from_secs(10), task).await;
        assert_eq!(ended.expect("never ended").unwrap(), EndReason::TimedOut);
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "{:?}",
            start.elapsed()
        );
    }

    /// Interrupts faster than their answers are read: the session ends at the bound on
    /// waiting replies instead of queueing without one.
    #[tokio::test(start_paused = true)]
    async fn interrupts_nobody_reads_are_bounded() {
        let mut l = limits();
        l.write_timeout = Duration::from_secs(3600);
        let tracker: SessionTracker = SessionTracker::new();
        let interrupts = futures_util::stream::iter(std::iter::repeat_n(
            Incoming::Frame(ClientFrame::Interrupt),
            1000,
        ))
        .chain(futures_util::stream::pending());
        let (task, _, mut unread, _shutdown) = run(&tracker, Box::pin(interrupts), l, 1);
        let ended = tokio::time::timeout(Duration::from_secs(10), task).await;
        assert_eq!(
            ended.expect("never ended").unwrap(),
            EndReason::Disconnected
        );
        // One reply took the channel's slot; the bound's worth waited behind it, and the
        // one past the bound ended the session.
        let mut replies = 0;
        while let Ok(Outgoing::Frame(ServerFrame::Interrupted { .. })) = unread.try_recv() {
            replies += 1;
        }
        assert_eq!(replies, 1);
        assert_eq!(tracker.active(), 0);
    }

    /// A conversation timed by a clock into a fresh estimator, fed through `frames`.
    struct Timed {
        task: JoinHandle<EndReason>,
        frames: mpsc::UnboundedSender<Incoming>,
        out: mpsc::Receiver<Outgoing>,
        estimator: Arc<PrequalEstimator>,
        /// Dropping it would shut the conversation down.
        _shutdown: watch::Sender<bool>,
    }

    fn timed(tracker: &SessionTracker, l: Limits) -> Timed {
        let estimator = Arc::new(PrequalEstimator::new());
        let clock = FirstChunkClock::new(Arc::clone(&estimator), tracker.clone());
        let (frames, rx) = mpsc::unbounded_channel();
        let incoming = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|msg| (msg, rx))
        });
        let (out, out_rx) = mpsc::channel(64);
        let shutdown = watch::channel(false).0;
        let task = tokio::spawn(converse(
            tracker.start(),
            None,
            Box::pin(incoming),
            out,
            l,
            shutdown.subscribe(),
            Some(clock),
        ));
        Timed {
            task,
            frames,
            out: out_rx,
            estimator,
            _shutdown: shutdown,
        }
    }

    async fn next_frame(rx: &mut mpsc::Receiver<Outgoing>) -> ServerFrame {
        match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
            Ok(Some(Outgoing::Frame(frame))) => frame,
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    /// Only the first response is timed, at the RIF of its `speak` (this session and the
    /// other one open: 2).
    #[tokio::test(start_paused = true)]
    async fn the_first_response_is_timed_once_at_the_rif_of_its_speak() {
        let tracker: SessionTracker = SessionTracker::new();
        let _other = tracker.start();
        let Timed {
            task,
            frames,
            out: mut rx,
            estimator,
            _shutdown,
        } = timed(&tracker, limits());
        for chunks in [2, 1] {
            frames
                .send(Incoming::Frame(ClientFrame::Speak { chunks }))
                .unwrap();
            for seq in 0..chunks {
                assert_eq!(next_frame(&mut rx).await, ServerFrame::Chunk { seq });
            }
            assert_eq!(next_frame(&mut rx).await, ServerFrame::Done { chunks });
        }
        frames.send(Incoming::Closed).unwrap();
        assert_eq!(task.await.unwrap(), EndReason::Completed);
        let probe = estimator.probe(2);
        assert_eq!((probe.samples, probe.samples_used), (1, 1), "{probe:?}");
        assert!(probe.latency_ms.is_some());
        // Recorded at 2: neither 0 (0..=1) nor 4 (3..=5) is near it.
        assert_eq!(estimator.probe(0).latency_ms, None);
        assert_eq!(estimator.probe(4).latency_ms, None);
    }

    /// A first response interrupted before its first chunk has no known latency: nothing
    /// is recorded, and the next response is not the first. Real time: the chunk's work
    /// burns 50 ms on the blocking pool, and the interrupt arrives before it ends.
    #[tokio::test]
    async fn a_first_response_interrupted_before_its_first_chunk_records_nothing() {
        let mut l = limits();
        l.work = Duration::from_millis(50);
        let tracker: SessionTracker = SessionTracker::new();
        let Timed {
            task,
            frames,
            out: mut rx,
            estimator,
            _shutdown,
        } = timed(&tracker, l);
        frames
            .send(Incoming::Frame(ClientFrame::Speak { chunks: 1 }))
            .unwrap();
        frames
            .send(Incoming::Frame(ClientFrame::Interrupt))
            .unwrap();
        assert_eq!(
            next_frame(&mut rx).await,
            ServerFrame::Interrupted { sent: 0 }
        );
        frames
            .send(Incoming::Frame(ClientFrame::Speak { chunks: 1 }))
            .unwrap();
        assert_eq!(next_frame(&mut rx).await, ServerFrame::Chunk { seq: 0 });
        assert_eq!(next_frame(&mut rx).await, ServerFrame::Done { chunks: 1 });
        frames.send(Incoming::Closed).unwrap();
        assert_eq!(task.await.unwrap(), EndReason::Completed);
        assert_eq!(estimator.probe(1).samples, 0);
    }

    /// A client that reads its answers may interrupt as often as it likes.
    #[tokio::test(start_paused = true)]
    async fn interrupts_that_are_read_are_not_bounded() {
        let tracker: SessionTracker = SessionTracker::new();
        let interrupts = futures_util::stream::iter(std::iter::repeat_n(
            Incoming::Frame(ClientFrame::Interrupt),
            100,
        ))
        .chain(futures_util::stream::iter([Incoming::Closed]));
        let (task, _, mut rx, _shutdown) = run(&tracker, Box::pin(interrupts), limits(), 256);
        assert_eq!(task.await.unwrap(), EndReason::Completed);
        let mut replies = 0;
        while let Ok(Outgoing::Frame(ServerFrame::Interrupted { sent: 0 })) = rx.try_recv() {
            replies += 1;
        }
        assert_eq!(replies, 100);
    }
}
