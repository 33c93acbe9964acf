//! [`LoadSource`]: where a [`LoadFeed`](crate::LoadFeed) gets a backend's reports;
//! [`HttpLoadSource`]: polling the backend's `/load` JSON.

use std::fmt;
use std::future::{Future, poll_fn};
use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use http::header::{ACCEPT, CONNECTION, HOST};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use livecount_report::ServedReport;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::{Interval, MissedTickBehavior};

use crate::backend_load::BackendLoad;

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
/// use livecount_balance::{BackendLoad, LoadSource};
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

/// The largest `/load` body read, and the largest response head: a longer one is an
/// [`InvalidData`](io::ErrorKind::InvalidData) error, so a backend cannot make the balancer
/// buffer without bound. A report with long names is still far below it.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// Polls a backend's `/load` JSON (a [`ServedReport`]) every interval, over HTTP/1.1 with
/// hyper's client: one short connection per poll (`Connection: close`), nothing kept
/// between polls.
///
/// Every poll is bounded: connecting, sending the request and reading the whole response
/// together take at most the [`timeout`](HttpLoadSource::timeout) (else a
/// [`TimedOut`](io::ErrorKind::TimedOut) error), and the body at most 64 KiB, as is the
/// response head. A status other than `200 OK`, a body longer than that or one that is not
/// a [`ServedReport`] (see its compatibility rules: a body missing a routing field is
/// refused) is an [`InvalidData`](io::ErrorKind::InvalidData) error. Any framing hyper
/// reads is accepted: `Content-Length`, chunked, or until the connection closes.
///
/// ```
/// use livecount_balance::HttpLoadSource;
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
    /// Polls `http://{addr}/load` ([`ServedReport::PATH`]) every `period` (the first poll
    /// at once), each poll bounded by `period` too unless
    /// [`timeout`](HttpLoadSource::timeout) says otherwise.
    ///
    /// # Panics
    ///
    /// If `period` is zero.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let source = livecount_balance::HttpLoadSource::new("10.0.0.1:9000".parse().unwrap(), Duration::from_secs(1));
    /// # let _ = source;
    /// ```
    pub fn new(addr: SocketAddr, period: Duration) -> Self {
        assert!(
            !period.is_zero(),
            "HttpLoadSource: the poll period must be above zero"
        );
        HttpLoadSource {
            addr,
            path: ServedReport::PATH.to_owned(),
            period,
            timeout: period,
            interval: None,
        }
    }

    /// Polls `path` (an origin-form target: `/load`, `/agent/load?x=1`) instead of `/load`.
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Bounds each poll (connect, request, response) by `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Fetches the backend's whole report once, now (no pacing), bounded by the timeout: the
    /// same exchange a poll makes, for a tool that wants every field (a dashboard, a test).
    ///
    /// ```no_run
    /// # async fn run() -> std::io::Result<()> {
    /// use std::time::Duration;
    /// let source = livecount_balance::HttpLoadSource::new("10.0.0.1:9000".parse().unwrap(), Duration::from_secs(1));
    /// let served = source.fetch_report().await?;
    /// println!("{} open, {} ms old", served.report.active, served.age_ms);
    /// # Ok(()) }
    /// ```
    pub async fn fetch_report(&self) -> io::Result<ServedReport> {
        tokio::time::timeout(self.timeout, self.exchange())
            .await
            .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
    }

    /// One poll, unbounded in time (the caller bounds it): connect, one exchange, the
    /// body decoded.
    async fn fetch(&self) -> io::Result<BackendLoad> {
        self.exchange()
            .await
            .map(|served| BackendLoad::from(&served))
    }

    /// Connect, one exchange, the body decoded; unbounded in time.
    async fn exchange(&self) -> io::Result<ServedReport> {
        let request = Request::get(self.path.as_str())
            .header(HOST, self.addr.to_string())
            .header(ACCEPT, "application/json")
            .header(CONNECTION, "close")
            .body(Empty::<Bytes>::new())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let stream = TcpStream::connect(self.addr).await?;
        let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
            .max_header_size(MAX_BODY_BYTES)
            .handshake(TokioIo::new(stream))
            .await
            .map_err(hyper_error)?;
        let exchange = async move {
            let response = sender.send_request(request).await.map_err(hyper_error)?;
            if response.status() != StatusCode::OK {
                let status = response.status();
                return Err(invalid(&format!("unexpected status: {status}")));
            }
            let body = Limited::new(response.into_body(), MAX_BODY_BYTES)
                .collect()
                .await
                .map_err(body_error)?
                .to_bytes();
            Ok(serde_json::from_slice::<ServedReport>(&body)?)
        };
        alongside(connection, exchange).await
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

/// Runs `exchange` while driving `connection` (hyper's reads and writes for it) in this
/// same future, rather than in a spawned task: dropping the poll (its timeout) drops the
/// connection too, so nothing outlives the bound.
async fn alongside<T>(
    connection: impl Future<Output = hyper::Result<()>>,
    exchange: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    let mut connection = pin!(connection);
    let mut exchange = pin!(exchange);
    let mut connection_done = false;
    poll_fn(|cx| {
        if !connection_done {
            match connection.as_mut().poll(cx) {
                Poll::Ready(Err(e)) => return Poll::Ready(Err(hyper_error(e))),
                // Closed after the response: what it read is queued for the exchange.
                Poll::Ready(Ok(())) => connection_done = true,
                Poll::Pending => {}
            }
        }
        exchange.as_mut().poll(cx)
    })
    .await
}

/// An `InvalidData` error saying `what` (a report that is not one).
pub(crate) fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// A hyper error as the I/O error it is: the socket's own error, `InvalidData` for a
/// response that is not HTTP (or whose head is over the bound), `UnexpectedEof` for one
/// cut short.
fn hyper_error(e: hyper::Error) -> io::Error {
    // `is_parse` covers a head over the bound too (hyper's `Parse::TooLarge`; its own
    // `is_parse_too_large` exists only with hyper's server feature).
    let kind = if e.is_parse() || e.is_parse_status() {
        io::ErrorKind::InvalidData
    } else if e.is_incomplete_message() {
        io::ErrorKind::UnexpectedEof
    } else {
        let source = std::error::Error::source(&e);
        source
            .and_then(|s| s.downcast_ref::<io::Error>())
            .map_or(io::ErrorKind::Other, io::Error::kind)
    };
    io::Error::new(kind, e)
}

/// An error reading the body: over the length bound (`InvalidData`), or hyper's.
fn body_error(e: Box<dyn std::error::Error + Send + Sync>) -> io::Error {
    if e.is::<LengthLimitError>() {
        return invalid("the /load body is longer than 64 KiB");
    }
    match e.downcast::<hyper::Error>() {
        Ok(e) => hyper_error(*e),
        Err(e) => io::Error::other(e),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use livecount_report::LoadReport;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// The agent's encoding of a report with distinct routing figures: 3 / 2 / 8 / 5 ms.
    fn body() -> String {
        let mut report = LoadReport::empty("b1");
        (report.sequence, report.active) = (3, 2);
        (report.effective_capacity, report.headroom) = (8.0, 6.0);
        serde_json::to_string(&ServedReport::with_age(report, 5)).unwrap()
    }

    fn expected() -> BackendLoad {
        BackendLoad::new(3, 2, 8.0).with_age_ms(5)
    }

    /// A server answering one connection with `response` (written as is, then closed), and
    /// the request head it read.
    async fn serve_once(response: impl Into<Vec<u8>>) -> (SocketAddr, Arc<Mutex<String>>) {
        let response = response.into();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let head = Arc::new(Mutex::new(String::new()));
        let seen = Arc::clone(&head);
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.ends_with(b"\r\n\r\n") {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            *seen.lock().unwrap() = String::from_utf8_lossy(&request).into_owned();
            let _ = socket.write_all(&response).await;
        });
        (addr, head)
    }

    fn source(addr: SocketAddr) -> HttpLoadSource {
        HttpLoadSource::new(addr, Duration::from_secs(5))
    }

    /// One poll of `source`, failing the test (not hanging it) if it never finishes.
    async fn fetch(source: &HttpLoadSource) -> io::Result<BackendLoad> {
        let poll = tokio::time::timeout(Duration::from_secs(10), source.fetch());
        poll.await.expect("a poll of a server that closes finishes")
    }

    fn ok_with_length(body: &str) -> String {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
    }

    fn ok_chunked(body: &str) -> String {
        let (a, b) = body.split_at(body.len() / 2);
        format!(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
            a.len(),
            b.len()
        )
    }

    fn ok_until_close(body: &str) -> String {
        format!("HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n{body}")
    }

    /// The request is a GET of the path, for the host, asking for JSON and a closed
    /// connection; the response's report is decoded.
    #[tokio::test]
    async fn a_poll_gets_the_path_and_decodes_the_report() {
        let (addr, head) = serve_once(ok_with_length(&body())).await;
        let load = fetch(&source(addr).path("/agent/load?v=1")).await.unwrap();
        assert_eq!(load, expected());
        let head = head.lock().unwrap().to_ascii_lowercase();
        assert!(
            head.starts_with("get /agent/load?v=1 http/1.1\r\n"),
            "{head}"
        );
        assert!(head.contains(&format!("host: {addr}\r\n")), "{head}");
        assert!(head.contains("accept: application/json\r\n"), "{head}");
        assert!(head.contains("connection: close\r\n"), "{head}");
    }

    /// Chunked, `Content-Length` and close-delimited bodies all read the same report.
    #[tokio::test]
    async fn every_http1_framing_reads_the_same_report() {
        let json = body();
        for response in [
            ok_with_length(&json),
            ok_chunked(&json),
            ok_until_close(&json),
        ] {
            let (addr, _) = serve_once(response.clone()).await;
            assert_eq!(
                fetch(&source(addr)).await.unwrap(),
                expected(),
                "{response}"
            );
        }
    }

    /// A body is read up to 64 KiB (a report with long names is still a report) and refused
    /// beyond, whatever its framing, so a backend cannot make the balancer buffer without
    /// bound.
    #[tokio::test]
    async fn bodies_up_to_64_kib_are_read_and_longer_ones_refused() {
        let padded = |len: usize| {
            let json = body();
            format!("{json}{}", " ".repeat(len - json.len()))
        };
        for frame in [ok_with_length, ok_chunked, ok_until_close] {
            for len in [40 * 1024, 64 * 1024] {
                let (addr, _) = serve_once(frame(&padded(len))).await;
                assert_eq!(fetch(&source(addr)).await.unwrap(), expected(), "{len}");
            }
            let (addr, _) = serve_once(frame(&padded(64 * 1024 + 1))).await;
            let err = fetch(&source(addr)).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        }
    }

    /// Not a report, not a 200, not HTTP, or a head over the bound: each an `InvalidData`
    /// error, never a load.
    #[tokio::test]
    async fn bad_responses_are_invalid_data() {
        let mut missing =
            serde_json::to_value(serde_json::from_str::<ServedReport>(&body()).unwrap()).unwrap();
        missing.as_object_mut().unwrap().remove("active");
        let huge_header = format!("x-pad: {}", "a".repeat(MAX_BODY_BYTES));
        let bad = [
            "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n".to_owned(),
            format!(
                "HTTP/1.1 404 Not Found\r\ncontent-length: {}\r\n\r\n{}",
                body().len(),
                body()
            ),
            ok_with_length(&missing.to_string()),
            ok_with_length("{\"active\":1}"),
            ok_with_length("not json"),
            "SSH-2.0-OpenSSH_9.6\r\n\r\n".to_owned(),
            format!(
                "HTTP/1.1 200 OK\r\n{huge_header}\r\ncontent-length: {}\r\n\r\n{}",
                body().len(),
                body()
            ),
        ];
        for response in bad {
            let (addr, _) = serve_once(response.clone()).await;
            let err = fetch(&source(addr)).await.unwrap_err();
            let shown: String = response.chars().take(60).collect();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{shown}: {err}");
        }
    }

    /// A body cut short of its `Content-Length` is an error, not the part that came.
    #[tokio::test]
    async fn a_truncated_body_is_an_error() {
        let json = body();
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{json}",
            json.len() + 10
        );
        let (addr, _) = serve_once(response).await;
        assert!(fetch(&source(addr)).await.is_err());
    }

    /// The timeout bounds the whole poll: a backend that sends its head and then nothing
    /// (or nothing at all) costs one timeout, then a `TimedOut` error.
    #[tokio::test]
    async fn a_stalled_response_times_out_within_the_timeout() {
        let head_only = "HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{";
        for stall in [head_only, ""] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = tokio::spawn(async move {
                let (mut socket, _) = listener.accept().await.unwrap();
                let _ = socket.read(&mut [0u8; 1024]).await;
                let _ = socket.write_all(stall.as_bytes()).await;
                std::future::pending::<()>().await; // holds the socket open
            });
            let timeout = Duration::from_millis(200);
            let mut source = source(addr).timeout(timeout);
            let started = tokio::time::Instant::now();
            let err = source.next_report().await.unwrap().unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{stall:?}: {err}");
            let took = started.elapsed();
            assert!(took >= timeout && took < Duration::from_secs(3), "{took:?}");
            server.abort();
        }
    }

    #[test]
    #[should_panic(expected = "above zero")]
    fn a_zero_period_panics_at_the_call() {
        let _ = HttpLoadSource::new("127.0.0.1:1".parse().unwrap(), Duration::ZERO);
    }
}
