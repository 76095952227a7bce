//! AtomicETH (28 bytes, packed) and AtomicAckETH (8 bytes) (roce-facts §4.3, §4.4).

use super::field::{get_u32, get_u64, set_u32, set_u64};
use super::Truncated;
use crate::num::Rkey;

fixed_view!(
    /// View of the AtomicETH of CMP_SWAP and FETCH_ADD.
    AtomicEth,
    28
);

impl<T: AsRef<[u8]>> AtomicEth<T> {
    /// Target address (must be 8-byte aligned).
    pub fn va(&self) -> u64 {
        get_u64(self.buffer.as_ref(), 0)
    }
    /// Remote key.
    pub fn rkey(&self) -> Rkey {
        Rkey(get_u32(self.buffer.as_ref(), 8))
    }
    /// Swap (CMP_SWAP) or add (FETCH_ADD) operand.
    pub fn swap_add(&self) -> u64 {
        get_u64(self.buffer.as_ref(), 12)
    }
    /// Compare operand (CMP_SWAP only).
    pub fn compare(&self) -> u64 {
        get_u64(self.buffer.as_ref(), 20)
    }
}

/// Plain-data AtomicETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtomicEthRepr {
    pub va: u64,
    pub rkey: Rkey,
    pub swap_add: u64,
    pub compare: u64,
}

impl AtomicEthRepr {
    /// Bytes this header occupies.
    pub const LEN: usize = 28;

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &AtomicEth<T>) -> Self {
        Self {
            va: v.va(),
            rkey: v.rkey(),
            swap_add: v.swap_add(),
            compare: v.compare(),
        }
    }

    /// The value an atomic leaves in the 8 bytes that held `orig`: `swap_add` when
    /// `cmp_swap` and `orig` equals `compare` (else `orig`), or `orig + swap_add`
    /// (wrapping) for a FETCH_ADD. The engine's responder and the fast path's receive
    /// path execute atomics through it.
    pub fn apply(&self, cmp_swap: bool, orig: u64) -> u64 {
        if !cmp_swap {
            orig.wrapping_add(self.swap_add)
        } else if orig == self.compare {
            self.swap_add
        } else {
            orig
        }
    }

    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let b = buf.get_mut(..Self::LEN).ok_or(Truncated)?;
        set_u64(b, 0, self.va);
        set_u32(b, 8, self.rkey.0);
        set_u64(b, 12, self.swap_add);
        set_u64(b, 20, self.compare);
        Ok(Self::LEN)
    }
}

fixed_view!(
    /// View of the AtomicAckETH of ATOMIC_ACKNOWLEDGE.
    AtomicAckEth,
    8
);

impl<T: AsRef<[u8]>> AtomicAckEth<T> {
    /// The value the target held before the atomic.
    pub fn orig_rem_data(&self) -> u64 {
        get_u64(self.buffer.as_ref(), 0)
    }
}

/// Plain-data AtomicAckETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtomicAckEthRepr {
    pub orig_rem_data: u64,
}

impl AtomicAckEthRepr {
    /// Bytes this header occupies.
    pub const LEN: usize = 8;

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &AtomicAckEth<T>) -> Self {
        Self {
            orig_rem_data: v.orig_rem_data(),
        }
    }

    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let b = buf.get_mut(..Self::LEN).ok_or(Truncated)?;
        set_u64(b, 0, self.orig_rem_data);
        Ok(Self::LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_eth_fields_are_packed_unaligned() {
        let mut raw = [0u8; 28];
        let repr = AtomicEthRepr {
            va: 0x0102_0304_0506_0708,
            rkey: Rkey(0x1122_3344),
            swap_add: 0xA1A2_A3A4_A5A6_A7A8,
            compare: 0xB1B2_B3B4_B5B6_B7B8,
        };
        repr.emit(&mut raw).unwrap();
        // Offsets 0, 8, 12, 20 (roce-facts §4.3).
        assert_eq!(raw[0], 0x01);
        assert_eq!(raw[8], 0x11);
        assert_eq!(raw[12], 0xA1);
        assert_eq!(raw[20], 0xB1);
        assert_eq!(
            AtomicEthRepr::parse(&AtomicEth::new_checked(&raw[..]).unwrap()),
            repr
        );
    }
}
