//! NGINX for the end-to-end tests: its binary and version, the config rendered for a
//! fleet, the running master (stopped by PID however a test ends), and its access log,
//! which says where it placed each session.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::lb::{Fleet, assert_rendered, free_port, tool};

/// The config the test runs (and the one `docs/lb/nginx.md` shows).
pub(crate) const TEMPLATE: &str = include_str!("../../../../deploy/nginx/nginx.conf.in");

pub(crate) fn nginx_binary() -> PathBuf {
    tool(&["nginx", "/usr/sbin/nginx"], "-v")
}

/// `nginx -v`'s line, e.g. `nginx/1.22.1`.
pub(crate) fn nginx_version(bin: &Path) -> String {
    let out = Command::new(bin).arg("-v").output().expect("nginx -v");
    let text = String::from_utf8_lossy(&out.stderr);
    text.trim().trim_start_matches("nginx version: ").to_owned()
}

// === NGINX, its ports and its guard ===

/// NGINX's listeners.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fronts {
    pub(crate) ws_least_conn: u16,
    pub(crate) ws_random_two: u16,
    pub(crate) ws_capped: u16,
    pub(crate) ws_uncapped: u16,
    pub(crate) grpc: u16,
}

impl Fronts {
    pub(crate) fn all(&self) -> [u16; 5] {
        [
            self.ws_least_conn,
            self.ws_random_two,
            self.ws_capped,
            self.ws_uncapped,
            self.grpc,
        ]
    }
}

/// A running NGINX master (foreground, its own prefix). Dropping it, panic or not, sends
/// the master SIGTERM (NGINX's fast shutdown: it stops its workers) and waits up to 3 s,
/// then SIGKILLs the master and the workers it had, by PID: a master killed outright would
/// leave its workers running and listening.
pub(crate) struct Nginx {
    pub(crate) child: Child,
    pub(crate) prefix: PathBuf,
    pub(crate) fronts: Fronts,
}

impl Nginx {
    pub(crate) fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.prefix.join("logs").join(name)).unwrap_or_default()
    }

    /// The PIDs of the master's children (its workers), from `/proc`.
    pub(crate) fn workers(&self) -> Vec<String> {
        let pid = self.child.id();
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let workers = self.workers();
        let master = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &master]).status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(3) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        for w in workers {
            let _ = Command::new("kill").args(["-KILL", &w]).status();
        }
    }
}

/// `template` with every `@KEY@` of `values` replaced; panics if a placeholder is left.
pub(crate) fn render(template: &str, values: &[(String, String)]) -> String {
    let mut out = template.to_owned();
    for (key, value) in values {
        out = out.replace(&format!("@{key}@"), value);
    }
    assert_rendered(&out);
    out
}

/// Renders the template for the fleet and b4 (`max_conns` from each agent's
/// `max_sessions`), starts NGINX with its prefix in the fleet's directory, and waits (up to
/// 10 s) until every listener accepts. Returns it and the rendered config.
pub(crate) async fn start_nginx(fleet: &Fleet, b4_http: u16, maxes: &[u64]) -> (Nginx, String) {
    let prefix = fleet.dir.join("nginx");
    for sub in ["logs", "tmp"] {
        std::fs::create_dir_all(prefix.join(sub)).unwrap();
    }
    let fronts = Fronts {
        ws_least_conn: free_port(),
        ws_random_two: free_port(),
        ws_capped: free_port(),
        ws_uncapped: free_port(),
        grpc: free_port(),
    };
    let mut values: Vec<(String, String)> = vec![
        ("WS_LEAST_CONN".into(), fronts.ws_least_conn.to_string()),
        ("WS_RANDOM_TWO".into(), fronts.ws_random_two.to_string()),
        ("WS_CAPPED".into(), fronts.ws_capped.to_string()),
        ("WS_UNCAPPED".into(), fronts.ws_uncapped.to_string()),
        ("GRPC_FRONT".into(), fronts.grpc.to_string()),
        ("HTTP4".into(), b4_http.to_string()),
    ];
    for (i, b) in fleet.backends.iter().enumerate() {
        values.push((format!("HTTP{}", i + 1), b.http.to_string()));
        values.push((format!("GRPC{}", i + 1), b.grpc.to_string()));
    }
    for (i, max) in maxes.iter().enumerate() {
        values.push((format!("MAX{}", i + 1), max.to_string()));
    }
    let config = render(TEMPLATE, &values);
    let conf = prefix.join("nginx.conf");
    std::fs::write(&conf, &config).unwrap();
    let child = Command::new(nginx_binary())
        .arg("-p")
        .arg(&prefix)
        .arg("-c")
        .arg(&conf)
        .arg("-e")
        .arg(prefix.join("logs/error.log"))
        .arg("-g")
        .arg(format!("daemon off; pid {}/nginx.pid;", prefix.display()))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(prefix.join("logs/stderr.log")).unwrap())
        .spawn()
        .expect("nginx starts");
    let mut nginx = Nginx {
        child,
        prefix,
        fronts,
    };
    let start = Instant::now();
    loop {
        if let Some(status) = nginx.child.try_wait().unwrap() {
            panic!(
                "nginx exited at its start: {status}\n{}\n{}",
                nginx.log("error.log"),
                nginx.log("stderr.log")
            );
        }
        let mut up = true;
        for port in fronts.all() {
            up &= tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok();
        }
        if up {
            return (nginx, config);
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "nginx's listeners never all accepted\n{}",
            nginx.log("error.log")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// === NGINX's access log: where it placed each session ===

/// One access-log line (`log_format sessions`): one session, written when it ended.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// NGINX's listener.
    pub(crate) port: u16,
    /// Every server tried, in order (the last one served, or refused last).
    pub(crate) tried: Vec<u16>,
    /// Each one's status (`503`, `101`, `200`).
    pub(crate) statuses: Vec<String>,
    /// The gRPC status in the response headers: a trailers-only response (a refusal before
    /// the stream started). Empty if none.
    pub(crate) grpc_in_headers: String,
    /// The gRPC status in the trailers: the end of a stream that started. Empty if none.
    pub(crate) grpc_in_trailers: String,
}

impl Entry {
    pub(crate) fn parse(line: &str) -> Entry {
        let f: Vec<&str> = line.split('|').collect();
        assert!(f.len() >= 7, "an access-log line of 7 fields: {line}");
        let ports = f[1]
            .split([',', ':'])
            .filter_map(|p| p.trim().parse::<u16>().ok())
            .collect();
        // NGINX logs a missing header or trailer as `-`.
        let grpc = |field: &str| field.trim().trim_matches('-').to_owned();
        Entry {
            port: f[0].parse().unwrap_or(0),
            tried: ports,
            statuses: f[2].split(',').map(|s| s.trim().to_owned()).collect(),
            grpc_in_headers: grpc(f[4]),
            grpc_in_trailers: grpc(f[5]),
        }
    }

    /// Where the session ended up.
    pub(crate) fn served_by(&self) -> Option<u16> {
        self.tried.last().copied()
    }
}

/// The access log, read on from where the last read stopped.
pub(crate) struct AccessLog {
    pub(crate) path: PathBuf,
    pub(crate) read: usize,
}

impl AccessLog {
    /// The entries since the last call, waiting (up to 5 s) until there are at least `n`
    /// for each `(port, n)` of `want` among them.
    pub(crate) async fn take(&mut self, want: &[(u16, usize)]) -> Vec<Entry> {
        let start = Instant::now();
        loop {
            let text = std::fs::read_to_string(&self.path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().skip(self.read).collect();
            let entries: Vec<Entry> = lines.iter().map(|l| Entry::parse(l)).collect();
            let complete = want
                .iter()
                .all(|&(port, n)| entries.iter().filter(|e| e.port == port).count() >= n);
            if complete || start.elapsed() > Duration::from_secs(5) {
                self.read += lines.len();
                return entries;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Sessions per backend as NGINX placed them (`entries` on `port`), for backends whose
/// ports are `ports`.
pub(crate) fn placed(entries: &[Entry], port: u16, ports: &[u16]) -> Vec<u64> {
    let mut out = vec![0; ports.len()];
    for e in entries.iter().filter(|e| e.port == port) {
        if let Some(i) = e
            .served_by()
            .and_then(|p| ports.iter().position(|&q| q == p))
        {
            out[i] += 1;
        }
    }
    out
}
