//! Memory windows (type 1 and type 2) and fast-registration MRs, as IBTA §10.6.7 /
//! §10.7 and Linux rxe (`rxe_mw.c`, `rxe_mr.c`) define them.
//!
//! * A window is a remote key onto part of an MR the owner registered with
//!   `MW_BIND`. `alloc_mw` makes one with no binding; a BIND_MW work request binds it
//!   (type 1: `ibv_bind_mw`, which libibverbs turns into the same work request; type 2:
//!   posted directly). A type 2 window belongs to the QP that bound it, must be free to
//!   be bound again and is freed by LOCAL_INV or SEND_WITH_INV; a type 1 window is
//!   rebound (or unbound, length 0) by another bind and cannot be invalidated.
//! * A fast-registration MR (`alloc_mr`, kernel `ib_alloc_mr`) starts free; a REG_MR
//!   work request gives it an address, a length, rights and the key's low byte, and
//!   makes it valid; LOCAL_INV or SEND_WITH_INV frees it again, so it can be re-keyed.
//! * Window keys live above the MRs' (key bit 31, rxe's separate MW index range), so the
//!   responder knows from the key alone which table to look in.
//!
//! One deliberate difference from rxe: a remote access through a window must lie inside
//! the window's bounds (what a window is for, IBTA §10.6.7); rxe's `check_rkey` checks
//! only the underlying MR's range.

use super::{range_within, AccessFlags, MemError, MemoryTable, MrKeys, Pd, WQE_LKEY};
use crate::num::{Lkey, Qpn, Rkey};

/// Key bit that marks a memory window's R_Key.
pub(super) const MW_KEY_BIT: u32 = 1 << 31;

/// True when `key` names a memory window (not an MR, not [`WQE_LKEY`]).
pub const fn is_mw_key(key: u32) -> bool {
    key & MW_KEY_BIT != 0 && key != WQE_LKEY.0
}

/// `enum ibv_mw_type`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[repr(u8)]
pub enum MwType {
    /// `IBV_MW_TYPE_1` = 1: bound with `ibv_bind_mw`, any QP of the PD may use it.
    Type1 = 1,
    /// `IBV_MW_TYPE_2` = 2: bound by a BIND_MW work request, usable only through the QP
    /// that bound it, invalidated by LOCAL_INV / SEND_WITH_INV.
    Type2 = 2,
}

impl MwType {
    /// From the libibverbs number.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::Type1),
            2 => Some(Self::Type2),
            _ => None,
        }
    }
}

/// What a window is bound to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MwBinding {
    /// The MR's L_Key.
    pub mr: u32,
    /// First byte of the window.
    pub addr: u64,
    /// Length (never 0: a bind of length 0 unbinds).
    pub length: u64,
    /// Remote rights the window grants.
    pub access: AccessFlags,
    /// Type 2: the QP that bound it, the only one that may use it.
    pub qpn: Option<Qpn>,
}

/// A memory window (`struct ibv_mw`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MemoryWindow {
    /// Owning PD.
    pub pd: Pd,
    /// Type.
    pub mw_type: MwType,
    /// Current R_Key (the low byte changes on each bind).
    pub rkey: Rkey,
    /// The binding, `None` while free (type 2) or unbound (type 1).
    pub binding: Option<MwBinding>,
}

/// The fields of a BIND_MW work request (`ibv_send_wr.bind_mw`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct MwBind {
    /// The window's R_Key as it is now.
    pub mw: Rkey,
    /// The R_Key it gets; only the low 8 bits (the key tag) are taken.
    pub rkey: Rkey,
    /// The MR the window opens (ignored when `length` is 0).
    pub mr: Lkey,
    /// First byte of the window.
    pub addr: u64,
    /// Length; 0 unbinds a type 1 window.
    pub length: u64,
    /// Remote rights (`mw_access_flags`): REMOTE_READ, REMOTE_WRITE, REMOTE_ATOMIC.
    pub access: AccessFlags,
}

/// The fields of a fast-register work request (kernel `ib_reg_wr`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct FastReg {
    /// The fast-registration MR's L_Key as it is now.
    pub mr: Lkey,
    /// The key it gets (L_Key = R_Key); only the low 8 bits may differ from `mr`.
    pub key: u32,
    /// First byte (the iova; this NIC maps addresses one to one).
    pub addr: u64,
    /// Length, at most the `max_len` it was allocated with.
    pub length: u64,
    /// Rights, as for `reg_mr`.
    pub access: AccessFlags,
}

/// Slot of the window table.
#[derive(Clone, Copy, Debug)]
pub(super) struct MwSlot {
    pub(super) mw: Option<MemoryWindow>,
    pub(super) generation: u8,
}

impl MwSlot {
    pub(super) const EMPTY: Self = Self {
        mw: None,
        generation: 0,
    };
}

/// Rights a window may grant.
const MW_RIGHTS: AccessFlags = AccessFlags(
    AccessFlags::REMOTE_READ.0 | AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_ATOMIC.0,
);

impl<const PDS: usize, const MRS: usize> MemoryTable<PDS, MRS> {
    fn mw_index(key: u32) -> Option<usize> {
        if !is_mw_key(key) {
            return None;
        }
        usize::try_from((key & !MW_KEY_BIT) >> 8).ok()
    }

    fn mw_slot_mut(&mut self, key: u32) -> Result<&mut MwSlot, MemError> {
        let i = Self::mw_index(key).ok_or(MemError::NoSuchKey(key))?;
        match self.mws.get_mut(i) {
            Some(s) if s.mw.is_some_and(|w| w.rkey.0 == key) => Ok(s),
            _ => Err(MemError::NoSuchKey(key)),
        }
    }

    /// The window `rkey` names, if allocated and the key is current.
    pub fn window(&self, rkey: Rkey) -> Option<&MemoryWindow> {
        let i = Self::mw_index(rkey.0)?;
        self.mws.get(i)?.mw.as_ref().filter(|w| w.rkey == rkey)
    }

    /// Every allocated window.
    pub fn windows(&self) -> impl Iterator<Item = &MemoryWindow> {
        self.mws.iter().filter_map(|s| s.mw.as_ref())
    }

    /// `ibv_alloc_mw`: a window of `pd`, unbound.
    pub fn alloc_mw(&mut self, pd: Pd, mw_type: MwType) -> Result<Rkey, MemError> {
        self.pd_slot(pd)?;
        let (i, slot) = self
            .mws
            .iter_mut()
            .enumerate()
            .find(|(_, s)| s.mw.is_none())
            .ok_or(MemError::TableFull)?;
        let index = u32::try_from(i)
            .ok()
            .filter(|&i| i < (1 << 23) - 1)
            .ok_or(MemError::TableFull)?;
        slot.generation = slot.generation.wrapping_add(1);
        let rkey = Rkey(MW_KEY_BIT | index << 8 | u32::from(slot.generation));
        slot.mw = Some(MemoryWindow {
            pd,
            mw_type,
            rkey,
            binding: None,
        });
        self.version = self.version.wrapping_add(1);
        if let Ok(p) = self.pd_slot(pd) {
            p.users = p.users.saturating_add(1);
        }
        Ok(rkey)
    }

    /// `ibv_dealloc_mw`: unbinds (the MR loses a window) and frees the window. Any key
    /// the window has had names it here (the tag is ignored): a host that bound it by
    /// a raw work request need not track the tag to free it.
    pub fn dealloc_mw(&mut self, rkey: Rkey) -> Result<(), MemError> {
        let slot = Self::mw_index(rkey.0)
            .and_then(|i| self.mws.get_mut(i))
            .filter(|s| s.mw.is_some())
            .ok_or(MemError::NoSuchKey(rkey.0))?;
        let mw = slot.mw.take();
        if let Some(w) = mw {
            self.unbind(w.binding);
            self.pd_put(w.pd);
        }
        self.version = self.version.wrapping_add(1);
        Ok(())
    }

    /// Releases the MR side of a binding.
    fn unbind(&mut self, binding: Option<MwBinding>) {
        if let Some(b) = binding {
            if let Ok(s) = self.slot_mut(b.mr) {
                s.windows = s.windows.saturating_sub(1);
            }
        }
    }

    /// Executes a BIND_MW work request of QP `qpn` (of `qp_pd`): rxe's `rxe_bind_mw`
    /// checks, and the window gets the new key tag. Any failure changes nothing (the
    /// completion is `IBV_WC_MW_BIND_ERR`).
    pub fn bind_mw(&mut self, qp_pd: Pd, qpn: Qpn, b: &MwBind) -> Result<Rkey, MemError> {
        let key = b.mw.0;
        let w = *self.window(b.mw).ok_or(MemError::NoSuchKey(key))?;
        if b.access.bits() & !MW_RIGHTS.bits() != 0 {
            return Err(MemError::InvalidAccess);
        }
        // C10-72: the QP, the window and the MR share one PD, whatever the window's
        // type (rxe checked it for type 2 only until 2025; without it a QP of another
        // tenant could rebind or unbind a type 1 window it learnt the key of).
        if qp_pd != w.pd {
            return Err(MemError::WrongPd(key));
        }
        if w.mw_type == MwType::Type2 {
            // o10-37.2.30: only a free type 2 window binds; o10-37.2.40: a type 2 window
            // is freed by invalidation, not a 0-length bind.
            if w.binding.is_some() {
                return Err(MemError::WrongState(key));
            }
            if b.length == 0 {
                return Err(MemError::OutOfBounds {
                    key,
                    addr: b.addr,
                    len: 0,
                });
            }
        }
        let binding = if b.length == 0 {
            None
        } else {
            let mr = *self.get(b.mr.0).ok_or(MemError::NoSuchKey(b.mr.0))?;
            if mr.pd != w.pd {
                return Err(MemError::WrongPd(b.mr.0));
            }
            if !mr.valid {
                return Err(MemError::Invalidated(b.mr.0));
            }
            // C10-73: the MR allows binding; C10-74: a writable window needs an MR the
            // NIC may write locally.
            let mut need = AccessFlags::MW_BIND;
            if b.access.contains(AccessFlags::REMOTE_WRITE)
                || b.access.contains(AccessFlags::REMOTE_ATOMIC)
            {
                need = need | AccessFlags::LOCAL_WRITE;
            }
            // C10-75: inside the MR.
            mr.check(b.addr, b.length, need)?;
            Some(MwBinding {
                mr: mr.key,
                addr: b.addr,
                length: b.length,
                access: b.access,
                qpn: (w.mw_type == MwType::Type2).then_some(qpn),
            })
        };
        let new = Rkey(key & !0xFF | b.rkey.0 & 0xFF);
        self.unbind(w.binding);
        if let Some(bd) = binding {
            if let Ok(s) = self.slot_mut(bd.mr) {
                s.windows = s.windows.saturating_add(1);
            }
        }
        let i = Self::mw_index(key).ok_or(MemError::NoSuchKey(key))?;
        if let Some(slot) = self.mws.get_mut(i) {
            slot.generation = new.0 as u8;
            slot.mw = Some(MemoryWindow {
                rkey: new,
                binding,
                ..w
            });
        }
        self.version = self.version.wrapping_add(1);
        Ok(new)
    }

    /// Invalidates a type 2 window (LOCAL_INV, SEND_WITH_INV): it becomes free. A type 1
    /// window cannot be invalidated (o10-37.2.26), nor a free one.
    pub(super) fn invalidate_mw(&mut self, pd: Pd, key: u32) -> Result<(), MemError> {
        let slot = self.mw_slot_mut(key)?;
        let Some(w) = slot.mw.as_mut() else {
            return Err(MemError::NoSuchKey(key));
        };
        if w.pd != pd {
            return Err(MemError::WrongPd(key));
        }
        if w.mw_type == MwType::Type1 || w.binding.is_none() {
            return Err(MemError::WrongState(key));
        }
        let b = w.binding.take();
        self.unbind(b);
        self.version = self.version.wrapping_add(1);
        Ok(())
    }

    /// Checks a remote access through a window's R_Key by QP `qpn` of `pd`
    /// (`rxe_lookup_mw`, plus the window's bounds).
    pub(super) fn check_window(
        &self,
        pd: Pd,
        qpn: Qpn,
        rkey: Rkey,
        addr: u64,
        len: u64,
        need: AccessFlags,
    ) -> Result<(), MemError> {
        let key = rkey.0;
        let w = self.window(rkey).ok_or(MemError::NoSuchKey(key))?;
        if w.pd != pd {
            return Err(MemError::WrongPd(key));
        }
        let b = w.binding.ok_or(MemError::Invalidated(key))?;
        if b.qpn.is_some_and(|q| q != qpn) {
            return Err(MemError::WrongQp(key));
        }
        if !b.access.contains(need) {
            return Err(MemError::AccessDenied {
                key,
                need,
                have: b.access,
            });
        }
        if !range_within(b.addr, b.length, addr, len) {
            return Err(MemError::OutOfBounds { key, addr, len });
        }
        // The MR cannot be deregistered or invalidated while bound; check anyway.
        let mr = self.get(b.mr).ok_or(MemError::NoSuchKey(b.mr))?;
        mr.check(addr, len, AccessFlags::NONE)
    }

    /// Kernel `ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, ..)`: a fast-registration MR of at
    /// most `max_len` bytes, free (invalid) until a REG_MR work request registers it.
    pub fn alloc_mr(&mut self, pd: Pd, max_len: u64) -> Result<MrKeys, MemError> {
        let keys = self.reg_mr(pd, 0, 0, AccessFlags::NONE)?;
        let slot = self.slot_mut(keys.lkey.0)?;
        slot.fast_reg_max = Some(max_len);
        if let Some(mr) = slot.mr.as_mut() {
            mr.valid = false;
        }
        Ok(keys)
    }

    /// Executes a REG_MR work request of a QP of `qp_pd` (`rxe_reg_fast_mr`): the MR must
    /// be a free fast-registration MR of the QP's PD and only the key's low byte may
    /// change. Any failure changes nothing (the completion is `IBV_WC_LOC_QP_OP_ERR`).
    pub fn reg_fast_mr(&mut self, qp_pd: Pd, r: &FastReg) -> Result<MrKeys, MemError> {
        let key = r.mr.0;
        if r.key & !0xFF != key & !0xFF {
            return Err(MemError::NoSuchKey(r.key));
        }
        check_mr_access(r.access)?;
        if r.length != 0 && r.addr.checked_add(r.length - 1).is_none() {
            return Err(MemError::RangeOverflow);
        }
        let slot = self.slot_mut(key)?;
        let max = slot.fast_reg_max.ok_or(MemError::WrongState(key))?;
        let Some(mr) = slot.mr.as_mut() else {
            return Err(MemError::NoSuchKey(key));
        };
        if mr.valid {
            return Err(MemError::WrongState(key));
        }
        if mr.pd != qp_pd {
            return Err(MemError::WrongPd(key));
        }
        if r.length > max {
            return Err(MemError::OutOfBounds {
                key,
                addr: r.addr,
                len: r.length,
            });
        }
        *mr = super::MemoryRegion {
            addr: r.addr,
            length: r.length,
            access: r.access,
            key: r.key,
            valid: true,
            ..*mr
        };
        slot.generation = r.key as u8;
        self.version = self.version.wrapping_add(1);
        Ok(MrKeys {
            lkey: Lkey(r.key),
            rkey: Rkey(r.key),
        })
    }
}

/// `reg_mr`'s rule for rights: REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE.
pub(super) fn check_mr_access(access: AccessFlags) -> Result<(), MemError> {
    if (access.contains(AccessFlags::REMOTE_WRITE) || access.contains(AccessFlags::REMOTE_ATOMIC))
        && !access.contains(AccessFlags::LOCAL_WRITE)
    {
        return Err(MemError::InvalidAccess);
    }
    Ok(())
}
