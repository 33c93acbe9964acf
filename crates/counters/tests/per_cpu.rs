//! `PerCpu` on real CPUs: exact under forced migrations (threads re-pinned with
//! `sched_setaffinity` while they count), on every CPU source this machine has, and the
//! fallback taken when glibc's rseq is switched off (`GLIBC_TUNABLES=glibc.pthread.rseq=0`, in
//! a child process: the tunable is read once, at process start).
#![cfg(target_os = "linux")]

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use livecount::{Counter, CpuSource, PerCpu, Totals};

/// Workers counting at once: more than this machine's two cores, so some share a CPU (and
/// its cell) and preempt each other mid-update as well as migrate.
const WORKERS: usize = 4;
/// How long the mover re-pins the workers, per source.
const MIGRATING_FOR: Duration = Duration::from_millis(800);
/// Migrations the workers must have seen for the test to mean anything.
const MIN_MIGRATIONS: u64 = 100;

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `set` is a zeroed `cpu_set_t`, a plain bit array; `sched_getaffinity` fills it
    // for the calling thread (0) and reads nothing else.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set),
            0,
            "sched_getaffinity failed"
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

/// Pins thread `tid` to `cpu`; `false` if the thread is gone.
fn pin(tid: libc::pid_t, cpu: usize) -> bool {
    // SAFETY: as above, a zeroed bit array with one bit set, read by the call.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(tid, size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

fn current_cpu() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::sched_getcpu() }
}

/// `WORKERS` threads run start/end pairs (each with one session held open throughout) while
/// the main thread re-pins every worker to the next allowed CPU every 200 µs. Returns the
/// migrations the workers saw (a change of `sched_getcpu` between two batches).
fn count_while_migrating(counter: &PerCpu) -> u64 {
    let cpus = allowed_cpus();
    assert!(
        cpus.len() >= 2,
        "this test forces migrations and needs 2 CPUs to move threads between; \
         this process may use only {cpus:?}"
    );
    let stop = AtomicBool::new(false);
    let pairs = AtomicU64::new(0);
    let migrations = AtomicU64::new(0);
    let (tids, workers) = mpsc::channel();
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            let tids = tids.clone();
            let (stop, pairs, migrations) = (&stop, &pairs, &migrations);
            s.spawn(move || {
                // SAFETY: no preconditions.
                let tid = unsafe { libc::gettid() };
                tids.send(tid).unwrap();
                let held = counter.increment();
                let (mut done, mut seen, mut last) = (0, 0, current_cpu());
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..256 {
                        let token = counter.increment();
                        counter.decrement(token);
                    }
                    done += 256;
                    let now = current_cpu();
                    seen += u64::from(now != last);
                    last = now;
                }
                counter.decrement(held);
                pairs.fetch_add(done, Ordering::Relaxed);
                migrations.fetch_add(seen, Ordering::Relaxed);
            });
        }
        drop(tids);
        let tids: Vec<_> = workers.iter().take(WORKERS).collect();
        let until = Instant::now() + MIGRATING_FOR;
        let mut round = 0;
        while Instant::now() < until {
            for (i, &tid) in tids.iter().enumerate() {
                assert!(
                    pin(tid, cpus[(i + round) % cpus.len()]),
                    "re-pinning failed"
                );
            }
            round += 1;
            std::thread::sleep(Duration::from_micros(200));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let pairs = pairs.load(Ordering::Relaxed) + WORKERS as u64;
    assert_eq!(
        counter.totals(),
        Some(Totals {
            started: pairs,
            ended: pairs
        }),
        "{counter:?} lost or invented updates under forced migrations"
    );
    assert_eq!(counter.load(), 0);
    migrations.load(Ordering::Relaxed)
}

/// Every source, and a counter with fewer cells than CPUs (the overflow cell), is exact while
/// its threads are moved between CPUs mid-update. For `Rseq` this is the test of the
/// critical section: an unlocked add that did not restart after a migration would race the
/// thread now on the old CPU and lose updates.
#[test]
fn exact_under_forced_migrations_on_every_source() {
    for source in CpuSource::available() {
        for cells in [possible_cpus(), 1] {
            let counter = PerCpu::with_source(cells, source).unwrap();
            let migrations = count_while_migrating(&counter);
            eprintln!("{source} with {cells} cells: exact across {migrations} migrations");
            assert!(
                migrations >= MIN_MIGRATIONS,
                "{source}: only {migrations} migrations seen; the test proved nothing"
            );
        }
    }
}

fn possible_cpus() -> usize {
    PerCpu::new().cells()
}

/// Whether this process's glibc registers rseq unless told not to (2.35 and later).
fn glibc_registers_rseq() -> bool {
    // SAFETY: returns a pointer to a static NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    let version = version.to_str().expect("an ASCII version");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 35)
}

/// Where glibc registers rseq (and nobody switched it off), `PerCpu` uses the critical
/// section: the fast path is not silently lost to a fallback.
#[cfg(target_arch = "x86_64")]
#[test]
fn rseq_is_used_wherever_glibc_registered_it() {
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if !glibc_registers_rseq() || tunables.contains("rseq=0") {
        eprintln!("NOTE: glibc here does not register rseq ({tunables:?}); PerCpu falls back");
        assert_ne!(CpuSource::best(), CpuSource::Rseq);
        return;
    }
    assert_eq!(
        PerCpu::new().cpu_source(),
        CpuSource::Rseq,
        "glibc 2.35+ registers rseq, but PerCpu did not find it"
    );
}

/// The variable that tells this test binary it is the child of `rseq_switched_off_…`.
const CHILD: &str = "LIVECOUNT_PER_CPU_FALLBACK_CHILD";
/// What the child prints once it has checked everything.
const CHILD_DONE: &str = "per-cpu fallback child: done";

/// With `GLIBC_TUNABLES=glibc.pthread.rseq=0` glibc registers no rseq area (`__rseq_size`
/// is 0): `PerCpu` must notice, refuse the rseq sources with a reason, and count exactly on
/// `sched_getcpu` — here in a child process of this test binary, since the tunable is read at
/// process start.
#[test]
fn rseq_switched_off_falls_back_to_sched_getcpu() {
    if std::env::var_os(CHILD).is_some() {
        for source in [CpuSource::Rseq, CpuSource::RseqCpuId] {
            assert!(!source.is_available(), "{source} with rseq switched off");
            let error = PerCpu::with_source(2, source).unwrap_err().to_string();
            assert!(error.contains("glibc.pthread.rseq=0"), "{error}");
        }
        let counter = PerCpu::new();
        assert_eq!(counter.cpu_source(), CpuSource::SchedGetcpu);
        let migrations = count_while_migrating(&counter);
        println!("{CHILD_DONE}: sched_getcpu exact across {migrations} migrations");
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([
            "--exact",
            "rseq_switched_off_falls_back_to_sched_getcpu",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("GLIBC_TUNABLES", "glibc.pthread.rseq=0")
        .output()
        .expect("start the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(CHILD_DONE),
        "the child failed or did not run the check ({}):\n{stdout}\n{stderr}",
        out.status
    );
    eprintln!(
        "{}",
        stdout.lines().find(|l| l.contains(CHILD_DONE)).unwrap()
    );
}
