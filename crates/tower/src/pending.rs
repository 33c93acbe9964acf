//! [`Pending`]: the connections a server holds that are not yet upgraded or closed, oldest
//! first, and which of them to close when there are too many.
//!
//! At the bound, the oldest connection still waiting for a request head (a slowloris, or
//! an idle keep-alive connection) is closed to make room; only when every pending
//! connection has a request in flight is the oldest of those closed. Refusing the
//! newcomer instead would let an attacker who holds the bound deny every fresh client for
//! a whole head timeout; closing the oldest means a fresh client, which sends its head
//! right behind its handshake, is served.
//!
//! A shed connection is closed by its own task, which first answers `503` with
//! `Retry-After` if no request head of it has reached the service: a connection waiting
//! for its head may be a well-behaved client whose head is already in the socket, or one
//! the network delayed (after the listener's backlog overflowed, the kernel can complete
//! a connection before the client's retransmitted head arrives, seconds later), and such a
//! client must get an answer, not a bare close.
//!
//! The limit of this: attackers that reconnect as soon as they are closed, from as many
//! connections as the bound plus the listener's backlog, churn through the bound as fast
//! as the server accepts, and a fresh client accepted among them can be shed as the
//! oldest before its head is read (it is answered `503`), or find the backlog full and
//! wait for its SYN to be retransmitted. A limit per client address, in front of the
//! server (a load balancer, a firewall), is the defence against that.

use std::collections::VecDeque;

use tokio::task::AbortHandle;

use crate::busy::Busy;

/// The pending connections, oldest first (only the accept loop touches it, so it needs no
/// lock).
#[derive(Debug)]
pub(crate) struct Pending {
    max: usize,
    oldest_first: VecDeque<Connection>,
}

/// One connection's task and whether it has a request in flight.
#[derive(Debug)]
struct Connection {
    task: AbortHandle,
    busy: Busy,
}

impl Pending {
    /// At most `max` (≥ 1) pending connections.
    pub(crate) fn new(max: usize) -> Self {
        let max = max.max(1);
        Self {
            max,
            // Grows as connections arrive: a large bound costs nothing until used.
            oldest_first: VecDeque::new(),
        }
    }

    /// Makes room for one more: forgets closed (or upgraded) connections, then closes
    /// pending ones while at the bound. Returns how many it closed.
    pub(crate) fn make_room(&mut self) -> usize {
        if self.oldest_first.len() < self.max {
            return 0;
        }
        let mut closed = 0;
        while self.oldest_first.len() >= self.max && self.shed_one() {
            closed += 1;
        }
        closed
    }

    /// Sheds one pending connection: the oldest waiting for a request head, else the
    /// oldest. `false` if none is open.
    pub(crate) fn shed_one(&mut self) -> bool {
        self.oldest_first.retain(|c| !c.task.is_finished());
        let waiting = self.oldest_first.iter().position(|c| !c.busy.is_busy());
        match self.oldest_first.remove(waiting.unwrap_or(0)) {
            Some(connection) => {
                // Its task answers if it can, closes the socket and ends.
                connection.busy.shed();
                true
            }
            None => false,
        }
    }

    /// Adds the newest connection.
    pub(crate) fn push(&mut self, task: AbortHandle, busy: Busy) {
        self.oldest_first.push_back(Connection { task, busy });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::task::JoinSet;

    /// `n` tasks that run until shed, with their busy flags.
    fn connections(set: &mut JoinSet<()>, n: usize) -> Vec<(AbortHandle, Busy)> {
        (0..n)
            .map(|_| {
                let busy = Busy::default();
                let shed = busy.clone();
                (set.spawn(async move { shed.shed_requested().await }), busy)
            })
            .collect()
    }

    async fn settle() {
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn at_the_bound_the_oldest_waiting_for_a_head_goes_first() {
        let mut set = JoinSet::new();
        let conns = connections(&mut set, 4);
        let mut pending = Pending::new(3);
        // The oldest is busy (a request in flight): `in_flight` holds its guard.
        let service = crate::busy::BusyService::new(
            tower::service_fn(|_: http::Request<()>| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(()))
            }),
            conns[0].1.clone(),
        );
        let in_flight = hyper::service::Service::call(&service, http::Request::new(()));
        for (task, busy) in &conns[..3] {
            assert_eq!(pending.make_room(), 0);
            pending.push(task.clone(), busy.clone());
        }
        assert_eq!(pending.make_room(), 1);
        pending.push(conns[3].0.clone(), conns[3].1.clone());
        settle().await;
        let shed: Vec<bool> = conns.iter().map(|(t, _)| t.is_finished()).collect();
        assert_eq!(
            shed,
            [false, true, false, false],
            "the busy oldest was kept"
        );

        // Once nothing is in flight, the oldest goes.
        drop(in_flight);
        assert!(pending.shed_one());
        settle().await;
        assert!(conns[0].0.is_finished(), "idle now, and the oldest");
        assert!(pending.shed_one() && pending.shed_one());
        assert!(!pending.shed_one(), "none left");
    }
}
