//! `livecount-agent`: the streaming agent server (`serve`) and its load driver (`drive`).

use std::process::ExitCode;

use livecount_server::driver::{DRIVE_USAGE, DriveConfig, drive};
use livecount_server::{AgentConfig, RunningAgent, SERVE_USAGE};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let result = match args.first().map(String::as_str) {
        Some("serve") => {
            AgentConfig::from_args(&args[1..]).and_then(|c| runtime.block_on(serve(c)))
        }
        Some("drive") => DriveConfig::from_args(&args[1..]).map(|c| {
            let summary = runtime.block_on(drive(c));
            println!(
                "{}",
                serde_json::to_string(&summary).expect("summaries serialise")
            );
        }),
        Some("-h" | "--help" | "help") => {
            println!("{SERVE_USAGE}\n\n{DRIVE_USAGE}");
            Ok(())
        }
        _ => Err(format!(
            "expected `serve` or `drive`\n\n{SERVE_USAGE}\n\n{DRIVE_USAGE}"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("livecount-agent: {e}");
            ExitCode::from(2)
        }
    }
}

async fn serve(config: AgentConfig) -> Result<(), String> {
    let name = config.name.clone();
    let agent = RunningAgent::start(config)
        .await
        .map_err(|e| format!("cannot listen: {e}"))?;
    let check = agent.agent_check.map_or("off".into(), |a| a.to_string());
    let grpc = agent.grpc.map_or("off".into(), |a| a.to_string());
    eprintln!(
        "{name}: sessions at ws://{}/session, /metrics, /load; agent-check {check}; \
         gRPC (Agent/Converse, ORCA) {grpc}",
        agent.http
    );
    wait_for_signal().await;
    eprintln!("{name}: draining");
    let last = agent.shutdown().await;
    eprintln!(
        "{name}: stopped; started {} ended {} active {} ({:?})",
        last.started, last.ended, last.active, last.ended_by_reason
    );
    Ok(())
}

async fn wait_for_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
