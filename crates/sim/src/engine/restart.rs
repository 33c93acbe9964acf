//! The rolling restart: backend 0, 1, … told in turn to restart, cut or drained, away for
//! `restart_s`, back empty; the next one `gap_s` after the previous one is back.
//!
//! How the balancer learns of a drain: the backend's next load report says so (weight 0,
//! as an ORCA or agent-check report would), after `reports.delay_s` and unless it is lost;
//! its health check fails `reports.health_check_s` after the drain began; and a proxy that
//! sends it a session before either is refused (the listener is closed), counted in
//! `rejected` and in the restart's `refused`, and marks it down itself, as it would a dead
//! one. A cut backend is simply dead until it is back.

use super::Engine;
use crate::event_queue::Event;
use crate::scenario::{RestartMode, RollingRestart};
use crate::session_plan::EndReason;

impl Engine<'_> {
    fn rolling_restart(&self) -> &RollingRestart {
        self.sc
            .rolling_restart
            .as_ref()
            .expect("a restart event without a rolling restart")
    }

    /// Backend `b` is told to restart.
    pub(super) fn restart(&mut self, b: usize) {
        let (mode, deadline) = {
            let r = self.rolling_restart();
            (r.mode, r.drain_deadline_s)
        };
        if b == 0 {
            self.collector.restart_window(true, self.now);
        }
        match mode {
            RestartMode::Cut => self.exit_for_restart(b),
            RestartMode::Drain => {
                self.backends[b].draining = true;
                let deadline = deadline.expect("validated: drain mode has a deadline");
                self.queue
                    .push(self.now + deadline, Event::DrainDeadline(b as u32));
                let check = self.now + self.sc.reports.health_check_s;
                self.queue.push(check, Event::HealthCheck(b as u32));
                self.drained(b);
            }
        }
    }

    /// A draining backend whose last session has ended exits at once (its graceful
    /// shutdown returns).
    pub(super) fn drained(&mut self, b: usize) {
        let backend = &self.backends[b];
        if backend.draining && backend.open == 0 {
            self.exit_for_restart(b);
        }
    }

    /// The drain deadline of backend `b`: the sessions still open end `shutdown` and it
    /// exits. Nothing when it emptied and exited before.
    pub(super) fn drain_deadline(&mut self, b: usize) {
        if self.backends[b].draining {
            self.exit_for_restart(b);
        }
    }

    /// Backend `b`'s process exits, ending its open sessions `shutdown`; its replacement is
    /// ready `restart_s` later.
    fn exit_for_restart(&mut self, b: usize) {
        self.take_down(b, EndReason::Shutdown);
        let back = self.now + self.rolling_restart().restart_s;
        self.queue.push(back, Event::Restarted(b as u32));
    }

    /// Backend `b`'s replacement is ready: back, empty; the next one restarts `gap_s`
    /// later, or the restart is over.
    pub(super) fn restarted(&mut self, b: usize) {
        self.bring_up(b);
        let next = b + 1;
        if next < self.backends.len() {
            let at = self.now + self.rolling_restart().gap_s;
            self.queue.push(at, Event::Restart(next as u32));
        } else {
            self.collector.restart_window(false, self.now);
        }
    }
}
