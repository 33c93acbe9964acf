//! `JavaProbe`: Java 17's `LongAdder` and `AtomicLong` measured beside `Striped` in the same
//! run, through `benches/java/PairsProbe.java` in a JVM the picker starts and drives.
//!
//! The probe is the anchor `Striped` is judged against (it is LongAdder's design): its loop is
//! the threads workload's (threads started together on a barrier, each timing its own loop of
//! back-to-back increment + decrement pairs, the window from the earliest start to the latest
//! end), and the picker sizes and repeats its runs exactly as it does its own contenders',
//! between them, so the ratios are side by side. `scripts/longadder.sh` installs a JDK from the
//! package registry and runs the picker's `--anchors` table; without a JDK the picker says so
//! and measures the rest.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use crate::contender::{Info, Kind};
use crate::workload::{Sample, threads_sample};

/// The environment variable naming the `java` launcher to use (default: `java` on `PATH`).
pub(crate) const JAVA_ENV: &str = "LIVECOUNT_JAVA";

/// A counter of the Java standard library the probe measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JavaCounter {
    /// `java.util.concurrent.atomic.LongAdder`: `increment()` + `decrement()`.
    LongAdder,
    /// `java.util.concurrent.atomic.AtomicLong`: `incrementAndGet()` + `decrementAndGet()`.
    AtomicLong,
}

impl JavaCounter {
    /// Both, in report order.
    pub(crate) const ALL: [JavaCounter; 2] = [JavaCounter::LongAdder, JavaCounter::AtomicLong];

    /// The contender name in tables and `results.json`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            JavaCounter::LongAdder => "Java LongAdder",
            JavaCounter::AtomicLong => "Java AtomicLong",
        }
    }

    /// The class name the probe's protocol takes.
    fn class(self) -> &'static str {
        match self {
            JavaCounter::LongAdder => "LongAdder",
            JavaCounter::AtomicLong => "AtomicLong",
        }
    }

    /// Its [`Info`]: a foreign contender, shown and never recommended.
    pub(crate) fn info(self) -> Info {
        Info {
            name: self.name().to_owned(),
            import: format!("java.util.concurrent.atomic.{} (JVM)", self.class()),
            kind: Kind::Foreign,
        }
    }
}

/// The name of the `LongAdder` contender.
pub(crate) const LONG_ADDER: &str = "Java LongAdder";

/// A running probe: a JVM answering `run` requests on its stdin.
#[derive(Debug)]
pub(crate) struct JavaProbe {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// `java -version`'s first line, for the report.
    pub version: String,
}

/// The probe's source, in the workspace.
pub(crate) fn source() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../benches/java/PairsProbe.java")
}

fn java() -> String {
    std::env::var(JAVA_ENV).unwrap_or_else(|_| "java".to_owned())
}

impl JavaProbe {
    /// Starts the probe and waits for its JIT warm-up. `Ok(None)`: no `java` to run (no JDK on
    /// this machine); `Err`: a `java` that could not run the probe (a JRE without the
    /// compiler, a broken source), with what it said.
    pub(crate) fn start() -> Result<Option<JavaProbe>, String> {
        let java = java();
        let version = match Command::new(&java).arg("-version").output() {
            Ok(out) => String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("java")
                .trim()
                .to_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot run `{java} -version`: {e}")),
        };
        let mut child = Command::new(&java)
            .arg(source())
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start `{java}`: {e}"))?;
        let stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        let read = stdout.read_line(&mut line);
        if line.trim() != "ready" {
            let _ = child.kill();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            let _ = child.wait();
            return Err(format!(
                "`{java} {}` did not start ({}): {}",
                source().display(),
                read.map_or_else(|e| e.to_string(), |_| format!("said `{}`", line.trim())),
                err.lines().take(3).collect::<Vec<_>>().join(" / ")
            ));
        }
        Ok(Some(JavaProbe {
            child,
            stdin,
            stdout,
            version,
        }))
    }

    /// `threads` threads each doing `per_thread` pairs on a fresh `counter`, timed by the
    /// threads workload's rule ([`threads_sample`]).
    pub(crate) fn run(
        &mut self,
        counter: JavaCounter,
        threads: usize,
        per_thread: u64,
    ) -> Result<Sample, String> {
        let per_thread = per_thread.max(1);
        writeln!(self.stdin, "run {} {threads} {per_thread}", counter.class())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("the Java probe stopped: {e}"))?;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| format!("the Java probe stopped: {e}"))?;
        let answer = || format!("the Java probe answered `{}`", line.trim());
        let ns: Vec<u64> = line
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|_| answer())?;
        let [window, cpu] = ns[..] else {
            return Err(answer());
        };
        let (window, cpu) = (Duration::from_nanos(window), Duration::from_nanos(cpu));
        Ok(threads_sample(
            window,
            Some(cpu),
            threads,
            threads as u64 * per_thread,
        ))
    }
}

/// The probe if `wanted` and a JDK runs it, and the line saying which JVM it is, or why there
/// is none (a JDK that cannot run the probe is reported, not fatal: the rest is measured).
pub(crate) fn start_or_say_why(wanted: bool) -> (Option<JavaProbe>, String) {
    const INSTALL: &str = "scripts/longadder.sh installs one";
    if !wanted {
        return (None, "not measured (--no-java)".into());
    }
    match JavaProbe::start() {
        Ok(Some(probe)) => {
            let version = probe.version.clone();
            (Some(probe), version)
        }
        Ok(None) => (None, format!("not measured: no `java` on PATH ({INSTALL})")),
        Err(e) => (None, format!("not measured: {e} ({INSTALL})")),
    }
}

impl Drop for JavaProbe {
    fn drop(&mut self) {
        // A probe mid-run would finish it first; nothing it does now is wanted.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_kinds() {
        assert_eq!(JavaCounter::LongAdder.name(), LONG_ADDER);
        let info = JavaCounter::AtomicLong.info();
        assert_eq!(info.kind, Kind::Foreign);
        assert!(info.import.contains("AtomicLong"), "{}", info.import);
        assert!(source().exists(), "{}", source().display());
    }

    /// With a JDK the probe runs and counts; without one `start` says so with `None`.
    #[test]
    fn the_probe_answers_when_a_jdk_is_present() {
        match JavaProbe::start() {
            Ok(Some(mut probe)) => {
                let s = probe.run(JavaCounter::LongAdder, 2, 1_000).unwrap();
                assert_eq!(s.pairs, 2_000);
                assert!(s.elapsed > Duration::ZERO);
            }
            Ok(None) => eprintln!("no java on PATH: the probe is not exercised"),
            Err(e) => panic!("{e}"),
        }
    }
}
