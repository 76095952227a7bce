//! The wire layer's test oracle, shared by the property tests (`proptest_wire.rs`) and
//! the fuzz targets (`fuzz/`, by path): what must hold of any frame `parse` accepts, the
//! agreement of `parse` and `parse_unverified`, and an independent ICRC (roce-facts §5.3).

use roce_core::wire::{parse, parse_unverified, Error, Packet};

/// Parses `frame` both ways and checks them against each other and the invariants of
/// [`check_packet`]. Returns the verified parse.
pub fn check_frame(frame: &[u8]) -> Result<Packet<'_>, Error> {
    let verified = parse(frame);
    let unverified = parse_unverified(frame);
    match (&verified, &unverified) {
        (Ok(p), Ok(q)) => {
            assert!(p.icrc_verified() && !q.icrc_verified());
            assert_eq!(
                (p.headers(), p.payload(), p.pad()),
                (q.headers(), q.payload(), q.pad())
            );
            assert_eq!(
                (p.trailer(), p.layout(), p.icrc()),
                (q.trailer(), q.layout(), q.icrc())
            );
            check_packet(frame, p);
            if p.headers().l3.is_rocev2() {
                assert_eq!(reference_icrc(frame), Some(p.icrc()), "accepted a bad ICRC");
            }
        }
        (Err(Error::IcrcMismatch { computed, wire }), Ok(q)) => {
            check_packet(frame, q);
            assert_eq!(*wire, q.icrc());
            assert_ne!(computed, wire);
            if q.headers().l3.is_rocev2() {
                assert_eq!(reference_icrc(frame), Some(*computed));
            }
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b);
            assert!(!matches!(a, Error::IcrcMismatch { .. }));
        }
        other => panic!("parse and parse_unverified disagree: {other:?}"),
    }
    verified
}

/// The layout of an accepted packet is ordered, lies within the frame, and its slices
/// are where it says.
pub fn check_packet(frame: &[u8], p: &Packet<'_>) {
    let l = p.layout();
    assert!(l.l3 == 14 || l.l3 == 18, "{l:?}");
    assert_eq!(l.l3 == 18, p.headers().vlan.is_some());
    match l.udp {
        Some(u) => assert!(l.l3 < u && u + 8 == l.bth, "{l:?}"),
        None => assert!(l.l3 < l.bth && p.headers().udp.is_none(), "{l:?}"),
    }
    assert_eq!(l.payload, l.bth + 12 + p.info().ext_len());
    assert!(l.payload <= l.pad && l.pad <= l.icrc, "{l:?}");
    assert_eq!(l.icrc + 4, l.end);
    assert!(l.end <= frame.len());
    assert_eq!((l.icrc - l.bth) % 4, 0);
    assert_eq!(p.payload(), &frame[l.payload..l.pad]);
    assert_eq!(p.pad(), &frame[l.pad..l.icrc]);
    assert_eq!(p.trailer(), &frame[l.end..]);
    assert_eq!(p.frame(), frame);
    let wire = [
        frame[l.icrc],
        frame[l.icrc + 1],
        frame[l.icrc + 2],
        frame[l.icrc + 3],
    ];
    assert_eq!(p.icrc(), u32::from_le_bytes(wire));
    assert_eq!(p.pad().len(), usize::from(p.headers().bth.pad_count));
    assert_eq!(p.info().opcode, p.headers().bth.opcode);
    assert_eq!(p.headers().bth.tver, 0);
    if !p.info().payload {
        assert!(p.payload().is_empty() && p.pad().is_empty());
    }
    check_accessors(p);
}

/// Every lazy accessor decodes what `headers()` decodes.
pub fn check_accessors(p: &Packet<'_>) {
    let h = p.headers();
    assert_eq!(
        (p.eth(), p.vlan(), p.l3(), p.udp(), p.bth()),
        (h.eth, h.vlan, h.l3, h.udp, h.bth)
    );
    let e = h.ext;
    assert_eq!(p.ext(), e);
    assert_eq!(
        (p.reth(), p.aeth(), p.atomic_eth(), p.atomic_ack_eth()),
        (e.reth, e.aeth, e.atomic_eth, e.atomic_ack_eth)
    );
    assert_eq!(
        (p.immdt(), p.ieth(), p.deth(), p.cnp()),
        (e.immdt, e.ieth, e.deth, e.cnp)
    );
    let b = h.bth;
    assert_eq!(
        (p.opcode(), p.dest_qp(), p.psn(), p.ack_req(), p.se()),
        (b.opcode, b.dest_qp, b.psn, b.ack_req, b.se)
    );
    assert_eq!(
        (p.pkey(), p.pad_count(), p.becn()),
        (b.pkey, b.pad_count, b.becn)
    );
    assert_eq!(
        (p.is_rocev2(), p.icrc_kind()),
        (h.l3.is_rocev2(), h.l3.icrc_kind())
    );
}

/// The ICRC of a RoCEv2 frame from roce-facts §5.3 alone (copy, mask, CRC-32 behind
/// 8 x 0xFF), locating the headers by the frame's own EtherType and IP length fields.
pub fn reference_icrc(frame: &[u8]) -> Option<u32> {
    let be16 = |at: usize| Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]));
    let (mut l3, mut ethertype) = (14, be16(12)?);
    if ethertype == 0x8100 {
        (l3, ethertype) = (18, be16(16)?);
    }
    let (ip_len, end) = match ethertype {
        0x0800 => (
            usize::from(frame.get(l3)? & 0x0F) * 4,
            l3 + usize::from(be16(l3 + 2)?),
        ),
        0x86DD => (40, l3 + 40 + usize::from(be16(l3 + 4)?)),
        _ => return None,
    };
    let mut buf = vec![0xFF; 8];
    buf.extend_from_slice(frame.get(l3..end.checked_sub(4)?)?);
    let (ip, udp) = (8, 8 + ip_len);
    let bth = udp + 8;
    if buf.len() < bth + 12 {
        return None;
    }
    if ethertype == 0x0800 {
        buf[ip + 1] = 0xFF;
        buf[ip + 8] = 0xFF;
        buf[ip + 10] = 0xFF;
        buf[ip + 11] = 0xFF;
    } else {
        buf[ip] |= 0x0F;
        buf[ip + 1..ip + 4].fill(0xFF);
        buf[ip + 7] = 0xFF;
    }
    buf[udp + 6] = 0xFF;
    buf[udp + 7] = 0xFF;
    buf[bth + 4] = 0xFF;
    Some(crc32fast::hash(&buf))
}
