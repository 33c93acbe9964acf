//! [`LoadSource`]: where a [`LoadFeed`](crate::LoadFeed) gets a backend's reports;
//! [`HttpLoadSource`]: polling the backend's `/load` JSON.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::{Interval, MissedTickBehavior};

use crate::report::BackendLoad;

/// A stream of one backend's load reports, driven by a [`LoadFeed`](crate::LoadFeed)'s
/// background task.
///
/// The contract:
///
/// * `next_report` waits for the next report and returns it, or an error for a report that
///   could not be had (the feed keeps the last good report until it goes stale, waits
///   100 ms, and asks again);
/// * `None` means the source is finished (the feed's task ends; the last report goes stale);
/// * the source paces itself: a poller waits its interval, a stream waits for its messages.
///
/// Implemented by [`HttpLoadSource`] (the agent's `/load`) and by a
/// `tokio::sync::mpsc::Receiver<BackendLoad>`, so any other source (an ORCA out-of-band
/// stream, say) plugs in either way.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use livecount_tower::{BackendLoad, LoadSource};
///
/// let (reports, mut source) = tokio::sync::mpsc::channel(4);
/// reports.send(BackendLoad::new(1, 3, 10.0)).await.unwrap();
/// drop(reports);
/// assert_eq!(source.next_report().await.unwrap().unwrap().active, 3);
/// assert!(source.next_report().await.is_none()); // the sender is gone
/// # }
/// ```
pub trait LoadSource: Send + 'static {
    /// The next report, an error, or `None` when the source is finished.
    fn next_report(&mut self) -> impl Future<Output = Option<io::Result<BackendLoad>>> + Send;
}

impl LoadSource for mpsc::Receiver<BackendLoad> {
    async fn next_report(&mut self) -> Option<io::Result<BackendLoad>> {
        self.recv().await.map(Ok)
    }
}

/// The largest `/load` response read, headers included; a longer one is an error.
const MAX_RESPONSE_BYTES: u64 = 64 * 1024;

/// Polls a backend's `/load` JSON over plain HTTP/1.0 (one short connection per poll, no
/// client library) every interval; each poll is bounded by a timeout.
///
/// ```
/// use livecount_tower::HttpLoadSource;
/// use std::time::Duration;
///
/// let source = HttpLoadSource::new("127.0.0.1:9000".parse().unwrap(), Duration::from_secs(1))
///     .path("/load")
///     .timeout(Duration::from_millis(500));
/// # let _ = source;
/// ```
pub struct HttpLoadSource {
    addr: SocketAddr,
    path: String,
    period: Duration,
    timeout: Duration,
    interval: Option<Interval>,
}

impl HttpLoadSource {
    /// Polls `http://{addr}/load` every `period` (the first poll at once), each poll bounded
    /// by `period` too unless [`timeout`](HttpLoadSource::timeout) says otherwise.
    ///
    /// # Panics
    ///
    /// If `period` is zero.
    pub fn new(addr: SocketAddr, period: Duration) -> Self {
        assert!(
            !period.is_zero(),
            "HttpLoadSource: the poll period must be above zero"
        );
        HttpLoadSource {
            addr,
            path: "/load".to_owned(),
            period,
            timeout: period,
            interval: None,
        }
    }

    /// Polls `path` instead of `/load`.
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Bounds each poll (connect, request, response) by `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    async fn fetch(&self) -> io::Result<BackendLoad> {
        let mut stream = TcpStream::connect(self.addr).await?;
        let request = format!(
            "GET {} HTTP/1.0\r\nHost: {}\r\nAccept: application/json\r\n\r\n",
            self.path, self.addr
        );
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        (&mut stream)
            .take(MAX_RESPONSE_BYTES + 1)
            .read_to_end(&mut response)
            .await?;
        if response.len() as u64 > MAX_RESPONSE_BYTES {
            return Err(invalid("the /load response is too long"));
        }
        parse_response(&response)
    }
}

impl LoadSource for HttpLoadSource {
    async fn next_report(&mut self) -> Option<io::Result<BackendLoad>> {
        let period = self.period;
        let interval = self.interval.get_or_insert_with(|| {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            interval
        });
        interval.tick().await;
        Some(
            tokio::time::timeout(self.timeout, self.fetch())
                .await
                .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into())),
        )
    }
}

impl fmt::Debug for HttpLoadSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpLoadSource")
            .field("addr", &self.addr)
            .field("path", &self.path)
            .field("period", &self.period)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// An `InvalidData` error saying `what` (a report that is not one).
pub(crate) fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// The report in a whole HTTP/1.x response: status 200, not chunked, a JSON body.
fn parse_response(response: &[u8]) -> io::Result<BackendLoad> {
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| invalid("no end of headers"))?;
    let head = std::str::from_utf8(&response[..split]).map_err(|_| invalid("headers not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    if status.split(' ').nth(1) != Some("200") {
        return Err(invalid(&format!("unexpected status: {status}")));
    }
    let chunked = lines.any(|line| {
        let line = line.to_ascii_lowercase();
        line.starts_with("transfer-encoding:") && line.contains("chunked")
    });
    if chunked {
        return Err(invalid("chunked /load responses are not supported"));
    }
    serde_json::from_slice(&response[split + 4..]).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_parses_to_its_report() {
        let ok = b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n\
            {\"sequence\":3,\"active\":2,\"effective_capacity\":8.0,\"headroom\":6.0,\"age_ms\":5}";
        assert_eq!(
            parse_response(ok).unwrap(),
            BackendLoad::new(3, 2, 8.0).with_age_ms(5)
        );
    }

    /// Only a `Transfer-Encoding` that says chunked is refused: another header mentioning
    /// "chunked", or an identity encoding, is an ordinary response.
    #[test]
    fn only_a_chunked_transfer_encoding_is_refused() {
        let body = "{\"sequence\":3,\"active\":2,\"effective_capacity\":8.0,\"headroom\":6.0,\"age_ms\":5}";
        for header in ["X-Note: not chunked at all", "Transfer-Encoding: identity"] {
            let response = format!("HTTP/1.0 200 OK\r\n{header}\r\n\r\n{body}");
            assert!(parse_response(response.as_bytes()).is_ok(), "{header}");
        }
        let chunked = format!("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n{body}");
        assert!(parse_response(chunked.as_bytes()).is_err());
    }

    #[test]
    fn bad_responses_are_errors() {
        for bad in [
            &b"HTTP/1.0 503 Service Unavailable\r\n\r\n{}"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{...}",
            b"HTTP/1.0 200 OK\r\n\r\n{\"active\":1}",
            b"HTTP/1.0 200 OK\r\nno end",
        ] {
            assert_eq!(
                parse_response(bad).unwrap_err().kind(),
                io::ErrorKind::InvalidData
            );
        }
    }

    /// Serves one `/load` response whose JSON body is padded with spaces to `len` bytes.
    async fn serve_once(len: usize) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 1024];
            let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut request).await;
            let head = "HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n";
            let json =
                r#"{"sequence":3,"active":2,"effective_capacity":8.0,"headroom":6.0,"age_ms":5}"#;
            let pad = len.saturating_sub(head.len() + json.len());
            let response = format!("{head}{json}{}", " ".repeat(pad));
            let _ = socket.write_all(response.as_bytes()).await;
        });
        addr
    }

    /// A `/load` response is read up to 64 KiB (a report with long names is still a report)
    /// and refused beyond, so a backend cannot make the balancer buffer without bound.
    #[tokio::test]
    async fn responses_up_to_64_kib_are_read_and_longer_ones_refused() {
        let period = Duration::from_secs(1);
        let big = HttpLoadSource::new(serve_once(40 * 1024).await, period);
        assert_eq!(
            big.fetch().await.unwrap(),
            BackendLoad::new(3, 2, 8.0).with_age_ms(5)
        );
        let exact = HttpLoadSource::new(serve_once(64 * 1024).await, period);
        assert!(
            exact.fetch().await.is_ok(),
            "64 KiB exactly is within the bound"
        );
        let over = HttpLoadSource::new(serve_once(64 * 1024 + 1).await, period);
        assert_eq!(
            over.fetch().await.unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    #[test]
    #[should_panic(expected = "above zero")]
    fn a_zero_period_panics_at_the_call() {
        let _ = HttpLoadSource::new("127.0.0.1:1".parse().unwrap(), Duration::ZERO);
    }
}
