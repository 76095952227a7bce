//! What a switch reads from a frame: destination MAC, priority, where the ECN bits are,
//! and the ECMP flow key. Reads go through roce-core's checked header views; a frame too
//! short for a header simply lacks that layer (it is classified, never rejected here).

use roce_core::wire::ethernet::{
    Frame, MacAddr, VlanTag, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN,
};
use roce_core::wire::ipv4::{self, PROTOCOL_UDP};
use roce_core::wire::ipv6::{self, NEXT_HEADER_UDP};
use roce_core::wire::udp::Datagram;

/// ECN codepoints (roce-facts §1.4; kernel `INET_ECN_*`).
pub const ECN_NOT_ECT: u8 = 0b00;
pub const ECN_ECT1: u8 = 0b01;
pub const ECN_ECT0: u8 = 0b10;
pub const ECN_CE: u8 = 0b11;

/// The IP header of a frame, for ECN marking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpAt {
    /// IPv4 header starting at this offset, with this header length.
    V4(usize, usize),
    /// IPv6 header starting at this offset.
    V6(usize),
}

/// The fields of a frame a switch acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    pub dst: MacAddr,
    pub src: MacAddr,
    /// 802.1p priority: the PCP when tagged, else from the DSCP map, else 0.
    pub priority: u8,
    pub ip: Option<IpAt>,
    /// ECN codepoint of the IP header (0 without one).
    pub ecn: u8,
    /// Offset of the UDP header, if the IP payload is UDP.
    pub udp: Option<usize>,
}

/// Reads what the switch needs from `frame`, or `None` when it is shorter than an
/// Ethernet header.
pub fn classify(frame: &[u8], dscp_to_priority: &[u8; 64]) -> Option<Class> {
    let eth = Frame::new_checked(frame).ok()?;
    let mut ethertype = eth.ethertype();
    let mut l3 = 14;
    let mut pcp = None;
    if ethertype == ETHERTYPE_VLAN {
        if let Ok(tag) = VlanTag::new_checked(&frame[14..]) {
            pcp = Some(tag.pcp());
            ethertype = tag.ethertype();
            l3 = 18;
        }
    }
    let mut class = Class {
        dst: eth.dst(),
        src: eth.src(),
        priority: pcp.unwrap_or(0),
        ip: None,
        ecn: 0,
        udp: None,
    };
    let net = &frame[l3.min(frame.len())..];
    let tos = match ethertype {
        ETHERTYPE_IPV4 => {
            let Ok(ip) = ipv4::Packet::new_checked(net) else {
                return Some(class);
            };
            let hl = ip.header_len().max(20);
            class.ip = Some(IpAt::V4(l3, hl));
            class.udp = (ip.protocol() == PROTOCOL_UDP).then_some(l3 + hl);
            ip.dscp() << 2 | ip.ecn()
        }
        ETHERTYPE_IPV6 => {
            let Ok(ip) = ipv6::Packet::new_checked(net) else {
                return Some(class);
            };
            class.ip = Some(IpAt::V6(l3));
            class.udp = (ip.next_header() == NEXT_HEADER_UDP).then_some(l3 + 40);
            ip.traffic_class()
        }
        _ => return Some(class),
    };
    class.ecn = tos & 0b11;
    if pcp.is_none() {
        class.priority = dscp_to_priority[usize::from(tos >> 2)] & 7;
    }
    Some(class)
}

/// The ECMP hash input of a classified frame: IP addresses and UDP ports (the RoCE
/// source port carries the entropy, roce-facts §1.6), or the MACs for non-IP frames.
/// Computed only for frames routed to an ECMP group.
pub fn flow_key(frame: &[u8], class: &Class) -> u64 {
    let mut key = match class.ip {
        Some(IpAt::V4(at, _)) => {
            let ip = ipv4::Packet::new_unchecked(&frame[at..]);
            (u64::from(u32::from(ip.src())) << 32) | u64::from(u32::from(ip.dst()))
        }
        Some(IpAt::V6(at)) => {
            let ip = ipv6::Packet::new_unchecked(&frame[at..]);
            fold(u128::from(ip.src())) ^ fold(u128::from(ip.dst())).rotate_left(32)
        }
        None => mac_key(class.dst) ^ mac_key(class.src).rotate_left(17),
    };
    if let Some(udp) = class
        .udp
        .and_then(|at| Datagram::new_checked(frame.get(at..)?).ok())
    {
        key ^= (u64::from(udp.src_port()) << 16 | u64::from(udp.dst_port()))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    key
}

fn mac_key(m: MacAddr) -> u64 {
    let b = m.0;
    u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
}

fn fold(x: u128) -> u64 {
    (x >> 64) as u64 ^ x as u64
}

/// A MAC address as a table key.
pub(crate) fn mac_u64(m: MacAddr) -> u64 {
    mac_key(m)
}

/// Sets the ECN field of the frame's IP header to CE; for IPv4 also refreshes the header
/// checksum. The RoCE ICRC masks the TOS / traffic class byte (roce-facts §5.1), so it
/// stays valid.
pub fn mark_ce(frame: &mut [u8], ip: IpAt) {
    match ip {
        IpAt::V4(at, hl) => {
            if frame.len() >= at + hl {
                frame[at + 1] |= ECN_CE;
                ipv4::Packet::new_unchecked(&mut frame[at..]).fill_checksum();
            }
        }
        IpAt::V6(at) => {
            // Traffic class = low nibble of byte 0 and high nibble of byte 1; its two ECN
            // bits are bits 5..4 of byte 1.
            if let Some(b) = frame.get_mut(at + 1) {
                *b |= ECN_CE << 4;
            }
        }
    }
}

/// The default DSCP to priority map: the class selector, DSCP >> 3 (so DSCP 26, AF31,
/// maps to 3 and DSCP 48, the CNP default of roce-facts §7.2, to 6).
pub const fn default_dscp_map() -> [u8; 64] {
    let mut m = [0u8; 64];
    let mut d = 0;
    while d < 64 {
        m[d] = (d >> 3) as u8;
        d += 1;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    // IPv4 RC RDMA_WRITE_ONLY of roce-facts §5.6, TOS 0x02 (ECT(0)), sport 0xC000.
    const WRITE_ONLY: &str = "02000000000202000000000108004502004400004000401126a50a0000010a000002c00012b7003000000a00ffff00000012800abcde00007f000000100000001234000000080001020304050607a75d0cbb";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn untagged_ipv4_uses_the_dscp_map_and_marking_keeps_frame_valid() {
        let mut f = hex(WRITE_ONLY);
        let c = classify(&f, &default_dscp_map()).unwrap();
        assert_eq!(c.priority, 0);
        assert_eq!(c.ecn, ECN_ECT0);
        assert_eq!(c.ip, Some(IpAt::V4(14, 20)));
        mark_ce(&mut f, c.ip.unwrap());
        let p = roce_core::wire::parse(&f).expect("checksum and ICRC still valid");
        match p.l3() {
            roce_core::wire::L3Repr::Ipv4(ip) => assert_eq!(ip.ecn, ECN_CE),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_pcp_wins_over_the_dscp_and_sport_changes_the_flow_key() {
        let f = hex(WRITE_ONLY);
        let mut tagged = f[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0xA0, 0x64]); // PCP 5, VID 100
        tagged.extend_from_slice(&f[12..]);
        let mut map = default_dscp_map();
        map[0] = 2;
        assert_eq!(classify(&f, &map).unwrap().priority, 2);
        let c = classify(&tagged, &map).unwrap();
        assert_eq!((c.priority, c.ip), (5, Some(IpAt::V4(18, 20))));
        let mut other_port = f.clone();
        other_port[35] = 0x01; // UDP source port 0xC001
        let key = |f: &[u8]| flow_key(f, &classify(f, &map).unwrap());
        assert_ne!(key(&f), key(&other_port));
        assert_eq!(key(&f), key(&f.clone()));
        assert!(classify(&f[..13], &map).is_none());
    }

    #[test]
    fn ipv6_priority_comes_from_the_traffic_class_and_marking_keeps_the_icrc() {
        use crate::nodes::{Generator, GeneratorConfig};
        use crate::{Node, Priorities};
        let ip =
            |n: u16| std::net::IpAddr::V6(std::net::Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, n));
        let mac = |n: u8| MacAddr([2, 0, 0, 0, 0, n]);
        let mut g = Generator::new(GeneratorConfig {
            dscp: 46, // EF: priority 5
            ..GeneratorConfig::new(mac(1), mac(2), ip(1), ip(2), 64)
        });
        let mut f = vec![0; crate::MAX_FRAME_LEN];
        let len = g.poll_transmit(0, 0, Priorities::NONE, &mut f).unwrap();
        f.truncate(len);
        let c = classify(&f, &default_dscp_map()).unwrap();
        assert_eq!((c.priority, c.ecn, c.ip), (5, ECN_ECT0, Some(IpAt::V6(14))));
        mark_ce(&mut f, c.ip.unwrap());
        let p = roce_core::wire::parse(&f).expect("ICRC still valid");
        match p.headers.l3 {
            roce_core::wire::L3Repr::Ipv6(ip) => assert_eq!((ip.dscp, ip.ecn), (46, ECN_CE)),
            other => panic!("{other:?}"),
        }
    }
}
