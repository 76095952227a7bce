//! UDP header (roce-facts §1.6). RoCEv2 is identified by destination port 4791.

use super::field::{get_u16, set_u16};
use super::Truncated;

/// The RoCEv2 UDP destination port.
pub const ROCEV2_PORT: u16 = 4791;

fixed_view!(
    /// View of the 8-byte UDP header.
    Datagram,
    8
);

impl<T: AsRef<[u8]>> Datagram<T> {
    /// Source port (ECMP entropy for RoCEv2).
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 0)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 2)
    }
    /// Length of header + payload.
    pub fn length(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 4)
    }
    /// Checksum as on the wire (RoCEv2 senders usually send 0; masked in the ICRC).
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 6)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Datagram<T> {
    /// Sets the length field.
    pub fn set_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), 4, v);
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), 6, v);
    }
}

/// Plain-data UDP header. The length is derived by `emit`; the checksum is carried as
/// given, because RoCEv2 does not compute it (the ICRC protects the datagram).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub checksum: u16,
}

impl UdpRepr {
    /// Bytes this header occupies.
    pub const LEN: usize = 8;

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Datagram<T>) -> Self {
        Self {
            src_port: v.src_port(),
            dst_port: v.dst_port(),
            checksum: v.checksum(),
        }
    }

    /// Writes the header for `payload_len` bytes of payload.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) -> Result<usize, Truncated> {
        let len = u16::try_from(payload_len + Self::LEN).map_err(|_| Truncated)?;
        let b = buf.get_mut(..Self::LEN).ok_or(Truncated)?;
        set_u16(b, 0, self.src_port);
        set_u16(b, 2, self.dst_port);
        set_u16(b, 4, len);
        set_u16(b, 6, self.checksum);
        Ok(Self::LEN)
    }
}

/// The UDP source port for a flow label (Linux `rdma_flow_label_to_udp_sport`, rdma-core
/// `ibv_flow_label_to_udp_sport`; roce-facts §1.6). Always in 0xC000..=0xFFFF.
pub fn sport_from_flow_label(fl: u32) -> u16 {
    let mut lo = fl & 0x3FFF;
    let hi = fl & 0xFC000;
    lo ^= hi >> 14;
    (lo | 0xC000) as u16
}

/// The symmetric flow label Linux derives from a QP pair (`rdma_calc_flow_label`).
pub fn flow_label_for_qps(lqpn: u32, rqpn: u32) -> u32 {
    let mut v = u64::from(lqpn) * u64::from(rqpn);
    v ^= v >> 20;
    v ^= v >> 40;
    (v & 0xFFFFF) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cnp_udp_header_round_trips() {
        // ConnectX-4 Lx CNP (roce-facts §5.4): sport 0, dport 4791, len 40, csum 0.
        let raw = [0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00];
        let d = Datagram::new_checked(&raw[..]).unwrap();
        assert_eq!(
            (d.src_port(), d.dst_port(), d.length(), d.checksum()),
            (0, 4791, 40, 0)
        );
        let mut out = [0xAAu8; 8];
        UdpRepr::parse(&d).emit(&mut out, 32).unwrap();
        assert_eq!(out, raw);
    }

    #[test]
    fn sport_helpers_stay_in_the_rocev2_range() {
        for fl in [0, 1, 0x3FFF, 0x4000, 0xFFFFF, 0x12345] {
            assert!(sport_from_flow_label(fl) >= 0xC000);
        }
        assert_eq!(sport_from_flow_label(0), 0xC000);
        assert_eq!(flow_label_for_qps(3, 5), flow_label_for_qps(5, 3));
    }
}
