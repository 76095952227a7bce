//! Shared receive queues (`ibv_srq`): receive WQEs that any QP attached to the SRQ may
//! consume. A QP takes one only when a message needs it (the first packet of a SEND, the
//! last of a WRITE_WITH_IMM) and holds it in its own receive queue until the message
//! completes, as rxe's responder copies the SRQ's WQE into the QP (`get_srq_wqe`). When
//! a take leaves fewer WQEs than the armed limit, the limit disarms and the SRQ owes its
//! owner `IBV_EVENT_SRQ_LIMIT_REACHED` (IBTA o11-4.2, rxe's `srq->limit = 0`).

use heapless::Deque;

use crate::memory::Pd;

use super::entry::RecvWqe;
use super::error::Error;
use super::verbs::{sgl_len, RecvWr};

/// Most SRQs an engine holds.
pub const MAX_SRQ: usize = 4;
const _: () = assert!(MAX_SRQ <= 32); // one event bit each

/// An SRQ's number in the engine (`srq_num`), `0..MAX_SRQ`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct SrqHandle(pub u16);

/// What `ibv_query_srq` reports.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SrqInfo {
    /// Capacity (`max_wr`).
    pub max_wr: u32,
    /// The armed limit (`srq_limit`), 0 when not armed.
    pub srq_limit: u32,
    /// Receive WQEs posted and not yet taken by a QP.
    pub outstanding: u32,
}

#[derive(Clone, Debug)]
struct Srq<const D: usize> {
    pd: Pd,
    queue: Deque<RecvWqe, D>,
    /// `max_wr` as created (at most `D`).
    max_wr: u32,
    limit: u32,
    /// QPs attached.
    users: u32,
}

/// The engine's SRQs, `N` of them, each up to `D` WQEs deep.
#[derive(Clone, Debug)]
pub(crate) struct SrqTable<const N: usize, const D: usize> {
    srqs: [Option<Srq<D>>; N],
    /// Bit `i`: SRQ `i` reached its limit and the event was not yet taken.
    limit_reached: u32,
}

impl<const N: usize, const D: usize> SrqTable<N, D> {
    pub(crate) const fn new() -> Self {
        Self {
            srqs: [const { None }; N],
            limit_reached: 0,
        }
    }

    fn get_mut(&mut self, h: SrqHandle) -> Result<&mut Srq<D>, Error> {
        match self.srqs.get_mut(usize::from(h.0)) {
            Some(Some(s)) => Ok(s),
            _ => Err(Error::NoSuchSrq(h.0)),
        }
    }

    fn get(&self, h: SrqHandle) -> Result<&Srq<D>, Error> {
        match self.srqs.get(usize::from(h.0)) {
            Some(Some(s)) => Ok(s),
            _ => Err(Error::NoSuchSrq(h.0)),
        }
    }

    /// `ibv_create_srq`: `max_wr` entries (at most the engine's depth), the limit armed
    /// at `srq_limit` (0: not armed).
    pub(crate) fn create(
        &mut self,
        pd: Pd,
        max_wr: u32,
        srq_limit: u32,
    ) -> Result<SrqHandle, Error> {
        if max_wr == 0 || max_wr as usize > D {
            return Err(Error::InvalidCap { cap: "max_wr" });
        }
        if srq_limit > max_wr {
            return Err(Error::InvalidCap { cap: "srq_limit" });
        }
        let i = self
            .srqs
            .iter()
            .position(Option::is_none)
            .ok_or(Error::TableFull { table: "SRQ" })?;
        let h = SrqHandle(u16::try_from(i).map_err(|_| Error::TableFull { table: "SRQ" })?);
        if let Some(s) = self.srqs.get_mut(i) {
            *s = Some(Srq {
                pd,
                queue: Deque::new(),
                max_wr,
                limit: srq_limit,
                users: 0,
            });
        }
        self.clear_event(h);
        Ok(h)
    }

    /// `ibv_destroy_srq`: refused while QPs use it. Its WQEs go without completions.
    pub(crate) fn destroy(&mut self, h: SrqHandle) -> Result<Pd, Error> {
        let s = self.get_mut(h)?;
        if s.users != 0 {
            return Err(Error::Busy { what: "SRQ" });
        }
        let pd = s.pd;
        if let Some(slot) = self.srqs.get_mut(usize::from(h.0)) {
            *slot = None;
        }
        self.clear_event(h);
        Ok(pd)
    }

    /// `ibv_modify_srq` with `IBV_SRQ_LIMIT`: arms the limit (0 disarms). Above
    /// `max_wr` is EINVAL (rxe `rxe_srq_chk_attr`).
    pub(crate) fn arm(&mut self, h: SrqHandle, srq_limit: u32) -> Result<(), Error> {
        let s = self.get_mut(h)?;
        if srq_limit > s.max_wr {
            return Err(Error::InvalidCap { cap: "srq_limit" });
        }
        s.limit = srq_limit;
        Ok(())
    }

    pub(crate) fn query(&self, h: SrqHandle) -> Result<SrqInfo, Error> {
        let s = self.get(h)?;
        Ok(SrqInfo {
            max_wr: s.max_wr,
            srq_limit: s.limit,
            outstanding: s.queue.len() as u32,
        })
    }

    /// `ibv_post_srq_recv`.
    pub(crate) fn post(&mut self, h: SrqHandle, wr: &RecvWr) -> Result<(), Error> {
        let s = self.get_mut(h)?;
        sgl_len(&wr.sg_list).ok_or(Error::InvalidWr {
            reason: "receive buffers longer than 2^31 bytes",
        })?;
        if s.queue.len() >= s.max_wr as usize {
            return Err(Error::QueueFull {
                verb: "post_srq_recv",
            });
        }
        s.queue
            .push_back(RecvWqe { wr: wr.clone() })
            .map_err(|_| Error::QueueFull {
                verb: "post_srq_recv",
            })
    }

    /// A QP of `pd` attaches (`create_qp` with this SRQ): the PDs must match, as rxe
    /// does not require but the spec's protection model implies (the WQE's L_Keys are
    /// checked against the QP's PD).
    pub(crate) fn attach(&mut self, h: SrqHandle, pd: Pd) -> Result<(), Error> {
        let s = self.get_mut(h)?;
        if s.pd != pd {
            return Err(Error::InvalidCap {
                cap: "srq (another PD)",
            });
        }
        s.users = s.users.saturating_add(1);
        Ok(())
    }

    pub(crate) fn detach(&mut self, h: SrqHandle) {
        if let Ok(s) = self.get_mut(h) {
            s.users = s.users.saturating_sub(1);
        }
    }

    /// The next SRQ whose limit was reached (`IBV_EVENT_SRQ_LIMIT_REACHED`), once each.
    pub(crate) fn take_event(&mut self) -> Option<SrqHandle> {
        if self.limit_reached == 0 {
            return None;
        }
        let i = self.limit_reached.trailing_zeros();
        self.limit_reached &= !(1 << i);
        Some(SrqHandle(i as u16))
    }

    fn clear_event(&mut self, h: SrqHandle) {
        self.limit_reached &= !(1 << (h.0 % 32));
    }
}

/// Where a QP's responder takes a receive WQE from when it is attached to an SRQ (the
/// engine lends its table for one call, as it lends memory and CQs).
pub(crate) trait SrqTake {
    /// The head WQE of `h` for a QP whose message needs one, firing the limit event
    /// when fewer than the armed limit remain.
    fn take(&mut self, h: SrqHandle) -> Option<RecvWqe>;
}

impl<const N: usize, const D: usize> SrqTake for SrqTable<N, D> {
    fn take(&mut self, h: SrqHandle) -> Option<RecvWqe> {
        let s = self.get_mut(h).ok()?;
        let w = s.queue.pop_front()?;
        if s.limit != 0 && (s.queue.len() as u32) < s.limit {
            s.limit = 0;
            self.limit_reached |= 1 << (h.0 % 32);
        }
        Some(w)
    }
}
