//! RDMA Extended Transport Header, 16 bytes (roce-facts §4.1): on WRITE_FIRST,
//! WRITE_ONLY(_WITH_IMMEDIATE) and READ_REQUEST.

use super::field::{get_u32, get_u64, set_u32, set_u64};
use super::Truncated;
use crate::num::Rkey;

fixed_view!(
    /// View of the RETH.
    Header,
    16
);

impl<T: AsRef<[u8]>> Header<T> {
    /// Virtual address of the remote buffer.
    pub fn va(&self) -> u64 {
        get_u64(self.buffer.as_ref(), 0)
    }
    /// Remote key of the region.
    pub fn rkey(&self) -> Rkey {
        Rkey(get_u32(self.buffer.as_ref(), 8))
    }
    /// Total length of the message (0 is legal: then VA and R_Key are not checked).
    pub fn dma_len(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 12)
    }
}

/// Plain-data RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RethRepr {
    pub va: u64,
    pub rkey: Rkey,
    pub dma_len: u32,
}

impl RethRepr {
    /// Bytes this header occupies.
    pub const LEN: usize = 16;

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Header<T>) -> Self {
        Self {
            va: v.va(),
            rkey: v.rkey(),
            dma_len: v.dma_len(),
        }
    }

    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let b = buf.get_mut(..Self::LEN).ok_or(Truncated)?;
        set_u64(b, 0, self.va);
        set_u32(b, 8, self.rkey.0);
        set_u32(b, 12, self.dma_len);
        Ok(Self::LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_request_reth_from_a_real_capture() {
        // vectors/real/pcapplusplus_fork_InfiniBandPacket_dat: va 0x7fee260fb000,
        // rkey 0x2b8, len 65536.
        let raw = [
            0, 0, 0x7f, 0xee, 0x26, 0x0f, 0xb0, 0, 0, 0, 0x02, 0xb8, 0, 1, 0, 0,
        ];
        let r = RethRepr::parse(&Header::new_checked(&raw[..]).unwrap());
        assert_eq!(
            r,
            RethRepr {
                va: 0x7fee_260f_b000,
                rkey: Rkey(0x2b8),
                dma_len: 65536
            }
        );
        let mut out = [0u8; 16];
        r.emit(&mut out).unwrap();
        assert_eq!(out, raw);
    }
}
