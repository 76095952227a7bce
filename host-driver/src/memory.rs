//! Host memory that the NIC reaches by DMA: one growable arena with a first-fit
//! allocator. Addresses start above 4 GiB so that 64-bit DMA addressing is exercised.

use roce_core::memory::{copy_crc, copy_crc_in_one_pass, Dma, DmaError};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// First host address handed out.
pub const BASE: u64 = 0x1_0000_0000;

#[derive(Default)]
struct Arena {
    bytes: Vec<u8>,
    /// Free blocks: start offset -> length.
    free: BTreeMap<usize, usize>,
}

/// Host memory shared by the driver and the device (cheap to clone: a handle).
#[derive(Clone, Default)]
pub struct HostMemory {
    arena: Rc<RefCell<Arena>>,
}

impl HostMemory {
    /// Allocates `len` bytes aligned to `align` (a power of two), zeroed.
    pub fn alloc(&self, len: usize, align: usize) -> u64 {
        let mut a = self.arena.borrow_mut();
        let align = align.max(1);
        let fit = a.free.iter().find_map(|(&start, &size)| {
            let aligned = start.next_multiple_of(align);
            (aligned + len <= start + size).then_some((start, size, aligned))
        });
        let off = match fit {
            Some((start, size, aligned)) => {
                a.free.remove(&start);
                if aligned > start {
                    a.free.insert(start, aligned - start);
                }
                if aligned + len < start + size {
                    a.free.insert(aligned + len, start + size - aligned - len);
                }
                a.bytes[aligned..aligned + len].fill(0);
                aligned
            }
            None => {
                let aligned = a.bytes.len().next_multiple_of(align);
                a.bytes.resize(aligned + len, 0);
                aligned
            }
        };
        BASE + off as u64
    }

    /// Returns a block to the allocator.
    pub fn free(&self, addr: u64, len: usize) {
        if let Some(off) = addr.checked_sub(BASE) {
            self.arena.borrow_mut().free.insert(off as usize, len);
        }
    }

    fn range(a: &Arena, addr: u64, len: usize) -> Option<std::ops::Range<usize>> {
        let off = usize::try_from(addr.checked_sub(BASE)?).ok()?;
        let end = off.checked_add(len)?;
        (end <= a.bytes.len()).then_some(off..end)
    }

    /// Reads `buf.len()` bytes at `addr`.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let a = self.arena.borrow();
        let r = Self::range(&a, addr, buf.len()).ok_or(DmaError {
            addr,
            len: buf.len(),
        })?;
        buf.copy_from_slice(&a.bytes[r]);
        Ok(())
    }

    /// [`read`](Self::read) that also continues the CRC-32 `crc` over the bytes, in the
    /// same pass ([`Dma::read_crc`]).
    pub fn read_crc(&self, addr: u64, buf: &mut [u8], crc: u32) -> Result<u32, DmaError> {
        let a = self.arena.borrow();
        let r = Self::range(&a, addr, buf.len()).ok_or(DmaError {
            addr,
            len: buf.len(),
        })?;
        Ok(copy_crc(crc, &a.bytes[r], buf))
    }

    /// Writes `data` at `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let mut a = self.arena.borrow_mut();
        let r = Self::range(&a, addr, data.len()).ok_or(DmaError {
            addr,
            len: data.len(),
        })?;
        a.bytes[r].copy_from_slice(data);
        Ok(())
    }
}

impl Dma for HostMemory {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        HostMemory::read(self, addr, buf)
    }
    fn read_crc(&mut self, addr: u64, buf: &mut [u8], crc: u32) -> Result<u32, DmaError> {
        HostMemory::read_crc(self, addr, buf, crc)
    }
    fn hashes_reads(&self) -> bool {
        copy_crc_in_one_pass()
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        HostMemory::write(self, addr, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_zeroed_and_reused() {
        let m = HostMemory::default();
        let a = m.alloc(100, 64);
        assert_eq!(a % 64, 0);
        m.write(a, &[7; 100]).unwrap();
        m.free(a, 100);
        let b = m.alloc(64, 64);
        assert_eq!(b, a);
        let mut buf = [1u8; 64];
        m.read(b, &mut buf).unwrap();
        assert_eq!(buf, [0; 64]);
        assert!(m.read(BASE + 1_000_000, &mut buf).is_err());
        assert!(m.read(u64::MAX - 3, &mut buf).is_err());
    }
}
