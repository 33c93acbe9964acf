//! `livecount-agent`: the streaming agent server (`serve`) and its load driver (`drive`).
//!
//! Exit codes: 0 on success (including `serve` drained after SIGTERM or ctrl-c, and
//! `--help`); 1 when `serve` cannot listen, a server of `serve` failed, or `drive` could
//! open no session at all; 2 for
//! a usage error (clap's convention), which names the flag.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use livecount_server::load_driver::{DriveConfig, drive};
use livecount_server::{AgentConfig, RunningAgent, ServeArgs};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The streaming agent server with the livecount session tracker inside, and its load driver.
#[derive(Debug, Parser)]
#[command(name = "livecount-agent")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    // The help of each subcommand is its struct's `about`. Boxed: `serve` has many flags.
    Serve(Box<ServeArgs>),
    Drive(DriveConfig),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Serve(args) => {
            let config = args.into_config().unwrap_or_else(|e| e.exit());
            runtime().block_on(serve(config))
        }
        Command::Drive(config) => runtime().block_on(drive_and_report(config)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("livecount-agent: {e}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().expect("a tokio runtime")
}

async fn serve(config: AgentConfig) -> Result<(), String> {
    // First, before any listener or banner: from here on SIGTERM and ctrl-c drain instead
    // of killing the process (a signal during start-up waits in the stream).
    let mut stop = Stop::install();
    let name = config.name.clone();
    let agent = RunningAgent::start(config)
        .await
        .map_err(|e| format!("serve: {e}"))?;
    let check = agent.agent_check.map_or("off".into(), |a| a.to_string());
    let grpc = agent.grpc.map_or("off".into(), |a| a.to_string());
    eprintln!(
        "{name}: sessions at ws://{}/session, /metrics, /load, /prequal; agent-check {check}; \
         gRPC (Agent/Converse, ORCA) {grpc}",
        agent.http
    );
    stop.requested().await;
    eprintln!("{name}: draining");
    // A second SIGTERM (or ctrl-c) during the drain ends it at once.
    let (last, drained) = agent
        .drain(stop.requested())
        .await
        .map_err(|e| format!("serve: {e}"))?;
    eprintln!(
        "{name}: drained in {:.1} s: {} open at the signal, {} cut{}",
        drained.waited.as_secs_f64(),
        drained.open_at_start,
        drained.cut,
        if drained.hurried {
            " (a second signal)"
        } else {
            ""
        }
    );
    eprintln!(
        "{name}: stopped; started {} ended {} active {} ({:?}); refused {}",
        last.started, last.ended, last.active, last.ended_by_reason, last.refused
    );
    Ok(())
}

/// Runs the drive, prints its summary, and fails when not one session could be opened.
async fn drive_and_report(config: DriveConfig) -> Result<(), String> {
    let target = config.target.clone();
    let summary = drive(config).await;
    println!(
        "{}",
        serde_json::to_string(&summary).expect("summaries serialise")
    );
    if summary.opened == 0 {
        return Err(format!(
            "drive: could not open any session at ws://{target}/session \
             ({} refused or unreachable)",
            summary.refused
        ));
    }
    Ok(())
}

/// SIGTERM and SIGINT (ctrl-c), caught from the moment of [`Stop::install`].
struct Stop {
    term: Signal,
    int: Signal,
}

impl Stop {
    fn install() -> Self {
        let handler = |kind| signal(kind).expect("a signal handler");
        Self {
            term: handler(SignalKind::terminate()),
            int: handler(SignalKind::interrupt()),
        }
    }

    async fn requested(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}
