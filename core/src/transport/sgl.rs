//! Moving message bytes between packets and scatter/gather lists, with the protection
//! check made on every piece touched (so a region deregistered or invalidated in the
//! middle of a message stops the transfer).

use crate::memory::{AccessFlags, Dma, MemError, Pd, Protection};
use crate::wire::icrc::Icrc;

use super::verbs::Sge;

/// Why a scatter or gather failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SglError {
    /// The list is shorter than the data (receive buffer too small).
    Overflow,
    /// A protection check failed.
    Prot(MemError),
    /// The DMA engine faulted.
    Dma,
}

/// Checks every element of a list for `need` (zero-length elements are not checked).
pub(crate) fn check(
    mem: &dyn Protection,
    pd: Pd,
    sgl: &[Sge],
    need: AccessFlags,
) -> Result<(), MemError> {
    for s in sgl.iter().filter(|s| s.length != 0) {
        mem.check_local(pd, s.lkey, s.addr, u64::from(s.length), need)?;
    }
    Ok(())
}

/// Calls `f(addr, lkey, range_in_data)` for each piece of the list that covers
/// `[offset, offset + len)` of the logical message.
fn walk(
    sgl: &[Sge],
    offset: u32,
    len: usize,
    mut f: impl FnMut(&Sge, u64, core::ops::Range<usize>) -> Result<(), SglError>,
) -> Result<(), SglError> {
    let mut skip = u64::from(offset);
    let mut done = 0usize;
    for s in sgl {
        if done == len {
            break;
        }
        let slen = u64::from(s.length);
        if skip >= slen {
            skip -= slen;
            continue;
        }
        let avail = slen - skip;
        let want = len - done;
        let take = usize::try_from(avail).map_or(want, |a| a.min(want));
        let addr = s.addr.checked_add(skip).ok_or(SglError::Overflow)?;
        f(s, addr, done..done + take)?;
        done += take;
        skip = 0;
    }
    if done == len {
        Ok(())
    } else {
        Err(SglError::Overflow)
    }
}

/// Copies `dst.len()` bytes of the message starting at `offset` out of local memory;
/// with `icrc`, feeding them to it in order as they are read (a frame's payload: one
/// pass over the bytes, [`Icrc::read`]).
pub(crate) fn gather(
    mem: &dyn Protection,
    dma: &mut dyn Dma,
    pd: Pd,
    sgl: &[Sge],
    offset: u32,
    dst: &mut [u8],
    mut icrc: Option<&mut Icrc>,
) -> Result<(), SglError> {
    let len = dst.len();
    walk(sgl, offset, len, |s, addr, r| {
        mem.check_local(pd, s.lkey, addr, r.len() as u64, AccessFlags::NONE)
            .map_err(SglError::Prot)?;
        let d = dst.get_mut(r).ok_or(SglError::Overflow)?;
        Icrc::read_opt(icrc.as_deref_mut(), dma, addr, d).map_err(|_| SglError::Dma)
    })
}

/// Copies `src` into the message at `offset` in local memory (needs LOCAL_WRITE).
pub(crate) fn scatter(
    mem: &dyn Protection,
    dma: &mut dyn Dma,
    pd: Pd,
    sgl: &[Sge],
    offset: u32,
    src: &[u8],
) -> Result<(), SglError> {
    walk(sgl, offset, src.len(), |s, addr, r| {
        mem.check_local(pd, s.lkey, addr, r.len() as u64, AccessFlags::LOCAL_WRITE)
            .map_err(SglError::Prot)?;
        let d = src.get(r).ok_or(SglError::Overflow)?;
        dma.write(addr, d).map_err(|_| SglError::Dma)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{MemoryTable, SliceMemory};
    use crate::num::Lkey;
    use crate::wire::icrc::IcrcKind;

    #[test]
    fn scatter_and_gather_cross_elements() {
        let mut t = MemoryTable::<1, 2>::new();
        let pd = t.alloc_pd().unwrap();
        let k = t.reg_mr(pd, 0x100, 64, AccessFlags::LOCAL_WRITE).unwrap();
        let sgl = [
            Sge {
                addr: 0x100,
                length: 3,
                lkey: k.lkey,
            },
            Sge {
                addr: 0x120,
                length: 0,
                lkey: Lkey(0),
            },
            Sge {
                addr: 0x110,
                length: 5,
                lkey: k.lkey,
            },
        ];
        check(&t, pd, &sgl, AccessFlags::LOCAL_WRITE).unwrap();
        let mut backing = [0u8; 64];
        let mut m = SliceMemory::new(0x100, &mut backing);
        scatter(&t, &mut m, pd, &sgl, 1, &[1, 2, 3, 4]).unwrap();
        let mut out = [0u8; 8];
        // An IPv4 + UDP + BTH prefix to start an ICRC with: the bytes gathered are fed
        // to it in order, as a frame's payload.
        let mut headers = [0u8; 40];
        headers[0] = 0x45;
        let start = || Icrc::start(IcrcKind::Ipv4, &headers).unwrap();
        let mut icrc = start();
        gather(&t, &mut m, pd, &sgl, 0, &mut out, Some(&mut icrc)).unwrap();
        assert_eq!(out, [0, 1, 2, 3, 4, 0, 0, 0]);
        let mut fed = start();
        fed.update(&out);
        assert_eq!(icrc.finish(), fed.finish());
        assert_eq!(
            scatter(&t, &mut m, pd, &sgl, 5, &[9; 4]),
            Err(SglError::Overflow)
        );
        assert_eq!(gather(&t, &mut m, pd, &sgl, 9, &mut [], None), Ok(()));
        // A bad key fails the check before any byte moves.
        let bad = [Sge {
            addr: 0x100,
            length: 1,
            lkey: Lkey(0x999),
        }];
        assert!(matches!(
            scatter(&t, &mut m, pd, &bad, 0, &[1]),
            Err(SglError::Prot(_))
        ));
    }
}
