//! The `abi` target's memory windows (ABI 1.3): what a remote access through a
//! window's R_Key may touch, and the rules every binding must keep, both worked out
//! from IBTA §10.6.7 (C10-72 to C10-75, o10-37.2.x) and `docs/abi.md`, not from the
//! NIC's code.
//!
//! **Access through a window.** Before each poll the target takes a snapshot of the
//! NIC's windows ([`snapshot`]). Within a poll the firmware runs commands, then receives
//! frames, then transmits; windows are bound only by BIND_MW work requests, which run
//! when the requester transmits. So while a frame is received, a window's state is the
//! snapshot's, less what a command or an earlier SEND_WITH_INV of the same poll took
//! away (DEALLOC_MW, invalidation): nothing in between grants access. Hence, for a
//! request (a WRITE's first or only packet, an atomic) naming a window's R_Key:
//! * when the snapshot refuses it (no window has that exact key, the window is unbound,
//!   of another PD than the QP it arrives at, a type 2 window bound by another QP,
//!   rights missing, or the range not inside the window), the NIC refuses it too: the
//!   frame (and the rest of its message) makes no DMA access to memory;
//! * otherwise every DMA access the message makes lies inside the range it names.
//!
//! [`Limit`] carries that verdict to the memory checks (`nic.rs`). A READ's data is read
//! when its responses are built, at transmit, where only the tenant rule applies.
//!
//! **Bindings.** After every poll ([`check_bindings`]): every bound window opens part of
//! a valid MR of its own PD that allows `MW_BIND` (C10-73), lies inside it (C10-75),
//! grants only remote rights and, writable, sits on an MR with `LOCAL_WRITE` (C10-74);
//! a type 1 window names no QP, a type 2 window the QP that bound it; and the victim's windows are exactly as it left them (no other tenant's
//! QP can bind, unbind or free them).

use std::cell::RefCell;

use roce_core::memory::{range_within, AccessFlags, MemoryWindow, MwType};
use roce_core::wire::opcode::Operation;
use roce_core::wire::Packet;

/// What a received frame may touch (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Nothing: the request must be refused.
    Refuse,
    /// Only `[addr, addr + len)`.
    Within(u64, u64),
}

impl Limit {
    /// Whether a DMA access of `len` bytes at `addr` keeps to the limit.
    pub fn allows(self, addr: u64, len: usize) -> bool {
        match self {
            Limit::Refuse => false,
            Limit::Within(a, l) => range_within(a, l, addr, len as u64),
        }
    }
}

/// The windows as they were before the current poll, and each QP's PD (its ABI handle,
/// which is the PD's index).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub windows: Vec<MemoryWindow>,
    pub qp_pds: Vec<(u32, u32)>,
}

thread_local! {
    static SNAPSHOT: RefCell<Option<Snapshot>> = const { RefCell::new(None) };
}

/// Publishes the state the next poll starts from (`None`: no verdicts, as during setup).
pub fn snapshot(s: Option<Snapshot>) {
    SNAPSHOT.set(s);
}

/// Publishes the state the next poll starts from, as [`snapshot`] does, refilling the
/// published snapshot's buffers in place: the `abi` target takes one before each of its
/// ~100 polls per input, and two fresh vectors each time were a measurable part of its
/// cost.
pub fn refresh(
    windows: impl Iterator<Item = MemoryWindow>,
    qp_pds: impl Iterator<Item = (u32, u32)>,
) {
    SNAPSHOT.with_borrow_mut(|s| {
        let s = s.get_or_insert_with(Snapshot::default);
        s.windows.clear();
        s.windows.extend(windows);
        s.qp_pds.clear();
        s.qp_pds.extend(qp_pds);
    });
}

/// The verdict for a request of `p` (arriving at its destination QP), when it names a
/// window's R_Key; `None` for every other frame.
pub fn verdict(p: &Packet<'_>) -> Option<Limit> {
    let (rkey, va, len, need) = match p.info().operation {
        Operation::RdmaWrite if p.info().position.starts() => {
            let r = p.reth()?;
            (
                r.rkey,
                r.va,
                u64::from(r.dma_len),
                AccessFlags::REMOTE_WRITE,
            )
        }
        Operation::CompareSwap | Operation::FetchAdd => {
            let a = p.atomic_eth()?;
            (a.rkey, a.va, 8, AccessFlags::REMOTE_ATOMIC)
        }
        _ => return None,
    };
    if !roce_core::memory::is_mw_key(rkey.0) {
        return None;
    }
    let qpn = p.dest_qp().value();
    SNAPSHOT.with_borrow(|s| {
        let s = s.as_ref()?;
        Some(judge(s, qpn, (rkey.0, va, len), need))
    })
}

/// The verdict for a request arriving at QP `qpn` through window key `rkey` for `len`
/// bytes at `va`, needing `need`, by the windows of `s` (see the module doc).
fn judge(s: &Snapshot, qpn: u32, (rkey, va, len): (u32, u64, u64), need: AccessFlags) -> Limit {
    let allowed = || {
        let pd = s.qp_pds.iter().find(|q| q.0 == qpn)?.1;
        let w = s.windows.iter().find(|w| w.rkey.0 == rkey)?;
        let b = w.binding?;
        let ok = u32::from(w.pd.index()) == pd
            && match w.mw_type {
                MwType::Type1 => true,
                MwType::Type2 => b.qpn.map(|q| q.value()) == Some(qpn),
            }
            && b.access.contains(need)
            && (len == 0 || range_within(b.addr, b.length, va, len));
        ok.then_some(())
    };
    match allowed() {
        Some(()) => Limit::Within(va, len),
        None => Limit::Refuse,
    }
}

/// The IBTA rules every bound window keeps, and the victim's windows untouched (see the
/// module doc): `victim` = the victim's windows as it left them.
pub fn check_bindings(
    windows: &[MemoryWindow],
    regions: &[roce_core::memory::MemoryRegion],
    victim: &[MemoryWindow],
) {
    for v in victim {
        let now = windows.iter().find(|w| w.rkey.0 >> 8 == v.rkey.0 >> 8);
        assert_eq!(now, Some(v), "the victim's window changed hands");
    }
    let rights = AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC;
    for w in windows {
        let Some(b) = w.binding else { continue };
        let mr = regions.iter().find(|m| m.key == b.mr);
        let mr = mr.unwrap_or_else(|| panic!("window {w:?} is bound to no MR"));
        assert!(
            mr.valid && mr.pd == w.pd,
            "window {w:?} on an MR of another PD or invalidated: {mr:?}"
        );
        assert!(
            mr.access.contains(AccessFlags::MW_BIND),
            "window {w:?} on an MR without MW_BIND (C10-73): {mr:?}"
        );
        assert!(
            range_within(mr.addr, mr.length, b.addr, b.length) && b.length != 0,
            "window {w:?} not inside its MR (C10-75): {mr:?}"
        );
        assert!(
            rights.contains(b.access),
            "window {w:?} grants more than remote rights"
        );
        let writes = b.access.contains(AccessFlags::REMOTE_WRITE)
            || b.access.contains(AccessFlags::REMOTE_ATOMIC);
        assert!(
            !writes || mr.access.contains(AccessFlags::LOCAL_WRITE),
            "writable window {w:?} on an MR without LOCAL_WRITE (C10-74): {mr:?}"
        );
        // Type 1: any QP of the PD uses it; type 2: only the QP that bound it.
        assert_eq!(
            b.qpn.is_some(),
            w.mw_type == MwType::Type2,
            "window {w:?}: a QP named exactly when type 2"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce_core::memory::{MemoryRegion, MwBinding, Pd};
    use roce_core::num::{Qpn, Rkey};

    const KEY: u32 = 0x8000_0107;
    const MR: u32 = 0x0000_0203;

    fn window(mw_type: MwType, qpn: Option<u32>) -> MemoryWindow {
        MemoryWindow {
            pd: Pd::from_index(1),
            mw_type,
            rkey: Rkey(KEY),
            binding: Some(MwBinding {
                mr: MR,
                addr: 0x1000,
                length: 0x100,
                access: AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC,
                qpn: qpn.map(Qpn::new),
            }),
        }
    }

    fn region(pd: u16, access: AccessFlags) -> MemoryRegion {
        MemoryRegion {
            pd: Pd::from_index(pd),
            addr: 0x1000,
            length: 0x1000,
            access,
            key: MR,
            valid: true,
        }
    }

    /// QP 0x11 of PD 1 (the window's), QP 0x12 of PD 2.
    fn snap(w: MemoryWindow) -> Snapshot {
        Snapshot {
            windows: vec![w],
            qp_pds: vec![(0x11, 1), (0x12, 2)],
        }
    }

    #[test]
    fn a_request_inside_a_bound_window_may_touch_its_range() {
        let s = snap(window(MwType::Type2, Some(0x11)));
        let write = AccessFlags::REMOTE_WRITE;
        let got = judge(&s, 0x11, (KEY, 0x1010, 0x20), write);
        assert_eq!(got, Limit::Within(0x1010, 0x20));
        assert!(got.allows(0x1020, 0x10));
        assert!(!got.allows(0x1028, 0x10), "past the request's range");
        let s = snap(window(MwType::Type1, None));
        assert_eq!(
            judge(&s, 0x11, (KEY, 0x1000, 0x100), write),
            Limit::Within(0x1000, 0x100)
        );
    }

    #[test]
    fn every_reason_to_refuse_refuses() {
        let write = AccessFlags::REMOTE_WRITE;
        let t2 = snap(window(MwType::Type2, Some(0x11)));
        // Past the window's end; another QP of a type 2 window; a QP of another PD;
        // a right the window does not grant; a stale tag.
        assert_eq!(judge(&t2, 0x11, (KEY, 0x10F0, 0x20), write), Limit::Refuse);
        let t1 = snap(window(MwType::Type1, None));
        assert_eq!(judge(&t1, 0x12, (KEY, 0x1000, 8), write), Limit::Refuse);
        let mut other_qp = t2.clone();
        other_qp.qp_pds.push((0x13, 1));
        assert_eq!(
            judge(&other_qp, 0x13, (KEY, 0x1000, 8), write),
            Limit::Refuse
        );
        let read = AccessFlags::REMOTE_READ;
        assert_eq!(judge(&t2, 0x11, (KEY, 0x1000, 8), read), Limit::Refuse);
        assert_eq!(judge(&t2, 0x11, (KEY ^ 1, 0x1000, 8), write), Limit::Refuse);
        // An unbound (invalidated) window.
        let mut free = window(MwType::Type2, Some(0x11));
        free.binding = None;
        assert_eq!(
            judge(&snap(free), 0x11, (KEY, 0x1000, 8), write),
            Limit::Refuse
        );
        assert!(!Limit::Refuse.allows(0x1000, 1));
    }

    fn bindable() -> AccessFlags {
        AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND
    }

    #[test]
    fn a_binding_by_the_rules_passes() {
        let w = window(MwType::Type2, Some(0x11));
        check_bindings(&[w], &[region(1, bindable())], &[w]);
    }

    #[test]
    #[should_panic(expected = "the victim's window changed hands")]
    fn an_unbound_victim_window_is_caught() {
        let w = window(MwType::Type1, None);
        let mut now = w;
        now.binding = None;
        now.rkey = Rkey(KEY & !0xFF);
        check_bindings(&[now], &[region(1, bindable())], &[w]);
    }

    #[test]
    #[should_panic(expected = "another PD")]
    fn a_window_on_another_pds_mr_is_caught() {
        check_bindings(
            &[window(MwType::Type1, None)],
            &[region(2, bindable())],
            &[],
        );
    }

    #[test]
    #[should_panic(expected = "C10-73")]
    fn a_window_on_an_mr_without_mw_bind_is_caught() {
        let w = window(MwType::Type1, None);
        check_bindings(&[w], &[region(1, AccessFlags::LOCAL_WRITE)], &[]);
    }

    #[test]
    #[should_panic(expected = "C10-74")]
    fn a_writable_window_on_an_mr_without_local_write_is_caught() {
        let w = window(MwType::Type1, None);
        check_bindings(&[w], &[region(1, AccessFlags::MW_BIND)], &[]);
    }

    #[test]
    #[should_panic(expected = "C10-75")]
    fn a_window_beyond_its_mr_is_caught() {
        let mut w = window(MwType::Type1, None);
        if let Some(b) = w.binding.as_mut() {
            b.addr = 0x1F80;
        }
        check_bindings(&[w], &[region(1, bindable())], &[]);
    }
}
