//! End to end on loopback: a real Prometheus (Debian's 2.42) scraping two `livecount-agent`
//! processes' `/metrics` every second, queried through its HTTP API while WebSocket
//! sessions are held open and after they end.
//!
//! Asserted: the fleet sum of `livecount_active_sessions` equals the truth (the agents'
//! `/load` and the sessions the driver holds open), per backend too; the arrivals counter's
//! `increase()`/`rate()` matches what was opened within Prometheus' extrapolation; headroom
//! and effective capacity exist per instance and never exceed `--max-sessions` over the
//! whole run; after the clients close (or are killed), the sum returns to 0, the ended
//! counters by reason match what the clients did, and every agent settles. Then a short
//! round of 3 s sessions, all killed, puts known durations beside the 12 s ones: the
//! histogram `livecount_session_duration_seconds` counts every session under its reason,
//! its mean lies within the driven lengths, and `histogram_quantile(0.5, …)`, over the
//! fleet and filtered by reason, falls in the bucket of the driven median.
//!
//! `#[ignore]`d (it needs the `prometheus` binary, installed by `scripts/lb_tools.sh`);
//! `scripts/test.sh` runs it in its heavy phase. Writes `target/lb/prometheus/REPORT.md`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::Procs;
use common::lb::{Fleet, Timeline, free_port, write_report};
use livecount_server::load_driver::{DriveConfig, DriveSummary, drive};

/// Every agent's `--max-sessions`: small, so a capacity estimate above it would show.
const MAX_SESSIONS: f64 = 30.0;
/// Sessions opened on b1 and on b2 (the hot one).
const PER_AGENT: [u32; 2] = [20, 8];
/// How long each session is held: long enough for a few scrapes while all are open, and
/// clear of the duration buckets' bounds (10 s, 30 s) by more than a response's length.
const HOLD: Duration = Duration::from_secs(12);
/// The short round: sessions on b2, held this long, every one killed.
const SHORT_SESSIONS: u32 = 10;
const SHORT_HOLD: Duration = Duration::from_secs(3);
/// How much longer than its hold a session may last at the agent: the response to an
/// utterance sent just before the hold ends, the bye or the kill, scheduling.
const OVERRUN: Duration = Duration::from_secs(2);

/// The Prometheus binary: `prometheus` on PATH, else Debian's /usr/bin/prometheus.
fn prometheus() -> PathBuf {
    common::lb::tool(&["prometheus", "/usr/bin/prometheus"], "--version")
}

/// Percent-encodes a query parameter (everything but RFC 3986's unreserved characters).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// `GET path` on `addr`: the status and body, or `None` if the server did not answer.
async fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    livecount_server::load_driver::http_get(addr, path).await
}

/// One series of an instant query's result: its distinguishing label and its value.
#[derive(Debug, Clone)]
struct Point {
    /// The `backend`, `reason` or `state` label (the first present), or "" for a sum.
    label: String,
    value: f64,
}

/// An instant query through `/api/v1/query`; panics on an error answer.
async fn query(prom: &str, q: &str) -> Vec<Point> {
    let path = format!("/api/v1/query?query={}", encode(q));
    let (status, body) = get(prom, &path)
        .await
        .unwrap_or_else(|| panic!("prometheus at {prom} did not answer {q}"));
    let v: serde_json::Value = serde_json::from_str(&body)
        .unwrap_or_else(|e| panic!("{q}: HTTP {status}, not JSON ({e}): {body}"));
    assert_eq!(v["status"], "success", "{q}: HTTP {status}: {body}");
    let mut out: Vec<Point> = v["data"]["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{q}: not a vector: {body}"))
        .iter()
        .map(|s| {
            let m = &s["metric"];
            let label = ["backend", "reason", "state"]
                .iter()
                .find_map(|k| m[*k].as_str())
                .unwrap_or_default()
                .to_owned();
            let value = s["value"][1].as_str().unwrap().parse().unwrap();
            Point { label, value }
        })
        .collect();
    out.sort_by(|a, b| a.label.cmp(&b.label));
    out
}

/// The single value of a query that yields one series (a `sum`), `None` if it yields none.
async fn scalar(prom: &str, q: &str) -> Option<f64> {
    let r = query(prom, q).await;
    assert!(r.len() <= 1, "{q}: more than one series: {r:?}");
    r.first().map(|p| p.value)
}

/// A query's result for the table: `28` or `b1=20, b2=8`.
fn show(points: &[Point]) -> String {
    if points.is_empty() {
        return "(no series)".into();
    }
    let num = |v: f64| {
        if v.fract() == 0.0 {
            format!("{v}")
        } else {
            format!("{v:.3}")
        }
    };
    points
        .iter()
        .map(|p| {
            if p.label.is_empty() {
                num(p.value)
            } else {
                format!("{}={}", p.label, num(p.value))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Polls `q` every 250 ms until `done` holds for its value, up to `limit`; returns the
/// value and how long it took, or panics with the last value.
async fn until(
    prom: &str,
    q: &str,
    limit: Duration,
    done: impl Fn(Option<f64>) -> bool,
) -> (Option<f64>, Duration) {
    let start = Instant::now();
    loop {
        let v = scalar(prom, q).await;
        if done(v) {
            return (v, start.elapsed());
        }
        assert!(start.elapsed() < limit, "{q} stayed at {v:?} for {limit:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The table's rows: (phase, query, result, what is asserted).
struct Table(Vec<[String; 4]>);

impl Table {
    async fn ask(&mut self, prom: &str, phase: &str, q: &str, check: &str) -> Vec<Point> {
        let r = query(prom, q).await;
        self.0
            .push([phase, &format!("`{q}`"), &show(&r), check].map(str::to_owned));
        r
    }

    fn markdown(&self) -> String {
        let mut t =
            String::from("| phase | query | result | asserted |\n| --- | --- | --- | --- |\n");
        for [a, b, c, d] in &self.0 {
            let _ = writeln!(t, "| {a} | {b} | {c} | {d} |");
        }
        t
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs prometheus (scripts/lb_tools.sh); run by scripts/test.sh"]
async fn prometheus_sees_the_true_session_count_arrivals_and_capped_headroom() {
    let t0 = Instant::now();
    let bin = prometheus();
    let max = MAX_SESSIONS.to_string();
    let fleet = Fleet::start("prometheus", 2, 1, &["--max-sessions", &max]);

    // The scrape config: the template with one static target (and its label) per agent.
    let targets: Vec<String> = fleet
        .backends
        .iter()
        .map(|b| {
            format!(
                "      - targets: [\"{}\"]\n        labels: {{ backend: \"{}\" }}",
                b.http_addr(),
                b.name
            )
        })
        .collect();
    let config = include_str!("../../../deploy/prometheus/prometheus.yml.in")
        .replace("\n@TARGETS@\n", &format!("\n{}\n", targets.join("\n")));
    let config_path = fleet.dir.join("prometheus.yml");
    std::fs::write(&config_path, &config).unwrap();
    let prom = format!("127.0.0.1:{}", free_port());
    let prom_log = fleet.dir.join("prometheus.log");
    // Declared after `fleet`, so dropped (killed by PID) before the fleet removes its dir.
    let mut procs = Procs(vec![
        Command::new(&bin)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                fleet.dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={prom}"))
            .args(["--storage.tsdb.retention.time=1h", "--log.level=warn"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&prom_log).unwrap())
            .spawn()
            .expect("prometheus starts"),
    ]);

    // While Prometheus starts: the agents answer and the hot one reports its CPU.
    fleet.ready().await;
    let ready_start = Instant::now();
    loop {
        if let Some((200, _)) = get(&prom, "/-/ready").await {
            break;
        }
        let exited = procs.0[0].try_wait().unwrap();
        assert!(
            exited.is_none() && ready_start.elapsed() < Duration::from_secs(30),
            "prometheus not ready (exit: {exited:?}); its log:\n{}",
            std::fs::read_to_string(&prom_log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let prom_ready = t0.elapsed();

    // Both targets scraped at least twice before any session: the arrival counter's first
    // sample is 0, so increase() has a true zero to start from.
    let n = fleet.backends.len() as f64;
    let limit = Duration::from_secs(15);
    until(&prom, r#"count(up{job="livecount"} == 1)"#, limit, |v| {
        v == Some(n)
    })
    .await;
    until(
        &prom,
        "count(livecount_sessions_started_total == 0)",
        limit,
        |v| v == Some(n),
    )
    .await;
    until(
        &prom,
        "min(count_over_time(livecount_sessions_started_total[1m]))",
        limit,
        |v| v.is_some_and(|k| k >= 2.0),
    )
    .await;

    let timeline = Timeline::record(&fleet);
    let mut table = Table(Vec::new());
    let drive_start = Instant::now();
    let drives: Vec<_> = fleet
        .backends
        .iter()
        .zip(PER_AGENT)
        .enumerate()
        .map(|(i, (b, sessions))| {
            tokio::spawn(drive(DriveConfig {
                target: b.http_addr(),
                sessions,
                ramp: Duration::from_secs(1),
                hold: HOLD,
                speak_every: Duration::from_millis(800),
                chunks: 5,
                interrupt_share: 0.1,
                kill_share: 0.25,
                observe: Vec::new(),
                seed: 41 + i as u64,
            }))
        })
        .collect();

    // Every session open (they all are from ~1 s until ~12 s): Prometheus' sum must reach
    // the truth before the first one ends, and the agents' /load must agree.
    let total: u32 = PER_AGENT.iter().sum();
    let truth = f64::from(total);
    until(
        &prom,
        "sum(livecount_active_sessions)",
        HOLD - Duration::from_millis(1500),
        |v| v == Some(truth),
    )
    .await;
    let seen_after = drive_start.elapsed();
    let loads = fleet.loads().await;
    let load_active: Vec<u64> = loads.iter().map(|r| r.active).collect();
    assert_eq!(
        load_active,
        PER_AGENT.map(u64::from).to_vec(),
        "the agents' /load while every session is held"
    );

    let held = "held";
    let r = table
        .ask(
            &prom,
            held,
            "sum(livecount_active_sessions)",
            "= Σ /load active = driver's open sessions",
        )
        .await;
    assert_eq!(r[0].value, truth);
    let r = table
        .ask(
            &prom,
            held,
            "sum by (backend) (livecount_active_sessions)",
            "= each agent's /load active",
        )
        .await;
    let per: Vec<f64> = r.iter().map(|p| p.value).collect();
    assert_eq!(per, PER_AGENT.map(f64::from).to_vec(), "{r:?}");
    table
        .ask(
            &prom,
            held,
            "sum by (state) (livecount_sessions)",
            "(shown)",
        )
        .await;
    let r = table
        .ask(
            &prom,
            held,
            "sum(livecount_sessions_started_total)",
            "= sessions opened",
        )
        .await;
    assert_eq!(r[0].value, truth);
    // increase() over a window that holds the counter's whole history: the raw delta is
    // exactly what each agent opened (its first sample is the 0 scraped before the drive).
    // Prometheus then extrapolates the delta to the window's edges: not at all towards the
    // start (never below the first sample's 0), and at most 1.1 average sample gaps past
    // the last sample. With k samples in the window the sampled span is k − 1 gaps, so
    // increase ∈ [n, n × (1 + 1.1 / (k − 1))] per series. k is read first: a scrape landing
    // between the two queries only adds a sample and loosens nothing.
    let counts = table
        .ask(
            &prom,
            held,
            "count_over_time(livecount_sessions_started_total[1m])",
            "k samples per series (for the bound below)",
        )
        .await;
    assert_eq!(counts.len(), fleet.backends.len(), "{counts:?}");
    let bound: f64 = counts
        .iter()
        .zip(PER_AGENT)
        .map(|(k, n)| {
            assert!(k.value >= 3.0, "too few samples for a rate: {counts:?}");
            f64::from(n) * (1.0 + 1.1 / (k.value - 1.0))
        })
        .sum();
    let inc = table
        .ask(
            &prom,
            held,
            "sum(increase(livecount_sessions_started_total[1m]))",
            &format!("∈ [{truth}, {bound:.1}]: opened, plus extrapolation"),
        )
        .await[0]
        .value;
    assert!(
        (truth..=bound).contains(&inc),
        "increase {inc} vs {truth} opened (bound {bound:.2})"
    );
    let rate = table
        .ask(
            &prom,
            held,
            "sum(rate(livecount_sessions_started_total[1m]))",
            &format!(
                "> 0, ∈ [{truth}, {bound:.1}] ÷ 60 s = [{:.3}, {:.3}]/s",
                truth / 60.0,
                bound / 60.0
            ),
        )
        .await[0]
        .value;
    assert!(rate > 0.0, "rate {rate}");
    assert!(
        (truth / 60.0..=bound / 60.0).contains(&rate),
        "rate {rate}/s vs {truth} opened in a 1 min window (bound {bound:.2})"
    );
    let max_points = table
        .ask(&prom, held, "livecount_max_sessions", "= --max-sessions 30")
        .await;
    assert_eq!(max_points.len(), fleet.backends.len(), "{max_points:?}");
    assert!(max_points.iter().all(|p| p.value == MAX_SESSIONS));
    for (q, series, check) in [
        (
            "livecount_effective_capacity",
            "capacity",
            "one per instance, ≤ 30",
        ),
        (
            "livecount_headroom",
            "headroom",
            "one per instance, ≤ 30 − its active (b1 ≤ 10, b2 ≤ 22)",
        ),
    ] {
        let r = table.ask(&prom, held, q, check).await;
        assert_eq!(
            r.len(),
            fleet.backends.len(),
            "{series} per instance: {r:?}"
        );
        for (p, active) in r.iter().zip(PER_AGENT) {
            let bound = if series == "headroom" {
                MAX_SESSIONS - f64::from(active)
            } else {
                MAX_SESSIONS
            };
            assert!(
                p.value <= bound,
                "{series} of {} is {} > {bound}",
                p.label,
                p.value
            );
        }
    }
    let over = table
        .ask(
            &prom,
            held,
            "livecount_effective_capacity > on(instance) livecount_max_sessions",
            "no series",
        )
        .await;
    assert!(over.is_empty(), "capacity above max_sessions: {over:?}");
    // docs/autoscaling.md's share-of-capacity signal: the true count over capacities that
    // are each at least their own count and at most 30.
    let truth = f64::from(PER_AGENT.iter().sum::<u32>());
    let most = MAX_SESSIONS * fleet.backends.len() as f64;
    let used = table
        .ask(
            &prom,
            held,
            "sum(livecount_active_sessions) / clamp_min(sum(livecount_effective_capacity), 1)",
            &format!("∈ [{truth} ÷ {most}, 1]"),
        )
        .await;
    assert_eq!(used.len(), 1, "{used:?}");
    assert!(
        (truth / most..=1.0).contains(&used[0].value),
        "share of capacity used: {used:?}"
    );

    // The sessions end (closed with bye, or killed without a close frame).
    let mut summaries: Vec<DriveSummary> = Vec::new();
    for d in drives {
        summaries.push(d.await.unwrap());
    }
    let drive_secs = drive_start.elapsed();
    for (s, n) in summaries.iter().zip(PER_AGENT) {
        assert_eq!((s.opened, s.refused), (u64::from(n), 0), "{s:?}");
        assert_eq!(s.closed + s.killed, u64::from(n), "{s:?}");
    }
    let (_, zero_after) = until(
        &prom,
        "sum(livecount_active_sessions)",
        Duration::from_secs(10),
        |v| v == Some(0.0),
    )
    .await;
    let finals = fleet.settled(&[0, 1]).await;
    until(
        &prom,
        "sum(livecount_sessions_ended_total)",
        Duration::from_secs(10),
        |v| v == Some(truth),
    )
    .await;
    let after = "ended";
    table
        .ask(&prom, after, "sum(livecount_active_sessions)", "= 0")
        .await;
    let r = table
        .ask(
            &prom,
            after,
            "sum by (reason) (livecount_sessions_ended_total) > 0",
            "completed = clients' byes, disconnected = clients killed",
        )
        .await;
    let reason = |name: &str| r.iter().find(|p| p.label == name).map_or(0.0, |p| p.value);
    let killed: u64 = summaries.iter().map(|s| s.killed).sum();
    let closed: u64 = summaries.iter().map(|s| s.closed).sum();
    assert_eq!(reason("disconnected"), killed as f64, "{r:?}");
    assert_eq!(reason("completed"), closed as f64, "{r:?}");
    assert_eq!(r.iter().map(|p| p.value).sum::<f64>(), truth, "{r:?}");
    let r = table
        .ask(&prom, after, "sum(livecount_sessions_refused_total)", "= 0")
        .await;
    assert_eq!(r[0].value, 0.0);
    let r = table
        .ask(
            &prom,
            after,
            "max_over_time(sum(livecount_active_sessions)[5m:1s])",
            "= 28: the peak, never above the truth",
        )
        .await;
    assert_eq!(r[0].value, truth);
    for q in [
        "max_over_time(livecount_effective_capacity[5m])",
        "max_over_time(livecount_headroom[5m])",
    ] {
        let r = table
            .ask(&prom, after, q, "≤ 30 per instance over the whole run")
            .await;
        assert_eq!(r.len(), fleet.backends.len(), "{r:?}");
        for p in &r {
            assert!(p.value <= MAX_SESSIONS, "{q}: {} is {}", p.label, p.value);
        }
    }
    let durations = durations(&prom, &fleet, &summaries, &mut table).await;
    let samples = timeline.stop();
    let elapsed = t0.elapsed();

    let md = table.markdown();
    eprintln!("\n{md}");
    eprintln!(
        "drivers: {summaries:?}\nPrometheus ready {:.1} s after start; it saw all {total} \
         sessions {:.1} s after the drive began and 0 {:.1} s after the drive ended; \
         total {:.1} s",
        prom_ready.as_secs_f64(),
        seen_after.as_secs_f64(),
        zero_after.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    let mut body = String::new();
    let _ = write!(
        body,
        "Two agents (`--max-sessions {MAX_SESSIONS}`, reports every 0.5 s; b2 hot with 90 % \
         background CPU) scraped by a real Prometheus ({version}) every second. The driver \
         held {a} WebSocket sessions on b1 and {b} on b2 for {hold} s (10 % of utterances \
         interrupted, 25 % of clients killed without a close frame), then the test queried \
         `/api/v1/query`. Then {short} more sessions on b2 held {short_hold} s, every client \
         killed, for the duration histogram: {durations}\n\n\
         ## Queries and results\n\n{md}\n\
         Drivers: {summaries:?}.\n\n\
         ## Timings\n\n\
         * Prometheus ready {ready:.1} s after the test began.\n\
         * It saw all {total} sessions {seen:.1} s after the drive began (the ramp is 1 s, \
           the agents report every 0.5 s, Prometheus scrapes every 1 s).\n\
         * It saw 0 open sessions {zero:.1} s after the last client finished (drive took \
           {drive:.1} s); every agent settled at active 0, started = ended \
           ({settled}).\n\
         * The whole test: {elapsed:.1} s.\n\n\
         ## Scrape config\n\n```yaml\n{config}```\n",
        version = std::process::Command::new(&bin)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned())
            .unwrap_or_default(),
        a = PER_AGENT[0],
        b = PER_AGENT[1],
        hold = HOLD.as_secs(),
        short = SHORT_SESSIONS,
        short_hold = SHORT_HOLD.as_secs(),
        ready = prom_ready.as_secs_f64(),
        seen = seen_after.as_secs_f64(),
        zero = zero_after.as_secs_f64(),
        drive = drive_secs.as_secs_f64(),
        settled = finals
            .iter()
            .map(|r| format!("{}: {} started", r.name, r.started))
            .collect::<Vec<_>>()
            .join(", "),
        elapsed = elapsed.as_secs_f64(),
    );
    let dir = write_report(
        "prometheus",
        "Prometheus scraping livecount agents",
        &body,
        &fleet,
        &samples,
    );
    eprintln!("report: {}", dir.display());
    drop(procs);
}

/// The duration histogram: a short round of killed sessions on b2, then its counts by
/// reason, its mean and its medians (all, `disconnected`, `completed`) against the lengths
/// driven. Returns a line for the report.
async fn durations(prom: &str, fleet: &Fleet, long: &[DriveSummary], table: &mut Table) -> String {
    let short = drive(DriveConfig {
        target: fleet.backends[1].http_addr(),
        sessions: SHORT_SESSIONS,
        ramp: Duration::from_millis(500),
        hold: SHORT_HOLD,
        // A mean pause of a minute: most clients say nothing before their 3 s are up.
        speak_every: Duration::from_secs(60),
        chunks: 1,
        interrupt_share: 0.0,
        kill_share: 1.0,
        observe: Vec::new(),
        seed: 43,
    })
    .await;
    let n_short = u64::from(SHORT_SESSIONS);
    assert_eq!(
        (short.opened, short.killed),
        (n_short, n_short),
        "{short:?}"
    );
    let killed: u64 = long.iter().map(|s| s.killed).sum();
    let closed: u64 = long.iter().map(|s| s.closed).sum();
    let all = (killed + closed + n_short) as f64;
    let name = "livecount_session_duration_seconds";
    let limit = Duration::from_secs(10);
    until(prom, &format!("sum({name}_count)"), limit, |v| {
        v == Some(all)
    })
    .await;

    let phase = "durations";
    let counts = table
        .ask(
            prom,
            phase,
            &format!("sum by (reason) ({name}_count) > 0"),
            "= ended_total by reason",
        )
        .await;
    let ended = query(prom, "sum by (reason) (livecount_sessions_ended_total) > 0").await;
    let pairs = |points: &[Point]| -> Vec<(String, f64)> {
        points.iter().map(|p| (p.label.clone(), p.value)).collect()
    };
    assert_eq!(pairs(&counts), pairs(&ended));
    let (long_n, short_n) = ((killed + closed) as f64, n_short as f64);
    let secs = |d: Duration| d.as_secs_f64();
    let low = (long_n * secs(HOLD) + short_n * secs(SHORT_HOLD)) / all - 0.1;
    let high = (long_n * secs(HOLD + OVERRUN) + short_n * secs(SHORT_HOLD + OVERRUN)) / all;
    let mean = table
        .ask(
            prom,
            phase,
            &format!("sum({name}_sum) / sum({name}_count)"),
            &format!("∈ [{low:.2}, {high:.2}] s: the driven lengths' mean"),
        )
        .await[0]
        .value;
    assert!((low..=high).contains(&mean), "mean {mean} s");

    // (sessions, nominal length) per group; each group's lengths sit in one bucket.
    let long_s = (HOLD, HOLD + OVERRUN);
    let short_s = (SHORT_HOLD, SHORT_HOLD + OVERRUN);
    let mut medians = Vec::new();
    for (filter, groups) in [
        ("", vec![(killed + closed, long_s), (n_short, short_s)]),
        (
            "{reason=\"disconnected\"}",
            vec![(killed, long_s), (n_short, short_s)],
        ),
        ("{reason=\"completed\"}", vec![(closed, long_s)]),
    ] {
        let (lower, upper) = median_bucket(&groups);
        let q = format!("histogram_quantile(0.5, sum by (le) ({name}_bucket{filter}))");
        let r = table
            .ask(
                prom,
                phase,
                &q,
                &format!("∈ ({lower}, {upper}]: the bucket of the driven median"),
            )
            .await;
        let v = r.first().map(|p| p.value).unwrap_or(f64::NAN);
        assert!(
            v > lower && v <= upper,
            "{q} = {v}, not in ({lower}, {upper}]"
        );
        medians.push(format!("{v:.2} s ∈ ({lower}, {upper}]"));
    }
    format!(
        "mean {mean:.2} s; medians (all, disconnected, completed) {}.",
        medians.join(", ")
    )
}

/// The bucket (lower, upper bound in seconds) Prometheus' `histogram_quantile(0.5, …)`
/// interpolates in, for groups of (sessions, length range): the first bucket whose
/// cumulative count reaches half the sessions. Each range must sit in one bucket.
fn median_bucket(groups: &[(u64, (Duration, Duration))]) -> (f64, f64) {
    use livecount_session::DurationHistogram;

    let mut counts = [0u64; DurationHistogram::BUCKETS];
    for &(n, (shortest, longest)) in groups {
        let bucket = DurationHistogram::bucket_of(shortest);
        assert_eq!(
            bucket,
            DurationHistogram::bucket_of(longest),
            "{shortest:?}..{longest:?} spans a bucket bound"
        );
        counts[bucket] += n;
    }
    let rank = counts.iter().sum::<u64>() as f64 / 2.0;
    let mut cumulative = 0;
    let b = counts
        .iter()
        .position(|&n| {
            cumulative += n;
            cumulative as f64 >= rank
        })
        .expect("some sessions");
    let bound = |i: usize| {
        DurationHistogram::BOUNDS
            .get(i)
            .map_or(f64::INFINITY, Duration::as_secs_f64)
    };
    (if b == 0 { 0.0 } else { bound(b - 1) }, bound(b))
}
