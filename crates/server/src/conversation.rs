//! One session's conversation, independent of the transport: frames in, frames out, and
//! the protocol's own ending — `bye`, a clean close, bad input, or replies the client never
//! reads.
//!
//! The limits every session runs under (its maximum length, the idle timeout, a client that
//! stops reading, shutdown, the cap on sessions) are not here: they are the edge libraries'
//! (the `livecount_service::Backend`'s WebSocket sessions and its gRPC layer), which end
//! the session through its handle. The conversation watches for that end and stops at once.
//!
//! The conversation never ends the session itself either. It returns how it stopped
//! ([`Ending`]), and the transport ends the session *first* and then says goodbye (an
//! `error` frame, the close or the status), bounded, so a client that does not read holds
//! neither the count nor the place under the cap.
//!
//! No send blocks the conversation: the response streams from its own task, and frames the
//! loop itself answers with (`interrupted`) queue for room in a `select!` arm next to the
//! input, which keeps being read.

use std::collections::VecDeque;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use livecount_session::{EndHandle, EndReason, Phase};
use tokio::sync::mpsc;
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
    /// A message above the size limit (gRPC: tonic refused to decode it).
    TooLarge,
    /// The client closed the stream cleanly (close frame, end of the gRPC stream).
    Closed,
    /// The transport failed: reset, EOF without a close, a read error (the transport knows
    /// which).
    Lost,
}

/// What to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// A protocol frame.
    Frame(ServerFrame),
    /// Close the stream with a WebSocket close code (gRPC maps it to a status).
    Close {
        /// RFC 6455 close code: 1000 normal, 1001 going away, 1007 invalid data, 1009 too
        /// big.
        code: u16,
        /// Human-readable reason.
        reason: &'static str,
    },
}

/// The cost of a response: what a speaking session burns and how it paces its chunks.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// CPU burned per chunk.
    pub work: Duration,
    /// Pause between chunks.
    pub chunk_gap: Duration,
}

/// How a conversation stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The protocol decided: the session should end with `reason`, and then the client be
    /// told `farewell` (why its input failed) and closed with `close`.
    Protocol {
        /// The session's reason.
        reason: EndReason,
        /// A frame to send after the end, before the close.
        farewell: Option<ServerFrame>,
        /// The close code and reason (gRPC: the status), if the client is to get one.
        close: Option<(u16, &'static str)>,
    },
    /// The client's input failed or ended without a close: the transport knows why
    /// (a reset, a lost connection).
    Lost,
    /// The transport's writer is gone (it failed a send, or the response was dropped).
    WriterGone,
    /// Something else ended the session first (a limit, shutdown, the transport): nothing
    /// more to say here.
    Elsewhere(EndReason),
}

impl Ending {
    fn protocol(reason: EndReason, close: Option<(u16, &'static str)>) -> Self {
        Ending::Protocol {
            reason,
            farewell: None,
            close,
        }
    }
}

/// Most replies (`interrupted`) that may wait for room at once. A client that sends more
/// interrupts than this without reading a frame is not reading: the session ends
/// `Disconnected`, instead of queueing without bound.
const MAX_WAITING_REPLIES: usize = 16;

/// The response being streamed.
#[derive(Debug)]
struct Response {
    id: u64,
    task: JoinHandle<()>,
    sent: Arc<AtomicU32>,
}

/// Burns `d` of this thread's CPU time (a busy loop: this is the "model inference" of a
/// speaking session).
///
/// CPU time, not wall time: a process that is not given the CPU (a loaded machine, a CPU
/// quota such as a container limit or the testbed's cgroups) takes longer to finish the
/// same work, as a real model would, instead of doing less of it.
pub fn burn(d: Duration) {
    let start = cpu_time::ThreadTime::now();
    let mut x = 0u64;
    while start.elapsed() < d {
        // A few hundred nanoseconds of work between clock reads (each one is a syscall).
        for _ in 0..256 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

/// Streams response `id`: `chunks` chunks, then `done` (reported on `done`). A
/// `first_chunk` timer stops, and the session's first chunk is noted on `first_of` (its
/// trace), when the first chunk is handed to `out`.
fn spawn_response(
    id: u64,
    chunks: u32,
    pace: Pace,
    out: mpsc::Sender<Outgoing>,
    done: mpsc::UnboundedSender<u64>,
    (mut first_chunk, mut first_of): (Option<FirstChunkTimer>, Option<EndHandle>),
) -> Response {
    let sent = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&sent);
    let task = tokio::spawn(async move {
        for seq in 0..chunks {
            if !pace.work.is_zero() {
                let work = pace.work;
                let _ = tokio::task::spawn_blocking(move || burn(work)).await;
            }
            // Waits for room without a bound of its own: the transport's write timeout ends
            // the session (and the loop aborts this task) if the client stops reading.
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
            if let Some(session) = first_of.take() {
                session.note_first_chunk();
            }
            // Release: pairs with the Acquire in `stop_response`, which reports the count.
            counter.store(seq + 1, Ordering::Release);
            // A zero gap does not sleep: tokio would round it up to its 1 ms timer tick.
            if !pace.chunk_gap.is_zero() {
                tokio::time::sleep(pace.chunk_gap).await;
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
    /// Moves the session's phase; the transport owns the session and its end.
    handle: EndHandle,
    out: mpsc::Sender<Outgoing>,
    pace: Pace,
    done: mpsc::UnboundedSender<u64>,
    response: Option<Response>,
    next_id: u64,
    /// Frames the loop answered with, waiting for room in `out`, oldest first.
    waiting: VecDeque<Outgoing>,
    /// Times the first response to its first chunk; taken by the first `speak`.
    first_chunk: Option<FirstChunkClock>,
    /// Whether a response was started: only the first one's first chunk is the session's.
    spoke: bool,
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
                let first_of =
                    (!std::mem::replace(&mut self.spoke, true)).then(|| self.handle.clone());
                let first = (timer, first_of);
                let response = spawn_response(self.next_id, chunks, self.pace, out, done, first);
                self.response = Some(response);
            }
            Incoming::Frame(ClientFrame::Interrupt) => {
                self.handle.note_interrupt();
                let sent = self.stop_response();
                self.handle.set_phase(Phase::Listening);
                return self.reply(Outgoing::Frame(ServerFrame::Interrupted { sent }));
            }
            Incoming::Frame(ClientFrame::Idle) => {}
            Incoming::Frame(ClientFrame::Bye) => {
                return Some(Ending::protocol(EndReason::Completed, Some((1000, "bye"))));
            }
            Incoming::Malformed(message) => {
                return Some(Ending::Protocol {
                    reason: EndReason::Failed,
                    farewell: Some(ServerFrame::Error { message }),
                    close: Some((1007, "invalid frame")),
                });
            }
            Incoming::TooLarge => {
                return Some(Ending::protocol(
                    EndReason::Failed,
                    Some((1009, "message too big")),
                ));
            }
            Incoming::Closed => return Some(Ending::protocol(EndReason::Completed, None)),
            Incoming::Lost => return Some(Ending::Lost),
        }
        None
    }

    /// Sends `frame` now if there is room and nothing waits before it, else queues it for
    /// the loop's `reserve` arm; `Some` (disconnected) past [`MAX_WAITING_REPLIES`].
    fn reply(&mut self, frame: Outgoing) -> Option<Ending> {
        let frame = if self.waiting.is_empty() {
            match self.out.try_send(frame) {
                Ok(()) => return None,
                // A closed channel too: the `reserve` arm then stops the conversation.
                Err(mpsc::error::TrySendError::Full(frame))
                | Err(mpsc::error::TrySendError::Closed(frame)) => frame,
            }
        } else {
            frame
        };
        if self.waiting.len() == MAX_WAITING_REPLIES {
            // Interrupts faster than the client reads their answers.
            return Some(Ending::protocol(EndReason::Disconnected, None));
        }
        self.waiting.push_back(frame);
        None
    }

    /// Aborts the current response, returning the chunks it had sent.
    fn stop_response(&mut self) -> u32 {
        self.response.take().map_or(0, |r| {
            r.task.abort();
            // Acquire: pairs with the Release in `spawn_response`.
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
}

/// Runs one session's conversation until the protocol decides its end, the input is lost,
/// the writer goes, or something else ends the session through `handle`; returns which
/// ([`Ending`]). The session is not ended here: the caller ends it with the ending's reason
/// and then says goodbye.
///
/// `incoming` ending without [`Incoming::Closed`] is [`Ending::Lost`], never a completed
/// session. With `first_chunk`, the first response's time to its first chunk is recorded
/// (see [`FirstChunkClock`]).
pub async fn converse<S>(
    handle: EndHandle,
    incoming: S,
    out: mpsc::Sender<Outgoing>,
    pace: Pace,
    first_chunk: Option<FirstChunkClock>,
) -> Ending
where
    S: Stream<Item = Incoming>,
{
    let incoming = incoming.chain(futures_util::stream::once(async { Incoming::Lost }));
    let mut incoming = pin!(incoming);
    let (done, mut done_rx) = mpsc::unbounded_channel();
    // The loop's own sender (the select arms borrow it while `c` changes).
    let room_in = out.clone();
    let ended = handle.clone();
    let mut c = Conversation {
        handle,
        out,
        pace,
        done,
        response: None,
        next_id: 0,
        waiting: VecDeque::new(),
        first_chunk,
        spoke: false,
    };
    let ending = loop {
        tokio::select! {
            biased;
            reason = ended.ended() => break Ending::Elsewhere(reason),
            msg = incoming.next() => {
                if let Some(ending) = c.on_incoming(msg.unwrap_or(Incoming::Lost)) {
                    break ending;
                }
            }
            room = room_in.reserve(), if !c.waiting.is_empty() => match (room, c.waiting.pop_front()) {
                (Ok(room), Some(frame)) => room.send(frame),
                _ => break Ending::WriterGone,
            },
            Some(id) = done_rx.recv() => c.on_done(id),
            () = room_in.closed() => break Ending::WriterGone,
        }
    };
    c.stop_response();
    ending
}

/// Offers `frames` to `out` after the session's end, for at most `bound`: a client that does
/// not read gets nothing more, and its task is done within the bound.
pub async fn say_goodbye(
    out: &mpsc::Sender<Outgoing>,
    frames: impl IntoIterator<Item = Outgoing>,
    bound: Duration,
) {
    let goodbye = async {
        for frame in frames {
            if out.send(frame).await.is_err() {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(bound, goodbye).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use livecount_report::PrequalEstimator;
    use livecount_session::SessionTracker;

    fn pace() -> Pace {
        Pace {
            work: Duration::ZERO,
            chunk_gap: Duration::ZERO,
        }
    }

    /// Runs `converse` on a fresh session over `incoming` with `room` frames of output
    /// room; returns its task, the session's handle and the output's receiver.
    fn run(
        tracker: &SessionTracker,
        incoming: impl Stream<Item = Incoming> + Send + 'static,
        room: usize,
    ) -> (
        JoinHandle<Ending>,
        livecount_session::Session,
        mpsc::Receiver<Outgoing>,
    ) {
        let (out, rx) = mpsc::channel(room);
        let session = tracker.start();
        let task = tokio::spawn(converse(session.handle(), incoming, out, pace(), None));
        (task, session, rx)
    }

    #[tokio::test(start_paused = true)]
    async fn bye_and_a_clean_close_complete_without_ending_the_session_here() {
        let tracker: SessionTracker = SessionTracker::new();
        let bye = futures_util::stream::iter([Incoming::Frame(ClientFrame::Bye)])
            .chain(futures_util::stream::pending());
        let (task, session, _rx) = run(&tracker, bye, 8);
        assert_eq!(
            task.await.unwrap(),
            Ending::protocol(EndReason::Completed, Some((1000, "bye")))
        );
        assert_eq!(
            session.reason(),
            None,
            "the transport ends it, not the conversation"
        );
        let clean = futures_util::stream::iter([Incoming::Closed]);
        let (task, _session, _rx) = run(&tracker, clean, 8);
        assert_eq!(
            task.await.unwrap(),
            Ending::protocol(EndReason::Completed, None)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_malformed_frame_fails_with_its_message_as_farewell_and_1007() {
        let tracker: SessionTracker = SessionTracker::new();
        let bad = futures_util::stream::iter([Incoming::Malformed("why".into())]);
        let (task, _session, _rx) = run(&tracker, bad, 8);
        assert_eq!(
            task.await.unwrap(),
            Ending::Protocol {
                reason: EndReason::Failed,
                farewell: Some(ServerFrame::Error {
                    message: "why".into()
                }),
                close: Some((1007, "invalid frame")),
            }
        );
        let big = futures_util::stream::iter([Incoming::TooLarge]);
        let (task, _session, _rx) = run(&tracker, big, 8);
        assert_eq!(
            task.await.unwrap(),
            Ending::protocol(EndReason::Failed, Some((1009, "message too big")))
        );
    }

    /// Input that just stops (no close frame, no `Closed`) is lost, never completed.
    #[tokio::test(start_paused = true)]
    async fn input_that_ends_without_a_close_is_lost() {
        let tracker: SessionTracker = SessionTracker::new();
        let idle = futures_util::stream::iter([Incoming::Frame(ClientFrame::Idle)]);
        let (task, _session, _rx) = run(&tracker, idle, 8);
        assert_eq!(task.await.unwrap(), Ending::Lost);
    }

    /// An end from elsewhere (a limit, shutdown, the transport) wakes the loop at once, even
    /// mid-response, and stops the response.
    #[tokio::test(start_paused = true)]
    async fn an_end_from_elsewhere_stops_the_loop_and_the_response() {
        for reason in [
            EndReason::TimedOut,
            EndReason::Shutdown,
            EndReason::Cancelled,
        ] {
            let tracker: SessionTracker = SessionTracker::new();
            let speak = futures_util::stream::iter([Incoming::Frame(ClientFrame::Speak {
                chunks: 10_000,
            })])
            .chain(futures_util::stream::pending());
            let (task, session, mut rx) = run(&tracker, speak, 1);
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(session.phase(), Some(Phase::Generating));
            assert!(session.handle().end(reason));
            let ended = tokio::time::timeout(Duration::from_secs(1), task).await;
            assert_eq!(
                ended.expect("the end woke the loop").unwrap(),
                Ending::Elsewhere(reason)
            );
            while rx.try_recv().is_ok() {}
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(rx.try_recv().is_err(), "the response kept streaming");
        }
    }

    /// The writer gone (a failed send, a dropped response) stops the conversation.
    #[tokio::test(start_paused = true)]
    async fn a_writer_gone_stops_the_conversation() {
        let tracker: SessionTracker = SessionTracker::new();
        let (task, _session, rx) = run(&tracker, futures_util::stream::pending(), 8);
        drop(rx);
        let ended = tokio::time::timeout(Duration::from_secs(1), task).await;
        assert_eq!(ended.expect("stopped").unwrap(), Ending::WriterGone);
    }

    /// Interrupts faster than their answers are read: the conversation ends at the bound on
    /// waiting replies instead of queueing without one.
    #[tokio::test(start_paused = true)]
    async fn interrupts_nobody_reads_are_bounded() {
        let tracker: SessionTracker = SessionTracker::new();
        let interrupts = futures_util::stream::iter(std::iter::repeat_n(
            Incoming::Frame(ClientFrame::Interrupt),
            1000,
        ))
        .chain(futures_util::stream::pending());
        let (task, _session, mut unread) = run(&tracker, interrupts, 1);
        let ended = tokio::time::timeout(Duration::from_secs(10), task).await;
        assert_eq!(
            ended.expect("never ended").unwrap(),
            Ending::protocol(EndReason::Disconnected, None)
        );
        // One reply took the channel's slot; the bound's worth waited behind it, and the
        // one past the bound ended the conversation.
        let mut replies = 0;
        while let Ok(Outgoing::Frame(ServerFrame::Interrupted { .. })) = unread.try_recv() {
            replies += 1;
        }
        assert_eq!(replies, 1);
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
        let (task, _session, mut rx) = run(&tracker, interrupts, 256);
        assert_eq!(
            task.await.unwrap(),
            Ending::protocol(EndReason::Completed, None)
        );
        let mut replies = 0;
        while let Ok(Outgoing::Frame(ServerFrame::Interrupted { sent: 0 })) = rx.try_recv() {
            replies += 1;
        }
        assert_eq!(replies, 100);
    }

    /// A conversation timed by a clock into a fresh estimator, fed through `frames`.
    struct Timed {
        task: JoinHandle<Ending>,
        frames: mpsc::UnboundedSender<Incoming>,
        out: mpsc::Receiver<Outgoing>,
        estimator: Arc<PrequalEstimator>,
        _session: livecount_session::Session,
    }

    fn timed(tracker: &SessionTracker, pace: Pace) -> Timed {
        let estimator = Arc::new(PrequalEstimator::new());
        let clock = FirstChunkClock::new(Arc::clone(&estimator), tracker.clone());
        let (frames, rx) = mpsc::unbounded_channel();
        let incoming = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|msg| (msg, rx))
        });
        let (out, out_rx) = mpsc::channel(64);
        let session = tracker.start();
        let task = tokio::spawn(converse(session.handle(), incoming, out, pace, Some(clock)));
        Timed {
            task,
            frames,
            out: out_rx,
            estimator,
            _session: session,
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
            _session,
        } = timed(&tracker, pace());
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
        assert_eq!(
            task.await.unwrap(),
            Ending::protocol(EndReason::Completed, None)
        );
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
        let tracker: SessionTracker = SessionTracker::new();
        let slow = Pace {
            work: Duration::from_millis(50),
            chunk_gap: Duration::ZERO,
        };
        let Timed {
            task,
            frames,
            out: mut rx,
            estimator,
            _session,
        } = timed(&tracker, slow);
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
        assert_eq!(
            task.await.unwrap(),
            Ending::protocol(EndReason::Completed, None)
        );
        assert_eq!(estimator.probe(1).samples, 0);
    }

    /// Goodbye frames are offered for at most the bound, then given up.
    #[tokio::test(start_paused = true)]
    async fn a_goodbye_nobody_reads_is_bounded() {
        let (out, _unread) = mpsc::channel(1);
        out.try_send(Outgoing::Frame(ServerFrame::Done { chunks: 1 }))
            .unwrap();
        let start = tokio::time::Instant::now();
        let close = Outgoing::Close {
            code: 1000,
            reason: "bye",
        };
        say_goodbye(&out, [close], Duration::from_secs(1)).await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }
}
