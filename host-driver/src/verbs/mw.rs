//! Memory windows and fast-registration MRs (ABI 1.3): `ibv_alloc_mw`, `ibv_bind_mw`,
//! `ibv_dealloc_mw`, and the kernel's `ib_alloc_mr` with its REG_MR work request.

use super::{Ctx, MemoryRegion, PdInner, ProtectionDomain, QueuePair, Result};
use crate::error::Error;
use roce_abi::{self as abi, reg, CmdEntry, CmdOp};
use roce_core::memory::{AccessFlags, FastReg, MrKeys, MwBind, MwType};
use roce_core::num::{Lkey, Rkey};
use roce_core::transport::{SendFlags, SendWr, WrOp};
use std::cell::Cell;
use std::rc::Rc;
use zerocopy::little_endian::U32;

/// `ibv_inc_rkey`: the key with its low byte (the tag) incremented.
pub fn inc_rkey(rkey: Rkey) -> Rkey {
    Rkey(rkey.0 & !0xFF | (rkey.0.wrapping_add(1) & 0xFF))
}

/// A memory window (`struct ibv_mw`).
pub struct MemoryWindow {
    ctx: Rc<Ctx>,
    _pd: Rc<PdInner>,
    mw_type: MwType,
    /// The key the last bind through [`QueuePair::bind_mw`] gave it.
    rkey: Cell<Rkey>,
}

impl MemoryWindow {
    /// The window's R_Key (`ibv_mw.rkey`), as of the last `bind_mw`.
    pub fn rkey(&self) -> Rkey {
        self.rkey.get()
    }
    /// Type 1 or 2.
    pub fn mw_type(&self) -> MwType {
        self.mw_type
    }
}

impl Drop for MemoryWindow {
    fn drop(&mut self) {
        let _ = self.ctx.exec_handle(CmdOp::DeallocMw, self.rkey.get().0);
    }
}

/// What a bind attaches the window to (`struct ibv_mw_bind_info`): `length` bytes of
/// `mr` from `offset`, with remote rights `access`; `mr` None (and length 0) unbinds a
/// type 1 window.
#[derive(Clone, Copy)]
pub struct MwBindInfo<'a> {
    pub mr: Option<&'a MemoryRegion>,
    pub offset: u64,
    pub length: u64,
    pub access: AccessFlags,
}

fn need_1_3(ctx: &Ctx, verb: &'static str) -> Result<()> {
    if abi::Version(ctx.dev.read_reg(reg::VERSION)).minor() < 3 {
        return Err(Error::InvalidArgument(verb));
    }
    Ok(())
}

impl ProtectionDomain {
    /// `ibv_alloc_mw`.
    pub fn alloc_mw(&self, mw_type: MwType) -> Result<MemoryWindow> {
        let ctx = &self.inner.ctx;
        need_1_3(ctx, "memory windows need ABI 1.3")?;
        let mut e = CmdEntry::default();
        abi::set_payload(
            &mut e,
            &abi::AllocMwArg {
                pd: U32::new(self.inner.pdn),
                mw_type: mw_type as u8,
                ..Default::default()
            },
        );
        ctx.exec(CmdOp::AllocMw, &mut e)?;
        Ok(MemoryWindow {
            ctx: ctx.clone(),
            _pd: self.inner.clone(),
            mw_type,
            rkey: Cell::new(Rkey(e.out.get())),
        })
    }

    /// Kernel `ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, ..)` over a fresh buffer of `len`
    /// bytes: invalid until [`QueuePair::reg_mr_wr`] registers it.
    pub fn alloc_mr(&self, len: usize) -> Result<MemoryRegion> {
        need_1_3(&self.inner.ctx, "fast-registration MRs need ABI 1.3")?;
        self.new_mr(CmdOp::AllocMr, len, AccessFlags::NONE)
    }
}

impl QueuePair {
    /// `ibv_bind_mw` (type 1), or a type 2 window's BIND_MW work request: posts the
    /// bind with the next tag ([`inc_rkey`]) and returns the key the window will have
    /// once the bind completes (`IBV_WC_BIND_MW`); `mw.rkey()` says it from now on.
    pub fn bind_mw(
        &self,
        mw: &MemoryWindow,
        info: &MwBindInfo<'_>,
        wr_id: u64,
        flags: SendFlags,
    ) -> Result<Rkey> {
        let (mr, addr) = match info.mr {
            Some(mr) => (mr.lkey(), mr.addr().wrapping_add(info.offset)),
            None if info.length == 0 && info.offset == 0 => (Lkey(0), 0),
            None => return Err(Error::InvalidArgument("a window with a length needs an MR")),
        };
        let new = inc_rkey(mw.rkey());
        let bind = MwBind {
            mw: mw.rkey(),
            rkey: new,
            mr,
            addr,
            length: info.length,
            access: info.access,
        };
        self.post_send(&SendWr::new(wr_id, WrOp::BindMw(bind)).flags(flags))?;
        mw.rkey.set(new);
        Ok(new)
    }

    /// A REG_MR work request over the whole buffer of `mr` (from `alloc_mr`, free or
    /// invalidated) with the key tag `tag` and rights `access`. `mr.lkey()`/`rkey()`
    /// give the new keys from now on (valid once it completes, `IB_WC_REG_MR`).
    pub fn reg_mr_wr(
        &self,
        mr: &MemoryRegion,
        tag: u8,
        access: AccessFlags,
        wr_id: u64,
        flags: SendFlags,
    ) -> Result<MrKeys> {
        let key = mr.lkey().0 & !0xFF | u32::from(tag);
        let reg = FastReg {
            mr: mr.lkey(),
            key,
            addr: mr.addr(),
            length: mr.len() as u64,
            access,
        };
        self.post_send(&SendWr::new(wr_id, WrOp::RegMr(reg)).flags(flags))?;
        mr.lkey.set(Lkey(key));
        mr.rkey.set(Rkey(key));
        Ok(MrKeys {
            lkey: Lkey(key),
            rkey: Rkey(key),
        })
    }
}
