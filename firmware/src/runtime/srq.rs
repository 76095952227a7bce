//! Shared receive queues at the ABI (1.2): the SRQ commands (CREATE/MODIFY/QUERY/
//! DESTROY_SRQ), each SRQ's host ring fetched from its doorbell into the engine's SRQ,
//! and the engine's SRQ-limit events raised as `EVENT_STATUS.srq_limit` + `EVENT_SRQN`.
//! SRQN `s` (from 1) is the engine's SRQ `s - 1`.

use super::{status_of, BadDoorbell, Nic, MAX_LOG_DEPTH};
use crate::abi::{self, reg, srq_attr, CmdEntry, CmdStatus};
use crate::hal::Hal;
use roce_core::memory::Pd;
use roce_core::transport::{Error as EngineError, SrqHandle, MAX_SRQ};
use zerocopy::little_endian::U32;

/// An SRQ's host ring.
#[derive(Clone, Copy, Debug)]
pub(super) struct HostSrq {
    ring: u64,
    log: u8,
    /// Next index to fetch.
    ci: u32,
}

/// The engine's SRQ an SRQN names (None for 0 and out of range).
pub(super) fn srq_handle(srqn: u32) -> Option<SrqHandle> {
    let i = srqn.checked_sub(1)?;
    (i < MAX_SRQ as u32).then_some(SrqHandle(i as u16))
}

fn srqn(h: SrqHandle) -> u32 {
    u32::from(h.0) + 1
}

impl<
        H: Hal,
        const QPS: usize,
        const CQS: usize,
        const PDS: usize,
        const MRS: usize,
        const SQ: usize,
        const RQ: usize,
        const CQE: usize,
        const RD: usize,
    > Nic<H, QPS, CQS, PDS, MRS, SQ, RQ, CQE, RD>
{
    pub(super) fn create_srq(&mut self, e: &mut CmdEntry) -> CmdStatus {
        let arg = abi::payload::<abi::CreateSrqArg>(e);
        if arg.log_depth > MAX_LOG_DEPTH || arg.ring.get() % 64 != 0 {
            return CmdStatus::BadParam;
        }
        let Ok(pd) = u16::try_from(arg.pd.get()) else {
            return CmdStatus::BadHandle;
        };
        // The engine holds the whole ring (at most its receive-queue depth), so the
        // limit counts every WQE the host posted and the NIC has not consumed.
        let max_wr = 1u32 << arg.log_depth;
        let h = match self
            .engine
            .create_srq(Pd::from_index(pd), max_wr, arg.srq_limit.get())
        {
            Ok(h) => h,
            Err(err) => return status_of(&err),
        };
        let n = srqn(h);
        match self.srqs.get_mut(usize::from(h.0)) {
            Some(s) => {
                *s = Some(HostSrq {
                    ring: arg.ring.get(),
                    log: arg.log_depth,
                    // A fresh SRQ reads its ring from where the doorbell stands now.
                    ci: self.hal.reg_read(reg::srq_db(n)),
                })
            }
            None => {
                let _ = self.engine.destroy_srq(h);
                return CmdStatus::NoResources;
            }
        }
        e.out = U32::new(n);
        CmdStatus::Ok
    }

    pub(super) fn modify_srq(&mut self, e: &mut CmdEntry) -> CmdStatus {
        let arg = abi::payload::<abi::SrqAttrArg>(e);
        let Some(h) = srq_handle(arg.srqn.get()) else {
            return CmdStatus::BadHandle;
        };
        if arg.attr_mask.get() != srq_attr::LIMIT {
            // Resizing (IBV_SRQ_MAX_WR) is not offered; nothing else is modifiable.
            return CmdStatus::BadParam;
        }
        match self.engine.modify_srq(h, arg.srq_limit.get()) {
            Ok(()) => CmdStatus::Ok,
            Err(err) => status_of(&err),
        }
    }

    pub(super) fn query_srq(&mut self, e: &mut CmdEntry) -> CmdStatus {
        let n = abi::payload::<abi::HandleArg>(e).handle.get();
        let Some(h) = srq_handle(n) else {
            return CmdStatus::BadHandle;
        };
        match self.engine.query_srq(h) {
            Ok(info) => {
                abi::set_payload(
                    e,
                    &abi::SrqAttrArg {
                        srqn: U32::new(n),
                        attr_mask: U32::new(srq_attr::MAX_WR | srq_attr::LIMIT),
                        max_wr: U32::new(info.max_wr),
                        srq_limit: U32::new(info.srq_limit),
                    },
                );
                CmdStatus::Ok
            }
            Err(err) => status_of(&err),
        }
    }

    pub(super) fn destroy_srq(&mut self, n: u32) -> CmdStatus {
        let Some(h) = srq_handle(n) else {
            return CmdStatus::BadHandle;
        };
        match self.engine.destroy_srq(h) {
            Ok(()) => {
                if let Some(s) = self.srqs.get_mut(usize::from(h.0)) {
                    *s = None;
                }
                CmdStatus::Ok
            }
            Err(err) => status_of(&err),
        }
    }

    /// Fetches every SRQ's new WQEs into the engine. Returns whether any was taken.
    /// Looks before it calls: the fetch's frame (its ring walk inlined) cost every
    /// doorbell ~110 instructions on the SoC's core with no SRQ at all.
    pub(super) fn fetch_srqs(&mut self) -> bool {
        self.srqs.iter().any(Option::is_some) && self.fetch_srqs_now()
    }

    #[inline(never)]
    fn fetch_srqs_now(&mut self) -> bool {
        let mut any = false;
        for i in 0..MAX_SRQ {
            let Some(Some(mut s)) = self.srqs.get(i).copied() else {
                continue;
            };
            let h = SrqHandle(i as u16);
            let pi = self.hal.reg_read(reg::srq_db(srqn(h)));
            let fetched = self.fetch_ring(
                pi,
                (s.ring, s.log),
                &mut s.ci,
                |nic| (nic.hal.dma(), &mut nic.rq_wqe),
                |nic, _| {
                    match nic
                        .rq_wqe
                        .to_wr()
                        .map(|wr| nic.engine.post_srq_recv(h, &wr))
                    {
                        Ok(Ok(())) => nic.counters.recv_wqes += 1,
                        Ok(Err(EngineError::QueueFull { .. })) => return false,
                        // Host misuse, counted and skipped (the verb would have failed).
                        _ => nic.counters.bad_wqes += 1,
                    }
                    true
                },
            );
            // A doorbell beyond the ring: its entries cannot be trusted; skipped and
            // counted (an SRQ has no state to fail into).
            any |= fetched.unwrap_or_else(|BadDoorbell| {
                self.counters.bad_doorbells += 1;
                true
            });
            self.backlog |= s.ci != pi;
            if let Some(slot) = self.srqs.get_mut(i) {
                *slot = Some(s);
            }
        }
        any
    }

    /// Raises the engine's SRQ-limit events (`IBV_EVENT_SRQ_LIMIT_REACHED`).
    pub(super) fn srq_events(&mut self) -> bool {
        let mut any = false;
        while let Some(h) = self.engine.poll_srq_event() {
            self.hal.reg_write(reg::EVENT_SRQN, srqn(h));
            self.raise(|e| e.set_srq_limit(true));
            any = true;
        }
        any
    }
}
