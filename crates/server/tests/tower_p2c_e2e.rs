//! End to end on loopback: a Rust client balancing `livecount.agent.v1.Agent/Converse`
//! streams across three `livecount-agent` processes (one hot) with tower's p2c balancer,
//! each backend's `Load` read from its own ORCA out-of-band stream
//! (`livecount_balance::OrcaLoadSource` → `LoadFeed` → `SessionLoad`), not from the client's
//! view of it (tonic's `Channel` reports a constant 0, which makes plain p2c random). The
//! load is the backend's open sessions while it reports room for one more, unknown
//! otherwise: `LoadSignal::ActiveWithRoom` (its docs say why not `LoadSignal::Occupancy`).
//!
//! 1. 60 sessions through the balancer over 6 s, each speaking a few times and holding
//!    4–6 s; 30 % are dropped mid-response without a bye. The hot backend takes at most
//!    10 % of them and the cold ones split the rest within 1.5×; every backend settles at
//!    0 with started = ended, and the drops end `cancelled`, the byes `completed`, exactly.
//! 2. SIGTERM to b1 while sessions are held: it ends them (`UNAVAILABLE`), exits 0 with
//!    `active 0`; its ORCA stream ends OK, which the client reads as draining and takes
//!    b1 out of the balancer's discovery. New sessions then go only to b2 and b3, and all
//!    succeed.
//!
//! `#[ignore]`d (it starts processes and takes ~20 s): `scripts/test.sh` runs it in its
//! heavy phase. Writes `target/lb/tower-p2c/REPORT.md`.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

mod common;

use common::lb::{
    Fleet, Timeline, assert_shares, ended_by, load_of, new_sessions, share_table, write_report,
};
use futures_util::stream;
use livecount_balance::{
    BackendLoad, LoadFeed, LoadSignal, LoadSource, OrcaLoadSource, SessionLoad,
};
use livecount_server::generated::livecount::agent::v1 as pb;
use pb::agent_client::AgentClient;
use pb::client_frame::Frame as Client;
use pb::server_frame::Frame as Server;
use tokio::sync::mpsc;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status, Streaming};
use tower::balance::p2c::Balance;
use tower::discover::Change;
use tower::{Service, ServiceExt};

/// How long any one frame, call or balancer wait may take.
const PATIENCE: Duration = Duration::from_secs(5);
/// The agents publish every 0.5 s (`Fleet`'s `--report-secs 0.5`): the ORCA interval asked.
const ORCA_INTERVAL: Duration = Duration::from_millis(500);
/// A backend whose report is older than this reads as unknown (above any known load).
const MAX_AGE: Duration = Duration::from_secs(2);

/// One open `Converse` call and the backend the balancer chose for it.
struct Call {
    backend: usize,
    tx: mpsc::Sender<pb::ClientFrame>,
    rx: Streaming<pb::ServerFrame>,
}

/// Opens a call on `channel` (backend `backend`); dropping the sender half-closes it.
async fn open(channel: Channel, backend: usize) -> Result<Call, Status> {
    let (tx, mut rx) = mpsc::channel(16);
    let requests = stream::poll_fn(move |cx| rx.poll_recv(cx));
    let response = AgentClient::new(channel).converse(requests).await?;
    Ok(Call {
        backend,
        tx,
        rx: response.into_inner(),
    })
}

fn frame(f: Client) -> pb::ClientFrame {
    pb::ClientFrame { frame: Some(f) }
}

/// How a session went, as its client saw it.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// Said bye; the call ended OK.
    Closed,
    /// Dropped mid-response without a bye.
    Dropped,
    /// The server ended the call with this status (b1 shutting down: `UNAVAILABLE`).
    EndedByServer(Code),
    /// Anything else: the test fails on it.
    Broken(String),
}

/// What one session does once open.
#[derive(Debug, Clone, Copy)]
struct Plan {
    speaks: u32,
    hold: Duration,
    drop: bool,
}

impl Call {
    /// The next frame, `Ok(None)` at an OK end, within the patience.
    async fn recv(&mut self) -> Result<Option<Server>, Outcome> {
        match tokio::time::timeout(PATIENCE, self.rx.message()).await {
            Err(_) => Err(Outcome::Broken("no frame within 5 s".into())),
            Ok(Err(status)) => Err(Outcome::EndedByServer(status.code())),
            Ok(Ok(f)) => Ok(f.and_then(|f| f.frame)),
        }
    }

    /// Sends a frame; a call the server already ended reports its status instead.
    async fn send(&mut self, f: pb::ClientFrame) -> Result<(), Outcome> {
        if self.tx.send(f).await.is_err() {
            return Err(self.recv().await.err().unwrap_or(Outcome::Broken(
                "request stream closed, response still open".into(),
            )));
        }
        Ok(())
    }

    /// Speaks `plan.speaks` times (3 chunks each) spread over the hold, then says bye or
    /// drops the call in the middle of a long response.
    async fn run(mut self, plan: Plan) -> Outcome {
        let began = tokio::time::Instant::now();
        match self.script(plan, began).await {
            Ok(outcome) => outcome,
            Err(outcome) => outcome,
        }
    }

    async fn script(
        &mut self,
        plan: Plan,
        began: tokio::time::Instant,
    ) -> Result<Outcome, Outcome> {
        for k in 0..plan.speaks {
            self.send(frame(Client::Speak(pb::Speak { chunks: 3 })))
                .await?;
            for seq in 0..3 {
                let got = self.recv().await?;
                if got != Some(Server::Chunk(pb::Chunk { seq })) {
                    return Err(Outcome::Broken(format!("chunk {seq}: {got:?}")));
                }
            }
            let got = self.recv().await?;
            if got != Some(Server::Done(pb::Done { chunks: 3 })) {
                return Err(Outcome::Broken(format!("done: {got:?}")));
            }
            let at = plan.hold * (k + 1) / (plan.speaks + 1);
            tokio::time::sleep_until(began + at).await;
        }
        tokio::time::sleep_until(began + plan.hold).await;
        if plan.drop {
            self.send(frame(Client::Speak(pb::Speak { chunks: 10_000 })))
                .await?;
            match self.recv().await? {
                Some(Server::Chunk(_)) => return Ok(Outcome::Dropped), // the caller drops it
                other => return Err(Outcome::Broken(format!("long response: {other:?}"))),
            }
        }
        self.send(frame(Client::Bye(pb::Bye {}))).await?;
        match self.recv().await? {
            None => Ok(Outcome::Closed),
            other => Err(Outcome::Broken(format!("after bye: {other:?}"))),
        }
    }
}

/// The load the balancer reads comes from an [`OrcaLoadSource`] with
/// `LoadSignal::ActiveWithRoom`: a backend's open sessions while its headroom leaves room for
/// one more session, and unknown (∞, never picked over a backend with room) when it has none
/// or drains (the signal's docs say why not `LoadSignal::Occupancy`). On top, this source
/// takes a draining backend (its ORCA stream ends OK) out of the balancer's discovery: p2c
/// compares two loads, and a draining backend against a hot idle one (both unknown) is a tie
/// it may break either way.
struct Gate {
    source: OrcaLoadSource,
    key: usize,
    drained: Option<mpsc::UnboundedSender<usize>>,
    /// Every report as the backend sent it, for the test's table.
    heard: Arc<Mutex<Vec<(usize, BackendLoad)>>>,
}

impl LoadSource for Gate {
    async fn next_report(&mut self) -> Option<std::io::Result<BackendLoad>> {
        let report = match self.source.next_report().await? {
            Ok(report) => report,
            Err(e) => return Some(Err(e)),
        };
        self.heard.lock().unwrap().push((self.key, report.clone()));
        if report.draining
            && let Some(drained) = self.drained.take()
        {
            let _ = drained.send(self.key);
        }
        Some(Ok(report))
    }
}

/// Session `i`'s plan: 2–3 speaks over a 4–6 s hold; 3 in every 10 dropped.
fn plan(i: u64) -> Plan {
    let spread = (i * 618_033 % 1_000_000) as f64 / 1_000_000.0;
    Plan {
        speaks: 2 + (i % 2) as u32,
        hold: Duration::from_secs_f64(4.0 + 2.0 * spread),
        drop: (i * 7) % 10 < 3,
    }
}

/// The balancer's view: each backend's `Load` as the p2c read it, sampled every 100 ms.
#[derive(Default)]
struct Seen {
    /// Per backend: known loads seen, and how many samples were unknown.
    known: Vec<Vec<f64>>,
    unknown: Vec<u64>,
}

fn spawn_sampler(feeds: Vec<LoadFeed>) -> (Arc<Mutex<Seen>>, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Seen {
        known: vec![Vec::new(); feeds.len()],
        unknown: vec![0; feeds.len()],
    }));
    let out = Arc::clone(&seen);
    let task = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(Duration::from_millis(100));
        loop {
            ticks.tick().await;
            let mut seen = out.lock().unwrap();
            for (i, feed) in feeds.iter().enumerate() {
                let load = feed.load();
                if load.is_known() {
                    seen.known[i].push(load.value());
                } else {
                    seen.unknown[i] += 1;
                }
            }
        }
    });
    (seen, task)
}

/// Opens `plans.len()` sessions through `balance`, one every `every`, each running its
/// plan on its own task; returns the tasks.
async fn open_through<B>(
    balance: &mut B,
    plans: &[Plan],
    every: Duration,
) -> Vec<tokio::task::JoinHandle<(usize, Outcome)>>
where
    B: Service<(), Response = Call> + Send,
    B::Error: std::fmt::Display + Send,
    B::Future: Send + 'static,
{
    let mut tasks = Vec::new();
    let mut ticks = tokio::time::interval(every);
    for &plan in plans {
        ticks.tick().await;
        let ready = tokio::time::timeout(PATIENCE, balance.ready())
            .await
            .expect("the balancer is ready within 5 s")
            .unwrap_or_else(|e| panic!("balancer: {e}"));
        let call = ready.call(());
        tasks.push(tokio::spawn(async move {
            match tokio::time::timeout(PATIENCE, call).await {
                Err(_) => (usize::MAX, Outcome::Broken("open timed out".into())),
                Ok(Err(e)) => (usize::MAX, Outcome::Broken(format!("open: {e}"))),
                Ok(Ok(call)) => {
                    let backend = call.backend;
                    (backend, call.run(plan).await)
                }
            }
        }));
    }
    tasks
}

async fn join_all(tasks: Vec<tokio::task::JoinHandle<(usize, Outcome)>>) -> Vec<(usize, Outcome)> {
    let mut out = Vec::new();
    for t in tasks {
        let done = tokio::time::timeout(Duration::from_secs(20), t)
            .await
            .expect("every session ends within 20 s");
        out.push(done.expect("session tasks do not panic"));
    }
    out
}

fn count(outcomes: &[(usize, Outcome)], backend: usize, outcome: &Outcome) -> u64 {
    outcomes
        .iter()
        .filter(|(b, o)| *b == backend && o == outcome)
        .count() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "end to end; run by scripts/test.sh"]
async fn p2c_on_orca_fed_load_balances_sessions_and_drains() {
    let began = Instant::now();
    let mut fleet = Fleet::start("p2c", 3, 2, &[]);
    fleet.ready().await;
    let n = fleet.backends.len();

    // The balancer: one endpoint per backend, a service opening a Converse call on that
    // backend's channel, its Load read from the backend's ORCA stream.
    let (drained_tx, mut drained_rx) = mpsc::unbounded_channel::<usize>();
    let mut feeds = Vec::new();
    let mut endpoints = Vec::new();
    let heard = Arc::new(Mutex::new(Vec::new()));
    for (i, b) in fleet.backends.iter().enumerate() {
        let grpc = format!("127.0.0.1:{}", b.grpc).parse().unwrap();
        let channel = Endpoint::from_shared(format!("http://{grpc}"))
            .unwrap()
            .connect_timeout(PATIENCE)
            .connect_lazy();
        let source = Gate {
            source: OrcaLoadSource::new(grpc, ORCA_INTERVAL)
                .timeout(Duration::from_secs(1))
                .backoff(Duration::from_millis(50), Duration::from_secs(1)),
            key: i,
            drained: Some(drained_tx.clone()),
            heard: Arc::clone(&heard),
        };
        let feed = LoadFeed::spawn(source, LoadSignal::ActiveWithRoom, MAX_AGE);
        feeds.push(feed.clone());
        let opener = tower::service_fn(move |()| open(channel.clone(), i));
        endpoints.push((i, SessionLoad::new(opener, feed)));
    }
    drop(drained_tx);
    endpoints.reverse();
    let discover = stream::poll_fn(move |cx| {
        if let Some((key, endpoint)) = endpoints.pop() {
            return Poll::Ready(Some(Ok::<_, Infallible>(Change::Insert(key, endpoint))));
        }
        drained_rx
            .poll_recv(cx)
            .map(|key| key.map(|key| Ok(Change::Remove(key))))
    });
    let mut balance = Balance::new(discover);
    // Every ORCA stream reports, and the cold backends have room: just started, an agent
    // reports no headroom for a report or two (its start-up CPU), and with every backend
    // unknown p2c would place sessions at random.
    let cold: Vec<usize> = (0..n).filter(|&i| i != fleet.hot).collect();
    tokio::time::timeout(Duration::from_secs(10), async {
        while !(feeds.iter().all(|f| f.reports() > 0)
            && cold.iter().all(|&i| feeds[i].load().is_known()))
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("every ORCA stream reports, and the cold backends have room, within 10 s");
    let (seen, sampler) = spawn_sampler(feeds.clone());
    let timeline = Timeline::record(&fleet);

    // 1. 60 sessions over 6 s.
    let before = fleet.loads().await;
    let heard_from = heard.lock().unwrap().len();
    let plans: Vec<Plan> = (0..60).map(plan).collect();
    let tasks = open_through(&mut balance, &plans, Duration::from_millis(100)).await;
    let outcomes = join_all(tasks).await;
    let after = fleet.settled(&[0, 1, 2]).await;
    let broken: Vec<_> = outcomes
        .iter()
        .filter(|(_, o)| !matches!(o, Outcome::Closed | Outcome::Dropped))
        .collect();
    assert!(broken.is_empty(), "{broken:?}");
    let new = new_sessions(&before, &after);
    let opened: Vec<u64> = (0..n)
        .map(|b| outcomes.iter().filter(|(o, _)| *o == b).count() as u64)
        .collect();
    assert_eq!(
        new, opened,
        "each backend started what the balancer sent it"
    );
    assert_eq!(new.iter().sum::<u64>(), 60);
    let dropped: Vec<u64> = (0..n)
        .map(|b| count(&outcomes, b, &Outcome::Dropped))
        .collect();
    let closed: Vec<u64> = (0..n)
        .map(|b| count(&outcomes, b, &Outcome::Closed))
        .collect();
    let diff = |i: usize, r: &str| ended_by(&before[i..=i], &after[i..=i], r);
    let cancelled: Vec<u64> = (0..n).map(|i| diff(i, "cancelled")).collect();
    let completed: Vec<u64> = (0..n).map(|i| diff(i, "completed")).collect();
    let ended: Vec<u64> = (0..n).map(|i| after[i].ended - before[i].ended).collect();
    assert_eq!(dropped.iter().sum::<u64>(), 18, "3 in 10 dropped");
    assert_eq!(cancelled, dropped, "a dropped call ends cancelled, once");
    assert_eq!(completed, closed, "a bye ends completed, once");
    assert_eq!(ended, new, "no other endings");
    let phase1_secs = began.elapsed().as_secs_f64();
    let reports: Vec<(usize, BackendLoad)> = heard.lock().unwrap()[heard_from..].to_vec();
    let mean_of = |i: usize, f: &dyn Fn(&BackendLoad) -> f64| {
        let v: Vec<f64> = reports
            .iter()
            .filter(|(k, _)| *k == i)
            .map(|(_, r)| f(r))
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let headroom: Vec<String> = (0..n)
        .map(|i| {
            let min = reports
                .iter()
                .filter(|(k, _)| *k == i)
                .map(|(_, r)| r.headroom)
                .fold(f64::INFINITY, f64::min);
            format!(
                "{:.1} / {:.1} (min {min:.2})",
                mean_of(i, &|r| r.active as f64),
                mean_of(i, &|r| r.headroom)
            )
        })
        .collect();

    let (means, unknown): (Vec<String>, Vec<String>) = {
        let seen = seen.lock().unwrap();
        (0..n)
            .map(|i| {
                let k = &seen.known[i];
                let mean = if k.is_empty() {
                    "—".to_owned()
                } else {
                    let (lo, hi) = k
                        .iter()
                        .fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
                    format!(
                        "{:.4} ({:.4}–{:.4})",
                        k.iter().sum::<f64>() / k.len() as f64,
                        lo,
                        hi
                    )
                };
                let total = k.len() as u64 + seen.unknown[i];
                (mean, format!("{} of {total}", seen.unknown[i]))
            })
            .unzip()
    };
    let mut table = String::from(
        "| backend | opened | dropped → cancelled | bye → completed | load p2c read (active): mean (min–max) | samples unknown (no room) | ORCA reports | mean active / headroom reported (min) |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for i in 0..n {
        let hot = if i == fleet.hot { " (hot)" } else { "" };
        table.push_str(&format!(
            "| {}{hot} | {} | {} → {} | {} → {} | {} | {} | {} | {} |\n",
            fleet.backends[i].name,
            new[i],
            dropped[i],
            cancelled[i],
            closed[i],
            completed[i],
            means[i],
            unknown[i],
            feeds[i].reports(),
            headroom[i],
        ));
    }
    eprintln!("tower p2c on ORCA-fed load, 60 sessions:\n{table}");
    assert_shares("tower-p2c", &new, fleet.hot);

    // 2. SIGTERM to b1 while sessions are held.
    let held_plans: Vec<Plan> = (0..12)
        .map(|_| Plan {
            speaks: 4,
            hold: Duration::from_secs(6),
            drop: false,
        })
        .collect();
    let before_drain = fleet.loads().await;
    let held = open_through(&mut balance, &held_plans, Duration::from_millis(50)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let on_b1 = load_of(&fleet.backends[0].http_addr()).await.active;
    assert!(on_b1 > 0, "b1 holds some of the sessions");
    fleet.sigterm_drained(0, on_b1).await;

    // b1 has drained and gone: new sessions go to b2 and b3 only, and all succeed.
    let after_plans: Vec<Plan> = (0..12)
        .map(|_| Plan {
            speaks: 1,
            hold: Duration::from_millis(500),
            drop: false,
        })
        .collect();
    let late =
        join_all(open_through(&mut balance, &after_plans, Duration::from_millis(50)).await).await;
    let late_on: Vec<u64> = (0..n)
        .map(|b| late.iter().filter(|(o, _)| *o == b).count() as u64)
        .collect();
    assert!(
        late.iter().all(|(b, o)| *b != 0 && *o == Outcome::Closed),
        "{late:?}"
    );
    let held = join_all(held).await;
    let held_on_b1 = held.iter().filter(|(b, _)| *b == 0).count() as u64;
    assert_eq!(held_on_b1, on_b1, "b1 held what it reported");
    for (b, o) in &held {
        let expected = if *b == 0 {
            Outcome::EndedByServer(Code::Unavailable)
        } else {
            Outcome::Closed
        };
        assert_eq!(*o, expected, "b{}: {held:?}", b + 1);
    }
    let finals = fleet.settled(&[1, 2]).await;
    for (k, i) in [1, 2].into_iter().enumerate() {
        let started = finals[k].started - before_drain[i].started;
        let on_i = held.iter().chain(&late).filter(|(b, _)| *b == i).count() as u64;
        assert_eq!(started, on_i, "{}", fleet.backends[i].name);
    }
    sampler.abort();
    let samples = timeline.stop();
    let secs = began.elapsed().as_secs_f64();
    let held_on: Vec<u64> = (0..n)
        .map(|b| held.iter().filter(|(o, _)| *o == b).count() as u64)
        .collect();
    eprintln!(
        "drain: held {held_on:?} (b1 ended UNAVAILABLE: {on_b1}), after b1 left {late_on:?}; \
         {secs:.1} s in all"
    );

    let body = format!(
        "A tower `p2c::Balance` over three endpoints, each a service opening a \
         `livecount.agent.v1.Agent/Converse` call on its backend's tonic channel, wrapped in \
         `SessionLoad` whose `Load` is the backend's open sessions \
         (`LoadSignal::ActiveWithRoom`) from its ORCA out-of-band reports (`OrcaLoadSource`, \
         asked every 0.5 s; stale after 2 s), \
         read as unknown (never picked over a backend with room) while the report's headroom \
         is below one session. b3 burns 90 % of its core in the background.\n\n\
         ## 60 sessions over 6 s\n\n\
         Each speaks 2–3 times and holds 4–6 s; 3 in 10 are dropped in the middle of a \
         response without a bye. Phase took {phase1_secs:.1} s including start-up.\n\n{}\n{table}\n\
         The drops ended `cancelled` and the byes `completed` on the backends, exactly; \
         every backend settled at 0 with started = ended.\n\n\
         ## SIGTERM to b1 with sessions held\n\n\
         12 sessions held (per backend {held_on:?}); b1 ended its {on_b1} `UNAVAILABLE` \
         (`shutdown` on the agent), exited 0 with `active 0`. Its ORCA stream ended OK: the \
         client read it as draining and took b1 out of discovery. 12 new sessions then: per \
         backend {late_on:?}, all completed.\n\n\
         Whole test: {secs:.1} s.",
        share_table(&fleet, &new, &samples),
    );
    let dir = write_report(
        "tower-p2c",
        "tower p2c on ORCA-fed load",
        &body,
        &fleet,
        &samples,
    );
    eprintln!("report: {}", dir.display());
}
