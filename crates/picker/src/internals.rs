//! Not API: the internals that `livecount-benches`' contention suite (the criterion front end)
//! and this crate's own integration tests share with the binary, so every front end measures
//! the same code. Hidden from the docs, free to change with any commit, and for this
//! workspace only: a user of the picker needs nothing here (the root names what they do).

/// The interface every workload drives, and the list of contenders.
pub mod contender {
    pub use crate::contender::{Contender, Live, LiveName, Tracked, Visit, all, for_each};
}

/// Which points a run measures, and measuring one.
pub mod plan {
    pub use crate::plan::{Ctx, Plan, Point, VisitLifecycle, for_each_lifecycle, run};
}

/// The workloads the criterion suite measures outside criterion's timing.
pub mod workload {
    pub use crate::workload::{ReadStats, Reader, memory, read_at_threads};
}

/// Criterion's own estimates, read back as figures.
pub mod estimates {
    pub use crate::estimates::{criterion_dir, figures};
}

/// The ranked table and livecount's targets, as the picker prints them.
pub mod report {
    pub use crate::report::{TARGETS_HEADING, TARGETS_NOTE, per_cpu_note, table, targets};
}

pub use crate::machine::cores;
pub use crate::sweep::conclude;
