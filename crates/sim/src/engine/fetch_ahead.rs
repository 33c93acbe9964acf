//! Asking memory early: at scale the session table, the backends and the views outgrow the
//! cache, and the loop knows its next events, so it asks for their lines ahead. A hint only:
//! nothing here changes a value the simulation reads.

use super::Engine;
use crate::backend::Backend;
use crate::event_queue::Event;
use crate::policy::BackendView;

/// How many events ahead the loop asks memory for a session's slot, and (half as far, by
/// when the slot has arrived) for its backend and view: far enough to cover a miss to
/// memory, near enough that what was fetched is still in cache when its event runs.
const FETCH_AHEAD: usize = 16;

/// Asks the CPU to bring the cache lines from `first` on (`lines` of 64 bytes) towards the
/// core. Only a hint: it changes no value, and on other targets it is nothing.
#[inline(always)]
#[allow(unsafe_code)]
pub(super) fn prefetch<T>(first: &T, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p: *const i8 = (first as *const T).cast();
        for line in 0..lines {
            // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has (it is in the
            // target's baseline). PREFETCHT0 reads nothing into the program and cannot
            // fault, whatever the address: a line past the object (`wrapping_add`, no
            // dereference) is at worst a wasted fetch.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(line * 64)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (first, lines);
}

impl Engine<'_> {
    /// At scale the session table, the backends and the views outgrow the cache, and
    /// every event would wait on memory for its session and then its backend. The next
    /// events are known, so their lines are asked for early: the session slot of the event
    /// [`FETCH_AHEAD`] places on, and the backend and view of the one half as far (whose
    /// slot was asked for earlier). Changes no state.
    pub(super) fn fetch_ahead(&self) {
        if let Some(Event::End(id, _) | Event::Phase(id, _)) = self.queue.ahead(FETCH_AHEAD)
            && let Some(s) = self.sessions.get(*id as usize)
        {
            prefetch(s, 1);
        }
        let backend = match self.queue.ahead(FETCH_AHEAD / 2) {
            Some(Event::End(id, _) | Event::Phase(id, _)) => self
                .sessions
                .get(*id as usize)
                .map(|s| (s.backend, s.proxy)),
            Some(Event::TakeReport(b)) => Some((*b, 0)),
            _ => None,
        };
        if let Some((b, p)) = backend {
            if let Some(backend) = self.backends.get(b as usize) {
                prefetch(backend, Backend::HOT_LINES);
            }
            if let Some(view) = self
                .proxies
                .get(p as usize)
                .and_then(|p| p.views.get(b as usize))
            {
                prefetch(view, std::mem::size_of::<BackendView>().div_ceil(64));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::{engine, scenario};

    /// Prefetching reads nothing into the program: a run with it is the same run.
    #[test]
    fn fetching_ahead_changes_no_state() {
        let sc = scenario("");
        let mut e = engine(&sc, "least_request");
        for _ in 0..200 {
            let Some((at, event)) = e.queue.pop() else {
                break;
            };
            e.now = at;
            let before = format!("{:?}", e.sessions);
            e.fetch_ahead();
            assert_eq!(before, format!("{:?}", e.sessions));
            e.handle(event);
        }
        assert!(e.collector.summary.assigned > 0, "the loop ran sessions");
    }

    /// A line past the object (or a dangling one) is at worst a wasted fetch.
    #[test]
    fn prefetching_past_an_object_is_harmless() {
        let x = [0u8; 3];
        prefetch(&x, 4);
    }
}
