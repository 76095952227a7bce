//! The body of a RoCEv2 Congestion Notification Packet (roce-facts §3.4): after a BTH
//! with opcode 0x81 and BECN = 1, 16 reserved bytes, then the ICRC.

use super::Truncated;

fixed_view!(
    /// View of the 16 reserved bytes of a CNP.
    Header,
    16
);

impl<T: AsRef<[u8]>> Header<T> {
    /// The reserved bytes as received (senders write zeros).
    pub fn reserved(&self) -> [u8; 16] {
        let mut r = [0u8; 16];
        r.copy_from_slice(&self.buffer.as_ref()[..16]);
        r
    }
}

/// Plain-data CNP body. The reserved bytes are kept so a captured CNP round-trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CnpRepr {
    pub reserved: [u8; 16],
}

impl CnpRepr {
    /// Bytes this header occupies.
    pub const LEN: usize = 16;

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Header<T>) -> Self {
        Self {
            reserved: v.reserved(),
        }
    }

    /// Writes the body into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        buf.get_mut(..Self::LEN)
            .ok_or(Truncated)?
            .copy_from_slice(&self.reserved);
        Ok(Self::LEN)
    }
}
