//! Memory protection: protection domains, memory regions with L_Key/R_Key and access
//! flags, bounds checks that cannot overflow, key invalidation, and the DMA trait
//! through which every byte of host memory is read or written.
//!
//! The tables have fixed capacity (const generics); keys carry a generation byte so a
//! stale key of a deregistered region does not name the region that reuses its slot.

mod dma;
mod window;

pub use dma::{copy_crc, copy_crc_in_one_pass, Dma, DmaError, SliceMemory};
pub use window::{is_mw_key, FastReg, MemoryWindow, MwBind, MwBinding, MwType};

use window::{check_mr_access, MwSlot};

use core::fmt;

use crate::num::{Lkey, Qpn, Rkey};

/// Memory access rights (`enum ibv_access_flags`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AccessFlags(u32);

impl AccessFlags {
    /// No access beyond local read.
    pub const NONE: Self = Self(0);
    /// `IBV_ACCESS_LOCAL_WRITE` = 1.
    pub const LOCAL_WRITE: Self = Self(1);
    /// `IBV_ACCESS_REMOTE_WRITE` = 2.
    pub const REMOTE_WRITE: Self = Self(2);
    /// `IBV_ACCESS_REMOTE_READ` = 4.
    pub const REMOTE_READ: Self = Self(4);
    /// `IBV_ACCESS_REMOTE_ATOMIC` = 8.
    pub const REMOTE_ATOMIC: Self = Self(8);
    /// `IBV_ACCESS_MW_BIND` = 16: memory windows may be bound to the region.
    pub const MW_BIND: Self = Self(16);
    /// The four data-access flags (every right but `MW_BIND`).
    pub const ALL: Self = Self(0xF);

    /// From libibverbs bits; None if a bit this core does not implement is set.
    pub const fn from_bits(bits: u32) -> Option<Self> {
        if bits & !0x1F == 0 {
            Some(Self(bits))
        } else {
            None
        }
    }

    /// The bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Every bit of `other` is set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Any remote right.
    pub const fn any_remote(self) -> bool {
        self.0 & 0xE != 0
    }
}

impl core::ops::BitOr for AccessFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl fmt::Debug for AccessFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(u32, &str); 5] = [
            (1, "LOCAL_WRITE"),
            (2, "REMOTE_WRITE"),
            (4, "REMOTE_READ"),
            (8, "REMOTE_ATOMIC"),
            (16, "MW_BIND"),
        ];
        let mut first = true;
        for (b, n) in NAMES {
            if self.0 & b != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(n)?;
                first = false;
            }
        }
        if first {
            f.write_str("NONE")?;
        }
        Ok(())
    }
}

/// Handle of a protection domain.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Pd(pub(crate) u16);

impl Pd {
    /// The table index (for diagnostics, and as the PD number of the host ABI).
    pub const fn index(self) -> u16 {
        self.0
    }

    /// The PD with table index `i`, as named by a host command. Every use checks that
    /// it exists, so a forged number is refused, not trusted.
    pub const fn from_index(i: u16) -> Self {
        Self(i)
    }
}

/// The keys of a registered region (`ibv_mr.lkey` / `rkey`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct MrKeys {
    /// Local key.
    pub lkey: Lkey,
    /// Remote key (same value as `lkey`, as on most RNICs).
    pub rkey: Rkey,
}

/// Memory layer errors.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MemError {
    /// The PD or MR table is full.
    TableFull,
    /// No such PD.
    NoSuchPd,
    /// No region has this key (never registered, deregistered, or stale generation).
    NoSuchKey(u32),
    /// The region belongs to another protection domain.
    WrongPd(u32),
    /// The region's key has been invalidated.
    Invalidated(u32),
    /// The region does not allow the access.
    AccessDenied {
        /// The key.
        key: u32,
        /// What was needed.
        need: AccessFlags,
        /// What the region allows.
        have: AccessFlags,
    },
    /// `[addr, addr + len)` is not inside the region.
    OutOfBounds {
        /// The key.
        key: u32,
        /// Start of the access.
        addr: u64,
        /// Length of the access.
        len: u64,
    },
    /// The range itself wraps past 2^64.
    RangeOverflow,
    /// Invalid access flags (REMOTE_WRITE or REMOTE_ATOMIC without LOCAL_WRITE, or an
    /// unimplemented bit).
    InvalidAccess,
    /// The PD still has regions, windows or QPs; the region still has windows bound.
    Busy,
    /// The key names an object in the wrong state for the operation: a bound type 2
    /// window (bind), a type 1 or free window (invalidate), a valid or ordinary MR
    /// (fast-register).
    WrongState(u32),
    /// A type 2 window used through a QP other than the one that bound it.
    WrongQp(u32),
}

impl fmt::Display for MemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TableFull => f.write_str("memory table full"),
            Self::NoSuchPd => f.write_str("no such protection domain"),
            Self::NoSuchKey(k) => write!(f, "no memory region with key {k:#010x}"),
            Self::WrongPd(k) => write!(f, "key {k:#010x} belongs to another PD"),
            Self::Invalidated(k) => write!(f, "key {k:#010x} was invalidated"),
            Self::AccessDenied { key, need, have } => {
                write!(f, "key {key:#010x} needs {need:?}, region allows {have:?}")
            }
            Self::OutOfBounds { key, addr, len } => {
                write!(f, "[{addr:#x}, +{len:#x}) is outside region {key:#010x}")
            }
            Self::RangeOverflow => f.write_str("address range wraps past 2^64"),
            Self::InvalidAccess => f.write_str("invalid access flags"),
            Self::Busy => f.write_str("resource still in use"),
            Self::WrongState(k) => write!(f, "key {k:#010x} is in the wrong state"),
            Self::WrongQp(k) => write!(f, "window {k:#010x} is bound to another QP"),
        }
    }
}

/// The firmware's own L_Key for payload it reads out of a send WQE in the host's send
/// queue (inline data, `IBV_SEND_INLINE`): it allows local reads anywhere, so the
/// firmware puts it only into SGEs it builds itself, and the ABI refuses it in every SGE
/// a host writes. No registration can produce it (`reg_mr` never uses the top slot).
pub const WQE_LKEY: Lkey = Lkey(u32::MAX);

/// True when `[addr, addr + len)` lies inside `[base, base + size)`, computed without
/// any addition that could overflow (both ranges may end exactly at 2^64).
pub const fn range_within(base: u64, size: u64, addr: u64, len: u64) -> bool {
    if addr < base {
        return false;
    }
    let off = addr - base;
    off <= size && len <= size - off
}

/// A registered memory region.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MemoryRegion {
    /// Owning protection domain.
    pub pd: Pd,
    /// First byte.
    pub addr: u64,
    /// Length in bytes (`addr + length` may equal 2^64, never exceed it).
    pub length: u64,
    /// Rights.
    pub access: AccessFlags,
    /// Its key (L_Key and R_Key share the value).
    pub key: u32,
    /// False after invalidation.
    pub valid: bool,
}

impl MemoryRegion {
    /// Checks an access of `len` bytes at `addr` that needs `need`.
    pub fn check(&self, addr: u64, len: u64, need: AccessFlags) -> Result<(), MemError> {
        if !self.valid {
            return Err(MemError::Invalidated(self.key));
        }
        if !self.access.contains(need) {
            return Err(MemError::AccessDenied {
                key: self.key,
                need,
                have: self.access,
            });
        }
        if !range_within(self.addr, self.length, addr, len) {
            return Err(MemError::OutOfBounds {
                key: self.key,
                addr,
                len,
            });
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct PdSlot {
    in_use: bool,
    /// MRs and QPs attached.
    users: u32,
}

#[derive(Clone, Copy, Debug)]
struct MrSlot {
    mr: Option<MemoryRegion>,
    /// Bumped on every registration in this slot: the low byte of the key.
    generation: u8,
    /// Memory windows bound to the region (it cannot be deregistered or invalidated
    /// while any are, as in rxe).
    windows: u16,
    /// A fast-registration MR (`alloc_mr`): the longest REG_MR may give it.
    fast_reg_max: Option<u64>,
}

impl MrSlot {
    const EMPTY: Self = Self {
        mr: None,
        generation: 0,
        windows: 0,
        fast_reg_max: None,
    };
}

/// Protection domains, memory regions and memory windows: `PDS`, `MRS` and `MRS`.
///
/// MR keys are `(slot + 1) << 8 | generation`, so key 0 is never valid and a key of a
/// deregistered region stops matching when its slot is reused. Window keys are
/// `1 << 31 | slot << 8 | tag` (`window.rs`).
#[derive(Clone, Debug)]
pub struct MemoryTable<const PDS: usize, const MRS: usize> {
    pds: [PdSlot; PDS],
    mrs: [MrSlot; MRS],
    mws: [MwSlot; MRS],
    /// Bumped on every change to a region (a copy elsewhere knows it is stale).
    version: u32,
}

impl<const PDS: usize, const MRS: usize> Default for MemoryTable<PDS, MRS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const PDS: usize, const MRS: usize> MemoryTable<PDS, MRS> {
    /// Empty tables.
    pub const fn new() -> Self {
        Self {
            pds: [PdSlot {
                in_use: false,
                users: 0,
            }; PDS],
            mrs: [MrSlot::EMPTY; MRS],
            mws: [MwSlot::EMPTY; MRS],
            version: 0,
        }
    }

    /// Bumped on every registration, deregistration and invalidation.
    pub const fn version(&self) -> u32 {
        self.version
    }

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&mut self) -> Result<Pd, MemError> {
        let (i, slot) = self
            .pds
            .iter_mut()
            .enumerate()
            .find(|(_, s)| !s.in_use)
            .ok_or(MemError::TableFull)?;
        let idx = u16::try_from(i).map_err(|_| MemError::TableFull)?;
        *slot = PdSlot {
            in_use: true,
            users: 0,
        };
        Ok(Pd(idx))
    }

    /// `ibv_dealloc_pd`: fails with `Busy` while regions or QPs use it.
    pub fn dealloc_pd(&mut self, pd: Pd) -> Result<(), MemError> {
        let slot = self.pd_slot(pd)?;
        if slot.users != 0 {
            return Err(MemError::Busy);
        }
        slot.in_use = false;
        Ok(())
    }

    fn pd_slot(&mut self, pd: Pd) -> Result<&mut PdSlot, MemError> {
        match self.pds.get_mut(usize::from(pd.0)) {
            Some(s) if s.in_use => Ok(s),
            _ => Err(MemError::NoSuchPd),
        }
    }

    /// True if `pd` is allocated.
    pub fn pd_exists(&self, pd: Pd) -> bool {
        matches!(self.pds.get(usize::from(pd.0)), Some(s) if s.in_use)
    }

    /// Records one more user (a QP) of `pd`.
    pub fn pd_get(&mut self, pd: Pd) -> Result<(), MemError> {
        let s = self.pd_slot(pd)?;
        s.users = s.users.saturating_add(1);
        Ok(())
    }

    /// Releases one user of `pd`.
    pub fn pd_put(&mut self, pd: Pd) {
        if let Ok(s) = self.pd_slot(pd) {
            s.users = s.users.saturating_sub(1);
        }
    }

    /// `ibv_reg_mr`: registers `[addr, addr + length)` with `access`.
    ///
    /// REMOTE_WRITE and REMOTE_ATOMIC require LOCAL_WRITE (as libibverbs requires), and
    /// the range may end at 2^64 but not beyond.
    pub fn reg_mr(
        &mut self,
        pd: Pd,
        addr: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<MrKeys, MemError> {
        check_mr_access(access)?;
        if length != 0 && addr.checked_add(length - 1).is_none() {
            return Err(MemError::RangeOverflow);
        }
        self.pd_slot(pd)?;
        let (i, slot) = self
            .mrs
            .iter_mut()
            .enumerate()
            .find(|(_, s)| s.mr.is_none())
            .ok_or(MemError::TableFull)?;
        let index = u32::try_from(i)
            .ok()
            .and_then(|i| i.checked_add(1))
            // Keys with bit 31 set are memory windows' (and WQE_LKEY).
            .filter(|&i| i < 1 << 23)
            .ok_or(MemError::TableFull)?;
        slot.generation = slot.generation.wrapping_add(1);
        let key = index << 8 | u32::from(slot.generation);
        self.version = self.version.wrapping_add(1);
        slot.windows = 0;
        slot.fast_reg_max = None;
        slot.mr = Some(MemoryRegion {
            pd,
            addr,
            length,
            access,
            key,
            valid: true,
        });
        if let Ok(p) = self.pd_slot(pd) {
            p.users = p.users.saturating_add(1);
        }
        Ok(MrKeys {
            lkey: Lkey(key),
            rkey: Rkey(key),
        })
    }

    /// `ibv_dereg_mr`: `Busy` while memory windows are bound to the region.
    pub fn dereg_mr(&mut self, lkey: Lkey) -> Result<(), MemError> {
        let slot = self.slot_mut(lkey.0)?;
        if slot.windows != 0 {
            return Err(MemError::Busy);
        }
        let pd = slot.mr.map(|m| m.pd);
        slot.mr = None;
        self.version = self.version.wrapping_add(1);
        if let Some(pd) = pd {
            self.pd_put(pd);
        }
        Ok(())
    }

    fn slot_index(key: u32) -> Option<usize> {
        usize::try_from(key >> 8).ok()?.checked_sub(1)
    }

    fn slot_mut(&mut self, key: u32) -> Result<&mut MrSlot, MemError> {
        let i = Self::slot_index(key).ok_or(MemError::NoSuchKey(key))?;
        match self.mrs.get_mut(i) {
            Some(s) if s.mr.is_some_and(|m| m.key == key) => Ok(s),
            _ => Err(MemError::NoSuchKey(key)),
        }
    }

    /// The region a key names, if registered (valid or invalidated).
    pub fn get(&self, key: u32) -> Option<&MemoryRegion> {
        let i = Self::slot_index(key)?;
        self.mrs.get(i)?.mr.as_ref().filter(|m| m.key == key)
    }

    /// Checks a local access through an L_Key (a scatter/gather element).
    pub fn check_local(
        &self,
        pd: Pd,
        lkey: Lkey,
        addr: u64,
        len: u64,
        need: AccessFlags,
    ) -> Result<(), MemError> {
        if lkey == WQE_LKEY {
            return if need == AccessFlags::NONE {
                Ok(())
            } else {
                Err(MemError::AccessDenied {
                    key: lkey.0,
                    need,
                    have: AccessFlags::NONE,
                })
            };
        }
        self.check(pd, lkey.0, addr, len, need)
    }

    /// Checks a remote access by QP `qpn` of `pd` through an R_Key (RETH / AtomicETH):
    /// an MR's, or a memory window's. A zero-length access is not checked at all
    /// (roce-facts §4.1): the caller skips this call then.
    pub fn check_remote(
        &self,
        pd: Pd,
        qpn: Qpn,
        rkey: Rkey,
        addr: u64,
        len: u64,
        need: AccessFlags,
    ) -> Result<(), MemError> {
        if is_mw_key(rkey.0) {
            return self.check_window(pd, qpn, rkey, addr, len, need);
        }
        self.check(pd, rkey.0, addr, len, need)
    }

    fn check(
        &self,
        pd: Pd,
        key: u32,
        addr: u64,
        len: u64,
        need: AccessFlags,
    ) -> Result<(), MemError> {
        let mr = self.get(key).ok_or(MemError::NoSuchKey(key))?;
        if mr.pd != pd {
            return Err(MemError::WrongPd(key));
        }
        mr.check(addr, len, need)
    }

    /// Invalidates a key (SEND_WITH_INV at the responder, LOCAL_INV at the requester).
    /// A type 2 window becomes free. A region stays registered but every access through
    /// it fails until it is deregistered, or, for a fast-registration MR, registered
    /// again by REG_MR. The object must belong to `pd`; a region with windows bound
    /// cannot be invalidated (rxe).
    pub fn invalidate(&mut self, pd: Pd, key: u32) -> Result<(), MemError> {
        if is_mw_key(key) {
            return self.invalidate_mw(pd, key);
        }
        let slot = self.slot_mut(key)?;
        if slot.windows != 0 {
            return Err(MemError::Busy);
        }
        match slot.mr.as_mut() {
            Some(mr) if mr.pd == pd => {
                mr.valid = false;
                self.version = self.version.wrapping_add(1);
                Ok(())
            }
            Some(_) => Err(MemError::WrongPd(key)),
            None => Err(MemError::NoSuchKey(key)),
        }
    }

    /// The registered regions (valid or invalidated).
    pub fn regions(&self) -> impl Iterator<Item = &MemoryRegion> {
        self.mrs.iter().filter_map(|s| s.mr.as_ref())
    }

    /// Number of registered regions.
    pub fn mr_count(&self) -> usize {
        self.mrs.iter().filter(|s| s.mr.is_some()).count()
    }
}

/// Protection checks as the transport sees them: the memory table behind a trait, so the
/// QP code does not carry the table's capacities as type parameters.
pub trait Protection {
    /// See [`MemoryTable::check_local`].
    fn check_local(
        &self,
        pd: Pd,
        lkey: Lkey,
        addr: u64,
        len: u64,
        need: AccessFlags,
    ) -> Result<(), MemError>;
    /// See [`MemoryTable::check_remote`].
    fn check_remote(
        &self,
        pd: Pd,
        qpn: Qpn,
        rkey: Rkey,
        addr: u64,
        len: u64,
        need: AccessFlags,
    ) -> Result<(), MemError>;
    /// See [`MemoryTable::invalidate`].
    fn invalidate(&mut self, pd: Pd, key: u32) -> Result<(), MemError>;
    /// See [`MemoryTable::bind_mw`].
    fn bind_mw(&mut self, qp_pd: Pd, qpn: Qpn, b: &MwBind) -> Result<Rkey, MemError>;
    /// See [`MemoryTable::reg_fast_mr`].
    fn reg_fast_mr(&mut self, qp_pd: Pd, r: &FastReg) -> Result<MrKeys, MemError>;
}

impl<const PDS: usize, const MRS: usize> Protection for MemoryTable<PDS, MRS> {
    fn check_local(
        &self,
        pd: Pd,
        lkey: Lkey,
        addr: u64,
        len: u64,
        need: AccessFlags,
    ) -> Result<(), MemError> {
        MemoryTable::check_local(self, pd, lkey, addr, len, need)
    }
    fn check_remote(
        &self,
        pd: Pd,
        qpn: Qpn,
        rkey: Rkey,
        addr: u64,
        len: u64,
        need: AccessFlags,
    ) -> Result<(), MemError> {
        MemoryTable::check_remote(self, pd, qpn, rkey, addr, len, need)
    }
    fn invalidate(&mut self, pd: Pd, key: u32) -> Result<(), MemError> {
        MemoryTable::invalidate(self, pd, key)
    }
    fn bind_mw(&mut self, qp_pd: Pd, qpn: Qpn, b: &MwBind) -> Result<Rkey, MemError> {
        MemoryTable::bind_mw(self, qp_pd, qpn, b)
    }
    fn reg_fast_mr(&mut self, qp_pd: Pd, r: &FastReg) -> Result<MrKeys, MemError> {
        MemoryTable::reg_fast_mr(self, qp_pd, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type T = MemoryTable<2, 4>;

    #[test]
    fn range_within_handles_the_top_of_the_address_space() {
        assert!(range_within(0, u64::MAX, 0, u64::MAX));
        assert!(range_within(u64::MAX - 9, 10, u64::MAX - 9, 10));
        assert!(range_within(u64::MAX - 9, 10, u64::MAX, 1));
        assert!(range_within(u64::MAX - 9, 10, u64::MAX, 0));
        assert!(!range_within(u64::MAX - 9, 10, u64::MAX, 2));
        assert!(!range_within(u64::MAX - 9, 10, u64::MAX - 10, 1));
        // A huge length that would wrap addr + len back inside the region.
        assert!(!range_within(0x1000, 0x1000, 0x1800, u64::MAX));
        assert!(!range_within(0x1000, 0x1000, 0x1800, u64::MAX - 0x7FF));
        assert!(range_within(0x1000, 0x1000, 0x2000, 0));
        assert!(!range_within(0x1000, 0x1000, 0x2001, 0));
    }

    #[test]
    fn register_check_and_deregister() {
        let mut t = T::new();
        let pd = t.alloc_pd().unwrap();
        let k = t
            .reg_mr(
                pd,
                0x1000,
                0x100,
                AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ,
            )
            .unwrap();
        assert_eq!(k.lkey.0, k.rkey.0);
        t.check_local(pd, k.lkey, 0x1000, 0x100, AccessFlags::LOCAL_WRITE)
            .unwrap();
        t.check_remote(
            pd,
            Qpn::new(16),
            k.rkey,
            0x10FF,
            1,
            AccessFlags::REMOTE_READ,
        )
        .unwrap();
        assert!(matches!(
            t.check_remote(
                pd,
                Qpn::new(16),
                k.rkey,
                0x10FF,
                2,
                AccessFlags::REMOTE_READ
            ),
            Err(MemError::OutOfBounds { .. })
        ));
        assert!(matches!(
            t.check_remote(
                pd,
                Qpn::new(16),
                k.rkey,
                0x1000,
                1,
                AccessFlags::REMOTE_WRITE
            ),
            Err(MemError::AccessDenied { .. })
        ));
        let other = t.alloc_pd().unwrap();
        assert_eq!(
            t.check_remote(
                other,
                Qpn::new(16),
                k.rkey,
                0x1000,
                1,
                AccessFlags::REMOTE_READ
            ),
            Err(MemError::WrongPd(k.rkey.0))
        );
        assert_eq!(t.dealloc_pd(pd), Err(MemError::Busy));
        t.dereg_mr(k.lkey).unwrap();
        assert_eq!(
            t.check_local(pd, k.lkey, 0x1000, 1, AccessFlags::NONE),
            Err(MemError::NoSuchKey(k.lkey.0))
        );
        assert_eq!(t.dereg_mr(k.lkey), Err(MemError::NoSuchKey(k.lkey.0)));
        t.dealloc_pd(pd).unwrap();
    }

    #[test]
    fn stale_keys_do_not_name_the_next_region_in_the_slot() {
        let mut t = T::new();
        let pd = t.alloc_pd().unwrap();
        let a = t.reg_mr(pd, 0, 16, AccessFlags::NONE).unwrap();
        t.dereg_mr(a.lkey).unwrap();
        let b = t.reg_mr(pd, 0, 16, AccessFlags::NONE).unwrap();
        assert_ne!(a.lkey, b.lkey);
        assert!(t.check_local(pd, a.lkey, 0, 1, AccessFlags::NONE).is_err());
        assert!(t.check_local(pd, b.lkey, 0, 1, AccessFlags::NONE).is_ok());
        assert!(t.get(0).is_none());
        assert!(t.get(u32::MAX).is_none());
    }

    #[test]
    fn registration_rejects_wrapping_ranges_and_bad_flags() {
        let mut t = T::new();
        let pd = t.alloc_pd().unwrap();
        assert_eq!(
            t.reg_mr(pd, u64::MAX, 2, AccessFlags::NONE),
            Err(MemError::RangeOverflow)
        );
        // Ending exactly at 2^64 is fine.
        let k = t
            .reg_mr(pd, u64::MAX - 7, 8, AccessFlags::LOCAL_WRITE)
            .unwrap();
        t.check_local(pd, k.lkey, u64::MAX, 1, AccessFlags::LOCAL_WRITE)
            .unwrap();
        assert_eq!(
            t.reg_mr(pd, 0, 8, AccessFlags::REMOTE_WRITE),
            Err(MemError::InvalidAccess)
        );
        assert_eq!(
            t.reg_mr(pd, 0, 8, AccessFlags::REMOTE_ATOMIC),
            Err(MemError::InvalidAccess)
        );
        assert_eq!(AccessFlags::from_bits(0x10), Some(AccessFlags::MW_BIND));
        assert_eq!(
            AccessFlags::from_bits(0x20),
            None,
            "ZERO_BASED is not implemented"
        );
        assert_eq!(
            t.reg_mr(Pd(1), 0, 8, AccessFlags::NONE),
            Err(MemError::NoSuchPd)
        );
    }

    #[test]
    fn window_keys_never_name_a_region_and_dealloc_ignores_the_tag() {
        let mut t = T::new();
        let pd = t.alloc_pd().unwrap();
        let mr = t.reg_mr(pd, 0, 64, AccessFlags::MW_BIND).unwrap();
        let mw = t.alloc_mw(pd, MwType::Type1).unwrap();
        assert!(is_mw_key(mw.0) && !is_mw_key(mr.lkey.0) && !is_mw_key(WQE_LKEY.0));
        assert_eq!(
            t.check_local(pd, Lkey(mw.0), 0, 1, AccessFlags::NONE),
            Err(MemError::NoSuchKey(mw.0))
        );
        // Unbound: no remote access; the PD is in use.
        assert_eq!(
            t.check_remote(pd, Qpn::new(16), mw, 0, 1, AccessFlags::REMOTE_READ),
            Err(MemError::Invalidated(mw.0))
        );
        assert_eq!(t.dealloc_pd(pd), Err(MemError::Busy));
        t.dealloc_mw(Rkey(mw.0 ^ 0x33)).unwrap();
        assert!(t.window(mw).is_none());
        t.dereg_mr(mr.lkey).unwrap();
        t.dealloc_pd(pd).unwrap();
    }

    #[test]
    fn tables_fill_up() {
        let mut t = T::new();
        let pd = t.alloc_pd().unwrap();
        let _ = t.alloc_pd().unwrap();
        assert_eq!(t.alloc_pd(), Err(MemError::TableFull));
        for _ in 0..4 {
            t.reg_mr(pd, 0, 1, AccessFlags::NONE).unwrap();
        }
        assert_eq!(
            t.reg_mr(pd, 0, 1, AccessFlags::NONE),
            Err(MemError::TableFull)
        );
        assert_eq!(t.mr_count(), 4);
    }

    #[test]
    fn invalidation_blocks_local_and_remote_use() {
        let mut t = T::new();
        let pd = t.alloc_pd().unwrap();
        let other = t.alloc_pd().unwrap();
        let k = t
            .reg_mr(
                pd,
                0x2000,
                64,
                AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
            )
            .unwrap();
        assert_eq!(
            t.invalidate(other, k.rkey.0),
            Err(MemError::WrongPd(k.rkey.0))
        );
        t.invalidate(pd, k.rkey.0).unwrap();
        assert_eq!(
            t.check_remote(
                pd,
                Qpn::new(16),
                k.rkey,
                0x2000,
                8,
                AccessFlags::REMOTE_WRITE
            ),
            Err(MemError::Invalidated(k.rkey.0))
        );
        assert_eq!(
            t.check_local(pd, k.lkey, 0x2000, 8, AccessFlags::NONE),
            Err(MemError::Invalidated(k.lkey.0))
        );
        assert_eq!(t.invalidate(pd, 0x12345), Err(MemError::NoSuchKey(0x12345)));
        t.dereg_mr(k.lkey).unwrap();
    }
}
