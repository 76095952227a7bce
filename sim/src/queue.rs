//! The deterministic event queue: a binary min-heap on the 128-bit key
//! `time << 64 | seq`, where the sequence number is the order of scheduling. Events due
//! at the same nanosecond run first-scheduled-first, independent of the heap's internal
//! layout, so the same run always processes events in the same order.
//!
//! Events scheduled with an explicit order ([`EventQueue::push_ordered`]: frames from
//! other partitions of a parallel run) run before every event scheduled by
//! [`EventQueue::push`] at the same nanosecond, among themselves by that order. Their
//! place thus does not depend on when they were pushed, which in a parallel run depends
//! on how the threads happened to run.
//!
//! (A radix heap and a per-nanosecond timing wheel were both tried: at the fabric's
//! typical tens of pending events neither beat `BinaryHeap`, and the wheel's slots
//! cost cache misses.)
//!
//! The events are kept in two heaps: those due within [`NEAR`] of the last event popped,
//! and the rest. A node's timer that moves leaves its old event behind (the fabric
//! skips it when it comes up), and a NIC's retransmission timer, 67 ms ahead and
//! re-armed at every message, leaves hundreds of them in a long stream: in one heap
//! every pop would sift through all of them. Popping the smaller of the two heaps'
//! tops gives exactly the order of one heap.

/// Events due further than this after the last event popped wait in the far heap.
const NEAR: Nanos = 100_000;

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Simulated time in nanoseconds since the start of the run.
pub type Nanos = u64;

struct Entry<E> {
    key: u128,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: `BinaryHeap` is a max-heap and we want the earliest event on top.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

/// The top bit of an event's sequence number: set for [`EventQueue::push`]'s, clear for
/// [`EventQueue::push_ordered`]'s, which thus go first at equal times.
const SCHEDULED: u64 = 1 << 63;

/// Events of type `E` ordered by time, ties broken by scheduling order.
pub struct EventQueue<E> {
    /// Events due by `last + NEAR` when they were pushed.
    near: BinaryHeap<Entry<E>>,
    /// The others.
    far: BinaryHeap<Entry<E>>,
    /// The time of the last event popped.
    last: Nanos,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self {
            near: BinaryHeap::with_capacity(1024),
            far: BinaryHeap::new(),
            last: 0,
            next_seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `time`.
    pub fn push(&mut self, time: Nanos, event: E) {
        let key = u128::from(time) << 64 | u128::from(SCHEDULED | self.next_seq);
        self.next_seq += 1;
        self.insert(time, Entry { key, event });
    }

    /// Schedules `event` at `time` in the given `order` (below 2^63) among the events
    /// pushed this way at the same time, ahead of those pushed by [`push`](Self::push).
    pub fn push_ordered(&mut self, time: Nanos, order: u64, event: E) {
        assert!(order < SCHEDULED, "event order {order:#x} out of range");
        let key = u128::from(time) << 64 | u128::from(order);
        self.insert(time, Entry { key, event });
    }

    fn insert(&mut self, time: Nanos, e: Entry<E>) {
        if time > self.last.saturating_add(NEAR) {
            self.far.push(e);
        } else {
            self.near.push(e);
        }
    }

    /// The heap whose top is the earliest event.
    fn first(&mut self) -> &mut BinaryHeap<Entry<E>> {
        match (self.near.peek(), self.far.peek()) {
            (Some(n), Some(f)) if f.key < n.key => &mut self.far,
            (None, Some(_)) => &mut self.far,
            _ => &mut self.near,
        }
    }

    /// Removes and returns the earliest event.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.pop_until(Nanos::MAX)
    }

    /// Time of the earliest event.
    pub fn peek_time(&self) -> Option<Nanos> {
        let key = |h: &BinaryHeap<Entry<E>>| h.peek().map(|e| e.key);
        let k = match (key(&self.near), key(&self.far)) {
            (Some(n), Some(f)) => n.min(f),
            (n, f) => n.or(f)?,
        };
        Some((k >> 64) as Nanos)
    }

    /// Removes and returns the earliest event if it is due at or before `limit`.
    pub fn pop_until(&mut self, limit: Nanos) -> Option<(Nanos, E)> {
        // The heaps' tops are compared once, not by `peek_time` and again by `pop`.
        let heap = self.first();
        let time = (heap.peek()?.key >> 64) as Nanos;
        if time > limit {
            return None;
        }
        let e = heap.pop()?;
        self.last = time;
        Some((time, e.event))
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.near.len() + self.far.len()
    }

    /// True when nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.near.is_empty() && self.far.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn earliest_first_and_ties_in_scheduling_order() {
        let mut q = EventQueue::default();
        q.push(30, 'a');
        q.push(10, 'b');
        q.push(30, 'c');
        q.push(10, 'd');
        q.push(20, 'e');
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            [(10, 'b'), (10, 'd'), (20, 'e'), (30, 'a'), (30, 'c')]
        );
    }

    #[test]
    fn ordered_events_go_first_at_their_time_whenever_they_were_pushed() {
        let mut q = EventQueue::default();
        q.push(10, 'a');
        q.push_ordered(10, 7, 'x');
        q.push(5, 'b');
        q.push_ordered(10, 3, 'y');
        q.push(10, 'c');
        q.push_ordered(4, 9, 'z');
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            [
                (4, 'z'),
                (5, 'b'),
                (10, 'y'),
                (10, 'x'),
                (10, 'a'),
                (10, 'c')
            ]
        );
    }

    #[test]
    fn matches_a_sort_by_time_then_scheduling_order_under_random_load() {
        // Events scheduled at random offsets from the present, as the fabric does, with
        // pop_until stops and pushes before the next pending event mixed in.
        let mut rng = Rng::new(3);
        let mut q = EventQueue::default();
        let mut reference: Vec<(Nanos, u64)> = Vec::new();
        let (mut now, mut id) = (0, 0u64);
        let mut popped = Vec::new();
        for round in 0..20_000 {
            for _ in 0..rng.below(3) {
                // Mostly the near future, sometimes far ahead.
                // (Beyond NEAR too: those wait in the far heap.)
                let span = if rng.chance(0.1) { 3 * NEAR } else { 1_000 };
                let t = now + rng.below(span);
                q.push(t, id);
                reference.push((t, id));
                id += 1;
            }
            let limit = now + rng.below(50);
            if let Some((t, e)) = q.pop_until(limit) {
                assert!(t >= now);
                now = t;
                popped.push((t, e));
            } else if round % 2 == 0 {
                now = limit;
            }
            assert_eq!(q.len(), reference.len() - popped.len());
        }
        popped.extend(std::iter::from_fn(|| q.pop()));
        // Ids grow with scheduling order, so (time, id) is the required order.
        reference.sort();
        assert_eq!(popped, reference);
        assert!(q.is_empty());
    }
}
