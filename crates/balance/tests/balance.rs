//! A tower p2c balancer over `SessionLoad` services fed by real `/load` servers on loopback
//! routes new work on the backends' reports: to the less loaded one, following the reports
//! as they change, and never to a backend whose report is stale or missing. The servers
//! send the agent's own encoding (`ServedReport`), and one test polls the agent's router.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use livecount_balance::{
    BackendLoad, HttpLoadSource, LoadFeed, LoadSignal, LoadSource, SessionLoad,
};
use livecount_report::{LoadReport, ServedReport};
use tokio::task::JoinHandle;
use tower::balance::p2c::Balance;
use tower::discover::ServiceList;
use tower::util::ServiceFn;
use tower::{Service, ServiceExt};

const PERIOD: Duration = Duration::from_millis(50);
const MAX_AGE: Duration = Duration::from_secs(2);
const WAIT: Duration = Duration::from_secs(10);

/// A `/load` body as the agent serves it: a report of `active` sessions out of 100, served
/// `age_ms` after it was taken.
fn report(sequence: u64, active: u64, age_ms: u64) -> ServedReport {
    let mut report = LoadReport::empty("backend");
    (report.sequence, report.active, report.listening) = (sequence, active, active);
    report.started = active;
    (report.effective_capacity, report.headroom) = (100.0, 100.0 - active as f64);
    ServedReport::with_age(report, age_ms)
}

/// A tiny backend serving, at `/load`, a report of the `(active, age_ms)` its cell holds,
/// with a new sequence number each time (as the agent's reporter takes a new one each
/// interval).
struct Backend {
    addr: SocketAddr,
    load: Arc<Mutex<(u64, u64)>>,
    task: JoinHandle<()>,
}

impl Backend {
    async fn start(active: u64, age_ms: u64) -> Backend {
        let load = Arc::new(Mutex::new((active, age_ms)));
        let cell = Arc::clone(&load);
        let sequence = Arc::new(AtomicU64::new(1));
        let app = Router::new().route(
            "/load",
            get(move || {
                let (active, age_ms) = *cell.lock().unwrap();
                let value = report(sequence.fetch_add(1, Ordering::Relaxed), active, age_ms);
                async move { axum::Json(value) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Backend { addr, load, task }
    }

    fn feed(&self) -> LoadFeed {
        feed(self.addr)
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn feed(addr: SocketAddr) -> LoadFeed {
    LoadFeed::spawn(
        HttpLoadSource::new(addr, PERIOD),
        LoadSignal::Occupancy,
        MAX_AGE,
    )
}

type Ready = std::future::Ready<Result<&'static str, Infallible>>;

/// A client service to backend `name`: answers its name, loaded as `feed` reads.
fn named(name: &'static str, feed: LoadFeed) -> SessionLoad<ServiceFn<impl FnMut(()) -> Ready>> {
    SessionLoad::new(
        tower::service_fn(move |()| std::future::ready(Ok(name))),
        feed,
    )
}

/// Sends 100 requests through a p2c balancer over `backends`; how many each name got.
async fn pick_100<S>(backends: Vec<SessionLoad<S>>) -> Vec<(&'static str, usize)>
where
    S: Service<(), Response = &'static str, Error = Infallible>,
{
    let mut balance = Balance::new(ServiceList::new(backends));
    let mut counts: Vec<(&'static str, usize)> = Vec::new();
    for _ in 0..100 {
        let pick = tokio::time::timeout(WAIT, async {
            balance.ready().await.unwrap().call(()).await.unwrap()
        });
        let name = pick.await.expect("the balancer answers in time");
        match counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, count)) => *count += 1,
            None => counts.push((name, 1)),
        }
    }
    counts
}

fn count(counts: &[(&str, usize)], name: &str) -> usize {
    counts
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, c)| *c)
}

async fn until_known(feeds: &[&LoadFeed]) {
    let known = tokio::time::timeout(WAIT, async {
        while !feeds.iter().all(|f| f.load().is_known()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    known.await.expect("every feed has a fresh report in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2c_sends_new_work_to_the_less_loaded_backend_and_follows_the_reports() {
    let light = Backend::start(10, 5).await;
    let heavy = Backend::start(90, 5).await;
    let (light_feed, heavy_feed) = (light.feed(), heavy.feed());
    until_known(&[&light_feed, &heavy_feed]).await;
    assert!(light_feed.load() < heavy_feed.load());

    let counts = pick_100(vec![
        named("light", light_feed.clone()),
        named("heavy", heavy_feed.clone()),
    ])
    .await;
    assert_eq!(count(&counts, "heavy"), 0, "{counts:?}");
    assert_eq!(count(&counts, "light"), 100);

    // The backends' sessions change places: so does the traffic.
    *light.load.lock().unwrap() = (95, 5);
    *heavy.load.lock().unwrap() = (5, 5);
    let swapped = tokio::time::timeout(WAIT, async {
        while light_feed.load() <= heavy_feed.load() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    swapped.await.expect("the new reports arrive in time");
    let counts = pick_100(vec![named("light", light_feed), named("heavy", heavy_feed)]).await;
    assert_eq!(count(&counts, "light"), 0, "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_or_missing_report_never_reads_as_free_capacity() {
    let loaded = Backend::start(90, 5).await;
    let idle_but_stale = Backend::start(0, 60_000).await;
    let gone = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap() // nothing listens here once this block ends
    };
    let loaded_feed = loaded.feed();
    until_known(&[&loaded_feed]).await;
    for (name, other) in [("stale", idle_but_stale.feed()), ("gone", feed(gone))] {
        // Give the other feed time to poll (and fail to find a fresh report) several times.
        tokio::time::sleep(PERIOD * 4).await;
        assert!(!other.load().is_known(), "{name}");
        let counts = pick_100(vec![
            named("loaded", loaded_feed.clone()),
            named(name, other),
        ])
        .await;
        assert_eq!(count(&counts, "loaded"), 100, "{counts:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_stops_reporting_goes_stale_within_max_age() {
    let backend = Backend::start(10, 5).await;
    let feed = backend.feed();
    until_known(&[&feed]).await;
    drop(backend); // the server stops: polls fail from now on
    let stale = tokio::time::timeout(WAIT, async {
        while feed.load().is_known() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    stale
        .await
        .expect("stale within max_age (2 s), waited at most 10 s");
}

/// `HttpLoadSource` reads what the agent's router serves: the board's sequence, active count,
/// capacity and headroom, a fresh age, and draining once the board drains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_source_reads_what_the_agents_router_serves() {
    use livecount_capacity::CapacityConfig;
    use livecount_report::{LoadBoard, ManualUtilisation};
    use livecount_session::SessionTracker;

    let second = Duration::from_secs(1);
    let (cpu, set_cpu) = ManualUtilisation::new();
    let config = CapacityConfig::new(0.8, 2.0, second, second).unwrap();
    let board = Arc::new(LoadBoard::builder("b1", config).utilisation(cpu).build());
    let tracker: SessionTracker = SessionTracker::default();
    let sessions: Vec<_> = (0..3).map(|_| tracker.start()).collect();
    set_cpu.set(0.2);
    let published = board.publish(tracker.snapshot());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app: Router = livecount_report::router(Arc::clone(&board));
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut source = HttpLoadSource::new(addr, PERIOD);
    let load = source.next_report().await.unwrap().unwrap();
    let expected = BackendLoad::from(&*published);
    assert_eq!((load.sequence, load.active), (published.sequence, 3));
    assert_eq!(
        (load.effective_capacity, load.headroom, load.draining),
        (expected.effective_capacity, expected.headroom, false)
    );
    assert!(load.age_ms < 60_000, "{load:?}");

    let drained = {
        tracker.begin_drain();
        board.publish(tracker.snapshot())
    };
    let load = source.next_report().await.unwrap().unwrap();
    assert_eq!((load.sequence, load.draining), (drained.sequence, true));
    drop(sessions);
    server.abort();
}

/// What a balancer compares: a known load reads back exactly, anything not a finite number
/// is unknown and above every known load, and the order follows the value.
#[test]
fn load_metrics_read_back_their_value_and_unknown_is_infinite() {
    use livecount_balance::LoadReading;
    assert_eq!(LoadReading::new(0.25).value(), 0.25);
    assert_eq!(LoadReading::new(17.0).value(), 17.0);
    assert_eq!(LoadReading::new(-3.5).value(), -3.5);
    assert!(LoadReading::new(0.25).is_known());
    assert_eq!(LoadReading::UNKNOWN.value(), f64::INFINITY);
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(LoadReading::new(bad), LoadReading::UNKNOWN);
        assert!(!LoadReading::new(bad).is_known());
    }
    assert!(LoadReading::new(2.0) < LoadReading::new(3.0));
    assert!(LoadReading::new(1e300) < LoadReading::UNKNOWN);
}

/// A backend that is ready or not, or failing, as told.
struct Gate(Option<Result<(), std::io::ErrorKind>>);

impl tower::Service<()> for Gate {
    type Response = ();
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<(), std::io::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), std::io::Error>> {
        match self.0 {
            None => std::task::Poll::Pending,
            Some(Ok(())) => std::task::Poll::Ready(Ok(())),
            Some(Err(kind)) => std::task::Poll::Ready(Err(kind.into())),
        }
    }

    fn call(&mut self, (): ()) -> Self::Future {
        std::future::ready(Ok(()))
    }
}

/// `SessionLoad` passes readiness through: pending while its backend is, failing when it
/// fails, so tower's balancer never sends to a backend that cannot take the call.
#[tokio::test]
async fn session_load_is_ready_exactly_when_its_backend_is() {
    use std::task::{Context, Poll, Waker};
    use tower::Service;
    let (_reports, source) = tokio::sync::mpsc::channel(1);
    let feed = LoadFeed::spawn(source, LoadSignal::Active, Duration::from_secs(3));
    let mut cx = Context::from_waker(Waker::noop());
    let mut pending = SessionLoad::new(Gate(None), feed.clone());
    assert!(pending.poll_ready(&mut cx).is_pending());
    let mut ready = SessionLoad::new(Gate(Some(Ok(()))), feed.clone());
    assert!(matches!(ready.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    let mut failed = SessionLoad::new(Gate(Some(Err(std::io::ErrorKind::BrokenPipe))), feed);
    match failed.poll_ready(&mut cx) {
        Poll::Ready(Err(e)) => assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe),
        other => panic!("expected the backend's error, got {other:?}"),
    }
}
