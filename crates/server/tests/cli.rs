//! `livecount-agent` as a user runs it: the real binary, on loopback, every run bounded in
//! time (the child is killed by PID when it overstays) and stopped at the end.
//!
//! Bad values exit 2 naming their flag without a panic; `--help` works; an occupied port
//! names its flag; SIGTERM drains whenever it comes after start-up; `drive` fails when it
//! reaches no one.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A generous bound on any one run: parsing errors take milliseconds, a drain two seconds.
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_livecount-agent"))
}

/// What a finished run said.
#[derive(Debug)]
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `args` to the end, within [`RUN_TIMEOUT`].
fn run(args: &[&str]) -> Run {
    let mut child = Running::spawn(args);
    let status = child.wait();
    let (stdout, stderr) = child.output();
    Run {
        status,
        stdout,
        stderr,
    }
}

/// A spawned `livecount-agent`, killed by PID if still running when dropped.
struct Running {
    child: Child,
    stderr_lines: mpsc::Receiver<String>,
    stderr_seen: String,
    stdout: Option<std::thread::JoinHandle<String>>,
}

impl Running {
    fn spawn(args: &[&str]) -> Self {
        let mut child = agent()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let err = BufReader::new(child.stderr.take().unwrap());
        let (tx, stderr_lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stderr_lines,
            stderr_seen: String::new(),
            stdout: Some(stdout),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next stderr line, within [`RUN_TIMEOUT`].
    fn next_line(&mut self) -> String {
        let line = self
            .stderr_lines
            .recv_timeout(RUN_TIMEOUT)
            .unwrap_or_else(|e| panic!("no stderr line ({e}); so far: {}", self.stderr_seen));
        self.stderr_seen += &line;
        self.stderr_seen += "\n";
        line
    }

    /// Waits for the exit, within [`RUN_TIMEOUT`]; kills the child and fails past it.
    fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + RUN_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("still running after {RUN_TIMEOUT:?}: {}", self.stderr_seen);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Everything printed, once the child has exited (its pipes are then closed).
    fn output(mut self) -> (String, String) {
        while let Ok(line) = self.stderr_lines.recv_timeout(RUN_TIMEOUT) {
            self.stderr_seen += &line;
            self.stderr_seen += "\n";
        }
        let stdout = self.stdout.take().expect("output is read once");
        (
            stdout.join().unwrap(),
            std::mem::take(&mut self.stderr_seen),
        )
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn sigterm(pid: u32) {
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -TERM {pid}");
}

/// Whether `pid` catches SIGTERM now (`SigCgt` in `/proc/PID/status`, bit 15 − 1).
fn catches_sigterm(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (15 - 1)) != 0)
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn assert_usage_error(args: &[&str], names: &str) {
    let r = run(args);
    assert_eq!(r.status.code(), Some(2), "{args:?}: {r:?}");
    assert!(
        r.stderr.contains(names),
        "{args:?} must name {names}: {r:?}"
    );
    assert!(!r.stderr.contains("panicked"), "{args:?}: {r:?}");
}

/// Every value of defect 5 (and its neighbours): exit 2, the flag named, no panic.
#[test]
fn out_of_range_values_exit_2_naming_the_flag() {
    let serve = [
        ("--idle-timeout-secs", "1e19"),
        ("--idle-timeout-secs", "0"),
        ("--max-session-secs", "1e19"),
        ("--max-session-secs", "NaN"),
        ("--drain-secs", "1e19"),
        ("--drain-secs", "-1"),
        ("--report-secs", "1e-9"),
        ("--report-secs", "inf"),
        ("--max-sessions", "0"),
        ("--max-sessions", "99999999999"),
        ("--max-frame-bytes", "0"),
        ("--max-frame-bytes", "1e12"),
        ("--background-load", "1.5"),
        ("--cores", "0"),
        ("--cores", "NaN"),
        ("--work-ms", "1e19"),
        ("--chunk-gap-ms", "-1"),
        ("--target", "2"),
        ("--safety-scaler", "0"),
        ("--http", "nowhere"),
    ];
    for (flag, value) in serve {
        let args = ["serve", "--http", "127.0.0.1:0", flag, value];
        assert_usage_error(&args, &format!("'{flag} "));
    }
    let closed = format!("127.0.0.1:{}", closed_port());
    let drive = [
        ("--sessions", "-5"),
        ("--sessions", "1e12"),
        ("--sessions", "0"),
        ("--kill-share", "5"),
        ("--interrupt-share", "-1"),
        ("--chunks", "0"),
        ("--seed", "-1"),
        ("--hold-secs", "1e19"),
        ("--ramp-secs", "NaN"),
        ("--speak-every-secs", "-2"),
    ];
    for (flag, value) in drive {
        let args = ["drive", "--target", &closed, flag, value];
        assert_usage_error(&args, &format!("'{flag} "));
    }
}

#[test]
fn stray_words_and_missing_values_are_named() {
    assert_usage_error(&["serve", "stray"], "'stray'");
    assert_usage_error(&["serve", "--http", "127.0.0.1:0", "stray"], "'stray'");
    assert_usage_error(&["serve", "--http"], "'--http ");
    assert_usage_error(&["serve", "--bogus", "1"], "'--bogus'");
    assert_usage_error(&["drive"], "--target");
    assert_usage_error(&["fly"], "'fly'");
}

#[test]
fn help_exits_0_and_lists_the_flags() {
    for (args, flags) in [
        (
            &["serve", "--help"][..],
            &["--http", "--grpc", "--idle-timeout-secs", "--drain-secs"][..],
        ),
        (
            &["drive", "--help"][..],
            &["--target", "--sessions", "--kill-share", "--seed"][..],
        ),
        (&["--help"][..], &["serve", "drive"][..]),
    ] {
        let r = run(args);
        assert!(r.status.success(), "{args:?}: {r:?}");
        for flag in flags {
            assert!(r.stdout.contains(flag), "{args:?} lists {flag}: {r:?}");
        }
    }
}

#[test]
fn an_occupied_port_names_its_flag_and_address() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for flag in ["--http", "--metrics", "--agent-check", "--grpc"] {
        let mut args = vec!["serve", flag, &addr];
        if flag != "--http" {
            args.extend(["--http", "127.0.0.1:0"]);
        }
        let r = run(&args);
        assert_eq!(r.status.code(), Some(1), "{args:?}: {r:?}");
        let says = format!("{flag} {addr}: ");
        assert!(
            r.stderr.contains(&says),
            "{args:?} must say {says:?}: {r:?}"
        );
        assert!(!r.stderr.contains("panicked"), "{r:?}");
    }
}

/// Waits for the exit of an agent sent SIGTERM: code 0, drained, its `stopped` line.
fn assert_drained(mut agent: Running) {
    let status = agent.wait();
    let (_, stderr) = agent.output();
    assert!(
        status.success(),
        "SIGTERM drains, exit 0: {status:?}\n{stderr}"
    );
    assert!(stderr.contains("draining"), "{stderr}");
    assert!(
        stderr.contains("stopped; started 0 ended 0 active 0"),
        "{stderr}"
    );
}

#[test]
fn sigterm_right_after_the_banner_drains() {
    let mut agent = Running::spawn(&["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"]);
    let banner = agent.next_line();
    assert!(banner.contains("sessions at ws://"), "{banner}");
    // The handler is in place by the time the banner is out; it used to come after it.
    assert!(
        catches_sigterm(agent.pid()),
        "SIGTERM caught before the banner"
    );
    sigterm(agent.pid());
    assert_drained(agent);
}

#[test]
fn sigterm_during_start_up_drains() {
    let mut agent = Running::spawn(&["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"]);
    // The first moment the process can catch SIGTERM (before that the signal would kill
    // any process); ordinarily before it binds and prints anything.
    let deadline = Instant::now() + RUN_TIMEOUT;
    while !catches_sigterm(agent.pid()) {
        assert!(
            Instant::now() < deadline,
            "never installed a SIGTERM handler"
        );
        assert!(agent.child.try_wait().unwrap().is_none(), "exited early");
        std::thread::sleep(Duration::from_micros(200));
    }
    sigterm(agent.pid());
    assert_drained(agent);
}

#[test]
fn drive_fails_when_it_reaches_no_one() {
    let target = format!("127.0.0.1:{}", closed_port());
    let r = run(&[
        "drive",
        "--target",
        &target,
        "--sessions",
        "3",
        "--ramp-secs",
        "0",
    ]);
    assert_eq!(r.status.code(), Some(1), "{r:?}");
    assert!(r.stderr.contains("could not open any session"), "{r:?}");
    assert!(
        r.stdout.contains(r#""opened":0"#),
        "the summary is still printed: {r:?}"
    );
}

/// The HTTP address in the agent's banner (`… sessions at ws://ADDR/session …`).
fn http_addr(banner: &str) -> String {
    banner
        .split("ws://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("an address in {banner}"))
        .to_owned()
}

#[test]
fn drive_succeeds_against_a_live_agent() {
    let mut agent = Running::spawn(&["serve", "--http", "127.0.0.1:0", "--chunk-gap-ms", "1"]);
    let banner = agent.next_line();
    let addr = http_addr(&banner);
    // `--sessions` twice: the last one wins, as with the parser before clap.
    let r = run(&[
        "drive",
        "--target",
        &addr,
        "--sessions",
        "5",
        "--ramp-secs",
        "0",
        "--hold-secs",
        "0.3",
        "--speak-every-secs",
        "0.05",
        "--kill-share",
        "0",
        "--sessions",
        "2",
    ]);
    assert!(r.status.success(), "{r:?}");
    assert!(r.stdout.contains(r#""opened":2"#), "{r:?}");
    sigterm(agent.pid());
    let status = agent.wait();
    let (_, stderr) = agent.output();
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("stopped; started 2 ended 2 active 0"),
        "{stderr}"
    );
}

/// `GET path` on `addr` over HTTP/1.0: the status code, within [`RUN_TIMEOUT`].
fn status_of(addr: &str, path: &str) -> u16 {
    status_of_request(addr, &format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n")).0
}

/// The status code and the whole answer to `request` (sent as is).
fn status_of_request(addr: &str, request: &str) -> (u16, String) {
    use std::io::Write;
    let mut conn = std::net::TcpStream::connect(addr).expect("connect");
    conn.set_read_timeout(Some(RUN_TIMEOUT)).unwrap();
    conn.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    let code = reply.split(' ').nth(1).and_then(|c| c.parse().ok());
    (code.unwrap_or(0), reply)
}

/// SIGTERM twice: the first starts a drain with a deadline far away (sessions held,
/// `/ready` 503, a new client refused 503), the second ends it at once; the agent exits 0,
/// each session ended once (`Shutdown`, counted by the drain as cut), the refusal counted
/// and never a session.
#[test]
fn a_second_sigterm_ends_the_drain_early_and_every_session_once() {
    let mut server = Running::spawn(&["serve", "--http", "127.0.0.1:0", "--drain-secs", "600"]);
    let banner = server.next_line();
    let addr = http_addr(&banner);
    // Three sessions held for a minute by the driver (killed by PID at the end).
    let mut driver = agent()
        .args([
            "drive",
            "--target",
            &addr,
            "--sessions",
            "3",
            "--ramp-secs",
            "0",
        ])
        .args(["--hold-secs", "60", "--kill-share", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the driver starts");
    let deadline = Instant::now() + RUN_TIMEOUT;
    let active = |addr: &str| {
        let load = status_of_request(addr, "GET /load HTTP/1.0\r\nHost: x\r\n\r\n");
        load.1.contains("\"active\":3")
    };
    while !active(&addr) {
        assert!(
            Instant::now() < deadline,
            "the driver's 3 sessions never opened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(status_of(&addr, "/ready"), 200);
    sigterm(server.pid());
    assert!(server.next_line().contains("draining"));
    // The line goes out as the drain begins; /ready turns within moments of it.
    let deadline = Instant::now() + RUN_TIMEOUT;
    while status_of(&addr, "/ready") != 503 {
        assert!(Instant::now() < deadline, "readiness never said draining");
        std::thread::sleep(Duration::from_millis(5));
    }
    let upgrade = format!(
        "GET /session HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    let (code, head) = status_of_request(&addr, &upgrade);
    assert_eq!(code, 503, "a new client is refused: {head}");
    assert!(head.to_ascii_lowercase().contains("retry-after:"), "{head}");
    let started = Instant::now();
    sigterm(server.pid());
    let status = server.wait();
    assert!(started.elapsed() < RUN_TIMEOUT);
    let _ = driver.kill();
    let _ = driver.wait();
    let (_, stderr) = server.output();
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("3 open at the signal, 3 cut (a second signal)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("stopped; started 3 ended 3 active 0"),
        "{stderr}"
    );
    assert!(stderr.contains("\"shutdown\": 3"), "{stderr}");
}
