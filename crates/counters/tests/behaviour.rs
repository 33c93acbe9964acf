//! Behaviour the model checkers and the proptest oracle do not pin down: totals are there
//! and exact where an implementation keeps them; `Striped` opens stripes under contention;
//! thread indices are given back, so memory stays bounded under thread churn.

use std::sync::Arc;
use std::time::{Duration, Instant};

use livecount::{Counter, PerThread, Reference, Sharded, Single, Striped, Totals};

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
    // At least two indices were in use at once (this thread's and a churning one's), so
    // the buckets of 1 and 2 cells exist: 2^k − 1 cells for k ≥ 2. Other tests' threads in
    // this process may hold indices too: a few buckets at most.
    assert!(
        allocated >= 3 && (allocated + 1).is_power_of_two() && allocated <= 63,
        "{allocated} cells after 200 sequential threads: {debug}"
    );
}
