//! The agent's settings: `livecount-agent serve`'s flags ([`ServeArgs`], parsed by clap, the
//! one source of every default, range and help line) and what they mean ([`AgentConfig`]).

use std::net::SocketAddr;
use std::time::Duration;

use clap::{CommandFactory, Parser};
use livecount_capacity::CapacityConfig;
use livecount_report::inband::InbandFormat;
use tokio::net::{TcpListener, TcpSocket};

use crate::flag_values::{MAX_SECS, finite, seconds, share};
use crate::otlp_args::{OtlpArgs, OtlpConfig};

/// Everything `livecount-agent serve` can be told.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// HTTP: WebSocket sessions at `/session`, `/metrics`, `/load`.
    pub http: SocketAddr,
    /// A separate address for `/metrics` and `/load` (a scrape port); they are always on
    /// `http` too. `None` = only there.
    pub metrics: Option<SocketAddr>,
    /// HAProxy agent-check responder; `None` = off.
    pub agent_check: Option<SocketAddr>,
    /// gRPC: sessions (`livecount.agent.v1.Agent/Converse`) and ORCA out-of-band load
    /// reports (`xds.service.orca.v3.OpenRcaService`); `None` = off.
    pub grpc: Option<SocketAddr>,
    /// A name for logs and `/load` (e.g. `b1`).
    pub name: String,
    /// Sessions above this are refused (HTTP 503) before the upgrade.
    pub max_sessions: u64,
    /// Longest session; it then ends `TimedOut` (close code 1000, "max session length").
    pub max_session: Duration,
    /// A session with no client frame for this long ends `Disconnected`, a missed
    /// heartbeat (close code 1008; over gRPC no frame either way, `DEADLINE_EXCEEDED`);
    /// `Reaped` is left to the ghost reaper.
    pub idle_timeout: Duration,
    /// A frame that waits this long for a client that stopped reading ends the session
    /// `Disconnected` (`--write-timeout-secs`).
    pub write_timeout: Duration,
    /// An HTTP connection whose request head has not fully arrived this long after it
    /// started is answered 503 with `Retry-After` and closed; after the last response, on
    /// keep-alive, it is closed (`--header-read-timeout-secs`).
    pub header_read_timeout: Duration,
    /// At most this many HTTP connections not yet upgraded to a WebSocket; at the bound a
    /// new connection sheds the oldest of them, answered 503 with `Retry-After` if its
    /// head has not reached the service (`--max-pending-connections`; `None`: the
    /// library's default, derived from `RLIMIT_NOFILE`; never above what the descriptor
    /// limit leaves either way, see `livecount_tower::serve`).
    pub max_pending_connections: Option<usize>,
    /// Largest client message accepted, bytes; larger ones close the session with 1009.
    pub max_frame_bytes: usize,
    /// CPU burned per response chunk, so speaking sessions cost something.
    pub work: Duration,
    /// Pause between chunks (token pacing).
    pub chunk_gap: Duration,
    /// A background thread burning this share of one core (makes a backend "hot").
    pub background_load: f64,
    /// Cores the utilisation is measured against (default: the CPUs this process may use).
    pub cores: f64,
    /// Seconds between load reports (also the capacity model's window and interval).
    pub report_interval: Duration,
    /// The drain's deadline: after SIGTERM, open sessions may finish this long (new ones
    /// are refused); the ones still open then end `Shutdown`.
    pub drain: Duration,
    /// Hybrid capacity model parameters.
    pub capacity: CapacityConfig,
    /// OpenTelemetry metrics pushed over OTLP (`--otlp-endpoint`); `None` = off.
    pub otlp: Option<OtlpConfig>,
    /// The in-band ORCA form on HTTP responses and WebSocket upgrades (a header); `None`:
    /// none (`--inband-orca`).
    pub inband_http: Option<InbandFormat>,
    /// The in-band ORCA form in gRPC trailers; `None`: none (`--inband-orca`).
    pub inband_grpc: Option<InbandFormat>,
}

/// The shortest session length or idle timeout: 1 ms (zero would end every session at once).
const MIN_TIMEOUT_SECS: f64 = 0.001;
/// The shortest report interval: faster reports would only burn CPU.
const MIN_REPORT_SECS: f64 = 0.05;
/// The longest report interval (and capacity window): an hour.
const MAX_REPORT_SECS: f64 = 3600.0;
/// The most sessions one agent admits.
const MAX_SESSIONS: u64 = 1_000_000;
/// The smallest frame limit: the protocol's messages need a few dozen bytes.
const MIN_FRAME_BYTES: u64 = 64;
/// The largest frame limit: 64 MiB.
const MAX_FRAME_BYTES: u64 = 64 << 20;
/// The most CPU burned per chunk: 10 s.
const MAX_WORK_MS: u64 = 10_000;
/// The longest pause between chunks: a minute.
const MAX_CHUNK_GAP_MS: u64 = 60_000;
/// The most cores utilisation may be measured against.
const MAX_CORES: f64 = 4096.0;
/// The largest capacity safety scaler.
const MAX_SAFETY_SCALER: f64 = 1000.0;

/// `livecount-agent serve`'s flags: every default, range and help line in one place.
///
/// Each value is checked as it is parsed, so an error names its flag (clap's usage error,
/// exit code 2); [`ServeArgs::into_config`] turns the flags into an [`AgentConfig`].
///
/// ```
/// use clap::Parser;
/// use livecount_server::ServeArgs;
///
/// let args = ServeArgs::try_parse_from(["serve", "--drain-secs", "5"]).unwrap();
/// assert_eq!(args.into_config().unwrap().drain.as_secs(), 5);
/// let error = ServeArgs::try_parse_from(["serve", "--drain-secs", "1e19"]).unwrap_err();
/// assert!(error.to_string().contains("'--drain-secs <S>'"));
/// ```
#[derive(Debug, Clone, Parser)]
#[command(
    name = "serve",
    bin_name = "livecount-agent serve",
    about = "Serve WebSocket (and gRPC) sessions and report load; SIGTERM or ctrl-c drains",
    long_about = None,
    // As before clap: a repeated flag overrides the earlier one (scripts append overrides).
    args_override_self = true
)]
pub struct ServeArgs {
    /// WebSocket /session, /metrics, /load and /prequal
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    http: SocketAddr,
    /// /metrics, /load and /prequal also on a separate scrape address [default: off]
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// HAProxy agent-check responder [default: off]
    #[arg(long, value_name = "ADDR")]
    agent_check: Option<SocketAddr>,
    /// gRPC sessions (Agent/Converse) and ORCA load reports [default: off]
    #[arg(long, value_name = "ADDR")]
    grpc: Option<SocketAddr>,
    /// Backend name in logs and /load
    #[arg(long, value_name = "NAME", default_value = "agent")]
    name: String,
    /// Refuse sessions above N with HTTP 503 (gRPC RESOURCE_EXHAUSTED), 1..=1000000
    #[arg(long, value_name = "N", default_value = "1000", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u64).range(1..=MAX_SESSIONS))]
    max_sessions: u64,
    /// End sessions after S seconds, TimedOut; 0.001..=604800 (a week)
    #[arg(long = "max-session-secs", value_name = "S", default_value = "1200",
          allow_negative_numbers = true, value_parser = seconds(MIN_TIMEOUT_SECS, MAX_SECS))]
    max_session: Duration,
    /// End sessions silent for S seconds; 0.001..=604800 (a week)
    #[arg(long = "idle-timeout-secs", value_name = "S", default_value = "60",
          allow_negative_numbers = true, value_parser = seconds(MIN_TIMEOUT_SECS, MAX_SECS))]
    idle_timeout: Duration,
    /// End a session whose client takes no frame for S seconds (a stalled reader),
    /// Disconnected; 0.01..=3600
    #[arg(long = "write-timeout-secs", value_name = "S", default_value = "10",
          allow_negative_numbers = true, value_parser = seconds(0.01, 3600.0))]
    write_timeout: Duration,
    /// Answer 503 and close connections that have not sent a whole request head within S
    /// seconds (slowloris); 0.01..=3600
    #[arg(long = "header-read-timeout-secs", value_name = "S", default_value = "10",
          allow_negative_numbers = true, value_parser = seconds(0.01, 3600.0))]
    header_read_timeout: Duration,
    /// Connections not yet upgraded held at once; at the bound the oldest still waiting
    /// for its request head is answered 503 and closed, 1..=100000 [default: min(4096, half the
    /// descriptors RLIMIT_NOFILE leaves free)]
    #[arg(long, value_name = "N", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    max_pending_connections: Option<u64>,
    /// Close sessions sending a message above B bytes (WebSocket 1009), 64..=67108864
    #[arg(long, value_name = "B", default_value = "16384", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u64).range(MIN_FRAME_BYTES..=MAX_FRAME_BYTES))]
    max_frame_bytes: u64,
    /// CPU burned per response chunk, milliseconds, 0..=10000
    #[arg(long, value_name = "MS", default_value = "0", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u64).range(..=MAX_WORK_MS))]
    work_ms: u64,
    /// Pause between response chunks, milliseconds, 0..=60000
    #[arg(long, value_name = "MS", default_value = "20", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u64).range(..=MAX_CHUNK_GAP_MS))]
    chunk_gap_ms: u64,
    /// Burn this share of one core in a background thread, 0..=1
    #[arg(long, value_name = "F", default_value = "0", allow_negative_numbers = true,
          value_parser = share)]
    background_load: f64,
    /// Cores utilisation is measured against, (0, 4096] [default: the CPUs this process may use]
    #[arg(long, value_name = "C", allow_negative_numbers = true, value_parser = cores)]
    cores: Option<f64>,
    /// Load report interval and capacity window, seconds, 0.05..=3600
    #[arg(long = "report-secs", value_name = "S", default_value = "1",
          allow_negative_numbers = true, value_parser = seconds(MIN_REPORT_SECS, MAX_REPORT_SECS))]
    report_interval: Duration,
    /// Drain deadline after SIGTERM: new sessions are refused at once, open ones may finish
    /// for S seconds, then the rest end (WebSocket 1012, gRPC UNAVAILABLE); a second SIGTERM
    /// ends the drain at once. Seconds, 0..=604800 (a week)
    #[arg(long = "drain-secs", value_name = "S", default_value = "2",
          allow_negative_numbers = true, value_parser = seconds(0.0, MAX_SECS))]
    drain: Duration,
    /// Capacity model's target utilisation, (0, 1]
    #[arg(long, value_name = "U", default_value = "0.8", allow_negative_numbers = true,
          value_parser = target_utilisation)]
    target: f64,
    /// Capacity model's safety scaler, 1..=1000
    #[arg(long, value_name = "K", default_value = "2", allow_negative_numbers = true,
          value_parser = safety_scaler)]
    safety_scaler: f64,
    #[command(flatten)]
    otlp: OtlpArgs,
    /// In-band ORCA load reports on every response: auto (TEXT
    /// `endpoint-load-metrics` on HTTP and WebSocket upgrades, `endpoint-load-metrics-bin`
    /// in gRPC trailers), text, json or bin (that form on both), or off
    #[arg(long, value_name = "FORM", default_value = "auto", value_parser = inband_mode)]
    inband_orca: InbandMode,
}

/// `--inband-orca`: the forms for HTTP and for gRPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InbandMode {
    http: Option<InbandFormat>,
    grpc: Option<InbandFormat>,
}

/// `auto`, `off`, or one form for both.
fn inband_mode(text: &str) -> Result<InbandMode, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(InbandMode {
            http: Some(InbandFormat::Text),
            grpc: Some(InbandFormat::Bin),
        }),
        "off" => Ok(InbandMode {
            http: None,
            grpc: None,
        }),
        other => other
            .parse::<InbandFormat>()
            .map(|f| InbandMode {
                http: Some(f),
                grpc: Some(f),
            })
            .map_err(|_| "expected auto, text, json, bin or off".into()),
    }
}

impl ServeArgs {
    /// The settings these flags describe. Fails only if the capacity model refuses the
    /// combination, as a clap error so it prints and exits like any other.
    pub fn into_config(self) -> Result<AgentConfig, clap::Error> {
        let interval = self.report_interval;
        let capacity = CapacityConfig::new(self.target, self.safety_scaler, interval, interval)
            .map_err(|e| {
                let message = format!("--target/--safety-scaler/--report-secs: {e}");
                Self::command().error(clap::error::ErrorKind::ValueValidation, message)
            })?;
        Ok(AgentConfig {
            http: self.http,
            metrics: self.metrics,
            agent_check: self.agent_check,
            grpc: self.grpc,
            name: self.name,
            max_sessions: self.max_sessions,
            max_session: self.max_session,
            idle_timeout: self.idle_timeout,
            write_timeout: self.write_timeout,
            header_read_timeout: self.header_read_timeout,
            max_pending_connections: self
                .max_pending_connections
                .map(|n| usize::try_from(n).expect("at most 100 000")),
            max_frame_bytes: usize::try_from(self.max_frame_bytes).expect("at most 64 MiB"),
            work: Duration::from_millis(self.work_ms),
            chunk_gap: Duration::from_millis(self.chunk_gap_ms),
            background_load: self.background_load,
            cores: self.cores.unwrap_or_else(available_cores),
            report_interval: interval,
            drain: self.drain,
            otlp: self.otlp.into_config(),
            capacity,
            inband_http: self.inband_orca.http,
            inband_grpc: self.inband_orca.grpc,
        })
    }
}

impl Default for AgentConfig {
    /// The defaults of `livecount-agent serve` with no flags.
    fn default() -> Self {
        Self::from_args(&[]).expect("the defaults are in range")
    }
}

impl AgentConfig {
    /// Parses `serve` flags (without `serve` itself) with [`ServeArgs`]; unknown flags,
    /// stray words and values out of range are errors naming the flag. `--help` is an
    /// error too, of kind [`clap::error::ErrorKind::DisplayHelp`], whose text is the help.
    ///
    /// ```
    /// use livecount_server::AgentConfig;
    ///
    /// let args = ["--max-sessions".to_string(), "0".to_string()];
    /// let error = AgentConfig::from_args(&args).unwrap_err();
    /// assert!(error.to_string().contains("--max-sessions"));
    /// ```
    pub fn from_args(args: &[String]) -> Result<Self, clap::Error> {
        let argv = std::iter::once("serve").chain(args.iter().map(String::as_str));
        ServeArgs::try_parse_from(argv)?.into_config()
    }
}

/// The listen backlog of every listener: connections the kernel has completed and holds
/// until the accept loop takes them. `TcpListener::bind` asks for 128 (the standard
/// library's), which a burst of connects fills whenever the accept loop falls a little
/// behind; past it Linux drops the client's SYN (its connect waits 1 s, 3 s, ...) or the
/// handshake's last ACK and the request head behind it, which then reaches the server
/// seconds after the connection is accepted, on the client's retransmission backoff.
/// nginx asks for 511; Linux caps the request at `net.core.somaxconn` (4096 since 5.4).
/// Queued connections hold no descriptor of ours.
const LISTEN_BACKLOG: u32 = 1024;

/// Binds `addr`, given by `flag`, with [`LISTEN_BACKLOG`]; a failure names both, e.g.
/// `--grpc 127.0.0.1:9000: Address already in use (os error 98)`.
pub(crate) async fn listen(flag: &str, addr: SocketAddr) -> std::io::Result<TcpListener> {
    let bind = || {
        let socket = match addr {
            SocketAddr::V4(_) => TcpSocket::new_v4()?,
            SocketAddr::V6(_) => TcpSocket::new_v6()?,
        };
        // As `TcpListener::bind` does: a restarted agent rebinds its port at once.
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(LISTEN_BACKLOG)
    };
    bind().map_err(|e| std::io::Error::new(e.kind(), format!("{flag} {addr}: {e}")))
}

fn available_cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

// === value parsers of this command's own flags (the shared ones: `flag_values`) ===

fn target_utilisation(text: &str) -> Result<f64, String> {
    let x = finite(text)?;
    if x > 0.0 && x <= 1.0 {
        Ok(x)
    } else {
        Err(format!("{x} is out of range (allowed (0, 1])"))
    }
}

fn cores(text: &str) -> Result<f64, String> {
    let x = finite(text)?;
    if x > 0.0 && x <= MAX_CORES {
        Ok(x)
    } else {
        Err(format!("{x} is out of range (allowed (0, {MAX_CORES}])"))
    }
}

fn safety_scaler(text: &str) -> Result<f64, String> {
    let x = finite(text)?;
    if (1.0..=MAX_SAFETY_SCALER).contains(&x) {
        Ok(x)
    } else {
        Err(format!(
            "{x} is out of range (allowed 1..={MAX_SAFETY_SCALER})"
        ))
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn error(s: &str) -> String {
        AgentConfig::from_args(&args(s)).unwrap_err().to_string()
    }

    #[test]
    fn parses_flags() {
        let c = AgentConfig::from_args(&args(
            "--http 127.0.0.1:9 --grpc 127.0.0.1:10 --work-ms 5 --report-secs 0.5",
        ))
        .unwrap();
        assert_eq!(c.http.port(), 9);
        assert_eq!(c.grpc.map(|a| a.port()), Some(10));
        assert_eq!(c.work, Duration::from_millis(5));
        assert_eq!(c.capacity.window(), Duration::from_millis(500));
        // A repeated flag overrides the earlier one, as the test helpers and scripts expect.
        let c = AgentConfig::from_args(&args("--report-secs 0.2 --report-secs 2")).unwrap();
        assert_eq!(c.report_interval, Duration::from_secs(2));
    }

    #[test]
    fn defaults_come_from_the_flags() {
        let c = AgentConfig::default();
        assert_eq!(c.http, "127.0.0.1:8080".parse().unwrap());
        assert_eq!((c.metrics, c.agent_check, c.grpc), (None, None, None));
        assert_eq!((c.name.as_str(), c.max_sessions), ("agent", 1000));
        assert_eq!(c.max_session, Duration::from_secs(1200));
        assert_eq!(c.idle_timeout, Duration::from_secs(60));
        assert_eq!(c.max_frame_bytes, 16 * 1024);
        assert_eq!(
            (c.work, c.chunk_gap),
            (Duration::ZERO, Duration::from_millis(20))
        );
        assert_eq!(c.report_interval, Duration::from_secs(1));
        assert_eq!(c.drain, Duration::from_secs(2));
        assert_eq!(c.capacity.target_utilisation(), 0.8);
        assert_eq!(c.capacity.safety_scaler(), 2.0);
        assert!(c.cores >= 1.0);
    }

    #[test]
    fn the_bounds_are_inclusive() {
        let c = AgentConfig::from_args(&args(
            "--max-session-secs 604800 --idle-timeout-secs 0.001 --drain-secs 0 \
             --report-secs 0.05 --max-sessions 1000000 --max-frame-bytes 67108864 \
             --work-ms 10000 --chunk-gap-ms 60000 --background-load 1 --cores 4096 \
             --target 1 --safety-scaler 1000",
        ))
        .unwrap();
        assert_eq!(c.max_session, Duration::from_secs_f64(MAX_SECS));
        assert_eq!(c.drain, Duration::ZERO);
        assert_eq!(c.max_frame_bytes, 64 << 20);
    }

    /// Every value that used to panic, spin or disable the agent is refused by name.
    #[test]
    fn out_of_range_values_name_their_flag() {
        for bad in [
            "--idle-timeout-secs 1e19",
            "--idle-timeout-secs 0",
            "--idle-timeout-secs NaN",
            "--max-session-secs 1e19",
            "--max-session-secs inf",
            "--max-session-secs -1",
            "--max-session-secs 604801",
            "--drain-secs 1e19",
            "--drain-secs -0.5",
            "--report-secs 1e-9",
            "--report-secs 0",
            "--report-secs 3601",
            "--max-sessions 0",
            "--max-sessions -3",
            "--max-sessions 1000001",
            "--max-frame-bytes 0",
            "--max-frame-bytes 67108865",
            "--work-ms 10001",
            "--work-ms -1",
            "--chunk-gap-ms 60001",
            "--background-load 2",
            "--background-load -0.1",
            "--background-load NaN",
            "--cores 0",
            "--cores inf",
            "--cores 4097",
            "--target 1.5",
            "--target 0",
            "--safety-scaler 0.5",
            "--safety-scaler 1e9",
            "--http nowhere",
            "--grpc 127.0.0.1",
        ] {
            let flag = bad.split_whitespace().next().unwrap();
            let e = error(bad);
            assert!(e.contains(&format!("'{flag} ")), "{bad}: {e}");
        }
    }

    #[test]
    fn unknown_flags_stray_words_and_missing_values_are_named() {
        for (bad, names) in [
            ("--bogus 1", "--bogus"),
            ("stray", "stray"),
            ("--work-ms 5 stray", "stray"),
            ("--http", "--http"),
        ] {
            let e = error(bad);
            assert!(e.contains(names), "{bad}: {e}");
        }
    }

    #[test]
    fn help_is_not_a_value_error() {
        let e = AgentConfig::from_args(&args("--help")).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp);
        let help = e.to_string();
        for flag in [
            "--http",
            "--idle-timeout-secs",
            "--drain-secs",
            "--safety-scaler",
        ] {
            assert!(help.contains(flag), "{help}");
        }
    }
}
