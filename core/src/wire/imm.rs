//! The two 4-byte headers that carry one 32-bit value: ImmDt (immediate data, §4.5) and
//! IETH (the R_Key to invalidate, §4.6).

use super::field::{get_u32, set_u32};
use super::Truncated;
use crate::num::Rkey;

fixed_view!(
    /// View of a 4-byte ImmDt or IETH.
    Header,
    4
);

impl<T: AsRef<[u8]>> Header<T> {
    /// The 32-bit value.
    pub fn value(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 0)
    }
}

/// Immediate data, delivered as-is (network byte order) to the receiver's completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ImmDtRepr {
    pub imm: u32,
}

/// Invalidate ETH: the responder invalidates this R_Key (SEND_*_WITH_INVALIDATE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct IethRepr {
    pub rkey: Rkey,
}

/// Writes a 4-byte header holding `v`.
fn emit_u32(v: u32, buf: &mut [u8]) -> Result<usize, Truncated> {
    set_u32(buf.get_mut(..4).ok_or(Truncated)?, 0, v);
    Ok(4)
}

impl ImmDtRepr {
    /// Bytes this header occupies.
    pub const LEN: usize = 4;
    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Header<T>) -> Self {
        Self { imm: v.value() }
    }
    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        emit_u32(self.imm, buf)
    }
}

impl IethRepr {
    /// Bytes this header occupies.
    pub const LEN: usize = 4;
    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Header<T>) -> Self {
        Self {
            rkey: Rkey(v.value()),
        }
    }
    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        emit_u32(self.rkey.0, buf)
    }
}
