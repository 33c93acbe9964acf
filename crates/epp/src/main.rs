//! `livecount-epp`: the endpoint picker as a process Envoy's `ext_proc` filter talks to.
//!
//! ```text
//! livecount-epp --listen 127.0.0.1:9002 \
//!     --backend 10.0.0.1:50051 --backend 10.0.0.2:50051 \
//!     --backend 10.0.0.3:8080,load=10.0.0.3:8080
//! ```
//!
//! Besides the `ext_proc` service it serves gRPC health: `""` and `liveness` are serving
//! while the process runs; `readiness` and `envoy.service.ext_proc.v3.ExternalProcessor`
//! only while at least one backend has a fresh report. SIGTERM or Ctrl-C stops it after the
//! streams in flight have their answers (each is bounded by the first-message timeout).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use livecount_epp::{BackendSpec, EndpointPicker, Picker, PickerConfig};
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;

/// The longest duration any flag takes, in seconds.
const MAX_SECS: f64 = 3600.0;

/// A session-aware endpoint picker for Envoy's ext_proc filter (the Endpoint Picker
/// Protocol): each new request goes to the backend with the most room by the hybrid
/// capacity model, read from the backends' own load reports.
#[derive(Debug, Parser)]
#[command(name = "livecount-epp", version)]
struct Args {
    /// Where Envoy's ext_proc filter connects (gRPC over cleartext HTTP/2).
    #[arg(long, default_value = "127.0.0.1:9002")]
    listen: SocketAddr,
    /// A backend, repeated for each: the endpoint Envoy connects to, and where its reports
    /// come from (default: its ORCA stream on the endpoint itself).
    #[arg(
        long = "backend",
        required = true,
        value_name = "ENDPOINT[,orca=ADDR|,load=ADDR]"
    )]
    backends: Vec<BackendSpec>,
    /// Seconds between two reports asked of each backend (no shorter than they publish).
    #[arg(long, default_value_t = 0.5, value_parser = seconds)]
    report_secs: f64,
    /// Seconds a report counts after the backend took it; then the backend is unknown and
    /// never chosen until it reports again.
    #[arg(long, default_value_t = 2.0, value_parser = seconds)]
    report_ttl_secs: f64,
    /// Endpoints listed after the chosen one, best first (Envoy's retries walk them).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(0..=16))]
    fallbacks: u8,
    /// `Retry-After` of a refusal (503 when no backend has room), in whole seconds.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=3600))]
    retry_after_secs: u64,
    /// Seconds a stream may wait for its first message before it is ended.
    #[arg(long, default_value_t = 10.0, value_parser = seconds)]
    first_message_timeout_secs: f64,
    /// Seed of the random pairs (default: a random one).
    #[arg(long)]
    seed: Option<u64>,
}

/// A number of seconds in (0, 3600].
fn seconds(text: &str) -> Result<f64, String> {
    let s: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if s.is_finite() && s > 0.0 && s <= MAX_SECS {
        Ok(s)
    } else {
        Err(format!("{text} s is outside (0, {MAX_SECS}]"))
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("livecount-epp: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let config = PickerConfig {
        report_interval: Duration::from_secs_f64(args.report_secs),
        report_ttl: Duration::from_secs_f64(args.report_ttl_secs),
        fallbacks: usize::from(args.fallbacks),
        seed: args.seed,
    };
    let picker = Arc::new(Picker::spawn(args.backends.clone(), config).map_err(|e| e.to_string())?);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("listening on {}: {e}", args.listen))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let service = EndpointPicker::new(Arc::clone(&picker))
        .first_message_timeout(Duration::from_secs_f64(args.first_message_timeout_secs))
        .retry_after(Duration::from_secs(args.retry_after_secs));
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("liveness", ServingStatus::Serving)
        .await;
    let readiness = tokio::spawn(track_readiness(
        reporter,
        Arc::clone(&picker),
        Duration::from_secs_f64(args.report_secs),
    ));
    eprintln!(
        "livecount-epp: listening on {local}, {} backends: {}",
        args.backends.len(),
        args.backends
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let served = tonic::transport::Server::builder()
        // A gateway that vanished without a FIN is found within 30 s.
        .http2_keepalive_interval(Some(Duration::from_secs(20)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .add_service(health)
        .add_service(service.server())
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            stopped(),
        )
        .await;
    readiness.abort();
    eprintln!("livecount-epp: stopped; {:?}", picker.stats());
    served.map_err(|e| format!("serving: {e}"))
}

/// Keeps `readiness` and the ext_proc service's health in step with whether any backend has
/// a fresh report, checked every `every`.
async fn track_readiness(
    reporter: tonic_health::server::HealthReporter,
    picker: Arc<Picker>,
    every: Duration,
) {
    const EXT_PROC: &str = "envoy.service.ext_proc.v3.ExternalProcessor";
    let mut ticks = tokio::time::interval(every);
    let mut last = None;
    loop {
        ticks.tick().await;
        let ready = picker.ready();
        if last != Some(ready) {
            let status = if ready {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            for name in ["readiness", EXT_PROC] {
                reporter.set_service_status(name, status).await;
            }
            last = Some(ready);
        }
    }
}

/// SIGTERM or Ctrl-C.
async fn stopped() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_taken_in_their_range_and_refused_with_the_reason_outside_it() {
        assert_eq!(seconds("0.5"), Ok(0.5));
        assert_eq!(seconds("3600"), Ok(MAX_SECS), "the top is included");
        for bad in ["0", "-1", "3600.5", "inf", "NaN"] {
            let err = seconds(bad).unwrap_err();
            assert!(err.contains("outside (0, 3600]"), "{bad}: {err}");
        }
        assert!(seconds("soon").unwrap_err().contains("not a number"));
    }
}
