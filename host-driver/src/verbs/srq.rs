//! Shared receive queues (`ibv_srq`, ABI 1.2): a ring of receive WQEs in host memory that
//! the QPs created with it consume, in post order, as their messages need them.

use super::{ring_log, Ctx, PdInner, ProtectionDomain, Result};
use crate::error::Error;
use roce_abi::{self as abi, reg, srq_attr, CmdEntry, CmdOp, RecvWqe};
use roce_core::transport::RecvWr;
use std::cell::Cell;
use std::mem::size_of;
use std::rc::Rc;
use zerocopy::little_endian::{U32, U64};
use zerocopy::IntoBytes;

pub(super) struct SrqInner {
    pub(super) ctx: Rc<Ctx>,
    _pd: Rc<PdInner>,
    pub(super) srqn: u32,
    ring: u64,
    log: u8,
    pi: Cell<u32>,
    /// Posted WQEs no completion has accounted for yet (their ring slots are busy).
    pub(super) outstanding: Cell<u32>,
}

impl Drop for SrqInner {
    fn drop(&mut self) {
        if self.ctx.exec_handle(CmdOp::DestroySrq, self.srqn).is_ok() {
            let len = (1usize << self.log) * size_of::<RecvWqe>();
            self.ctx.dev.memory().free(self.ring, len);
        }
    }
}

/// A shared receive queue (`struct ibv_srq`). QPs name it at creation
/// ([`super::QpBuilder::srq`]) and keep it alive.
#[derive(Clone)]
pub struct SharedReceiveQueue {
    pub(super) inner: Rc<SrqInner>,
}

/// What `ibv_query_srq` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqAttr {
    /// Capacity.
    pub max_wr: u32,
    /// The armed limit, 0 when not armed (it disarms when the event fires).
    pub srq_limit: u32,
}

impl ProtectionDomain {
    /// `ibv_create_srq` with room for `max_wr` receive WQEs (rounded up to a power of
    /// two; the NIC refuses more than it holds per queue) and the limit armed at
    /// `srq_limit` (0: not armed).
    pub fn create_srq(&self, max_wr: usize, srq_limit: u32) -> Result<SharedReceiveQueue> {
        let ctx = &self.inner.ctx;
        if abi::Version(ctx.dev.read_reg(reg::VERSION)).minor() < 2 {
            return Err(Error::InvalidArgument(
                "create_srq: the device's ABI is older than 1.2 (no SRQs)",
            ));
        }
        let log = ring_log(max_wr, ctx.attr.get().max_log_depth)?;
        let len = (1usize << log) * size_of::<RecvWqe>();
        let ring = ctx.dev.memory().alloc(len, 64);
        let mut e = CmdEntry::default();
        abi::set_payload(
            &mut e,
            &abi::CreateSrqArg {
                pd: U32::new(self.inner.pdn),
                log_depth: log,
                srq_limit: U32::new(srq_limit),
                ring: U64::new(ring),
                ..Default::default()
            },
        );
        if let Err(err) = ctx.exec(CmdOp::CreateSrq, &mut e) {
            ctx.dev.memory().free(ring, len);
            return Err(err);
        }
        let srqn = e.out.get();
        Ok(SharedReceiveQueue {
            inner: Rc::new(SrqInner {
                ctx: ctx.clone(),
                _pd: self.inner.clone(),
                srqn,
                ring,
                log,
                pi: Cell::new(ctx.dev.read_reg(reg::srq_db(srqn))),
                outstanding: Cell::new(0),
            }),
        })
    }
}

impl SharedReceiveQueue {
    /// The SRQ number (`srq_num`).
    pub fn srqn(&self) -> u32 {
        self.inner.srqn
    }

    /// Receive WQEs posted and not yet completed by some QP.
    pub fn outstanding(&self) -> u32 {
        self.inner.outstanding.get()
    }

    /// `ibv_post_srq_recv` of one work request.
    pub fn post_recv(&self, wr: &RecvWr) -> Result<()> {
        let s = &self.inner;
        let depth = 1u32 << s.log;
        if s.outstanding.get() >= depth {
            return Err(Error::QueueFull { queue: "SRQ" });
        }
        let pi = s.pi.get();
        let addr = s.ring + u64::from(pi & (depth - 1)) * size_of::<RecvWqe>() as u64;
        s.ctx
            .dev
            .memory()
            .write(addr, RecvWqe::from_wr(wr).as_bytes())
            .map_err(|e| Error::Dma { addr: e.addr })?;
        s.outstanding.set(s.outstanding.get() + 1);
        s.pi.set(pi.wrapping_add(1));
        s.ctx.dev.write_reg(reg::srq_db(s.srqn), pi.wrapping_add(1));
        Ok(())
    }

    /// `ibv_modify_srq(IBV_SRQ_LIMIT)`: arms the limit event at `srq_limit` WQEs (0
    /// disarms); more than the SRQ holds is refused.
    pub fn arm_limit(&self, srq_limit: u32) -> Result<()> {
        let mut e = CmdEntry::default();
        abi::set_payload(
            &mut e,
            &abi::SrqAttrArg {
                srqn: U32::new(self.inner.srqn),
                attr_mask: U32::new(srq_attr::LIMIT),
                srq_limit: U32::new(srq_limit),
                ..Default::default()
            },
        );
        self.inner.ctx.exec(CmdOp::ModifySrq, &mut e)
    }

    /// `ibv_query_srq`.
    pub fn query(&self) -> Result<SrqAttr> {
        let e = self
            .inner
            .ctx
            .exec_handle(CmdOp::QuerySrq, self.inner.srqn)?;
        let a: abi::SrqAttrArg = abi::payload(&e);
        Ok(SrqAttr {
            max_wr: a.max_wr.get(),
            srq_limit: a.srq_limit.get(),
        })
    }
}
