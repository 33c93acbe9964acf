//! A service that brings its own: a bidirectional gRPC service (`livecount.agent.v1.Agent`,
//! the agent's protocol, whose generated code this example borrows) and axum routes of its
//! own, mounted beside the [`Backend`]'s signals.
//!
//! * every `Agent/Converse` call is a session (the backend's default rule counts every gRPC
//!   call but ORCA's and health's), admitted under the cap, held to the limits and ended
//!   with its reason; it answers each `Speak { chunks }` with `Done { chunks }`;
//! * `GET /hello` is the service's own route; `/load`, `/metrics` and `/ready` are merged in
//!   from [`Backend::routes`];
//! * Ctrl-C drains as `full_service` does.
//!
//! `cargo run -p livecount-service --example own_services`, then
//! `curl 127.0.0.1:3000/hello`, `curl 127.0.0.1:3000/load` and a gRPC client of
//! `livecount.agent.v1.Agent/Converse` on `127.0.0.1:50051`.

use std::pin::Pin;

use axum::routing::get;
use futures_util::{FutureExt, Stream, StreamExt};
use livecount_service::Backend;
use tokio::net::TcpListener;
use tokio::signal::ctrl_c;
use tonic::{Request, Response, Status, Streaming};

#[allow(
    clippy::all,
    dead_code,
    missing_docs,
    missing_debug_implementations,
    unreachable_pub
)]
#[path = "../../server/src/generated/livecount.agent.v1.rs"]
#[rustfmt::skip] // generated, and checked against its .proto as generated
mod pb;

use pb::agent_server::{Agent, AgentServer};
use pb::{ClientFrame, Done, ServerFrame, client_frame, server_frame};

/// The service's own gRPC service: a `Done` for every `Speak`.
#[derive(Debug)]
struct Talk;

/// The replies of one `Converse` call.
type Replies = Pin<Box<dyn Stream<Item = Result<ServerFrame, Status>> + Send>>;

#[tonic::async_trait]
impl Agent for Talk {
    type ConverseStream = Replies;

    async fn converse(
        &self,
        request: Request<Streaming<ClientFrame>>,
    ) -> Result<Response<Replies>, Status> {
        let replies = request.into_inner().filter_map(|frame| async move {
            match frame {
                Ok(ClientFrame {
                    frame: Some(client_frame::Frame::Speak(speak)),
                }) => Some(Ok(ServerFrame {
                    frame: Some(server_frame::Frame::Done(Done {
                        chunks: speak.chunks,
                    })),
                })),
                Ok(_) => None, // heartbeats and the rest: nothing to say
                Err(status) => Some(Err(status)), // the call broke: end it
            }
        });
        Ok(Response::new(Box::pin(replies)))
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let backend = Backend::builder("b1").max_sessions(500).build();
    let app = backend
        .routes()
        .route("/hello", get(|| async { "hello\n" }));
    let (http, grpc) = (
        TcpListener::bind("127.0.0.1:3000").await?,
        TcpListener::bind("127.0.0.1:50051").await?,
    );
    let served = backend.serve(ctrl_c().map(drop)).http(http, app);
    let drained = served
        .grpc(grpc)
        .grpc_service(AgentServer::new(Talk))
        .await?;
    println!("drained: {} sessions cut", drained.cut);
    Ok(())
}
