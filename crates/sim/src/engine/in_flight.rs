//! [`InFlight`]: messages on their way to a proxy (reports, probe replies, first-stream
//! timings, reconnecting clients), each parked in a slot until its delivery event.

/// Messages on their way to a proxy, in slots reused once delivered.
#[derive(Debug)]
pub(super) struct InFlight<T> {
    slots: Vec<T>,
    free: Vec<u32>,
}

impl<T: Clone> InFlight<T> {
    pub(super) fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    pub(super) fn put(&mut self, item: T) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = item;
                slot
            }
            None => {
                self.slots.push(item);
                (self.slots.len() - 1) as u32
            }
        }
    }

    pub(super) fn take(&mut self, slot: u32) -> T {
        self.free.push(slot);
        self.slots[slot as usize].clone()
    }

    /// The message in `slot`, left in flight (tests read what is on its way).
    #[cfg(test)]
    pub(super) fn peek(&self, slot: u32) -> &T {
        &self.slots[slot as usize]
    }

    /// Messages put and not yet taken.
    pub(super) fn pending(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// A delivered message's slot goes to the next message, so the table holds what is in
    /// flight, not every message ever sent.
    #[test]
    fn slots_are_reused_once_taken() {
        let mut q = InFlight::new();
        let (a, b) = (q.put('a'), q.put('b'));
        assert_eq!((a, b, q.pending()), (0, 1, 2));
        assert_eq!(*q.peek(a), 'a');
        assert_eq!(q.take(a), 'a');
        assert_eq!(q.pending(), 1);
        let c = q.put('c');
        assert_eq!(c, a, "the freed slot is reused");
        assert_eq!((q.take(b), q.take(c)), ('b', 'c'));
        assert_eq!(q.pending(), 0);
    }
}
