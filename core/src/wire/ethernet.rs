//! Ethernet II header and the IEEE 802.1Q tag (roce-facts §1.1-1.3).

use super::field::{get_u16, set_u16};
use super::Truncated;
use core::fmt;

/// EtherType of IPv4 (RoCEv2).
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6 (RoCEv2).
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// EtherType of RoCEv1: an IB GRH directly over Ethernet (`ETH_P_IBOE`).
pub const ETHERTYPE_ROCEV1: u16 = 0x8915;
/// TPID of an 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// EtherType of MAC Control frames (PAUSE, PFC).
pub const ETHERTYPE_MAC_CONTROL: u16 = 0x8808;

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

fixed_view!(
    /// View of the 14-byte Ethernet II header: destination, source, EtherType.
    Frame,
    14
);

impl<T: AsRef<[u8]>> Frame<T> {
    /// Destination MAC address.
    pub fn dst(&self) -> MacAddr {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[0..6]);
        MacAddr(a)
    }
    /// Source MAC address.
    pub fn src(&self) -> MacAddr {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[6..12]);
        MacAddr(a)
    }
    /// EtherType, or the TPID 0x8100 when a VLAN tag follows.
    pub fn ethertype(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 12)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst(&mut self, a: MacAddr) {
        self.buffer.as_mut()[0..6].copy_from_slice(&a.0);
    }
    /// Sets the source MAC address.
    pub fn set_src(&mut self, a: MacAddr) {
        self.buffer.as_mut()[6..12].copy_from_slice(&a.0);
    }
    /// Sets the EtherType (or TPID).
    pub fn set_ethertype(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), 12, v);
    }
}

/// Plain-data Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EthernetRepr {
    pub dst: MacAddr,
    pub src: MacAddr,
    /// The EtherType field as on the wire (0x8100 when a VLAN tag follows).
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Bytes this header occupies.
    pub const LEN: usize = 14;

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Frame<T>) -> Self {
        Self {
            dst: v.dst(),
            src: v.src(),
            ethertype: v.ethertype(),
        }
    }

    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let mut v = Frame::new_checked(buf)?;
        v.set_dst(self.dst);
        v.set_src(self.src);
        v.set_ethertype(self.ethertype);
        Ok(Self::LEN)
    }
}

fixed_view!(
    /// View of an 802.1Q tag *after* its TPID: the 16-bit TCI (PCP, DEI, VID) and the
    /// inner EtherType (roce-facts §1.2).
    VlanTag,
    4
);

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Priority code point (0..7): the priority PFC pauses.
    pub fn pcp(&self) -> u8 {
        (self.buffer.as_ref()[0] >> 5) & 0x7
    }
    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.buffer.as_ref()[0] & 0x10 != 0
    }
    /// VLAN identifier (12 bits; 0 = priority-tagged).
    pub fn vid(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 0) & 0x0FFF
    }
    /// EtherType of what follows the tag.
    pub fn ethertype(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 2)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    /// Writes PCP, DEI and VID.
    pub fn set_tci(&mut self, pcp: u8, dei: bool, vid: u16) {
        let tci = (u16::from(pcp & 7) << 13) | (u16::from(dei) << 12) | (vid & 0x0FFF);
        set_u16(self.buffer.as_mut(), 0, tci);
    }
    /// Sets the inner EtherType.
    pub fn set_ethertype(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), 2, v);
    }
}

/// Plain-data 802.1Q tag (what follows the TPID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanRepr {
    pub pcp: u8,
    pub dei: bool,
    pub vid: u16,
    /// Inner EtherType.
    pub ethertype: u16,
}

impl VlanRepr {
    /// Bytes the tag occupies after the TPID.
    pub const LEN: usize = 4;

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &VlanTag<T>) -> Self {
        Self {
            pcp: v.pcp(),
            dei: v.dei(),
            vid: v.vid(),
            ethertype: v.ethertype(),
        }
    }

    /// Writes the tag into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let mut v = VlanTag::new_checked(buf)?;
        v.set_tci(self.pcp, self.dei, self.vid);
        v.set_ethertype(self.ethertype);
        Ok(Self::LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The 802.1Q-tagged RC RDMA_WRITE_ONLY of roce-facts §5.6: PCP 3, VID 100.
    static TAGGED: [u8; 18] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x81, 0x00, 0x60, 0x64, 0x08, 0x00,
    ];

    #[test]
    fn deconstruct_tagged_header() {
        let eth = Frame::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(eth.dst(), MacAddr([2, 0, 0, 0, 0, 2]));
        assert_eq!(eth.src(), MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(eth.ethertype(), ETHERTYPE_VLAN);
        let tag = VlanRepr::parse(&VlanTag::new_checked(&TAGGED[14..]).unwrap());
        assert_eq!(
            tag,
            VlanRepr {
                pcp: 3,
                dei: false,
                vid: 100,
                ethertype: ETHERTYPE_IPV4
            }
        );
    }

    #[test]
    fn construct_tagged_header() {
        let mut buf = [0u8; 18];
        let eth = EthernetRepr::parse(&Frame::new_checked(&TAGGED[..]).unwrap());
        assert_eq!(eth.emit(&mut buf).unwrap(), 14);
        VlanRepr {
            pcp: 3,
            dei: false,
            vid: 100,
            ethertype: ETHERTYPE_IPV4,
        }
        .emit(&mut buf[14..])
        .unwrap();
        assert_eq!(buf, TAGGED);
    }

    #[test]
    fn short_buffers_are_rejected() {
        assert_eq!(Frame::new_checked(&TAGGED[..13]).err(), Some(Truncated));
        assert_eq!(EthernetRepr::default().emit(&mut [0u8; 13]), Err(Truncated));
        assert_eq!(VlanTag::new_checked(&TAGGED[..3]).err(), Some(Truncated));
    }
}
