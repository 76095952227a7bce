//! A selective-repeat QP's records (`sack.rs` is what it does with them): the PSN
//! bitmaps of both directions, the retransmit range and the SACKs waiting to go out.
//! Kept with the QP's queues, so the context stays small. A leaf: the QP context holds
//! it without depending on the selective-repeat behaviour.

use heapless::Deque;

use crate::num::Psn;

use super::attr::{SrAttr, SR_WINDOW};
use super::verbs::AckTimeout;

/// SACKs the responder can hold before the oldest waiting one is overwritten.
const SACK_QUEUE: usize = 16;

/// A bitmap over a window of [`SR_WINDOW`] PSNs, indexed by PSN modulo the window (a
/// power of two that divides 2^24, so the ring never aliases within one window).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PsnBitmap {
    words: [u64; (SR_WINDOW / 64) as usize],
}

impl PsnBitmap {
    pub(super) const fn new() -> Self {
        Self {
            words: [0; (SR_WINDOW / 64) as usize],
        }
    }

    fn at(p: Psn) -> (usize, u64) {
        let i = p.value() % SR_WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    pub fn get(&self, p: Psn) -> bool {
        let (w, b) = Self::at(p);
        self.words.get(w).is_some_and(|x| x & b != 0)
    }

    pub fn set(&mut self, p: Psn) {
        let (w, b) = Self::at(p);
        if let Some(x) = self.words.get_mut(w) {
            *x |= b;
        }
    }

    /// Clears the bits of PSNs `from` up to (not including) `to`.
    pub fn clear_range(&mut self, from: Psn, to: Psn) {
        let n = to.diff(from);
        if n <= 0 {
            return;
        }
        if n as u32 >= SR_WINDOW {
            *self = Self::new();
            return;
        }
        let mut p = from;
        for _ in 0..n {
            let (w, b) = Self::at(p);
            if let Some(x) = self.words.get_mut(w) {
                *x &= !b;
            }
            p = p.next();
        }
    }

    pub(super) fn count(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }
}

/// Requester side: what the responder reported, and what to resend.
#[derive(Clone, Copy, Debug)]
pub(super) struct SackTx {
    /// PSNs at or after the cumulative ACK that the responder has (SACKed).
    pub(super) sacked: PsnBitmap,
    /// Next PSN the retransmit range looks at.
    pub(super) rtx_next: Psn,
    /// End (exclusive) of the retransmit range: one past the highest SACKed PSN, or
    /// everything sent after a timeout.
    pub(super) rtx_end: Psn,
    /// When the first unacknowledged PSN was last resent, the highest PSN sent by
    /// then: a SACK for a PSN at or after it means that resend was lost too.
    pub(super) head_rtx_mark: Option<Psn>,
}

/// Responder side: which PSNs after ePSN are in, and the SACKs to send.
#[derive(Clone, Debug)]
pub(super) struct SackRx {
    pub(super) rcvd: PsnBitmap,
    /// Trigger PSNs of SACKs waiting to go out, oldest first.
    pub(super) out: Deque<Psn, SACK_QUEUE>,
}

/// A QP's selective-repeat state (kept with its queues: the context stays small).
#[derive(Clone, Debug)]
pub struct SrState {
    pub(super) attr: SrAttr,
    pub(super) tx: SackTx,
    pub(super) rx: SackRx,
}

impl Default for SrState {
    fn default() -> Self {
        Self::new()
    }
}

impl SrState {
    /// Off, empty.
    pub const fn new() -> Self {
        Self {
            attr: SrAttr {
                enabled: false,
                max_inflight: 0,
                rto_low: AckTimeout::INFINITE,
            },
            tx: SackTx {
                sacked: PsnBitmap::new(),
                rtx_next: Psn::ZERO,
                rtx_end: Psn::ZERO,
                head_rtx_mark: None,
            },
            rx: SackRx {
                rcvd: PsnBitmap::new(),
                out: Deque::new(),
            },
        }
    }

    /// Writes every record into a stored QP context (`engine::ctx`).
    pub(crate) fn save(&self, w: &mut crate::engine::ctx::Put<'_>) {
        w.bool(self.attr.enabled);
        w.u16(self.attr.max_inflight);
        w.u8(self.attr.rto_low.code());
        for word in self.tx.sacked.words.iter().chain(&self.rx.rcvd.words) {
            w.u64(*word);
        }
        w.u32(self.tx.rtx_next.value());
        w.u32(self.tx.rtx_end.value());
        w.bool(self.tx.head_rtx_mark.is_some());
        w.u32(self.tx.head_rtx_mark.map_or(0, Psn::value));
        w.u8(self.rx.out.len() as u8);
        for p in self.rx.out.iter() {
            w.u32(p.value());
        }
    }

    /// Reads what [`SrState::save`] wrote.
    pub(crate) fn load(
        &mut self,
        r: &mut crate::engine::ctx::Get<'_>,
    ) -> Result<(), crate::engine::ctx::CtxError> {
        use crate::engine::ctx::CtxError;
        self.attr = SrAttr {
            enabled: r.bool()?,
            max_inflight: r.u16()?,
            rto_low: AckTimeout::new(r.u8()?).ok_or(CtxError)?,
        };
        for word in self.tx.sacked.words.iter_mut() {
            *word = r.u64()?;
        }
        for word in self.rx.rcvd.words.iter_mut() {
            *word = r.u64()?;
        }
        self.tx.rtx_next = Psn::new(r.u32()?);
        self.tx.rtx_end = Psn::new(r.u32()?);
        let mark = r.bool()?;
        let p = Psn::new(r.u32()?);
        self.tx.head_rtx_mark = mark.then_some(p);
        self.rx.out.clear();
        for _ in 0..r.u8()? {
            self.rx
                .out
                .push_back(Psn::new(r.u32()?))
                .map_err(|_| CtxError)?;
        }
        Ok(())
    }

    /// SACKs wait to go out.
    pub(crate) fn sacks_owed(&self) -> bool {
        !self.rx.out.is_empty()
    }

    /// Selective repeat is on for this QP.
    pub fn enabled(&self) -> bool {
        self.attr.enabled
    }

    /// The attribute as set.
    pub fn attr(&self) -> SrAttr {
        self.attr
    }

    /// Sets the attribute and forgets every record (done at INIT→RTR, before any
    /// packet).
    pub(crate) fn configure(&mut self, attr: SrAttr) {
        *self = Self::new();
        self.attr = attr;
    }

    /// Cancels the retransmit range (a Go-Back-N rewind resends everything anyway).
    pub(crate) fn cancel_rtx(&mut self) {
        self.tx.rtx_end = self.tx.rtx_next;
    }

    /// The send queue starts at `psn` (`sq_psn` was set): the cursors start there, so
    /// they compare correctly with the PSNs to come (half-window rule).
    pub(crate) fn start_tx(&mut self, psn: Psn) {
        self.tx = SackTx {
            sacked: PsnBitmap::new(),
            rtx_next: psn,
            rtx_end: psn,
            head_rtx_mark: None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmap_ring_wraps_with_the_psn() {
        let mut b = PsnBitmap::new();
        let top = Psn::new(0xFF_FFFF);
        b.set(top);
        b.set(top.next());
        assert!(b.get(top) && b.get(Psn::ZERO));
        assert!(!b.get(Psn::new(1)));
        b.clear_range(top, Psn::ZERO);
        assert!(!b.get(top) && b.get(Psn::ZERO));
        assert_eq!(b.count(), 1);
        // A range as long as the window clears everything.
        b.set(Psn::new(77));
        b.clear_range(Psn::new(1000), Psn::new(1000 + SR_WINDOW));
        assert_eq!(b.count(), 0);
    }
}
