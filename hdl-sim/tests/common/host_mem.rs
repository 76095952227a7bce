//! Host memory for the fast path's tests: one flat range from `base`, read and written
//! by the RTL's DMA ports and the model's alike.

use roce_core::memory::{Dma, DmaError};

#[derive(Clone)]
pub struct HostMem {
    pub base: u64,
    pub bytes: Vec<u8>,
}

impl HostMem {
    /// `len` bytes of a pattern (`seed` tells memories apart).
    pub fn new(base: u64, len: usize, seed: u8) -> Self {
        let bytes = (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect();
        Self { base, bytes }
    }

    pub fn range(&self, addr: u64, len: usize) -> Result<std::ops::Range<usize>, DmaError> {
        let err = DmaError { addr, len };
        let off = usize::try_from(addr.checked_sub(self.base).ok_or(err)?).map_err(|_| err)?;
        let end = off.checked_add(len).ok_or(err)?;
        (end <= self.bytes.len()).then_some(off..end).ok_or(err)
    }
}

impl Dma for HostMem {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let r = self.range(addr, buf.len())?;
        buf.copy_from_slice(&self.bytes[r]);
        Ok(())
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let r = self.range(addr, data.len())?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }
}
