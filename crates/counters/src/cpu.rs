//! Which CPU the calling thread runs on, as cheaply as the platform allows, and the one
//! restartable sequence `PerCpu` runs.
//!
//! * **rseq** (Linux, glibc 2.35 or later, which registers a restartable-sequences area for
//!   every thread and exports where it is: `__rseq_offset` from the thread pointer, and
//!   `__rseq_size`, 0 when it did not register). The kernel writes the thread's current CPU
//!   into the area's `cpu_id` on every return to user space after a migration, so reading it is
//!   one load; and a *critical section* registered through the area's `rseq_cs` field is
//!   aborted (restarted at its abort handler) if the thread is preempted, migrated or signalled
//!   before it commits. This crate never registers an area of its own: it finds glibc's with
//!   `dlsym`, so it links everywhere and falls back where the symbols are missing (musl,
//!   older glibc, static binaries) or `__rseq_size` is 0 (`GLIBC_TUNABLES=glibc.pthread.rseq=0`).
//! * **`sched_getcpu`** (Linux): a vDSO call, several times the cost of the rseq load.
//! * Under the model checkers the CPU is a model variable that a test can change between the
//!   read and the add ([`migrate`]), which is exactly what the kernel may do to a thread.

/// The number of CPUs the kernel may ever run a thread on (configured CPUs, not only those
/// this process may use now: an affinity mask or a cgroup leaves ids above its count in use).
pub(crate) fn possible() -> usize {
    let parallelism = std::thread::available_parallelism().map_or(1, |n| n.get());
    parallelism.max(configured())
}

#[cfg(target_os = "linux")]
fn configured() -> usize {
    // SAFETY: `sysconf` takes a constant name and has no preconditions; -1 means unknown.
    #[allow(unsafe_code)]
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    usize::try_from(n).unwrap_or(1)
}

#[cfg(not(target_os = "linux"))]
fn configured() -> usize {
    1
}

/// The CPU the calling thread runs on per `sched_getcpu()`, or `None` if it failed.
#[cfg(all(target_os = "linux", not(any(livecount_loom, livecount_shuttle))))]
#[inline]
pub(crate) fn sched_getcpu() -> Option<usize> {
    // SAFETY: `sched_getcpu` has no preconditions; it returns -1 (and sets errno) on failure.
    #[allow(unsafe_code)]
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// No `sched_getcpu` here (not Linux) or a model checker's CPU instead: always `None`, so
/// [`CpuSource::SchedGetcpu`](crate::CpuSource::SchedGetcpu) is unavailable.
#[cfg(not(all(target_os = "linux", not(any(livecount_loom, livecount_shuttle)))))]
// Not mutated (cargo-mutants reads `mutants::skip`; no build sets `cfg(mutants)`):
// compiled only off Linux or under a model checker, never in the build the tests run.
#[cfg_attr(mutants, mutants::skip)]
#[inline]
pub(crate) fn sched_getcpu() -> Option<usize> {
    None
}

/// The model checkers' CPU for the calling thread (`model::current`); `None` outside them,
/// where no counter takes the model's path.
// Not mutated (cargo-mutants reads `mutants::skip`; no build sets `cfg(mutants)`): the model
// checkers' hook; outside them `Path::Model`, its only caller, is never taken.
#[cfg_attr(mutants, mutants::skip)]
#[inline]
pub(crate) fn model_cpu() -> Option<usize> {
    #[cfg(any(livecount_loom, livecount_shuttle))]
    return model::current();
    #[cfg(not(any(livecount_loom, livecount_shuttle)))]
    None
}

/// The registered rseq area and the critical section, on x86-64 Linux with glibc.
#[cfg(livecount_rseq)]
pub(crate) mod rseq {
    use std::cell::Cell;
    use std::sync::OnceLock;

    use crate::sync::AtomicU64;

    /// `struct rseq`'s fields this code touches (the kernel's uapi `linux/rseq.h`): the
    /// current CPU (`u32` at byte 4) and the critical-section descriptor pointer (`u64` at 8).
    /// Both lie within the 20-byte original ABI every registration has.
    const CPU_ID: usize = 4;
    const RSEQ_CS: usize = 8;
    const ORIGINAL_SIZE: u32 = 20;

    /// The stride of `PerCpu`'s cache-padded cells (128 bytes on x86-64): the critical
    /// section addresses cell `cpu` as `cpu << CELL_SHIFT` bytes from cell 0.
    pub(crate) const CELL_SHIFT: u32 = 7;

    /// `__rseq_offset` when glibc registered an area for this process's threads.
    pub(crate) fn offset() -> Option<isize> {
        static OFFSET: OnceLock<Option<isize>> = OnceLock::new();
        *OFFSET.get_or_init(lookup)
    }

    fn lookup() -> Option<isize> {
        // SAFETY:
        // - `dlsym` with `RTLD_DEFAULT` and a NUL-terminated name has no preconditions and
        //   returns null when no loaded object defines the symbol;
        // - glibc defines `__rseq_size` as `const unsigned int` and `__rseq_offset` as
        //   `const ptrdiff_t` (`isize`), both set while the main thread's TLS is set up, before
        //   any Rust code runs, and never written again: reading them through the returned
        //   addresses is a read of initialised, immutable, correctly aligned data.
        #[allow(unsafe_code)]
        let (size, offset) = unsafe {
            let size = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr());
            let offset = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr());
            if size.is_null() || offset.is_null() {
                return None;
            }
            (*size.cast::<u32>(), *offset.cast::<isize>())
        };
        (size >= ORIGINAL_SIZE).then_some(offset)
    }

    std::thread_local! {
        /// The calling thread's rseq area (thread pointer + `__rseq_offset`), or 0 before
        /// its first update. A plain `const` thread-local: one load, no lazy-init state.
        static AREA: Cell<usize> = const { Cell::new(0) };
    }

    /// The address of the calling thread's rseq area. Call only where [`offset`] is `Some`.
    ///
    /// Cached per thread rather than addressed as `fs:[offset]` on every update: with the
    /// offset loaded from the counter first, that dependent `fs`-relative store and load
    /// about halved the critical section's throughput (side by side on a 2-core AMD EPYC VM);
    /// the cached address recovered most of it.
    #[inline(always)]
    pub(crate) fn area() -> usize {
        match AREA.get() {
            0 => locate_area(),
            area => area,
        }
    }

    #[cold]
    #[inline(never)]
    fn locate_area() -> usize {
        let offset = offset().expect("the rseq path is taken only where glibc registered rseq");
        let thread_pointer: usize;
        // SAFETY: the x86-64 ELF TLS ABI keeps the thread pointer itself at `fs:[0]` (the
        // TCB's self-pointer, what `__builtin_thread_pointer` reads); an aligned load of the
        // calling thread's own TCB, no stack, no flags.
        #[allow(unsafe_code)]
        unsafe {
            std::arch::asm!(
                "mov {tp}, qword ptr fs:[0]",
                tp = out(reg) thread_pointer,
                options(nostack, preserves_flags, readonly),
            );
        }
        let area = thread_pointer.wrapping_add_signed(offset);
        AREA.set(area);
        area
    }

    /// The calling thread's CPU as the kernel last wrote it into the area: `u32::MAX` (-1,
    /// uninitialised) or `u32::MAX - 1` (-2, registration failed) on a thread without one.
    /// Call only where [`offset`] is `Some`.
    #[inline]
    pub(crate) fn cpu_id() -> u32 {
        let area = area();
        let cpu: u32;
        // SAFETY:
        // - `area` is this thread's rseq area (thread pointer + glibc's `__rseq_offset`), in
        //   the thread's descriptor for the thread's whole life;
        // - the load reads the area's aligned `u32` `cpu_id`, which only the kernel writes, on
        //   this thread's return to user space (never concurrently with the thread itself);
        // - no stack, no flags, no other memory.
        #[allow(unsafe_code)]
        unsafe {
            std::arch::asm!(
                "mov {cpu:e}, dword ptr [{area} + {cpu_id}]",
                area = in(reg) area,
                cpu_id = const CPU_ID,
                cpu = lateout(reg) cpu,
                options(nostack, preserves_flags, readonly),
            );
        }
        cpu
    }

    /// Adds 1 to the word at `field + (cpu << CELL_SHIFT)` for the CPU the thread is on,
    /// without a locked instruction, if that byte offset is below `limit`. Returns `false`
    /// (and adds nothing) when it is not: a thread without a registered area, or a CPU with
    /// no cell.
    ///
    /// The CPU id is read and the word updated inside one restartable sequence: the add is
    /// the sequence's single committing instruction, and if the kernel preempts, migrates or
    /// signals the thread anywhere before it, the thread resumes at the abort handler, which
    /// starts over (reading the CPU again). So the word is only ever written by a thread that
    /// ran on `cpu` from the read to the write, and two threads on one CPU never interleave
    /// their read-modify-writes of it.
    ///
    /// # Safety
    ///
    /// - `area` is the calling thread's [`area`];
    /// - for every `cpu` with `cpu << CELL_SHIFT < limit`, `field + (cpu << CELL_SHIFT)` is
    ///   the address of a live `AtomicU64` that outlives the call;
    /// - no other code writes those words except through this function (a locked add from
    ///   another CPU could interleave with this unlocked one and lose an update).
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) unsafe fn add_on_this_cpu(area: usize, field: *const AtomicU64, limit: u64) -> bool {
        let at: u64;
        // SAFETY: by the kernel ABI (`linux/rseq.h` and the kernel's `rseq_ip_fixup`):
        // - `area` is this thread's rseq area, registered by glibc (see `cpu_id`): the
        //   thread pointer plus `__rseq_offset`, in the thread's descriptor for its whole
        //   life; `area + 8` is its `rseq_cs` pointer, which only this thread writes (the
        //   kernel clears it after an abort, and when it finds the thread outside the section);
        // - label `5` is a `struct rseq_cs` descriptor, 32-byte aligned as the ABI requires,
        //   in a writable data section so the dynamic linker can relocate its absolute
        //   addresses in a PIE: version 0, flags 0, `start_ip` = label `3`,
        //   `post_commit_offset` = label `4` − label `3`, `abort_ip` = label `6`;
        // - label `6` is preceded by the 4-byte signature glibc registered the area with
        //   (`RSEQ_SIG`, 0x53053053 on x86), encoded as the tail of a `ud1` instruction as
        //   librseq does, so nothing falls into it and the kernel's signature check passes;
        //   the abort handler jumps back to label `2`, which stores the descriptor again
        //   (the kernel cleared it) and restarts the whole sequence;
        // - the sequence writes no memory before its commit: the `add` is its last
        //   instruction, so an abort anywhere before it leaves nothing half done, and once it
        //   retired the thread is at `post_commit_ip`, outside the section;
        // - the word added to is in bounds by the caller's contract and the `cmp`/`jae`
        //   bounds check (64-bit compare of the zero-extended CPU id, so -1 and -2 fail it);
        // - uses no stack; clobbers flags (no `preserves_flags`); writes memory (no `nomem`),
        //   so the compiler keeps every memory access of the program on its side of the block.
        unsafe {
            std::arch::asm!(
                "2:",
                "lea {at}, [rip + 5f]",
                "mov qword ptr [{area} + {rseq_cs}], {at}",
                "3:",
                "mov {at:e}, dword ptr [{area} + {cpu_id}]",
                "shl {at}, {shift}",
                "cmp {at}, {limit}",
                "jae 4f",
                "add qword ptr [{field} + {at}], 1",
                "4:",
                ".pushsection __rseq_failure, \"ax\"",
                ".byte 0x0f, 0xb9, 0x3d",
                ".long 0x53053053",
                "6:",
                "jmp 2b",
                ".popsection",
                ".pushsection __rseq_cs, \"aw\"",
                ".balign 32",
                "5:",
                ".long 0, 0",
                ".quad 3b, 4b - 3b, 6b",
                ".popsection",
                area = in(reg) area,
                field = in(reg) field,
                limit = in(reg) limit,
                rseq_cs = const RSEQ_CS,
                cpu_id = const CPU_ID,
                shift = const CELL_SHIFT,
                at = out(reg) at,
                options(nostack),
            );
        }
        at < limit
    }
}

/// The model checkers' CPU: each model thread sits on CPU `thread index + shift`, and
/// [`migrate`] moves every thread to the next CPU at once, so a model can put a migration
/// between any update's CPU read and its add.
#[cfg(any(livecount_loom, livecount_shuttle))]
// Not mutated (cargo-mutants reads `mutants::skip`; no build sets `cfg(mutants)`):
// the model checkers' instrumentation, compiled only under them.
#[cfg_attr(mutants, mutants::skip)]
pub(crate) mod model {
    use crate::sync::{AtomicUsize, Ordering};

    #[cfg(livecount_loom)]
    loom::lazy_static! {
        static ref SHIFT: AtomicUsize = AtomicUsize::new(0);
    }

    #[cfg(all(livecount_shuttle, not(livecount_loom)))]
    shuttle::lazy_static! {
        static ref SHIFT: AtomicUsize = AtomicUsize::new(0);
    }

    /// The calling model thread's current CPU (or `None` during thread teardown).
    #[inline]
    pub(crate) fn current() -> Option<usize> {
        // Relaxed: a CPU id carries no data; any value, stale or not, is a CPU the thread
        // could be on, which is all the counter may assume of the real ones.
        crate::thread_id::current().map(|index| index + SHIFT.load(Ordering::Relaxed))
    }

    /// Moves every model thread to the next CPU.
    pub(crate) fn migrate() {
        SHIFT.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(any(livecount_loom, livecount_shuttle))))]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_machine_has_at_least_the_cpus_it_may_use() {
        let usable = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(possible() >= usable);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sched_getcpu_names_a_possible_cpu() {
        let cpu = sched_getcpu().expect("Linux has sched_getcpu");
        assert!(cpu < possible(), "CPU {cpu} of {}", possible());
    }

    /// The CPUs this process may run on.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    fn allowed() -> Vec<usize> {
        // SAFETY: a zeroed `cpu_set_t` is a valid empty bit array; the call fills it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set),
                0
            );
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
                .collect()
        }
    }

    /// Runs `check(cpu)` on a thread pinned to each allowed CPU in turn.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    pub(crate) fn on_each_cpu(check: impl Fn(usize) + Sync) {
        for cpu in allowed() {
            std::thread::scope(|s| {
                s.spawn(|| {
                    // SAFETY: as in `allowed`: a bit array with one bit set, read by the call.
                    unsafe {
                        let mut set: libc::cpu_set_t = std::mem::zeroed();
                        libc::CPU_SET(cpu, &mut set);
                        assert_eq!(
                            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set),
                            0
                        );
                    }
                    check(cpu);
                });
            });
        }
    }

    /// Pinned to a CPU, a thread is told that CPU (not, say, always CPU 0, which would
    /// still count exactly but put every update on one cell).
    #[cfg(target_os = "linux")]
    #[test]
    fn sched_getcpu_names_the_cpu_a_pinned_thread_runs_on() {
        on_each_cpu(|cpu| assert_eq!(sched_getcpu(), Some(cpu)));
    }

    /// The same for the CPU id read from the rseq area.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_rseq_cpu_id_names_the_cpu_a_pinned_thread_runs_on() {
        let Some(_) = rseq::offset() else {
            eprintln!("NOTE: no rseq area registered by glibc here; nothing to compare");
            return;
        };
        on_each_cpu(|cpu| assert_eq!(rseq::cpu_id() as usize, cpu));
    }

    /// Where glibc registered an area, the rseq CPU id agrees with `sched_getcpu` (which
    /// glibc itself answers from the same area): pinned to one CPU, both name it.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_rseq_cpu_id_is_the_cpu_the_thread_is_on() {
        let Some(_) = rseq::offset() else {
            eprintln!("NOTE: no rseq area registered by glibc here; nothing to compare");
            return;
        };
        std::thread::spawn(move || {
            for _ in 0..100 {
                let before = sched_getcpu().unwrap();
                let cpu = rseq::cpu_id() as usize;
                let after = sched_getcpu().unwrap();
                if before == after {
                    assert_eq!(cpu, before);
                    return;
                }
            }
            panic!("the thread migrated between every pair of reads");
        })
        .join()
        .unwrap();
    }
}
