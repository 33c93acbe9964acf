//! A raw HTTP/2 client for hostile gRPC tests: calls made by hand with the `h2` crate, so a
//! test can choose the flow-control window (a reader that never reads), the content type,
//! and what goes on the request stream. Shared by livecount-tower's and livecount-server's
//! hostile suites (`#[path]`-included there).

#![allow(dead_code)] // each test file uses a different part

use std::net::SocketAddr;

use tonic::codegen::{Bytes, http};

/// An HTTP/2 connection made by hand, its connection task aborted on drop.
pub(crate) struct RawH2 {
    send: h2::client::SendRequest<Bytes>,
    conn: tokio::task::JoinHandle<()>,
}

impl Drop for RawH2 {
    fn drop(&mut self) {
        self.conn.abort();
    }
}

/// Connects with a stream flow-control window of `window` bytes.
pub(crate) async fn raw_h2(addr: SocketAddr, window: u32) -> RawH2 {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(window)
        .handshake(tcp)
        .await
        .unwrap();
    let conn = tokio::spawn(async move {
        let _ = conn.await;
    });
    RawH2 { send, conn }
}

impl RawH2 {
    /// Starts a gRPC call to `path`; the request stream stays open.
    pub(crate) async fn call(
        &mut self,
        path: &str,
    ) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
        self.call_as(path, "application/grpc").await
    }

    /// Starts a call to `path` with `content_type`; the request stream stays open.
    pub(crate) async fn call_as(
        &mut self,
        path: &str,
        content_type: &str,
    ) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
        let request = http::Request::post(format!("http://livecount{path}"))
            .header("content-type", content_type)
            .header("te", "trailers")
            .body(())
            .unwrap();
        let mut send = self.send.clone().ready().await.unwrap();
        send.send_request(request, false).unwrap()
    }
}
