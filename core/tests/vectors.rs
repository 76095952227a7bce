//! Every frame of the shared corpus (scapy-made, ICRC by scapy) parses as its expected
//! line says: valid frames with the expected headers, invalid ones with the expected
//! error kind. The full JSON comparison runs through `roce decode` in the tests crate;
//! this is the fast check at the core's own level.

use roce_core::wire::{self, L3Repr};
use serde_json::Value;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn lines(name: &str) -> Vec<Value> {
    let path = format!(
        "{}/../tests/data/vectors/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn valid_vectors_parse_with_expected_headers() {
    let rows = lines("valid.jsonl");
    assert_eq!(rows.len(), 366);
    for row in rows {
        let frame = hex(row["hex"].as_str().unwrap());
        let want = &row["expected"];
        let p = wire::parse(&frame).unwrap_or_else(|e| panic!("{}: {e:?}", row["id"]));
        let bth = &p.headers().bth;
        assert_eq!(
            u64::from(bth.opcode.0),
            want["bth"]["opcode"],
            "{}",
            row["id"]
        );
        assert_eq!(u64::from(bth.psn.value()), want["bth"]["psn"]);
        assert_eq!(u64::from(bth.dest_qp.value()), want["bth"]["destqp"]);
        assert_eq!(u64::from(bth.pad_count), want["bth"]["padcnt"]);
        assert_eq!(p.payload().len() as u64, want["payload_len"]);
        assert_eq!(
            format!("{:#010x}", p.icrc()),
            want["icrc"].as_str().unwrap()
        );
        let v = if matches!(p.headers().l3, L3Repr::Ipv4(_)) {
            4
        } else {
            6
        };
        assert_eq!(want["ip"]["version"], v);
    }
}

/// The lazy accessors of every valid vector decode what `headers()` decodes.
#[test]
fn lazy_accessors_agree_with_headers() {
    for row in lines("valid.jsonl") {
        let frame = hex(row["hex"].as_str().unwrap());
        let p = wire::parse(&frame).unwrap();
        let h = p.headers();
        let id = &row["id"];
        assert_eq!(
            (p.eth(), p.vlan(), p.l3(), p.udp(), p.bth()),
            (h.eth, h.vlan, h.l3, h.udp, h.bth),
            "{id}"
        );
        assert_eq!(p.ext(), h.ext, "{id}");
        let e = h.ext;
        assert_eq!(
            (p.reth(), p.aeth(), p.atomic_eth(), p.atomic_ack_eth()),
            (e.reth, e.aeth, e.atomic_eth, e.atomic_ack_eth),
            "{id}"
        );
        assert_eq!(
            (p.immdt(), p.ieth(), p.deth(), p.cnp()),
            (e.immdt, e.ieth, e.deth, e.cnp),
            "{id}"
        );
        let b = h.bth;
        assert_eq!(
            (p.opcode(), p.dest_qp(), p.psn(), p.ack_req(), p.se()),
            (b.opcode, b.dest_qp, b.psn, b.ack_req, b.se),
            "{id}"
        );
        assert_eq!(
            (p.pkey(), p.pad_count(), p.becn()),
            (b.pkey, b.pad_count, b.becn),
            "{id}"
        );
        assert_eq!(
            (p.is_rocev2(), p.icrc_kind()),
            (h.l3.is_rocev2(), h.l3.icrc_kind()),
            "{id}"
        );
        assert!(format!("{p:?}").starts_with("Packet { headers: Headers {"));
    }
}

#[test]
fn invalid_vectors_fail_with_expected_error() {
    for row in lines("invalid.jsonl") {
        let frame = hex(row["hex"].as_str().unwrap());
        let err = wire::parse(&frame)
            .err()
            .unwrap_or_else(|| panic!("{} accepted", row["id"]));
        let mut allowed = vec![row["expected_error"].as_str().unwrap()];
        if let Some(alt) = row["alt_errors"].as_array() {
            allowed.extend(alt.iter().map(|a| a.as_str().unwrap()));
        }
        assert!(
            allowed.contains(&err.name()),
            "{}: got {} ({err})",
            row["id"],
            err.name()
        );
    }
}

#[test]
fn valid_vectors_reemit_byte_for_byte() {
    for row in lines("valid.jsonl") {
        let frame = hex(row["hex"].as_str().unwrap());
        let p = wire::parse(&frame).unwrap();
        if p.pad().iter().any(|&b| b != 0) || !p.trailer().is_empty() {
            continue; // emit writes zero pad and no trailer; the CLI covers these
        }
        let mut out = vec![0u8; frame.len()];
        let n = wire::emit(&p.headers(), p.payload(), &mut out).unwrap();
        assert_eq!(&out[..n], &frame[..], "{}", row["id"]);
    }
}

/// RoCEv1 (a GRH straight over Ethernet, EtherType 0x8915) has no vector in the corpus;
/// its layout is the IPv6 one with next header 0x1B and no UDP (roce-facts §1.7), and its
/// ICRC follows the IPv6 masking rule (not yet checked against hardware).
#[test]
fn rocev1_grh_frames_round_trip() {
    use roce_core::num::{Psn, Qpn};
    use roce_core::wire::bth::BthRepr;
    use roce_core::wire::ethernet::{EthernetRepr, MacAddr};
    use roce_core::wire::ipv6::{Ipv6Repr, NEXT_HEADER_BTH};
    use roce_core::wire::{Headers, Opcode};
    let grh = Ipv6Repr {
        next_header: NEXT_HEADER_BTH,
        flow_label: 0x1234,
        ..Ipv6Repr::default()
    };
    let h = Headers {
        eth: EthernetRepr {
            dst: MacAddr([2, 0, 0, 0, 0, 2]),
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            ethertype: 0x8915,
        },
        vlan: None,
        l3: L3Repr::Grh(grh),
        udp: None,
        bth: BthRepr::new(Opcode::RC_SEND_ONLY, Qpn::new(0x11), Psn::new(7)),
        ext: Default::default(),
    };
    let mut buf = [0u8; 128];
    let n = wire::emit(&h, b"hello", &mut buf).unwrap();
    assert_eq!(n, 14 + 40 + 12 + 8 + 4);
    assert_eq!(&buf[12..14], &[0x89, 0x15]);
    assert_eq!(buf[14 + 6], 0x1B);
    // GRH PayLen covers BTH .. ICRC, rounded to 4 bytes (roce-facts §1.7).
    assert_eq!(u16::from_be_bytes([buf[18], buf[19]]), 12 + 8 + 4);
    let p = wire::parse(&buf[..n]).unwrap();
    assert!(matches!(p.headers.l3, L3Repr::Grh(g) if g.flow_label == 0x1234));
    assert_eq!((p.payload, p.pad.len()), (&b"hello"[..], 3));
    // A changed hop limit (masked) keeps the ICRC; a changed DGID (covered) breaks it.
    let mut f = buf[..n].to_vec();
    f[14 + 7] = 1;
    assert!(wire::parse(&f).is_ok());
    f[14 + 39] ^= 1;
    assert_eq!(
        wire::parse(&f).err().map(|e| e.name()),
        Some("icrc_mismatch")
    );
}
