//! [`answer_unavailable`]: what a connection gets when the server closes it before any
//! request head of it has reached the service: `503 Service Unavailable` with
//! `Retry-After`, then the close.
//!
//! The server closes such a connection when it sheds it at the bound on pending
//! connections, when its head has not fully arrived by the head timeout, and when the
//! server shuts down. hyper would just close it, and a client whose head is already in the
//! socket, or still on its way, would read an end of stream or a reset where it expects a
//! response (tungstenite: "handshake incomplete"; Python's `websockets`: "did not receive a
//! valid HTTP response"). A head can be on its way for seconds through no fault of the
//! client: when the listener's backlog overflows, the kernel drops the client's handshake
//! ACK and the head behind it, later completes the connection on a retransmitted ACK, and
//! the head follows only at the client's next retransmission, on its exponential backoff.
//! Answered, such a client reads a status and when to retry; an attacker's connection is
//! closed as promptly as before.

use std::io::{Read, Write};
use std::net::Shutdown;

use tokio::net::TcpStream;

/// The answer, in full: no body, and the connection closes after it.
const UNAVAILABLE: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
    retry-after: 1\r\n\
    content-length: 0\r\n\
    connection: close\r\n\r\n";

/// The most bytes read and discarded before closing: a whole head at the default bound
/// ([`DEFAULT_MAX_HEADER_BYTES`](crate::serve::DEFAULT_MAX_HEADER_BYTES), 32 KiB) and as
/// much again.
const MAX_DISCARD: usize = 64 * 1024;

/// Answers `stream` with `503` and `Retry-After: 1`, sends its FIN, discards what the
/// client has sent, and closes it; nothing here waits.
///
/// The socket is taken out of the runtime's reactor first, so that the write and the reads
/// are tried at once whatever readiness the reactor last saw (a server short of CPU may not
/// have seen a new socket's first event yet). The answer fits any socket's send buffer
/// (~100 bytes); a socket that cannot take it is just closed. Reading what has arrived
/// makes the close a FIN behind the answer rather than a reset, which could make the
/// client's kernel drop the answer unread.
pub(crate) fn answer_unavailable(stream: TcpStream) {
    // Still non-blocking (tokio sets it, and `into_std` leaves it so).
    let Ok(mut stream) = stream.into_std() else {
        return;
    };
    if stream.write_all(UNAVAILABLE).is_err() {
        return;
    }
    let _ = stream.shutdown(Shutdown::Write);
    let mut sink = [0u8; 4096];
    let mut discarded = 0;
    while discarded < MAX_DISCARD {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => discarded += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn the_client_reads_the_answer_then_the_end() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        // Let the head arrive, so that it is unread when the server closes.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        answer_unavailable(server);
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer:?}");
        assert!(answer.contains("\r\nretry-after: 1\r\n"), "{answer:?}");
    }
}
