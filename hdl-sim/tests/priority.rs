//! "First fault met in header order": every pair of injected faults (and
//! every single one) on several base frames, with and without a recomputed
//! IPv4 checksum and ICRC, at both widths. roce-core's `wire::parse` is the
//! oracle: the RTL must name the same error (or accept the same frames).

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};

use common::diff::{add16_by, compare, fix_icrc, fix_ipv4_checksum};
use roce_core::num::{Msn, Psn, Qkey, Qpn, Rkey};
use roce_core::wire::aeth::{AethRepr, Syndrome};
use roce_core::wire::bth::BthRepr;
use roce_core::wire::deth::DethRepr;
use roce_core::wire::ethernet::{EthernetRepr, MacAddr, VlanRepr};
use roce_core::wire::icrc::IcrcKind;
use roce_core::wire::ipv4::Ipv4Repr;
use roce_core::wire::ipv6::Ipv6Repr;
use roce_core::wire::reth::RethRepr;
use roce_core::wire::udp::UdpRepr;
use roce_core::wire::{self, ExtHeaders, Headers, L3Repr, Opcode};
use roce_hdl_sim::DataWidth;

/// A clean frame and where its parts are.
#[derive(Clone)]
struct Base {
    name: &'static str,
    frame: Vec<u8>,
    l3: usize,
    kind: IcrcKind,
    /// UDP header (RoCEv2) / BTH (RoCEv1) offset
    l4: usize,
    bth: usize,
}

impl Base {
    fn v2(&self) -> bool {
        self.kind != IcrcKind::RoceV1
    }
}

fn base(name: &'static str, vlan: bool, kind: IcrcKind, opcode: Opcode, payload: usize) -> Base {
    let eth = EthernetRepr {
        dst: MacAddr([2, 0, 0, 0, 0, 1]),
        src: MacAddr([2, 0, 0, 0, 0, 2]),
        ethertype: 0,
    };
    let vlan = vlan.then_some(VlanRepr {
        pcp: 3,
        dei: false,
        vid: 100,
        ethertype: 0,
    });
    let v6 = Ipv6Repr {
        src: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
        dst: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
        dscp: 26,
        ecn: 2,
        flow_label: 0x12345,
        next_header: 17,
        hop_limit: 64,
    };
    let l3 = match kind {
        IcrcKind::Ipv4 => L3Repr::Ipv4(Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            dscp: 26,
            ecn: 2,
            ident: 7,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
            ttl: 64,
            protocol: 17,
        }),
        IcrcKind::Ipv6 => L3Repr::Ipv6(v6),
        IcrcKind::RoceV1 => L3Repr::Grh(Ipv6Repr {
            next_header: 0x1B,
            ..v6
        }),
    };
    let udp = (kind != IcrcKind::RoceV1).then_some(UdpRepr {
        src_port: 0xC001,
        dst_port: 4791,
        checksum: 0,
    });
    let ext = ExtHeaders {
        reth: Some(RethRepr {
            va: 0x1000,
            rkey: Rkey(0x1234),
            dma_len: payload as u32,
        }),
        aeth: Some(AethRepr {
            syndrome: Syndrome::from_byte(0x1F),
            msn: Msn::new(1),
        }),
        deth: Some(DethRepr {
            qkey: Qkey(0x1111),
            src_qp: Qpn::new(3),
        }),
        ..ExtHeaders::default()
    };
    let h = Headers {
        eth,
        vlan,
        l3,
        udp,
        bth: BthRepr::new(opcode, Qpn::new(0x12), Psn::new(5)),
        ext,
    };
    let data: Vec<u8> = (0..payload as u8).collect();
    let mut buf = vec![0u8; 512];
    let n = wire::emit(&h, &data, &mut buf).expect("emit");
    buf.truncate(n);
    let l3 = if vlan.is_some() { 18 } else { 14 };
    let l4 = l3 + if kind == IcrcKind::Ipv4 { 20 } else { 40 };
    let bth = if kind == IcrcKind::RoceV1 { l4 } else { l4 + 8 };
    Base {
        name,
        frame: buf,
        l3,
        kind,
        l4,
        bth,
    }
}

/// Sets the datagram's lengths for `tl` transport bytes (BTH..ICRC) and cuts or
/// extends the frame to match.
fn set_transport_len(f: &mut Vec<u8>, b: &Base, tl: usize) {
    f.resize(b.bth + tl, 0);
    if b.v2() {
        f[b.l4 + 4..b.l4 + 6].copy_from_slice(&((tl + 8) as u16).to_be_bytes());
    }
    let ip_payload = (b.bth - b.l3 + tl) as u16;
    if b.kind == IcrcKind::Ipv4 {
        f[b.l3 + 2..b.l3 + 4].copy_from_slice(&ip_payload.to_be_bytes());
    } else {
        f[b.l3 + 4..b.l3 + 6].copy_from_slice(&(ip_payload - 40).to_be_bytes());
    }
}

type Fault = (&'static str, fn(&mut Vec<u8>, &Base));

/// Named faults, roughly in header order. Each one makes a frame that is
/// wrong in one way; cuts are applied last (see `apply`).
const FAULTS: &[Fault] = &[
    ("ethertype_arp", |f, b| {
        f[b.l3 - 2..b.l3].copy_from_slice(&[0x08, 0x06])
    }),
    ("ip_version_5", |f, b| f[b.l3] = (f[b.l3] & 0x0F) | 0x50),
    ("ipv4_ihl_4", |f, b| {
        if b.kind == IcrcKind::Ipv4 {
            f[b.l3] = 0x44
        }
    }),
    ("ipv4_bad_checksum", |f, b| {
        if b.kind == IcrcKind::Ipv4 {
            f[b.l3 + 10] ^= 0x5A
        }
    }),
    ("ipv4_mf", |f, b| {
        if b.kind == IcrcKind::Ipv4 {
            f[b.l3 + 6] |= 0x20
        }
    }),
    ("ip_protocol_tcp", |f, b| {
        f[b.l3 + if b.kind == IcrcKind::Ipv4 { 9 } else { 6 }] = 6
    }),
    ("ipv4_total_below_ihl", |f, b| {
        if b.kind == IcrcKind::Ipv4 {
            f[b.l3 + 2..b.l3 + 4].copy_from_slice(&12u16.to_be_bytes())
        }
    }),
    ("udp_dport_4790", |f, b| {
        if b.v2() {
            f[b.l4 + 2..b.l4 + 4].copy_from_slice(&4790u16.to_be_bytes())
        }
    }),
    ("udp_length_plus_4", |f, b| {
        if b.v2() {
            add16_by(f, b.l4 + 4, 4)
        }
    }),
    ("ip_length_plus_8", |f, b| {
        add16_by(f, b.l3 + if b.kind == IcrcKind::Ipv4 { 2 } else { 4 }, 8)
    }),
    ("transport_8_bytes", |f, b| set_transport_len(f, b, 8)),
    ("bth_tver_1", |f, b| f[b.bth + 1] |= 0x01),
    ("opcode_0x15", |f, b| f[b.bth] = 0x15),
    ("opcode_0xc0", |f, b| f[b.bth] = 0xC0),
    ("ext_headers_cut", |f, b| {
        set_transport_len(f, b, 12 + 4 + 4)
    }),
    ("unaligned_minus_1", |f, b| {
        let tl = f.len() - b.bth;
        set_transport_len(f, b, tl - 1)
    }),
    ("padcnt_3", |f, b| f[b.bth + 1] |= 0x30),
    ("four_extra_bytes", |f, b| {
        let tl = f.len() - b.bth;
        set_transport_len(f, b, tl + 4)
    }),
    ("icrc_flip", |f, _| {
        let n = f.len();
        f[n - 1] ^= 1
    }),
];

/// Cuts (truncations) go last so that the other faults still find their bytes.
const CUTS: &[Fault] = &[
    ("cut_to_10", |f, _| f.truncate(10)),
    ("cut_at_ethertype", |f, b| f.truncate(b.l3)),
    ("cut_in_ip_header", |f, b| f.truncate(b.l3 + 10)),
    ("cut_in_udp", |f, b| f.truncate(b.l4 + 4)),
    ("cut_before_end", |f, _| {
        let n = f.len();
        f.truncate(n - 2)
    }),
];

fn apply(b: &Base, faults: &[&Fault], fix: bool) -> Vec<u8> {
    let mut f = b.frame.clone();
    let (cuts, edits): (Vec<&&Fault>, Vec<&&Fault>) =
        faults.iter().partition(|x| x.0.starts_with("cut"));
    for (_, edit) in &edits {
        edit(&mut f, b);
    }
    if fix {
        if b.kind == IcrcKind::Ipv4 && f[b.l3] & 0x0F == 5 && f.len() >= b.l3 + 20 {
            fix_ipv4_checksum(&mut f, b.l3);
        }
        if f.len() >= b.bth + 16 {
            let at = f.len() - 4;
            fix_icrc(&mut f, b.l3, b.kind, at);
        }
        // a deliberate bad checksum / ICRC stays bad
        for (name, edit) in &edits {
            if *name == "ipv4_bad_checksum" || *name == "icrc_flip" {
                edit(&mut f, b);
            }
        }
    }
    for (_, cut) in cuts {
        cut(&mut f, b);
    }
    f
}

#[test]
fn pairs_of_faults_get_roce_cores_verdict() {
    let bases = [
        base(
            "rc_write_only_v4",
            false,
            IcrcKind::Ipv4,
            Opcode::RC_RDMA_WRITE_ONLY,
            5,
        ),
        base(
            "rc_ack_v6_vlan",
            true,
            IcrcKind::Ipv6,
            Opcode::RC_ACKNOWLEDGE,
            0,
        ),
        base(
            "rc_send_only_v4_vlan_empty",
            true,
            IcrcKind::Ipv4,
            Opcode::RC_SEND_ONLY,
            0,
        ),
        base(
            "ud_send_only_rocev1",
            false,
            IcrcKind::RoceV1,
            Opcode::UD_SEND_ONLY,
            40,
        ),
    ];
    let all: Vec<&Fault> = FAULTS.iter().chain(CUTS).collect();
    let mut frames = Vec::new();
    let mut labels = Vec::new();
    for b in &bases {
        for fix in [false, true] {
            for i in 0..all.len() {
                for j in i..all.len() {
                    let set: Vec<&Fault> = if i == j {
                        vec![all[i]]
                    } else {
                        vec![all[i], all[j]]
                    };
                    frames.push(apply(b, &set, fix));
                    labels.push(format!(
                        "{} fix={fix}: {}",
                        b.name,
                        set.iter().map(|f| f.0).collect::<Vec<_>>().join(" + ")
                    ));
                }
            }
        }
    }
    let mut verdict_kinds = std::collections::BTreeSet::new();
    for width in DataWidth::ALL {
        let Some(mut dp) = common::datapath(width) else {
            return;
        };
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        let verdicts = dp.rx_batch(&refs).expect("rx");
        let mut bad = Vec::new();
        for ((f, v), label) in frames.iter().zip(&verdicts).zip(&labels) {
            verdict_kinds.insert(v.error().map_or("ok", |e| e.name()));
            if let Err(e) = compare(f, v) {
                bad.push(format!("{label}: {e}"));
            }
        }
        assert!(
            bad.is_empty(),
            "{width}: {} of {} differ:\n{}",
            bad.len(),
            frames.len(),
            bad[..bad.len().min(15)].join("\n")
        );
        eprintln!(
            "{width}: {} fault combinations agree with roce-core",
            frames.len()
        );
    }
    // the faults reach every error name (the frames are meaningful)
    for name in roce_core::wire::Error::ALL_NAMES {
        assert!(
            verdict_kinds.contains(name),
            "no combination produced {name}"
        );
    }
}
