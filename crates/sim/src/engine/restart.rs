//! The rolling restart: backend 0, 1, … told in turn to restart, cut or drained, away for
//! `restart_s`, back empty; the next one `gap_s` after the previous one is back.
//!
//! How the balancer learns of a drain: the backend's next load report says so (weight 0,
//! as an ORCA or agent-check report would), after `reports.delay_s` and unless it is lost;
//! its health check fails `reports.health_check_s` after the drain began; and a proxy that
//! sends it a session before either is refused (the listener is closed), counted in
//! `rejected` and in the restart's `refused`, and marks it down itself, as it would a dead
//! one. A cut backend is simply dead until it is back.
//!
//! A session the restart ends (`shutdown`, at once or at the drain deadline) is a call
//! dropped, not a call over: its client (`reconnect_share` of them) comes back
//! `reconnect_after_s` later through the same proxy, and the policy places it like an
//! arrival, with what was left of its plan (length, how it ends, cost weight). It has one
//! try, as an arrival does: refused (a drainer the balancer does not know of yet) or
//! dropped, it is gone; placed on a backend that restarts in turn, it is cut again.

use super::Engine;
use crate::SimRng;
use crate::event_queue::Event;
use crate::scenario::{RestartMode, RollingRestart};
use crate::session_plan::{EndReason, SessionPlan};

/// A client cut by the restart, on its way back: what is left of its session.
#[derive(Debug, Clone)]
pub(super) struct Reconnect {
    /// The proxy it came through, and comes back through.
    proxy: u32,
    /// The rest of its plan: the length still to run, from its return.
    plan: SessionPlan,
    /// Its session's own stream, going on where the cut part left it.
    rng: SimRng,
}

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
    /// shutdown returns): for a restart, or for a scale-in (`autoscale`).
    pub(super) fn drained(&mut self, b: usize) {
        let backend = &self.backends[b];
        if backend.draining && backend.open == 0 {
            if self.scaler.is_some() {
                self.scaled_in_exit(b);
            } else {
                self.exit_for_restart(b);
            }
        }
    }

    /// The drain deadline of backend `b`: the sessions still open end `shutdown` and it
    /// exits. Nothing when it emptied and exited before.
    pub(super) fn drain_deadline(&mut self, b: usize) {
        if self.scaler.is_some() {
            self.scaled_drain_deadline(b);
        } else if self.backends[b].draining {
            self.exit_for_restart(b);
        }
    }

    /// Backend `b`'s process exits, ending its open sessions `shutdown` (their clients
    /// reconnect); its replacement is ready `restart_s` later.
    fn exit_for_restart(&mut self, b: usize) {
        for id in self.open_on(b) {
            self.schedule_reconnect(id);
        }
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

// === reconnects ===

impl Engine<'_> {
    /// The share of cut clients that reconnect, and after how long: the rolling restart's
    /// or the autoscaler's (a scenario has at most one of them).
    fn reconnect_terms(&self) -> (f64, f64) {
        match (&self.sc.rolling_restart, &self.sc.autoscaler) {
            (Some(r), _) => (r.reconnect_share, r.reconnect_after_s),
            (None, Some(a)) => (a.reconnect_share, a.reconnect_after_s),
            (None, None) => panic!("a cut without a rolling restart or an autoscaler"),
        }
    }

    /// Session `id`, about to be cut, will come back `reconnect_after_s` from now with the
    /// rest of its plan, unless its client is one of those who give up.
    pub(super) fn schedule_reconnect(&mut self, id: u32) {
        let (share, after) = self.reconnect_terms();
        let s = &mut self.sessions[id as usize];
        // Drawn only when a share is asked for: 0 and 1 leave the session's stream as is.
        if share <= 0.0 || (share < 1.0 && !s.rng.chance(share)) {
            return;
        }
        let plan = SessionPlan {
            short: s.short,
            length: (s.end_at - self.now).max(1e-6),
            reason: s.reason,
            weight: f64::from(s.weight),
        };
        let slot = self.reconnects.put(Reconnect {
            proxy: u32::from(s.proxy),
            plan,
            rng: s.rng.clone(),
        });
        self.queue.push(self.now + after, Event::Reconnect(slot));
    }

    /// A cut client is back: through its proxy, a placement like an arrival's.
    pub(super) fn reconnect(&mut self, slot: u32) {
        let Reconnect { proxy, plan, rng } = self.reconnects.take(slot);
        self.collector.reconnect();
        self.route(proxy as usize, plan, rng);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scenario;

    /// Two backends, round robin, bursts of 2 at t = 1, 2, …, 9 of 2.2 s sessions; reports
    /// lost, health checks 0.3 s after a change; b0 cut at 2.6 and away 1 s, b1 cut 0.75 s
    /// after b0 is back; cut clients back 0.5 s later (the hand-computed scenario of
    /// `tests/rolling_restart.rs`).
    const CUT: &str = r#"
description = "reconnect times"
duration_s = 10
[arrivals]
pattern = "bursts"
rate_per_s = 1e-9
burst_every_s = 1
burst_size = 2
[sessions]
duration = "fixed"
mean_s = 2.2
speaking_mean_s = 0
[[backends]]
count = 2
[latency]
startup_ms = 0
first_stream_ms = 0
[reports]
loss = 1
health_check_s = 0.3
[rolling_restart]
start_s = 2.6
mode = "cut"
restart_s = 1
gap_s = 0.75
reconnect_after_s = 0.5
"#;

    /// What a run did: when each reconnect came (with the length it asked for), and when
    /// and on which backend each session ended on its own.
    #[derive(Debug, Default)]
    struct Trace {
        reconnects: Vec<(f64, f64)>,
        ends: Vec<(f64, u32)>,
    }

    fn trace(sc: &Scenario) -> Trace {
        let mut e = Engine::new(sc, "round_robin");
        let mut t = Trace::default();
        while !e.done() {
            let (at, event) = e.queue.pop().expect("events until done");
            e.now = at;
            match event {
                Event::Reconnect(slot) => {
                    let length = e.reconnects.peek(slot).plan.length;
                    t.reconnects.push((at, length));
                }
                Event::End(id, g) if e.is_open(id, g) => {
                    t.ends.push((at, e.sessions[id as usize].backend));
                }
                _ => {}
            }
            e.handle(event);
        }
        t
    }

    /// `got` equals `want` up to rounding, in (time, value) order (at one instant the
    /// engine goes by session slot).
    fn assert_times(got: &[(f64, f64)], want: &[(f64, f64)]) {
        let mut got = got.to_vec();
        got.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert_eq!(got.len(), want.len(), "{got:?} != {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!(close(g.0, w.0) && close(g.1, w.1), "{got:?} != {want:?}");
        }
    }

    #[test]
    fn cut_sessions_come_back_after_the_delay_and_run_what_was_left() {
        let sc = Scenario::from_toml_str(CUT, "cut.toml").unwrap();
        let t = trace(&sc);
        // 2.6: b0's sessions of t = 1 and 2 are cut with 0.6 s and 1.6 s left. 4.35: b1's
        // of t = 3 (0.85 s left each), t = 4's second (1.85 s) and the 1.6 s one, back on
        // b1 since 3.1 and cut again (0.35 s left).
        assert_times(
            &t.reconnects,
            &[
                (3.1, 0.6),
                (3.1, 1.6),
                (4.85, 0.35),
                (4.85, 0.85),
                (4.85, 0.85),
                (4.85, 1.85),
            ],
        );
        // Every end before 7 s: the reconnected parts end at their return plus what was
        // left (3.7 on b1; 5.2, 5.7, 5.7, 6.7 on b0); the one back at 3.1 with 1.6 s left
        // does not end at 4.7, it is cut at 4.35.
        let ends: Vec<(f64, f64)> = t
            .ends
            .iter()
            .filter(|(at, _)| *at < 7.0)
            .map(|&(at, b)| (at, f64::from(b)))
            .collect();
        assert_times(
            &ends,
            &[
                (3.2, 1.0),
                (3.7, 1.0),
                (4.2, 1.0),
                (5.2, 0.0),
                (5.7, 0.0),
                (5.7, 0.0),
                (6.2, 0.0),
                (6.7, 0.0),
            ],
        );
    }

    #[test]
    fn a_drain_longer_than_every_session_reconnects_none() {
        let text = CUT
            .replace("mean_s = 2.2", "mean_s = 1.4")
            .replace("mode = \"cut\"", "mode = \"drain\"\ndrain_deadline_s = 2");
        let sc = Scenario::from_toml_str(&text, "drain.toml").unwrap();
        let t = trace(&sc);
        assert_eq!(t.reconnects, [], "no 1.4 s session outlives a 2 s drain");
        assert_eq!(t.ends.len(), 18, "every arrival ends on its own");
    }
}
