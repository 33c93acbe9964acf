//! [`DescriptorBudget`]: how many pending connections fit below the process's
//! file-descriptor limit.
//!
//! Every accepted connection is a descriptor. A server that holds more pending (not yet
//! upgraded) connections than the process has descriptors left fails its `accept` with
//! `EMFILE` and then admits nobody until an attacker's connection times out, so the bound
//! on pending connections is taken from the limit itself:
//!
//! * **Default:** `min(MAX_DEFAULT_PENDING, soft_limit / 2 − open)`, at least 1, where
//!   `open` is the number of descriptors open when the server starts. The other half of
//!   the limit stays free for what the pending connections become (upgraded WebSocket
//!   sessions, which the application bounds) and for the files, pipes and sockets the rest
//!   of the process opens.
//! * **Explicit:** the requested bound, capped at `soft_limit − open − RESERVE` (at least
//!   1), so the listener can still accept while every pending slot is taken.
//!
//! The soft `RLIMIT_NOFILE` is what `accept` is held to; an unlimited soft limit, or a
//! platform without one (not unix), leaves only `MAX_DEFAULT_PENDING` for the default and
//! the request itself for an explicit bound. Descriptors are counted in `/proc/self/fd`
//! (Linux) or `/dev/fd` (macOS, the BSDs); where neither can be read they count as 0.

/// The ceiling of the default bound on pending connections (the bound is otherwise half
/// the descriptor limit minus the descriptors open): a real client is pending for a round
/// trip, so even 100 000 new connections a second keep only a few hundred pending, while
/// a higher limit (servers often run with 1 048 576) would let an attacker hold that many
/// half-sent heads, and their buffers, for a whole head timeout.
pub const MAX_DEFAULT_PENDING: usize = 4096;

/// Descriptors an explicit bound leaves free beyond those open at start: the listener's
/// next `accept`, and a few files or sockets the application opens meanwhile.
pub(crate) const RESERVE: u64 = 32;

/// The soft descriptor limit and the descriptors open, read once when a server starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DescriptorBudget {
    /// The soft `RLIMIT_NOFILE`; `None` when unlimited or unknown.
    limit: Option<u64>,
    /// Descriptors open when it was read.
    open: u64,
}

impl DescriptorBudget {
    /// This process's soft limit and the descriptors it has open now.
    pub(crate) fn of_this_process() -> Self {
        Self::new(soft_limit(), open_descriptors())
    }

    /// A budget of `limit` descriptors (`None`: unlimited) with `open` already used.
    pub(crate) fn new(limit: Option<u64>, open: u64) -> Self {
        Self { limit, open }
    }

    /// The default bound on pending connections: half the limit minus the descriptors
    /// open, at most [`MAX_DEFAULT_PENDING`], at least 1.
    pub(crate) fn default_max_pending(self) -> usize {
        let half_free = self
            .limit
            .map_or(u64::MAX, |limit| (limit / 2).saturating_sub(self.open));
        clamp_to_usize(half_free.min(MAX_DEFAULT_PENDING as u64))
    }

    /// `requested`, capped so that the pending connections, the descriptors open and
    /// [`RESERVE`] fit in the limit; at least 1.
    pub(crate) fn cap(self, requested: usize) -> usize {
        let room = self.limit.map_or(u64::MAX, |limit| {
            limit.saturating_sub(self.open).saturating_sub(RESERVE)
        });
        clamp_to_usize(room.min(requested as u64))
    }
}

/// `n` as a `usize`, at least 1 (a server with no pending slot could accept nobody).
fn clamp_to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX).max(1)
}

/// The soft `RLIMIT_NOFILE`, `None` if unlimited.
#[cfg(unix)]
fn soft_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// No descriptor limit to read here.
#[cfg(not(unix))]
fn soft_limit() -> Option<u64> {
    None
}

/// The descriptors this process has open (0 if they cannot be listed). The listing's own
/// descriptor is counted too, which errs on the safe side by one.
fn open_descriptors() -> u64 {
    ["/proc/self/fd", "/dev/fd"]
        .iter()
        .find_map(|dir| std::fs::read_dir(dir).ok())
        .map_or(0, |entries| entries.count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_half_the_limit_minus_what_is_open() {
        assert_eq!(
            DescriptorBudget::new(Some(200), 12).default_max_pending(),
            88
        );
        assert_eq!(
            DescriptorBudget::new(Some(1024), 24).default_max_pending(),
            488
        );
        // Never above the ceiling, never 0.
        let huge = DescriptorBudget::new(Some(1 << 20), 10);
        assert_eq!(huge.default_max_pending(), MAX_DEFAULT_PENDING);
        assert_eq!(
            DescriptorBudget::new(None, 10).default_max_pending(),
            MAX_DEFAULT_PENDING
        );
        assert_eq!(
            DescriptorBudget::new(Some(200), 150).default_max_pending(),
            1
        );
    }

    #[test]
    fn an_explicit_bound_is_capped_below_the_limit() {
        let budget = DescriptorBudget::new(Some(200), 12);
        assert_eq!(budget.cap(64), 64);
        assert_eq!(budget.cap(10_000), 200 - 12 - RESERVE as usize);
        assert_eq!(budget.cap(0), 1);
        assert_eq!(DescriptorBudget::new(Some(40), 30).cap(10), 1);
        assert_eq!(DescriptorBudget::new(None, 30).cap(100_000), 100_000);
    }

    #[test]
    fn this_process_has_a_limit_and_open_descriptors() {
        let budget = DescriptorBudget::of_this_process();
        assert!(
            budget.open >= 3,
            "stdin, stdout, stderr at least: {budget:?}"
        );
        #[cfg(unix)]
        assert!(
            budget.limit.is_some_and(|limit| limit > budget.open),
            "{budget:?}"
        );
    }
}
