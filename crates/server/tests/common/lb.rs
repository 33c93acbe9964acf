//! The end-to-end balancer tests' shared parts: a fleet of `livecount-agent` processes on
//! loopback (one of them hot), a timeline of what each advertised, the share assertions
//! every balancer must meet, and the report each test writes.
//!
//! Reports go to `target/lb/<balancer>/` on every run, and also to the committed
//! `results/lb/<balancer>/` when `LIVECOUNT_UPDATE_RESULTS=1` (so a test run never dirties
//! the checkout unless asked to) and the checkout is clean: committed results come from a
//! clean commit, which the report names. From a dirty tree the test still runs and judges,
//! and says on stderr why it left the committed copy alone.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use livecount_report::LoadReport;
use livecount_server::load_driver::fetch_load;
use livecount_support::provenance;

use super::Procs;

/// The first of `candidates` (names on PATH or paths) that runs `version_arg`
/// successfully; panics naming the tool and `scripts/lb_tools.sh` (which installs it).
pub(crate) fn tool(candidates: &[&str], version_arg: &str) -> PathBuf {
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| {
            Command::new(p)
                .arg(version_arg)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .unwrap_or_else(|| {
            panic!("none of {candidates:?} runs: install it with scripts/lb_tools.sh (scripts/test.sh does)")
        })
}

pub(crate) use livecount_server::ports::free_port;

/// One agent process's addresses.
#[derive(Debug, Clone)]
pub(crate) struct Backend {
    /// `b1`, `b2`, …
    pub(crate) name: String,
    /// HTTP: WebSocket sessions, `/load`, `/metrics`.
    pub(crate) http: u16,
    /// gRPC: Converse sessions and ORCA.
    pub(crate) grpc: u16,
    /// HAProxy agent-check.
    pub(crate) agent_check: u16,
    /// Its stderr (the last line after a SIGTERM is the final count).
    pub(crate) log: PathBuf,
}

impl Backend {
    /// `127.0.0.1:<http>`.
    pub(crate) fn http_addr(&self) -> String {
        format!("127.0.0.1:{}", self.http)
    }
}

/// `n` agents, every listener on a free loopback port, `--cores 1 --work-ms 1`, reports
/// every 0.5 s; backend `hot` also burns 90 % of its core in the background.
pub(crate) struct Fleet {
    pub(crate) backends: Vec<Backend>,
    pub(crate) procs: Procs,
    /// A scratch directory for configs and logs, removed on drop.
    pub(crate) dir: PathBuf,
    /// The backend burning its core (`usize::MAX`: none).
    pub(crate) hot: usize,
    /// The options every agent got after the fleet's own.
    extra: Vec<String>,
}

impl Fleet {
    /// Starts the agents (`tag` names the scratch directory) with `extra` options each.
    pub(crate) fn start(tag: &str, n: usize, hot: usize, extra: &[&str]) -> Fleet {
        let dir = std::env::temp_dir().join(format!("livecount-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let backends: Vec<Backend> = (1..=n)
            .map(|i| Backend {
                name: format!("b{i}"),
                http: free_port(),
                grpc: free_port(),
                agent_check: free_port(),
                log: dir.join(format!("b{i}.log")),
            })
            .collect();
        let mut fleet = Fleet {
            backends,
            procs: Procs(Vec::new()),
            dir,
            hot,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        for i in 0..n {
            let child = fleet.spawn(i);
            fleet.procs.0.push(child);
        }
        fleet
    }

    /// Starts backend `i`'s agent on its ports, its stderr to its `log`.
    fn spawn(&self, i: usize) -> Child {
        let b = &self.backends[i];
        let mut cmd = agent_command(&b.name, b.http, &b.log);
        cmd.args(["--grpc", &format!("127.0.0.1:{}", b.grpc)])
            .args(["--agent-check", &format!("127.0.0.1:{}", b.agent_check)])
            .args(&self.extra);
        if i == self.hot {
            cmd.args(["--background-load", "0.9"]);
        }
        cmd.spawn().expect("livecount-agent starts")
    }

    /// Starts one more agent beside the backends (not one of them: no gRPC or agent-check
    /// listener, not in [`loads`](Fleet::loads) or the timeline), as the fleet's are but
    /// with `extra` options instead of the fleet's, its stderr to `<name>.log`; it is
    /// killed with the fleet. Returns its HTTP address once its `/load` answers.
    pub(crate) async fn start_extra(&mut self, name: &str, extra: &[&str]) -> String {
        let http = free_port();
        let log = self.dir.join(format!("{name}.log"));
        let child = agent_command(name, http, &log)
            .args(extra)
            .spawn()
            .expect("livecount-agent starts");
        self.procs.0.push(child);
        let addr = format!("127.0.0.1:{http}");
        load_of(&addr).await;
        addr
    }

    /// Starts backend `i` again after it exited (a rolling restart's second half): the
    /// same options on the same ports, its stderr to a new log (`b1.2.log`, …), and waits
    /// (up to 10 s) until its `/load` answers. Panics if the old process still runs.
    pub(crate) async fn restart(&mut self, i: usize) {
        let exited = self.procs.0[i].try_wait().unwrap();
        assert!(exited.is_some(), "{} still runs", self.backends[i].name);
        let name = &self.backends[i].name;
        let log = (2..)
            .map(|g| self.dir.join(format!("{name}.{g}.log")))
            .find(|p| !p.exists())
            .unwrap();
        self.backends[i].log = log;
        self.procs.0[i] = self.spawn(i);
        let addr = self.backends[i].http_addr();
        for _ in 0..100 {
            if fetch_load(&addr).await.is_some() {
                return;
            }
            if let Some(status) = self.procs.0[i].try_wait().unwrap() {
                let log = std::fs::read_to_string(&self.backends[i].log).unwrap_or_default();
                panic!(
                    "{} exited at its restart: {status}\n{log}",
                    self.backends[i].name
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "{} did not answer /load within 10 s of its restart",
            self.backends[i].name
        );
    }

    /// Every backend's latest report (waiting up to 10 s for each to answer).
    pub(crate) async fn loads(&self) -> Vec<LoadReport> {
        let mut out = Vec::new();
        for b in &self.backends {
            out.push(load_of(&b.http_addr()).await);
        }
        out
    }

    /// Waits until every backend answers and the hot one reports its CPU (weight ≤ 5 %).
    pub(crate) async fn ready(&self) {
        let start = Instant::now();
        loop {
            let loads = self.loads().await;
            if loads[self.hot].weight_percent <= 5 {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the hot backend never reported its CPU: {:?}",
                loads[self.hot]
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits (up to 10 s) until every backend still running is at active 0 with started =
    /// ended, and returns their reports; panics with the last report otherwise.
    pub(crate) async fn settled(&self, running: &[usize]) -> Vec<LoadReport> {
        let mut out = Vec::new();
        for &i in running {
            out.push(settled_at(&self.backends[i].http_addr()).await);
        }
        out
    }

    /// Sends SIGTERM to backend `i` while it holds `held` sessions and checks it drained:
    /// it exits 0 and the last line of its log says `active 0` with those `held` ended
    /// `shutdown`. Returns that line.
    pub(crate) async fn sigterm_drained(&mut self, i: usize, held: u64) -> String {
        let (status, last) = self.sigterm(i).await;
        let name = &self.backends[i].name;
        eprintln!("{name} after SIGTERM with {held} sessions open: {status}; {last}");
        assert!(status.success(), "{name} exits 0: {status}");
        assert!(last.contains("active 0"), "{name}'s last log line: {last}");
        assert!(
            last.contains(&format!("\"shutdown\": {held}")),
            "{name}'s open sessions end Shutdown: {last}"
        );
        last
    }

    /// Sends SIGTERM to backend `i` and waits (up to 10 s) for it to exit; returns its
    /// exit status and the last line of its log.
    pub(crate) async fn sigterm(&mut self, i: usize) -> (ExitStatus, String) {
        self.send_sigterm(i);
        self.wait_exit(i).await
    }

    /// Waits (up to 10 s) for backend `i`, already sent SIGTERM, to exit; returns its exit
    /// status and the last line of its log. (A second SIGTERM would cut its drain short.)
    pub(crate) async fn wait_exit(&mut self, i: usize) -> (ExitStatus, String) {
        for _ in 0..100 {
            if let Some(status) = self.procs.0[i].try_wait().unwrap() {
                let log = std::fs::read_to_string(&self.backends[i].log).unwrap();
                let last = log.lines().last().unwrap_or_default().to_owned();
                return (status, last);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "{} did not exit within 10 s of SIGTERM",
            self.backends[i].name
        );
    }
}

impl Fleet {
    /// Sends SIGTERM to backend `i` (by its PID) and returns at once.
    pub(crate) fn send_sigterm(&self, i: usize) {
        let pid = self.procs.0[i].id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success(), "kill -TERM {pid}");
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // The processes go first (Procs' own drop runs after this), then their files.
        for c in &mut self.procs.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `livecount-agent serve` as a fleet's agent: `name`, HTTP on loopback port `http`,
/// `--cores 1 --work-ms 1`, reports every 0.5 s, stderr to `log`.
fn agent_command(name: &str, http: u16, log: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_livecount-agent"));
    cmd.args(["serve", "--name", name])
        .args(["--http", &format!("127.0.0.1:{http}")])
        .args(["--cores", "1", "--work-ms", "1", "--report-secs", "0.5"])
        .stderr(std::fs::File::create(log).unwrap());
    cmd
}

/// Waits (up to 10 s) until the agent at `addr` is at active 0 with started = ended, and
/// returns its report; panics with the last report otherwise.
pub(crate) async fn settled_at(addr: &str) -> LoadReport {
    let mut last = load_of(addr).await;
    for _ in 0..100 {
        if last.active == 0 && last.started == last.ended {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        last = load_of(addr).await;
    }
    panic!("{addr} never settled at active 0, started = ended: {last:?}");
}

/// Waits (up to 2 s) until the agent at `addr`, sent SIGTERM, says draining; returns
/// that report.
pub(crate) async fn draining_report(addr: &str) -> LoadReport {
    for _ in 0..100 {
        let report = load_of(addr).await;
        if report.draining {
            return report;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{addr} did not say draining within 2 s of SIGTERM");
}

/// The report at `addr`'s `/load`, retried for up to 10 s.
pub(crate) async fn load_of(addr: &str) -> LoadReport {
    for _ in 0..200 {
        if let Some(v) = fetch_load(addr).await {
            return serde_json::from_value(v).expect("/load is a LoadReport");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("agent at {addr} never answered /load");
}

/// What every backend advertised at one moment.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    /// Seconds since the timeline started.
    pub(crate) t: f64,
    pub(crate) active: Vec<u64>,
    pub(crate) started: Vec<u64>,
    /// The weight a stock WRR computes from the ORCA report (qps ÷ utilisation).
    pub(crate) orca_weight: Vec<f64>,
    /// The agent-check weight HAProxy reads, percent.
    pub(crate) agent_check: Vec<u32>,
}

/// Samples every backend's `/load` every 250 ms on its own task until stopped.
pub(crate) struct Timeline {
    samples: Arc<Mutex<Vec<Sample>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Timeline {
    /// Starts sampling `fleet`'s backends (a backend that stops answering keeps its last
    /// values, zeroed active).
    pub(crate) fn record(fleet: &Fleet) -> Timeline {
        let addrs: Vec<String> = fleet.backends.iter().map(Backend::http_addr).collect();
        let samples = Arc::new(Mutex::new(Vec::new()));
        let out = Arc::clone(&samples);
        let task = tokio::spawn(async move {
            let start = Instant::now();
            let mut ticks = tokio::time::interval(Duration::from_millis(250));
            let mut last: Vec<Option<LoadReport>> = vec![None; addrs.len()];
            loop {
                ticks.tick().await;
                for (i, addr) in addrs.iter().enumerate() {
                    let fetched =
                        tokio::time::timeout(Duration::from_millis(200), fetch_load(addr));
                    match fetched.await.ok().flatten() {
                        Some(v) => last[i] = serde_json::from_value(v).ok(),
                        None => {
                            if let Some(r) = last[i].as_mut() {
                                (r.active, r.headroom, r.weight_percent) = (0, 0.0, 0);
                            }
                        }
                    }
                }
                // A backend not heard from yet reads as the empty report: all zero.
                fn pick<T: Default>(
                    last: &[Option<LoadReport>],
                    f: impl Fn(&LoadReport) -> T,
                ) -> Vec<T> {
                    last.iter()
                        .map(|r| r.as_ref().map_or_else(T::default, &f))
                        .collect()
                }
                let sample = Sample {
                    t: start.elapsed().as_secs_f64(),
                    active: pick(&last, |r| r.active),
                    started: pick(&last, |r| r.started),
                    orca_weight: pick(&last, livecount_report::orca::wrr_weight),
                    agent_check: pick(&last, |r| r.weight_percent),
                };
                out.lock().unwrap().push(sample);
            }
        });
        Timeline { samples, task }
    }

    /// Stops sampling and returns the samples.
    pub(crate) fn stop(self) -> Vec<Sample> {
        self.task.abort();
        std::mem::take(&mut *self.samples.lock().unwrap())
    }
}

/// New sessions per backend between two reads of `started`.
pub(crate) fn new_sessions(before: &[LoadReport], after: &[LoadReport]) -> Vec<u64> {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| a.started - b.started)
        .collect()
}

/// Sessions ended for `reason` between two reads, summed over the backends read.
pub(crate) fn ended_by(before: &[LoadReport], after: &[LoadReport], reason: &str) -> u64 {
    let count = |r: &LoadReport| r.ended_by_reason.get(reason).copied().unwrap_or(0);
    before
        .iter()
        .zip(after)
        .map(|(b, a)| count(a) - count(b))
        .sum()
}

/// The assertions every balancer must meet on new sessions placed after the first report:
/// the hot backend takes at most 10 %, and the cold ones' counts differ by less than 1.5×.
pub(crate) fn assert_shares(balancer: &str, new: &[u64], hot: usize) {
    assert_hot_share(balancer, new, hot);
    let cold: Vec<u64> = cold_backends(new, hot).map(|i| new[i]).collect();
    let (lo, hi) = (cold.iter().min().unwrap(), cold.iter().max().unwrap());
    assert!(
        *lo > 0 && (*hi as f64) < 1.5 * *lo as f64,
        "{balancer}: the cold backends' shares differ by 1.5× or more: {new:?}"
    );
}

/// The two-sided 99.9 % quantile of the standard normal: the cold-split bounds allow this
/// many measured standard deviations.
pub(crate) const Z_999: f64 = 3.29;

/// The hot-share half of [`assert_shares`], and the cold split judged against the weights
/// the balancer held within `z_sd`, a spread measured over repeated runs of the test: for
/// a balancer whose picks the sessions share with other calls, where the 1.5× bound of
/// [`assert_shares`] is inside the run-to-run spread.
pub(crate) fn assert_shares_within(
    balancer: &str,
    new: &[u64],
    hot: usize,
    weights: &[f64],
    z_sd: f64,
) {
    let (a, b) = two_cold(balancer, new, hot);
    let asked = weights[a] / (weights[a] + weights[b]);
    let why = format!("the weights {weights:.0?} ask");
    assert_cold_split(balancer, new, hot, asked, &why, z_sd);
}

/// The two cold backends' indices, in order (the bounds here are for two).
pub(crate) fn two_cold(balancer: &str, new: &[u64], hot: usize) -> (usize, usize) {
    let cold: Vec<usize> = cold_backends(new, hot).collect();
    let &[a, b] = cold.as_slice() else {
        panic!("{balancer}: the bound is for two cold backends, got {cold:?}");
    };
    (a, b)
}

/// The hot-share half of [`assert_shares`], and the first cold backend's share of the cold
/// sessions within `allowed` of `asked`, the share the balancer's weights asked of it
/// (`why` says where `asked` came from, for the message).
pub(crate) fn assert_cold_split(
    balancer: &str,
    new: &[u64],
    hot: usize,
    asked: f64,
    why: &str,
    allowed: f64,
) {
    assert_hot_share(balancer, new, hot);
    let (a, b) = two_cold(balancer, new, hot);
    let n = (new[a] + new[b]) as f64;
    let got = new[a] as f64 / n;
    assert!(
        n > 0.0 && (got - asked).abs() <= allowed,
        "{balancer}: the cold split {new:?} gives the first cold backend {got:.2} where \
         {why} {asked:.2} (allowed: ±{allowed:.2})"
    );
}

/// The indices of the backends other than the hot one.
fn cold_backends(new: &[u64], hot: usize) -> impl Iterator<Item = usize> {
    (0..new.len()).filter(move |&i| i != hot)
}

/// The first half of [`assert_shares`]: some new sessions, the hot backend at most 10 %.
pub(crate) fn assert_hot_share(balancer: &str, new: &[u64], hot: usize) {
    let total: u64 = new.iter().sum();
    assert!(total > 0, "{balancer}: no new sessions at all");
    let hot_share = new[hot] as f64 / total as f64;
    assert!(
        hot_share <= 0.10,
        "{balancer}: the hot backend took {:.1} % of new sessions: {new:?}",
        100.0 * hot_share
    );
}

/// A markdown table of new sessions per backend, with its share and the weights it
/// advertised (mean over `samples`).
pub(crate) fn share_table(fleet: &Fleet, new: &[u64], samples: &[Sample]) -> String {
    let total: u64 = new.iter().sum::<u64>().max(1);
    let mean = |f: &dyn Fn(&Sample) -> f64| -> f64 {
        if samples.is_empty() {
            return 0.0;
        }
        samples.iter().map(f).sum::<f64>() / samples.len() as f64
    };
    let mut t = String::from(
        "| backend | new sessions | share | mean ORCA weight (qps ÷ utilisation, thousandths of a session of headroom) | mean agent-check weight |\n\
         | --- | ---: | ---: | ---: | ---: |\n",
    );
    for (i, b) in fleet.backends.iter().enumerate() {
        let hot = if i == fleet.hot { " (hot)" } else { "" };
        t.push_str(&format!(
            "| {}{hot} | {} | {:.1} % | {:.2} | {:.0} % |\n",
            b.name,
            new[i],
            100.0 * new[i] as f64 / total as f64,
            mean(&|s| s.orca_weight[i]),
            mean(&|s| f64::from(s.agent_check[i])),
        ));
    }
    t
}

/// Where a report for `balancer` goes: `target/lb/<balancer>` always, then
/// `results/lb/<balancer>` with `LIVECOUNT_UPDATE_RESULTS=1` if the tree is clean
/// (`livecount_support::provenance::commit_for`). A dirty tree does not fail the test (what
/// it judges does not depend on the report's destination): it keeps the committed copy and
/// says why on stderr.
pub(crate) fn report_dirs(balancer: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().unwrap_or(root);
    let mut dirs = vec![root.join("target/lb").join(balancer)];
    if std::env::var_os("LIVECOUNT_UPDATE_RESULTS").is_some_and(|v| v == "1") {
        let committed = root.join("results/lb").join(balancer);
        match provenance::commit_for(&committed) {
            Ok(_) => dirs.push(committed),
            Err(dirty) => eprintln!(
                "LIVECOUNT_UPDATE_RESULTS=1 ignored, the report is only in {}: {dirty}",
                dirs[0].display()
            ),
        }
    }
    dirs
}

/// A report's `REPORT.md`: `body` under `title` and the line naming the test that wrote it
/// and the commit it was built from, then the plot `sessions.svg` captioned `caption`.
pub(crate) fn report_text(title: &str, body: &str, caption: &str) -> String {
    // The test binary is `<test file stem>-<hash>`.
    let exe = std::env::current_exe().unwrap();
    let stem = exe.file_stem().unwrap().to_string_lossy();
    let test = stem.rsplit_once('-').map_or(&*stem, |(name, _)| name);
    format!(
        "# {title}\n\n\
         Generated by `crates/server/tests/{test}.rs` (run by `scripts/test.sh`; \
         `LIVECOUNT_UPDATE_RESULTS=1` rewrites this copy from a clean tree). Commit: {}. \
         Machine: {} cores; a loopback run, so ballpark.\n\n{body}\n\n\
         ![{caption}](sessions.svg)\n",
        provenance::commit(),
        provenance::cores(),
    )
}

/// Writes `REPORT.md` (`body` under a title) and `sessions.svg` (active sessions per
/// backend over time, and each backend's ORCA weight) for `balancer`; returns the
/// directory written under `target/`.
pub(crate) fn write_report(
    balancer: &str,
    title: &str,
    body: &str,
    fleet: &Fleet,
    samples: &[Sample],
) -> PathBuf {
    let mut dirs = report_dirs(balancer);
    let names: Vec<String> = fleet
        .backends
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if i == fleet.hot {
                format!("{} (hot)", b.name)
            } else {
                b.name.clone()
            }
        })
        .collect();
    let caption = "active sessions per backend, and the weight each advertised";
    let report = report_text(title, body, caption);
    for dir in &dirs {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("REPORT.md"), &report).unwrap();
        plot(&dir.join("sessions.svg"), title, &names, samples);
    }
    dirs.swap_remove(0)
}

/// Two panels: active sessions per backend over time, and the ORCA weight per backend
/// (log scale: the hot one sits at the floor).
fn plot(path: &std::path::Path, title: &str, names: &[String], samples: &[Sample]) {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (900, 640)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let (top, bottom) = root.split_vertically(340);
    let t_max = samples.last().map_or(1.0, |s| s.t).max(1.0);
    let active_max = samples
        .iter()
        .flat_map(|s| s.active.iter().copied())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let colours = [BLUE, GREEN, RED, MAGENTA, CYAN];
    let mut chart = ChartBuilder::on(&top)
        .caption(format!("{title}: active sessions"), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(45)
        .build_cartesian_2d(0.0..t_max, 0.0..active_max * 1.1)
        .unwrap();
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("active")
        .draw()
        .unwrap();
    for (i, name) in names.iter().enumerate() {
        let c = colours[i % colours.len()];
        chart
            .draw_series(LineSeries::new(
                samples.iter().map(|s| (s.t, s.active[i] as f64)),
                c,
            ))
            .unwrap()
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], c));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .draw()
        .unwrap();
    let w_max = samples
        .iter()
        .flat_map(|s| s.orca_weight.iter().copied())
        .fold(1.0_f64, f64::max);
    let mut chart = ChartBuilder::on(&bottom)
        .caption(
            "ORCA weight = qps ÷ utilisation (sessions, log)",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(45)
        .build_cartesian_2d(0.0..t_max, (0.005..w_max * 2.0).log_scale())
        .unwrap();
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("weight")
        .draw()
        .unwrap();
    for i in 0..names.len() {
        let c = colours[i % colours.len()];
        chart
            .draw_series(LineSeries::new(
                samples.iter().map(|s| (s.t, s.orca_weight[i].max(0.005))),
                c,
            ))
            .unwrap();
    }
    root.present().unwrap();
}

// === warm-up sessions ===

/// A session opened straight on one backend (not through the balancer) and held, speaking
/// as the waves' sessions do: one per cold backend before a wave. An idle agent advertises
/// only its capacity model's prior (about 2 sessions of headroom), and its first session
/// raises that to tens or hundreds; the cost per session it learns then settles over about
/// ten reports. Without a session on each cold backend, whichever cold backend's loaded
/// report the balancer applies first takes most of the wave for up to a report period;
/// with one that spoke once and went silent, each backend's learned cost is one burst's
/// noise (weights 2.4× apart were seen). Either way the cold split would measure the
/// warm-up rather than the balancing (see `docs/lb/envoy.md`).
pub(crate) struct WarmSession {
    tx: tokio::sync::mpsc::Sender<pb::ClientFrame>,
    /// Speaks every [`WARM_TURN`] until aborted.
    speaker: tokio::task::JoinHandle<()>,
    /// Reads every frame; ends with the call's end (`true` for a clean OK end).
    reader: tokio::task::JoinHandle<bool>,
}

use livecount_server::generated::livecount::agent::v1 as pb;

/// The longest one step of a warm-up session may take.
const WARM_STEP: Duration = Duration::from_secs(10);

/// How often a warm-up session speaks (as the waves' sessions do).
const WARM_TURN: Duration = Duration::from_millis(700);

impl WarmSession {
    /// Opens a session on the backend's gRPC port that speaks (3 chunks) every
    /// [`WARM_TURN`], so the backend learns what a session of the wave costs.
    pub(crate) async fn open(grpc: u16) -> WarmSession {
        use pb::client_frame::Frame as Client;
        use pb::server_frame::Frame as Server;
        let endpoint =
            tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{grpc}")).unwrap();
        let ch = tokio::time::timeout(WARM_STEP, endpoint.connect())
            .await
            .expect("connect within 10 s")
            .expect("connect");
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let requests = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let mut client = pb::agent_client::AgentClient::new(ch);
        let opened = tokio::time::timeout(WARM_STEP, client.converse(requests));
        let mut response = opened.await.expect("opened in 10 s").unwrap().into_inner();
        let speaker = {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut turn = tokio::time::interval(WARM_TURN);
                loop {
                    turn.tick().await;
                    let speak = Client::Speak(pb::Speak { chunks: 3 });
                    if tx
                        .send(pb::ClientFrame { frame: Some(speak) })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            })
        };
        let reader = tokio::spawn(async move {
            loop {
                match response.message().await {
                    Ok(Some(pb::ServerFrame {
                        frame: Some(Server::Chunk(_) | Server::Done(_) | Server::Interrupted(_)),
                    })) => {}
                    Ok(None) => return true,
                    other => panic!("warm-up session: {other:?}"),
                }
            }
        });
        WarmSession {
            tx,
            speaker,
            reader,
        }
    }

    /// `bye`, and the call's OK end.
    pub(crate) async fn close(self) {
        self.speaker.abort();
        let _ = self.speaker.await;
        let bye = pb::client_frame::Frame::Bye(pb::Bye {});
        self.tx
            .send(pb::ClientFrame { frame: Some(bye) })
            .await
            .unwrap();
        let end = tokio::time::timeout(WARM_STEP, self.reader).await;
        assert!(
            matches!(end, Ok(Ok(true))),
            "the warm-up session's end: {end:?}"
        );
    }
}

/// The warm-up is steady when the cold backends' advertised headrooms are within this
/// factor of each other, and each above [`WARM_LOADED`], for [`WARM_STEADY_FOR`].
///
/// At 1.3× and a single reading, a gRPC run began from headrooms 33.6 and 43.6 and split
/// its 60 sessions 24 / 36: what the weights asked for, and a failed 1.5× bound.
const WARM_SPREAD: f64 = 1.15;

/// How long the headrooms must stay within [`WARM_SPREAD`]: four reports at 0.5 s, so the
/// balancer's weights (averaged over its last reports) are the steady ones, not one
/// lucky reading while the cost average still learns.
const WARM_STEADY_FOR: Duration = Duration::from_secs(2);

/// Headroom (sessions) a cold backend advertises once it has learned what a warm session
/// costs: an idle agent's prior says about 2, and the first reports with a session, which
/// carry the connection's setup, say about as little until the cost average forgets them.
pub(crate) const WARM_LOADED: f64 = 10.0;

/// The longest the warm-up waits for [`WARM_SPREAD`] before the wave goes anyway.
const WARM_SETTLE: Duration = Duration::from_secs(15);

impl Fleet {
    /// One [`WarmSession`] on each cold backend, returned once every cold backend's
    /// published report counts it (a `/load` read before that would miss it, and a test's
    /// "new sessions" would count the warm-up as the run's) and their headrooms are above
    /// [`WARM_LOADED`] and within [`WARM_SPREAD`] of each other for [`WARM_STEADY_FOR`]
    /// (at most [`WARM_SETTLE`]; past it the wave goes on, and the test's share assertion
    /// judges).
    pub(crate) async fn warm_cold_backends(&self) -> Vec<WarmSession> {
        let mut warm = Vec::new();
        for (_, b) in self
            .backends
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != self.hot)
        {
            warm.push(WarmSession::open(b.grpc).await);
        }
        let start = Instant::now();
        let mut steady_since: Option<Instant> = None;
        loop {
            let loads = self.loads().await;
            let cold: Vec<&LoadReport> = loads
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != self.hot)
                .map(|(_, l)| l)
                .collect();
            let counted = cold.iter().all(|l| l.active >= 1);
            let (lo, hi) = cold.iter().fold((f64::MAX, 0.0f64), |(lo, hi), l| {
                (lo.min(l.headroom), hi.max(l.headroom))
            });
            let steady = counted && lo >= WARM_LOADED && hi <= WARM_SPREAD * lo;
            steady_since = if steady {
                steady_since.or(Some(Instant::now()))
            } else {
                None
            };
            if steady_since.is_some_and(|t| t.elapsed() >= WARM_STEADY_FOR) {
                eprintln!(
                    "warm-up steady after {:.1} s: cold headrooms {lo:.1}..{hi:.1}",
                    start.elapsed().as_secs_f64()
                );
                break;
            }
            assert!(
                counted || start.elapsed() < WARM_STEP,
                "the warm-up sessions never showed in the reports: {loads:?}"
            );
            if counted && start.elapsed() > WARM_SETTLE {
                let seen: Vec<_> = cold
                    .iter()
                    .map(|l| (l.active, l.raw_utilisation, l.utilisation, l.headroom))
                    .collect();
                eprintln!(
                    "warm-up not steady after {WARM_SETTLE:?}: cold headrooms {lo:.1}..{hi:.1} \
                     ((active, raw and smoothed utilisation, headroom): {seen:?}); the wave goes on"
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        warm
    }
}

/// Panics if a rendered balancer config still holds an `@NAME@` placeholder (uppercase
/// letters, digits, `_`): a template line the test forgot to fill.
pub(crate) fn assert_rendered(config: &str) {
    let mut rest = config;
    while let Some(at) = rest.find('@') {
        rest = &rest[at + 1..];
        let word = rest.split('@').next().unwrap_or_default();
        let placeholder = !word.is_empty()
            && rest.len() > word.len()
            && word
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        assert!(!placeholder, "placeholder @{word}@ left in\n{config}");
    }
}
