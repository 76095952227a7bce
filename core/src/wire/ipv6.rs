//! IPv6 header (roce-facts §1.5), which is also the layout of the RoCEv1 GRH
//! (§1.7: IPVer 6, TClass, FlowLabel, PayLen, NxtHdr 0x1B, HopLmt, SGID, DGID). One view
//! and one `Repr` serve both; [`GrhRepr`] names the RoCEv1 use.

use super::field::{get_u16, get_u32, set_u16, set_u32};
use super::Truncated;
use core::net::Ipv6Addr;

/// IPv6 next-header value of UDP.
pub const NEXT_HEADER_UDP: u8 = 17;
/// GRH next-header value when a BTH follows (RoCEv1).
pub const NEXT_HEADER_BTH: u8 = 0x1B;

fixed_view!(
    /// View of the 40-byte IPv6 header / RoCEv1 GRH.
    Packet,
    40
);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Version nibble (6).
    pub fn version(&self) -> u8 {
        self.b()[0] >> 4
    }
    /// Traffic class: DSCP (bits 7..2) and ECN (bits 1..0).
    pub fn traffic_class(&self) -> u8 {
        ((get_u16(self.b(), 0) >> 4) & 0xFF) as u8
    }
    /// 20-bit flow label.
    pub fn flow_label(&self) -> u32 {
        get_u32(self.b(), 0) & 0x000F_FFFF
    }
    /// Payload length (everything after this header).
    pub fn payload_len(&self) -> u16 {
        get_u16(self.b(), 4)
    }
    /// Next header (17 = UDP; 0x1B = BTH in a RoCEv1 GRH).
    pub fn next_header(&self) -> u8 {
        self.b()[6]
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.b()[7]
    }
    /// Source address (SGID in a GRH).
    pub fn src(&self) -> Ipv6Addr {
        addr(&self.b()[8..24])
    }
    /// Destination address (DGID in a GRH).
    pub fn dst(&self) -> Ipv6Addr {
        addr(&self.b()[24..40])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), 4, v);
    }
}

fn addr(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(b);
    Ipv6Addr::from(a)
}

/// Plain-data IPv6 header. The payload length is derived by `emit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub dscp: u8,
    pub ecn: u8,
    pub flow_label: u32,
    pub next_header: u8,
    pub hop_limit: u8,
}

/// The RoCEv1 Global Route Header: the IPv6 layout with next header 0x1B.
pub type GrhRepr = Ipv6Repr;

impl Default for Ipv6Repr {
    fn default() -> Self {
        Self {
            src: Ipv6Addr::UNSPECIFIED,
            dst: Ipv6Addr::UNSPECIFIED,
            dscp: 0,
            ecn: 0,
            flow_label: 0,
            next_header: NEXT_HEADER_UDP,
            hop_limit: 64,
        }
    }
}

impl Ipv6Repr {
    /// Bytes this header occupies.
    pub const LEN: usize = 40;

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Packet<T>) -> Self {
        let tc = v.traffic_class();
        Self {
            src: v.src(),
            dst: v.dst(),
            dscp: tc >> 2,
            ecn: tc & 3,
            flow_label: v.flow_label(),
            next_header: v.next_header(),
            hop_limit: v.hop_limit(),
        }
    }

    /// Writes the header for `payload_len` bytes of payload.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) -> Result<usize, Truncated> {
        let plen = u16::try_from(payload_len).map_err(|_| Truncated)?;
        let b = buf.get_mut(..Self::LEN).ok_or(Truncated)?;
        let tc = u32::from((self.dscp << 2) | (self.ecn & 3));
        set_u32(
            b,
            0,
            (6 << 28) | (tc << 20) | (self.flow_label & 0x000F_FFFF),
        );
        set_u16(b, 4, plen);
        b[6] = self.next_header;
        b[7] = self.hop_limit;
        b[8..24].copy_from_slice(&self.src.octets());
        b[24..40].copy_from_slice(&self.dst.octets());
        Ok(Self::LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // IPv6 header of the RC SEND_ONLY example of roce-facts §5.6: TC 0x68, flow 0x12345.
    static HDR: [u8; 40] = [
        0x66, 0x81, 0x23, 0x45, 0x00, 0x20, 0x11, 0x40, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0x01, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02,
    ];

    #[test]
    fn deconstruct_and_reconstruct() {
        let p = Packet::new_checked(&HDR[..]).unwrap();
        assert_eq!(
            (p.version(), p.traffic_class(), p.flow_label()),
            (6, 0x68, 0x12345)
        );
        assert_eq!(
            (p.payload_len(), p.next_header(), p.hop_limit()),
            (32, 17, 64)
        );
        let repr = Ipv6Repr::parse(&p);
        assert_eq!((repr.dscp, repr.ecn), (0x1A, 0));
        let mut buf = [0u8; 40];
        repr.emit(&mut buf, 32).unwrap();
        assert_eq!(buf, HDR);
    }
}
