//! The DMA boundary: every byte of host memory the engine touches goes through [`Dma`].
//! Firmware puts its DMA engine behind it; tests use plain memory ([`SliceMemory`]).

use core::fmt;

/// A DMA fault: the address range is not backed by memory the device can reach.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct DmaError {
    /// Start of the failed access.
    pub addr: u64,
    /// Its length.
    pub len: usize,
}

impl fmt::Display for DmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DMA fault at [{:#x}, +{:#x})", self.addr, self.len)
    }
}

/// Byte access to host memory by address. Protection is checked before any call (the
/// memory table); this trait only moves bytes.
pub trait Dma {
    /// Reads `buf.len()` bytes starting at `addr`.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError>;
    /// Writes `data` starting at `addr`.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError>;
    /// [`read`](Self::read), then the CRC-32 `crc` (a finished value, as
    /// `roce_crc32::update` takes) continued over the bytes read: a frame's payload read
    /// for its ICRC ([`crate::wire::icrc::Icrc::read`]). A memory that holds the bytes
    /// itself does both in one pass with [`copy_crc`].
    fn read_crc(&mut self, addr: u64, buf: &mut [u8], crc: u32) -> Result<u32, DmaError> {
        self.read(addr, buf)?;
        Ok(roce_crc32::update(crc, buf))
    }
    /// Whether [`read_crc`](Self::read_crc) copies and hashes in one pass, so that a
    /// frame's builder should hash its payload as it reads it. Otherwise the builder
    /// reads, then hashes the whole frame in one call: a CRC begun over the headers and
    /// continued piece by piece costs more calls (on the soft core ~130 instructions more
    /// for a READ response).
    fn hashes_reads(&self) -> bool {
        false
    }
}

/// Whether [`copy_crc`] copies and hashes in one pass on this CPU (the AVX-512 kernel);
/// otherwise it copies, then hashes.
#[inline]
pub fn copy_crc_in_one_pass() -> bool {
    roce_crc32::copy_update_in_one_pass()
}

/// Copies `src` into `dst` and returns the CRC-32 `crc` continued over the bytes, in one
/// pass over them where the CPU allows (`roce_crc32::copy_update`): for
/// [`Dma::read_crc`] of a memory that holds its bytes. A 4 KiB payload costs the copy's
/// time, not the copy's then the CRC's (BENCHMARKS.md, scale12).
#[inline]
pub fn copy_crc(crc: u32, src: &[u8], dst: &mut [u8]) -> u32 {
    roce_crc32::copy_update(crc, src, dst)
}

impl<T: Dma + ?Sized> Dma for &mut T {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        (**self).read(addr, buf)
    }
    fn read_crc(&mut self, addr: u64, buf: &mut [u8], crc: u32) -> Result<u32, DmaError> {
        (**self).read_crc(addr, buf, crc)
    }
    fn hashes_reads(&self) -> bool {
        (**self).hashes_reads()
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        (**self).write(addr, data)
    }
}

/// Host memory as one byte slice mapped at `base`.
#[derive(Debug)]
pub struct SliceMemory<'a> {
    base: u64,
    bytes: &'a mut [u8],
}

impl<'a> SliceMemory<'a> {
    /// Maps `bytes` at address `base`.
    pub fn new(base: u64, bytes: &'a mut [u8]) -> Self {
        Self { base, bytes }
    }

    /// The backing bytes.
    pub fn bytes(&self) -> &[u8] {
        self.bytes
    }

    fn range(&self, addr: u64, len: usize) -> Option<core::ops::Range<usize>> {
        let off = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        let end = off.checked_add(len)?;
        (end <= self.bytes.len()).then_some(off..end)
    }
}

impl Dma for SliceMemory<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let err = DmaError {
            addr,
            len: buf.len(),
        };
        let r = self.range(addr, buf.len()).ok_or(err)?;
        buf.copy_from_slice(self.bytes.get(r).ok_or(err)?);
        Ok(())
    }

    fn read_crc(&mut self, addr: u64, buf: &mut [u8], crc: u32) -> Result<u32, DmaError> {
        let err = DmaError {
            addr,
            len: buf.len(),
        };
        let r = self.range(addr, buf.len()).ok_or(err)?;
        Ok(copy_crc(crc, self.bytes.get(r).ok_or(err)?, buf))
    }

    fn hashes_reads(&self) -> bool {
        copy_crc_in_one_pass()
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let err = DmaError {
            addr,
            len: data.len(),
        };
        let r = self.range(addr, data.len()).ok_or(err)?;
        self.bytes.get_mut(r).ok_or(err)?.copy_from_slice(data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_memory_bounds() {
        let mut backing = [0u8; 16];
        let mut m = SliceMemory::new(u64::MAX - 15, &mut backing);
        m.write(u64::MAX - 1, &[1, 2]).unwrap();
        assert!(m.write(u64::MAX, &[1, 2]).is_err());
        assert!(m.write(0, &[1]).is_err());
        let mut b = [0u8; 2];
        m.read(u64::MAX - 1, &mut b).unwrap();
        assert_eq!(b, [1, 2]);
        assert!(m.read(u64::MAX - 16, &mut b).is_err());
        m.read(u64::MAX, &mut []).unwrap();
    }
}
