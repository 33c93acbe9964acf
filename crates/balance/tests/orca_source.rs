//! `OrcaLoadSource` against a real `livecount_report::OrcaService` served by tonic on
//! loopback: a report's fields arrive, draining is seen as the stream ends OK, the source
//! reconnects after the server restarts on the same port, a dead or silent address never
//! hangs it, and a p2c balancer on ORCA-fed loads sends work where there is room.
//!
//! Each server runs on a runtime of its own, so that "killing" it (shutting the runtime
//! down) drops its connections as a dying process would.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use livecount_balance::{
    BackendLoad, LoadFeed, LoadReading, LoadSignal, LoadSource, OrcaLoadSource, SessionLoad,
};
use livecount_capacity::CapacityConfig;
use livecount_report::{LoadBoard, LoadReport, ManualUtilisation, OrcaService};
use livecount_session::{Session, SessionTracker};
use tokio::time::timeout;
use tower::balance::p2c::Balance;
use tower::discover::ServiceList;
use tower::{Service, ServiceExt};

const WAIT: Duration = Duration::from_secs(10);
const INTERVAL: Duration = Duration::from_millis(100);

/// A board publishing every 100 ms (by hand here), at most 50 sessions, CPU as set.
fn board(name: &str) -> Arc<LoadBoard> {
    let config = CapacityConfig::new(0.8, 2.0, Duration::from_secs(1), INTERVAL).unwrap();
    let (cpu, set_cpu) = ManualUtilisation::new();
    set_cpu.set(0.1);
    Arc::new(
        LoadBoard::builder(name, config)
            .max_sessions(50)
            .utilisation(cpu)
            .build(),
    )
}

/// A backend: a tracker, its board, and the ORCA service on its own runtime.
struct Backend {
    tracker: SessionTracker,
    board: Arc<LoadBoard>,
    sessions: Vec<Session>,
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Backend {
    /// Serves on `addr` (port 0: any free port) once bound.
    async fn start(addr: SocketAddr) -> Backend {
        let board = board("b");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (bound, rx) = tokio::sync::oneshot::channel();
        let orca = OrcaService::server(Arc::clone(&board));
        runtime.spawn(async move {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_reuseaddr(true).unwrap();
            socket.bind(addr).unwrap();
            let listener = socket.listen(64).unwrap();
            let _ = bound.send(listener.local_addr().unwrap());
            let _ = tonic::transport::Server::builder()
                .add_service(orca)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await;
        });
        let addr = timeout(WAIT, rx).await.unwrap().unwrap();
        Backend {
            tracker: SessionTracker::default(),
            board,
            sessions: Vec::new(),
            addr,
            runtime: Some(runtime),
        }
    }

    /// Holds `active` sessions and publishes a report of them.
    fn publish(&mut self, active: usize) -> Arc<LoadReport> {
        while self.sessions.len() < active {
            self.sessions.push(self.tracker.start());
        }
        self.sessions.truncate(active);
        self.board.publish(self.tracker.snapshot())
    }

    /// Stops the server as a crash would: its runtime goes, and every connection with it.
    fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.kill();
    }
}

fn source(addr: SocketAddr) -> OrcaLoadSource {
    OrcaLoadSource::new(addr, INTERVAL)
        .timeout(Duration::from_millis(500))
        .backoff(Duration::from_millis(20), Duration::from_millis(200))
}

/// The next item of `source`, which must come within the wait.
async fn next(source: &mut OrcaLoadSource) -> std::io::Result<BackendLoad> {
    timeout(WAIT, source.next_report())
        .await
        .expect("next_report returns in time")
        .expect("the source never finishes")
}

/// Reports from `source` until one satisfies `done` (errors skipped), within the wait.
async fn until(source: &mut OrcaLoadSource, done: impl Fn(&BackendLoad) -> bool) -> BackendLoad {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(report) = next(source).await
            && done(&report)
        {
            return report;
        }
        assert!(Instant::now() < deadline, "no such report in time");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reports_fields_arrive_and_draining_ends_the_stream() {
    let mut backend = Backend::start("127.0.0.1:0".parse().unwrap()).await;
    let published = backend.publish(4);
    let mut source = source(backend.addr);
    let first = next(&mut source).await.unwrap();
    assert_eq!(first.sequence, published.sequence, "{first:?}");
    assert_eq!(first.active, 4);
    assert_eq!(first.effective_capacity, published.effective_capacity);
    assert_eq!(first.headroom, published.headroom);
    assert!(first.headroom > 0.0 && !first.draining, "{first:?}");
    assert_eq!(first.age_ms, 0);

    let published = backend.publish(9);
    let later = until(&mut source, |r| r.sequence == published.sequence).await;
    assert_eq!((later.active, later.headroom), (9, published.headroom));

    // A feed on a second source: known now, and draining at once when the board drains
    // (its max age, a minute, is not what makes it unknown).
    let feed = LoadFeed::spawn(
        self::source(backend.addr),
        LoadSignal::Occupancy,
        Duration::from_secs(60),
    );
    timeout(WAIT, async {
        while !feed.load().is_known() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the feed hears a report");
    let expected = LoadSignal::Occupancy.of(&later);
    assert!((feed.load().value() - expected).abs() < 1e-12, "{feed:?}");

    let drained = {
        backend.tracker.begin_drain();
        backend.board.publish(backend.tracker.snapshot())
    };
    let draining = until(&mut source, |r| r.draining).await;
    assert_eq!(draining.sequence, OrcaLoadSource::DRAINING_SEQUENCE);
    assert_eq!(draining.active, 9, "the last report, marked draining");
    assert_eq!(LoadSignal::Occupancy.of(&draining), f64::INFINITY);
    assert!(drained.draining);
    timeout(Duration::from_secs(2), async {
        while feed.load().is_known() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the feed reads a draining backend as unknown within 2 s");
    assert_eq!(feed.load(), LoadReading::UNKNOWN);

    // While the board drains, each new stream ends at once: more draining reports (the
    // feed ignores the repeats), never a hang.
    for _ in 0..3 {
        let again = next(&mut source).await.unwrap();
        assert!(again.draining, "{again:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_source_reconnects_after_the_server_restarts() {
    let mut backend = Backend::start("127.0.0.1:0".parse().unwrap()).await;
    let addr = backend.addr;
    backend.publish(3);
    let mut source = source(addr);
    assert_eq!(next(&mut source).await.unwrap().active, 3);

    backend.kill();
    let deadline = Instant::now() + WAIT;
    let mut failures = 0;
    while failures < 3 {
        if next(&mut source).await.is_err() {
            failures += 1;
        }
        assert!(Instant::now() < deadline, "errors while the server is down");
    }

    let mut restarted = Backend::start(addr).await;
    assert_eq!(restarted.addr, addr, "the same port");
    let report = restarted.publish(1);
    let back = until(&mut source, |r| !r.draining && r.active == 1).await;
    assert_eq!(back.sequence, report.sequence, "the new server's report");
    assert_eq!(back.headroom, report.headroom);
    // And it keeps streaming on the new connection.
    let report = restarted.publish(2);
    let next = until(&mut source, |r| r.sequence == report.sequence).await;
    assert_eq!(next.active, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_or_silent_address_does_not_hang() {
    // Nothing listening: refused at once, every time, with the backoff in between.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = free.local_addr().unwrap();
    drop(free);
    let mut refused = source(dead);
    for _ in 0..4 {
        let began = Instant::now();
        let error = next(&mut refused).await.unwrap_err();
        assert!(began.elapsed() < Duration::from_secs(2), "{error}");
    }

    // A listener that never accepts (the kernel completes the handshake, nobody speaks
    // HTTP/2): the call set-up times out.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut stuck = OrcaLoadSource::new(silent.local_addr().unwrap(), INTERVAL)
        .timeout(Duration::from_millis(300))
        .backoff(Duration::from_millis(10), Duration::from_millis(50));
    for _ in 0..2 {
        let began = Instant::now();
        let error = next(&mut stuck).await.unwrap_err();
        let took = began.elapsed();
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut, "{error}");
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(2),
            "{took:?}"
        );
    }

    // A feed on a dead backend stays unknown: silence is not free capacity.
    let feed = LoadFeed::spawn(source(dead), LoadSignal::Occupancy, Duration::from_secs(2));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(feed.load(), LoadReading::UNKNOWN);
    drop(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_p2c_balancer_on_orca_fed_loads_sends_work_where_there_is_room() {
    let mut full = Backend::start("127.0.0.1:0".parse().unwrap()).await;
    let mut roomy = Backend::start("127.0.0.1:0".parse().unwrap()).await;
    let (a, b) = (full.publish(40), roomy.publish(5));
    assert!(
        LoadSignal::Occupancy.of(&BackendLoad::new(0, a.active, a.effective_capacity))
            > LoadSignal::Occupancy.of(&BackendLoad::new(0, b.active, b.effective_capacity)),
        "{a:?} {b:?}"
    );
    let services = [&full, &roomy].map(|backend| {
        let feed = LoadFeed::spawn(
            source(backend.addr),
            LoadSignal::Occupancy,
            Duration::from_secs(2),
        );
        let addr = backend.addr;
        SessionLoad::new(
            tower::service_fn(move |()| async move { Ok::<_, std::io::Error>(addr) }),
            feed,
        )
    });
    timeout(WAIT, async {
        while !services.iter().all(|s| s.feed().load().is_known()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("both feeds hear a report");
    let mut balance = Balance::new(ServiceList::new(services));
    for _ in 0..50 {
        let ready = timeout(WAIT, balance.ready()).await.unwrap().unwrap();
        let chosen = ready.call(()).await.unwrap();
        assert_eq!(chosen, roomy.addr, "the backend with room");
    }
}
