//! Datagram Extended Transport Header, 8 bytes (roce-facts §4.7): UD sends.

use super::field::{get_u24, get_u32, set_u24, set_u32};
use super::Truncated;
use crate::num::{Qkey, Qpn};

fixed_view!(
    /// View of the DETH.
    Header,
    8
);

impl<T: AsRef<[u8]>> Header<T> {
    /// Queue key the receiving UD QP checks.
    pub fn qkey(&self) -> Qkey {
        Qkey(get_u32(self.buffer.as_ref(), 0))
    }
    /// The sending QP.
    pub fn src_qp(&self) -> Qpn {
        Qpn::new(get_u24(self.buffer.as_ref(), 5))
    }
}

/// Plain-data DETH (the reserved byte is sent as 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DethRepr {
    pub qkey: Qkey,
    pub src_qp: Qpn,
}

impl DethRepr {
    /// Bytes this header occupies.
    pub const LEN: usize = 8;

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Header<T>) -> Self {
        Self {
            qkey: v.qkey(),
            src_qp: v.src_qp(),
        }
    }

    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let b = buf.get_mut(..Self::LEN).ok_or(Truncated)?;
        set_u32(b, 0, self.qkey.0);
        b[4] = 0;
        set_u24(b, 5, self.src_qp.value());
        Ok(Self::LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gsi_deth_round_trips() {
        let raw = [0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01];
        let d = DethRepr::parse(&Header::new_checked(&raw[..]).unwrap());
        assert_eq!(
            d,
            DethRepr {
                qkey: Qkey::GSI,
                src_qp: Qpn::GSI
            }
        );
        let mut out = [0xFFu8; 8];
        d.emit(&mut out).unwrap();
        assert_eq!(out, raw);
    }
}
