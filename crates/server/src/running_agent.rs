//! [`RunningAgent`]: binds every listener (so their addresses are known, and an error names
//! its flag), hands them to `Backend::serve`, and drains it on request.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use livecount_report::LoadReport;
use livecount_report::otlp::{OtlpHandle, TraceExport};
use livecount_service::Drained;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agent_config::listen;
use crate::conversation::burn;
use crate::grpc_agent::AgentService;
use crate::http_router::{router, scrape_router};
use crate::{Agent, AgentConfig};

/// A started agent: its bound addresses and how to stop it.
#[derive(Debug)]
pub struct RunningAgent {
    /// The agent's state (its Backend, settings).
    pub agent: Arc<Agent>,
    /// Where HTTP listens.
    pub http: SocketAddr,
    /// Where the separate `/metrics` + `/load` listener is, if enabled.
    pub metrics: Option<SocketAddr>,
    /// Where agent-check listens, if enabled.
    pub agent_check: Option<SocketAddr>,
    /// Where gRPC (sessions and ORCA) listens, if enabled.
    pub grpc: Option<SocketAddr>,
    /// `Backend::serve`: every listener, the publisher and the drain.
    serving: JoinHandle<io::Result<Drained>>,
    /// Its shutdown signal: the drain begins.
    shutdown: CancellationToken,
    /// Its hurry signal: the drain's wait ends.
    hurry: CancellationToken,
    /// Stops the `--background-load` thread.
    stop_background: Arc<AtomicBool>,
    /// The OTLP export (`--otlp-endpoint`): sends the last report, then stops.
    otlp: Option<OtlpHandle>,
    /// The sessions' spans (`--otlp-endpoint` without `--no-otlp-traces`).
    traces: Option<TraceExport>,
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

/// Binds `addr` if the flag gave one.
async fn bind(flag: &'static str, addr: Option<SocketAddr>) -> io::Result<Option<TcpListener>> {
    match addr {
        Some(addr) => listen(flag, addr).await.map(Some),
        None => Ok(None),
    }
}

/// Where `listener` is bound, if there is one.
fn local(listener: &Option<TcpListener>) -> io::Result<Option<SocketAddr>> {
    listener.as_ref().map(TcpListener::local_addr).transpose()
}

impl RunningAgent {
    /// Binds every listener (an error names the flag whose address failed) and starts
    /// serving them through the agent's `Backend`.
    pub async fn start(config: AgentConfig) -> io::Result<Self> {
        let http = listen("--http", config.http).await?;
        let metrics = bind("--metrics", config.metrics).await?;
        let check = bind("--agent-check", config.agent_check).await?;
        let grpc = bind("--grpc", config.grpc).await?;
        let (http_addr, metrics_addr) = (http.local_addr()?, local(&metrics)?);
        let (check_addr, grpc_addr) = (local(&check)?, local(&grpc)?);

        let agent = Arc::new(Agent::new(config));
        let otlp = agent.config.otlp.as_ref().map(|c| c.install(agent.board()));
        let otlp = otlp.transpose().map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("--otlp-endpoint: {e}"))
        })?;
        let name = agent.board().name();
        let traces = agent.config.otlp.as_ref().and_then(|c| c.traces(name));
        let traces = traces.map(|t| agent.backend.otlp_traces(t)).transpose();
        let traces = traces.map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("OTLP traces: {e}"))
        })?;
        let stop_background = Arc::new(AtomicBool::new(false));
        background_load(agent.config.background_load, Arc::clone(&stop_background));
        agent.publish(); // the first `/load` is a real report, not the empty one

        let (shutdown, hurry) = (CancellationToken::new(), CancellationToken::new());
        let backend = &agent.backend;
        let mut serve = backend
            .serve(shutdown.clone().cancelled_owned())
            .hurry(hurry.clone().cancelled_owned())
            .http(http, router(&agent));
        if let Some(listener) = metrics {
            serve = serve.http(listener, scrape_router(backend));
        }
        if let Some(listener) = grpc {
            let converse = AgentService::server(Arc::clone(&agent));
            serve = serve.grpc(listener).grpc_service(converse);
        }
        if let Some(listener) = check {
            serve = serve.agent_check(listener);
        }
        Ok(RunningAgent {
            agent,
            http: http_addr,
            metrics: metrics_addr,
            agent_check: check_addr,
            grpc: grpc_addr,
            serving: tokio::spawn(serve.into_future()),
            shutdown,
            hurry,
            stop_background,
            otlp,
            traces,
        })
    }

    /// Graceful shutdown, [`drain`](RunningAgent::drain) to its deadline; the last report.
    /// A server's failure is not returned here (see [`drain`](RunningAgent::drain)).
    pub async fn shutdown(self) -> Arc<LoadReport> {
        let agent = Arc::clone(&self.agent);
        match self.drain(std::future::pending()).await {
            Ok((last, _)) => last,
            Err(_) => agent.board().latest(),
        }
    }

    /// Graceful shutdown, in `livecount_service::Serve`'s order: new sessions refused with
    /// their retry hint (WebSocket 503 + `Retry-After`, gRPC `UNAVAILABLE`), every signal
    /// says draining at once (agent-check `drain`, ORCA streams end, `/ready` 503, gRPC
    /// health `NOT_SERVING`, `/load`, `/metrics`), the open sessions go on until they end,
    /// the drain period (`--drain-secs`) passes or `hurry` resolves (a second signal), and
    /// the rest end `Shutdown` (WebSocket 1012, gRPC `UNAVAILABLE`) — then the servers stop:
    /// the closes of the cut sessions get their close timeout (1 s), then the servers 3 s
    /// together; a server still busy then is aborted. Then the OTLP export sends the last
    /// report.
    ///
    /// Returns the last report and what the drain did.
    ///
    /// # Errors
    ///
    /// The first error of a server (which began the drain by itself when it failed).
    pub async fn drain(
        self,
        hurry: impl Future<Output = ()>,
    ) -> io::Result<(Arc<LoadReport>, Drained)> {
        let RunningAgent {
            agent,
            mut serving,
            shutdown,
            hurry: hurried,
            stop_background,
            otlp,
            traces,
            ..
        } = self;
        shutdown.cancel();
        let served = tokio::select! {
            served = &mut serving => served,
            () = hurry => {
                hurried.cancel();
                serving.await
            }
        };
        // Relaxed: see `background_load`.
        stop_background.store(true, Ordering::Relaxed);
        let last = agent.board().latest(); // published by `Serve` once the servers stopped
        if let Some(otlp) = otlp {
            flush(&agent.config.name, otlp).await;
        }
        if let Some(traces) = traces {
            // Every session has ended and its span closed: the rest of them go out.
            flush_traces(&agent.config.name, traces).await;
        }
        let drained = served.map_err(io::Error::other)??;
        Ok((last, drained))
    }
}

/// Sends the spans still queued, bounded, and says what failed.
async fn flush_traces(name: &str, traces: TraceExport) {
    let stats = traces.stats();
    if let Err(e) = traces.shutdown().await {
        eprintln!("{name}: OTLP traces: {e}");
    }
    if stats.failed > 0 {
        eprintln!(
            "{name}: OTLP traces: {} exports failed, {} succeeded; the last failure: {}",
            stats.failed,
            stats.succeeded,
            stats.last_error.unwrap_or_default()
        );
    }
}

/// Sends the last report (the drain's ends, `draining` 1) to the collector, bounded, and
/// says what failed: the SDK, built without `internal-logs`, logs nothing.
async fn flush(name: &str, otlp: OtlpHandle) {
    let stats = otlp.stats();
    if let Err(e) = otlp.shutdown().await {
        eprintln!("{name}: {e}");
    }
    if stats.failed > 0 {
        eprintln!(
            "{name}: OTLP: {} exports failed, {} succeeded; the last failure: {}",
            stats.failed,
            stats.succeeded,
            stats.last_error.unwrap_or_default()
        );
    }
}
