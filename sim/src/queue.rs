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
//! The events are kept in two heaps: those due within `NEAR` of the last event popped,
//! and the rest. A node's timer that moves leaves its old event behind (the fabric
//! skips it when it comes up), and a NIC's retransmission timer, 67 ms ahead and
//! re-armed at every message, leaves hundreds of them in a long stream: in one heap
//! every pop would sift through all of them. Popping the smaller of the two heaps'
//! tops gives exactly the order of one heap.
//!
//! The near events are few in a fabric of a few hosts (a 100 Gb/s stream between two
//! NICs keeps three to five pending), and a binary heap's pop sifts and moves entries
//! down to the bottom and back even then. So while they are at most `FEW`, they are an
//! array in no order with the index of the earliest: a push appends (one comparison
//! with the earliest), a pop swaps the earliest out and scans the few left for the
//! next. More (a fat tree's hundreds) and they become a heap, and an array again when
//! they fall to `FEW` / 4. Keys are unique (time and scheduling order; the explicit
//! orders are unique among themselves), so every form pops the same events in the same
//! order. (A sorted array, latest first, cost more: its inserts moved entries.)

/// Events due further than this after the last event popped wait in the far heap.
const NEAR: Nanos = 100_000;

/// At most this many near events are kept in an array, more in a heap.
const FEW: usize = 16;

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

/// The near events: an array while they are few, a binary heap when many.
enum Near<E> {
    /// In no order; `first` indexes the earliest (0 when empty).
    Few {
        v: Vec<Entry<E>>,
        first: usize,
    },
    Many(BinaryHeap<Entry<E>>),
}

/// The index of the earliest of `v`'s entries (0 when there are none).
fn earliest<E>(v: &[Entry<E>]) -> usize {
    let mut first = 0;
    for (i, e) in v.iter().enumerate().skip(1) {
        if e.key < v[first].key {
            first = i;
        }
    }
    first
}

impl<E> Near<E> {
    fn push(&mut self, e: Entry<E>) {
        match self {
            Near::Few { v, first } if v.len() < FEW => {
                if v.get(*first).is_some_and(|f| e.key < f.key) {
                    *first = v.len();
                }
                v.push(e);
            }
            Near::Few { v, .. } => {
                let mut heap = BinaryHeap::from(std::mem::take(v));
                heap.push(e);
                *self = Near::Many(heap);
            }
            Near::Many(heap) => heap.push(e),
        }
    }

    fn peek_key(&self) -> Option<u128> {
        match self {
            Near::Few { v, first } => v.get(*first).map(|e| e.key),
            Near::Many(heap) => heap.peek().map(|e| e.key),
        }
    }

    fn pop(&mut self) -> Option<Entry<E>> {
        match self {
            Near::Few { v, first } => {
                if v.is_empty() {
                    return None;
                }
                let e = v.swap_remove(*first);
                *first = earliest(v);
                Some(e)
            }
            Near::Many(heap) => {
                let e = heap.pop();
                if heap.len() <= FEW / 4 {
                    let v = std::mem::take(heap).into_vec();
                    let first = earliest(&v);
                    *self = Near::Few { v, first };
                }
                e
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Near::Few { v, .. } => v.len(),
            Near::Many(heap) => heap.len(),
        }
    }
}

/// The top bit of an event's sequence number: set for [`EventQueue::push`]'s, clear for
/// [`EventQueue::push_ordered`]'s, which thus go first at equal times.
const SCHEDULED: u64 = 1 << 63;

/// Events of type `E` ordered by time, ties broken by scheduling order.
pub struct EventQueue<E> {
    /// Events due by `last + NEAR` when they were pushed.
    near: Near<E>,
    /// The others.
    far: BinaryHeap<Entry<E>>,
    /// The time of the last event popped.
    last: Nanos,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self {
            near: Near::Few {
                v: Vec::with_capacity(FEW),
                first: 0,
            },
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

    /// Removes and returns the earliest event.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.pop_until(Nanos::MAX)
    }

    /// Time of the earliest event.
    pub fn peek_time(&self) -> Option<Nanos> {
        let far = self.far.peek().map(|e| e.key);
        let k = match (self.near.peek_key(), far) {
            (Some(n), Some(f)) => n.min(f),
            (n, f) => n.or(f)?,
        };
        Some((k >> 64) as Nanos)
    }

    /// Removes and returns the earliest event if it is due at or before `limit`.
    pub fn pop_until(&mut self, limit: Nanos) -> Option<(Nanos, E)> {
        // The tops are compared once, not by `peek_time` and again by `pop`.
        let far = self.far.peek().map(|e| e.key);
        let (key, from_far) = match (self.near.peek_key(), far) {
            (Some(n), Some(f)) if f < n => (f, true),
            (Some(n), _) => (n, false),
            (None, f) => (f?, true),
        };
        let time = (key >> 64) as Nanos;
        if time > limit {
            return None;
        }
        let e = if from_far {
            self.far.pop()
        } else {
            self.near.pop()
        }?;
        self.last = time;
        Some((time, e.event))
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.near.len() + self.far.len()
    }

    /// True when nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        // pop_until stops and pushes before the next pending event mixed in, some
        // with an explicit order; now and then a burst that makes the near events many
        // (a heap) until they drain back to few (an array).
        let mut rng = Rng::new(3);
        let mut q = EventQueue::default();
        // (time, 0 for an explicit order then the order, or 1 then the scheduling
        // order): the order the queue must keep.
        let mut reference: Vec<(Nanos, u8, u64)> = Vec::new();
        let (mut now, mut id) = (0, 0u64);
        let mut popped = Vec::new();
        let (mut many_rounds, mut back_to_few) = (0, 0);
        for round in 0..20_000 {
            let pushes = match round % 1_000 {
                999 => 3 * FEW as u64,
                // Quiet after the burst: the queue drains.
                ..300 => 0,
                _ => rng.below(3),
            };
            for _ in 0..pushes {
                // Mostly the near future, sometimes far ahead (the far heap's).
                let t = if rng.chance(0.1) {
                    now + NEAR + 1 + rng.below(2 * NEAR)
                } else {
                    now + rng.below(1_000)
                };
                // An explicit order puts an event before those of its time that were
                // pushed earlier, so only at a time not yet popped (a remote frame
                // arrives after the horizon its partition ran to).
                if t > now && rng.chance(0.2) {
                    q.push_ordered(t, id, id);
                    reference.push((t, 0, id));
                } else {
                    q.push(t, id);
                    reference.push((t, 1, id));
                }
                id += 1;
            }
            let was_many = matches!(q.near, Near::Many(_));
            let limit = now + rng.below(50);
            if let Some((t, e)) = q.pop_until(limit) {
                assert!(t >= now);
                now = t;
                popped.push((t, e));
            } else if round % 2 == 0 {
                now = limit;
            }
            match q.near {
                Near::Many(_) => many_rounds += 1,
                Near::Few { .. } if was_many => back_to_few += 1,
                Near::Few { .. } => {}
            }
            assert_eq!(q.len(), reference.len() - popped.len());
        }
        assert!(
            many_rounds > 1_000 && back_to_few >= 10,
            "{many_rounds} {back_to_few}"
        );
        popped.extend(std::iter::from_fn(|| q.pop()));
        reference.sort();
        let reference: Vec<(Nanos, u64)> = reference.iter().map(|&(t, _, id)| (t, id)).collect();
        assert_eq!(popped, reference);
        assert!(q.is_empty());
    }
}
