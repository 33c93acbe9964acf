//! Behaviour the model checkers and the proptest oracle do not pin down: totals are there
//! and exact where an implementation keeps them; `Striped` opens stripes under contention;
//! thread indices are given back, so memory stays bounded under thread churn.

use std::sync::Arc;
use std::time::{Duration, Instant};

use livecount::{Counter, PerCpu, PerThread, Reference, Sharded, Single, Striped, Totals};

/// 5 starts and 3 ends, some of them on other threads: `totals` is `Some` and exact.
fn exact_totals<C: Counter>(counter: C) -> Option<Totals> {
    let tokens: Vec<_> = (0..5).map(|_| counter.increment()).collect();
    let mut tokens = tokens.into_iter();
    std::thread::scope(|s| {
        for t in tokens.by_ref().take(3) {
            let counter = &counter;
            s.spawn(move || counter.decrement(t));
        }
    });
    let totals = counter.totals();
    tokens.for_each(|t| counter.decrement(t));
    totals
}

#[test]
fn totals_are_kept_and_exact_where_promised() {
    let expected = Some(Totals {
        started: 5,
        ended: 3,
    });
    assert_eq!(exact_totals(PerThread::new()), expected, "PerThread");
    assert_eq!(exact_totals(PerCpu::new()), expected, "PerCpu");
    assert_eq!(exact_totals(Sharded::new()), expected, "Sharded");
    assert_eq!(exact_totals(Striped::new()), expected, "Striped");
    assert_eq!(exact_totals(Reference::new()), expected, "Reference");
    assert_eq!(
        exact_totals(Single::new()),
        None,
        "Single keeps only the gauge"
    );
}

/// Eight threads updating one `Striped` collide on its base within seconds on any machine
/// with more than one hardware thread, and the first collision opens the stripes.
#[test]
fn contention_opens_stripes() {
    let counter = Arc::new(Striped::with_max_stripes(8));
    let deadline = Instant::now() + Duration::from_secs(20);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                while counter.stripes() == 0 && Instant::now() < deadline {
                    for _ in 0..1_000 {
                        let t = counter.increment();
                        counter.decrement(t);
                    }
                }
            });
        }
    });
    let stripes = counter.stripes();
    assert!(
        (2..=counter.max_stripes()).contains(&stripes) && stripes.is_power_of_two(),
        "no contention opened the stripes in 20 s of 8 threads: {stripes}"
    );
    assert_eq!(counter.load(), 0);
    assert_eq!(counter.totals().unwrap().active(), 0);
}

/// 200 threads, one after another, each counting on a `PerThread`: each takes the index
/// the last one gave back, so the counter ends with the cells of a handful of indices, not
/// 200 (a leaked index would allocate buckets up to 256 cells).
#[test]
fn thread_churn_reuses_indices_and_memory_stays_bounded() {
    let counter = PerThread::new();
    // This thread counts too and keeps its index: the churning threads take another one.
    let mine = counter.increment();
    for _ in 0..200 {
        std::thread::scope(|s| {
            s.spawn(|| {
                let t = counter.increment();
                counter.decrement(t);
            });
        });
    }
    counter.decrement(mine);
    assert_eq!(
        counter.totals(),
        Some(Totals {
            started: 201,
            ended: 201
        })
    );
    // `Debug` shows the cells the table has allocated (buckets of 1, 2, 4, …).
    let debug = format!("{counter:?}");
    let allocated: usize = debug
        .split("allocated_cells: ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no allocated_cells in {debug}"));
    // Two indices at a time (this thread's and a churning one's) need a bucket or two. Other
    // tests' threads in this process (`cargo test` runs them side by side) may hold the low
    // indices, which moves ours into later buckets: still a few buckets, never the 255
    // cells a leaked index per thread would take.
    assert!(
        (1..=63).contains(&allocated),
        "{allocated} cells after 200 sequential threads: {debug}"
    );
}

/// `Sharded`'s shard count: a power of two, at least 1, twice the parallelism by default.
#[test]
fn sharded_rounds_its_shards_to_a_power_of_two() {
    assert_eq!(livecount::Sharded::with_shards(5).shards(), 8);
    assert_eq!(livecount::Sharded::with_shards(4).shards(), 4);
    assert_eq!(livecount::Sharded::with_shards(0).shards(), 1);
    let cpus = std::thread::available_parallelism().map_or(4, |n| n.get());
    assert_eq!(
        livecount::Sharded::new().shards(),
        (2 * cpus).next_power_of_two()
    );
}

/// A token's `Debug` names it and nothing else (it carries no count to show).
#[test]
fn a_token_debugs_as_its_name() {
    let counter = livecount::PerThread::new();
    let token = counter.increment();
    assert_eq!(format!("{token:?}"), "Token");
    counter.decrement(token);
}

/// Under contention `Striped` doubles its stripes on collisions until the cap, and never
/// past it: every count observed on the way is a power of two within the cap, the cap is
/// reached (16 stripes, 32 threads: more threads than the cap, so two threads always share
/// a stripe and collisions keep coming at every count below it — with 8 threads they could
/// spread over 8 stripes and stop colliding, which a mutation-testing baseline once hit),
/// and half a second more of contention at the cap does not take it further.
#[test]
fn contention_grows_the_stripes_to_the_cap_and_no_further() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let counter = Arc::new(Striped::with_max_stripes(16));
    let deadline = Instant::now() + Duration::from_secs(30);
    let stop = AtomicBool::new(false);
    let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
    std::thread::scope(|s| {
        for _ in 0..32 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1_000 {
                        let t = counter.increment();
                        counter.decrement(t);
                    }
                    seen.lock().unwrap().insert(counter.stripes());
                }
            });
        }
        while counter.stripes() < counter.max_stripes() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
    });
    let seen = seen.into_inner().unwrap();
    assert!(
        seen.iter()
            .all(|&n| n <= 16 && (n == 0 || n.is_power_of_two())),
        "stripe counts seen: {seen:?}"
    );
    assert_eq!(
        counter.stripes(),
        16,
        "the cap was not reached in 30 s: {seen:?}"
    );
    assert_eq!(counter.totals().unwrap().active(), 0);
}
