//! [`RunningAgent`]: binds every listener, starts each server as a named task, and shuts
//! them down in order.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use livecount_report::otlp::OtlpHandle;
use livecount_report::{LoadReport, serve_agent_check};
use livecount_tower::Drained;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::agent_config::listen;
use crate::conversation::burn;
use crate::grpc_agent::serve_grpc;
use crate::http_router::{router, scrape_router};
use crate::{Agent, AgentConfig};

/// A started agent: its bound addresses and how to stop it.
#[derive(Debug)]
pub struct RunningAgent {
    /// The agent's state (tracker, board).
    pub agent: Arc<Agent>,
    /// Where HTTP listens.
    pub http: SocketAddr,
    /// Where the separate `/metrics` + `/load` listener is, if enabled.
    pub metrics: Option<SocketAddr>,
    /// Where agent-check listens, if enabled.
    pub agent_check: Option<SocketAddr>,
    /// Where gRPC (sessions and ORCA) listens, if enabled.
    pub grpc: Option<SocketAddr>,
    tasks: Tasks,
}

/// Every task the agent runs, by name.
#[derive(Debug)]
struct Tasks {
    /// WebSocket sessions, `/load`, `/metrics`: stops gracefully on the shutdown signal.
    http: JoinHandle<()>,
    /// The separate scrape listener: stops gracefully on the shutdown signal too.
    scrape: Option<JoinHandle<()>>,
    /// gRPC sessions and ORCA: stops gracefully on the shutdown signal.
    grpc: Option<JoinHandle<()>>,
    /// The agent-check responder: aborted at the end (it answers `drain` until then).
    agent_check: Option<JoinHandle<()>>,
    /// Publishes a load report every interval: aborted at the end.
    publisher: JoinHandle<()>,
    /// Stops the `--background-load` thread.
    stop_background: Arc<AtomicBool>,
    /// The OTLP export (`--otlp-endpoint`): sends the last report, then stops.
    otlp: Option<OtlpHandle>,
}

/// Burns `share` of one core on a background thread until `stop` (a "hot" backend).
fn background_load(share: f64, stop: Arc<AtomicBool>) {
    if share <= 0.0 {
        return;
    }
    std::thread::spawn(move || {
        let period = Duration::from_millis(10);
        // Relaxed: a stop flag; nothing else is published with it.
        while !stop.load(Ordering::Relaxed) {
            burn(period.mul_f64(share));
            std::thread::sleep(period.mul_f64(1.0 - share));
        }
    });
}

/// Serves `app` on `listener` with the library's hardened HTTP server: the agent's head
/// timeout and bound on pending connections, shutting down gracefully once the drain is
/// over (it serves `/ready`, `/load` and the refusals throughout), within the drain period.
fn serve_http(agent: &Agent, listener: TcpListener, app: Router) -> JoinHandle<()> {
    let signal = agent.stop.clone().cancelled_owned();
    let mut server =
        livecount_tower::serve(listener, app).header_read_timeout(agent.config.header_read_timeout);
    if let Some(max) = agent.config.max_pending_connections {
        server = server.max_pending(max);
    }
    let server = server
        .with_graceful_shutdown(signal)
        .shutdown_timeout(STOP_BOUND);
    tokio::spawn(server.into_future())
}

/// How long the servers get to stop once the drain is over (every session has ended by
/// then, so they only close their listeners and idle connections).
pub(crate) const STOP_BOUND: Duration = Duration::from_secs(3);

/// Waits until `until` for `task`, then aborts it.
async fn join_until(task: JoinHandle<()>, until: tokio::time::Instant) {
    let abort = task.abort_handle();
    if tokio::time::timeout_at(until, task).await.is_err() {
        abort.abort();
    }
}

impl RunningAgent {
    /// Binds every listener (an error names the flag whose address failed) and starts
    /// serving.
    pub async fn start(config: AgentConfig) -> std::io::Result<Self> {
        let http = listen("--http", config.http).await?;
        let bind = |flag: &'static str, addr: Option<SocketAddr>| async move {
            match addr {
                Some(addr) => listen(flag, addr).await.map(Some),
                None => Ok(None),
            }
        };
        let metrics = bind("--metrics", config.metrics).await?;
        let check = bind("--agent-check", config.agent_check).await?;
        let grpc = bind("--grpc", config.grpc).await?;
        let addr = |l: &Option<TcpListener>| l.as_ref().map(TcpListener::local_addr).transpose();
        let (http_addr, metrics_addr) = (http.local_addr()?, addr(&metrics)?);
        let (check_addr, grpc_addr) = (addr(&check)?, addr(&grpc)?);

        let agent = Arc::new(Agent::new(config));
        let stop_background = Arc::new(AtomicBool::new(false));
        background_load(agent.config.background_load, Arc::clone(&stop_background));
        agent.publish();
        let otlp = agent.config.otlp.as_ref().map(|c| c.install(&agent.board));
        let otlp = otlp.transpose().map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("--otlp-endpoint: {e}"),
            )
        })?;
        let tasks = Tasks {
            http: serve_http(&agent, http, router(Arc::clone(&agent))),
            scrape: metrics.map(|listener| serve_http(&agent, listener, scrape_router(&agent))),
            grpc: grpc.map(|listener| tokio::spawn(serve_grpc(listener, Arc::clone(&agent)))),
            agent_check: check.map(|listener| {
                tokio::spawn(serve_agent_check(listener, Arc::clone(&agent.board)))
            }),
            publisher: agent.board.spawn_publisher(agent.tracker.clone()),
            stop_background,
            otlp,
        };
        Ok(RunningAgent {
            agent,
            http: http_addr,
            metrics: metrics_addr,
            agent_check: check_addr,
            grpc: grpc_addr,
            tasks,
        })
    }

    /// Graceful shutdown, [`drain`](RunningAgent::drain) to its deadline.
    pub async fn shutdown(self) -> Arc<LoadReport> {
        self.drain(std::future::pending()).await.0
    }

    /// Graceful shutdown: the drain (see [`livecount_tower::drain`]) — new sessions refused
    /// with their retry hint (WebSocket 503 + `Retry-After`, gRPC `UNAVAILABLE`), every
    /// signal says draining at once (agent-check `drain`, ORCA streams end, `/ready` 503,
    /// gRPC health `NOT_SERVING`, `/load`, `/metrics`), the open sessions go on until they
    /// end, the drain period (`--drain-secs`) passes or `hurry` resolves (a second signal),
    /// and the rest end `Shutdown` (WebSocket 1012, gRPC `UNAVAILABLE`) — then the servers
    /// stop: the closes of the cut sessions get their close timeout (1 s), then the servers
    /// 3 s together; a server still busy then is aborted. Returns the last report
    /// and what the drain did.
    pub async fn drain(self, hurry: impl Future<Output = ()>) -> (Arc<LoadReport>, Drained) {
        let agent = &self.agent;
        let drained = agent.drain(hurry).await;
        agent.stop.cancel();
        if drained.cut > 0 {
            // The cut sessions' close frames (1012, `UNAVAILABLE`) go out from their own
            // tasks after their end, each bounded by the close timeout: give them that
            // long before the process exits and the runtime drops those tasks.
            tokio::time::sleep(livecount_tower::DEFAULT_CLOSE_TIMEOUT).await;
        }
        let Tasks {
            http,
            scrape,
            grpc,
            agent_check,
            publisher,
            stop_background,
            otlp,
        } = self.tasks;
        // Relaxed: see `background_load`.
        stop_background.store(true, Ordering::Relaxed);
        publisher.abort();
        if let Some(check) = agent_check {
            check.abort();
        }
        let until = tokio::time::Instant::now() + STOP_BOUND;
        join_until(http, until).await;
        if let Some(scrape) = scrape {
            join_until(scrape, until).await;
        }
        if let Some(grpc) = grpc {
            // Open streams end on the shutdown signal; a client that does not read its
            // last frames gets the drain period, then the connection is cut.
            join_until(grpc, until).await;
        }
        let last = agent.publish();
        if let Some(otlp) = otlp {
            // The last report (the drain's ends, `draining` 1) to the collector; bounded.
            // Failures are said here: the SDK, built without `internal-logs`, logs nothing.
            let stats = otlp.stats();
            if let Err(e) = otlp.shutdown().await {
                eprintln!("{}: {e}", agent.config.name);
            }
            if stats.failed > 0 {
                eprintln!(
                    "{}: OTLP: {} exports failed, {} succeeded; the last failure: {}",
                    agent.config.name,
                    stats.failed,
                    stats.succeeded,
                    stats.last_error.unwrap_or_default()
                );
            }
        }
        (last, drained)
    }
}
