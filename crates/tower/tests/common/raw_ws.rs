//! A raw WebSocket client for hostile tests: the upgrade and the frames written by hand over
//! TCP, so a test can send what no library would (half a frame, unmasked frames, invalid
//! UTF-8) and read the server's close code. Shared by livecount-tower's and
//! livecount-server's hostile suites (`#[path]`-included there).

#![allow(dead_code)] // each test file uses a different part

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Awaits `f` for at most `secs` seconds, panicking if it takes longer.
pub(crate) async fn within<F: std::future::Future>(secs: u64, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .expect("in time")
}

/// Sends the upgrade request for `path` on a fresh connection (with a small receive buffer
/// if asked) and returns it with the response head, read up to its blank line.
pub(crate) async fn upgrade_request(
    addr: SocketAddr,
    path: &str,
    recv_buffer: Option<u32>,
) -> (TcpStream, String) {
    let socket = TcpSocket::new_v4().unwrap();
    if let Some(bytes) = recv_buffer {
        socket.set_recv_buffer_size(bytes).unwrap();
    }
    let mut conn = socket.connect(addr).await.unwrap();
    conn.set_nodelay(true).unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8];
        let n = within(5, conn.read(&mut byte)).await.unwrap();
        assert_eq!(n, 1, "the server closed during the upgrade: {head:?}");
        head.push(byte[0]);
    }
    (conn, String::from_utf8(head).unwrap())
}

/// Connects and upgrades `path` by hand; panics unless the answer is `101`.
pub(crate) async fn raw_upgrade(
    addr: SocketAddr,
    path: &str,
    recv_buffer: Option<u32>,
) -> TcpStream {
    let (conn, head) = upgrade_request(addr, path, recv_buffer).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    conn
}

/// A frame as a client would write it: `fin`, the RSV bits (0..=7), the opcode, and the
/// payload, masked with a fixed key unless `masked` is false.
pub(crate) fn frame(fin: bool, rsv: u8, opcode: u8, payload: &[u8], masked: bool) -> Vec<u8> {
    let mut bytes = vec![(u8::from(fin) << 7) | (rsv << 4) | opcode];
    let mask_bit = u8::from(masked) << 7;
    match payload.len() {
        n @ 0..=125 => bytes.push(mask_bit | n as u8),
        n @ 126..=0xffff => {
            bytes.push(mask_bit | 126);
            bytes.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            bytes.push(mask_bit | 127);
            bytes.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let key = [0x37, 0xfa, 0x21, 0x3d];
    if masked {
        bytes.extend_from_slice(&key);
    }
    let key = if masked { key } else { [0; 4] };
    bytes.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    bytes
}

/// A masked text frame.
pub(crate) fn text(payload: &str) -> Vec<u8> {
    frame(true, 0, 0x1, payload.as_bytes(), true)
}

/// Writes `bytes` one at a time (stopping quietly if the server closes).
pub(crate) async fn trickle(conn: &mut TcpStream, bytes: &[u8]) {
    for b in bytes {
        if conn.write_all(std::slice::from_ref(b)).await.is_err() {
            return;
        }
    }
}

/// Reads server frames until a close frame; its code (1005 if it has none), or `None` if
/// the connection ended without one (or nothing came for 5 s).
pub(crate) async fn close_code(conn: &mut TcpStream) -> Option<u16> {
    loop {
        let mut head = [0u8; 2];
        within(5, conn.read_exact(&mut head)).await.ok()?;
        let len = match head[1] & 0x7f {
            126 => u64::from(within(5, conn.read_u16()).await.ok()?),
            127 => within(5, conn.read_u64()).await.ok()?,
            n => u64::from(n),
        };
        let mut payload = vec![0u8; len as usize];
        within(5, conn.read_exact(&mut payload)).await.ok()?;
        if head[0] & 0x0f == 0x8 {
            return Some(
                payload
                    .get(..2)
                    .map_or(1005, |c| u16::from_be_bytes([c[0], c[1]])),
            );
        }
    }
}

/// Descriptors open in this process.
pub(crate) fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}
