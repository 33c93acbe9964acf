//! Compile-time checks: guards move across threads and tokio tasks, handles are shareable,
//! snapshots and windows can be published anywhere.

use livecount::{Counter, PerCpu, PerThread, Reference, Sharded, Single, Striped};
use livecount_session::{
    ByReason, EndHandle, EndReason, Ended, Phase, Session, SessionId, SessionInfo, SessionTracker,
    Snapshot, StartError, Window,
};

fn send<T: Send>() {}
fn sync<T: Sync>() {}
fn send_sync_static<T: Send + Sync + 'static>() {}

fn all_for<C: Counter + 'static>() {
    send_sync_static::<SessionTracker<C>>();
    send_sync_static::<SessionTracker<C, String>>();
    send_sync_static::<Session<C>>();
    send_sync_static::<Session<C, String>>();
    send_sync_static::<EndHandle<C>>();
    send_sync::<Ended<'_, C>>(); // an `ended()` future can be awaited in a spawned task
}

fn send_sync<T: Send + Sync>() {}

#[test]
fn everything_is_send_and_sync() {
    all_for::<PerThread>();
    all_for::<PerCpu>();
    all_for::<Sharded>();
    all_for::<Striped>();
    all_for::<Single>();
    all_for::<Reference>();
    send_sync_static::<Snapshot>();
    send_sync_static::<Window>();
    send_sync_static::<ByReason>();
    send_sync_static::<SessionInfo<String>>();
    send_sync_static::<StartError>();
    send::<SessionId>();
    sync::<EndReason>();
    sync::<Phase>();
}

#[cfg(feature = "tokio")]
#[test]
fn tracked_futures_can_be_spawned() {
    use livecount_session::{Tracked, TrackedStream};
    fn spawnable<T: Send + 'static>(_: &T) {}
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _enter = runtime.enter();
    let tracker: SessionTracker = SessionTracker::new();
    let tracked: Tracked<_, PerThread, ()> =
        tracker.track(async { 1 }, std::time::Duration::from_secs(1));
    spawnable(&tracked);
    let (_tx, rx) = tokio::sync::mpsc::channel::<u8>(1);
    struct Rx(tokio::sync::mpsc::Receiver<u8>);
    impl futures_core::Stream for Rx {
        type Item = u8;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<u8>> {
            self.0.poll_recv(cx)
        }
    }
    let stream: TrackedStream<_, PerThread, ()> =
        tracker.track_stream(Rx(rx), std::time::Duration::from_secs(1));
    spawnable(&stream);
    send_sync_static::<livecount_session::EndedEarly>();
    drop((tracked, stream));
    assert_eq!(tracker.snapshot().ended_by(EndReason::Cancelled), 2);
}
