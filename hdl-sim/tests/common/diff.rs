//! Comparison of an RTL verdict with roce-core's `wire::parse`, and frame
//! fix-ups (IPv4 checksum, ICRC) for fault injection.

use roce_core::wire::icrc::{self, IcrcKind};
use roce_core::wire::{self, L3Repr, Packet};
use roce_hdl_sim::{L3Kind, RxVerdict};

/// xorshift64*, for the fields that need no shrinking.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        b.iter_mut().for_each(|x| *x = self.next() as u8);
        b
    }
}

pub fn add16_by(f: &mut [u8], at: usize, d: i32) {
    let v = u16::from_be_bytes([f[at], f[at + 1]]).wrapping_add(d as u16);
    f[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

pub fn fix_ipv4_checksum(f: &mut [u8], l3: usize) {
    let len = usize::from(f[l3] & 0x0F) * 4;
    f[l3 + 10] = 0;
    f[l3 + 11] = 0;
    let mut sum: u32 = 0;
    for i in (0..len).step_by(2) {
        sum += u32::from(u16::from_be_bytes([f[l3 + i], f[l3 + i + 1]]));
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    f[l3 + 10..l3 + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// Rewrites the ICRC at `at` over frame[l3..at] (if roce-core can compute it).
pub fn fix_icrc(f: &mut [u8], l3: usize, kind: IcrcKind, at: usize) {
    if let Ok(crc) = icrc::compute(kind, &f[l3..at]) {
        f[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Field-by-field comparison of a good frame.
pub fn compare_ok(p: &Packet<'_>, v: &RxVerdict, frame: &[u8]) -> Result<(), String> {
    let m = &v.meta;
    let h = &p.headers();
    let layout = p.layout();
    let mut d = Vec::new();
    let mut chk = |what: &str, core: String, rtl: String| {
        if core != rtl {
            d.push(format!("{what}: core {core}, RTL {rtl}"));
        }
    };
    chk(
        "eth.dst",
        format!("{:?}", h.eth.dst.0),
        format!("{:?}", m.eth_dst),
    );
    chk(
        "eth.src",
        format!("{:?}", h.eth.src.0),
        format!("{:?}", m.eth_src),
    );
    let et = h.vlan.map_or(h.eth.ethertype, |t| t.ethertype);
    chk("ethertype", et.to_string(), m.ethertype.to_string());
    chk(
        "vlan",
        format!("{:?}", h.vlan.map(|t| (t.pcp, t.dei, t.vid))),
        format!("{:?}", m.vlan.map(|t| (t.pcp, t.dei, t.vid))),
    );
    let ip = &m.ip;
    let l3_len = layout.end - layout.l3;
    match &h.l3 {
        L3Repr::Ipv4(i) => {
            chk("l3", "Ipv4".into(), format!("{:?}", m.l3_kind));
            chk(
                "ipv4",
                format!(
                    "{} {} {} {} {} {} {} {} {} {} {}",
                    i.src,
                    i.dst,
                    i.dscp,
                    i.ecn,
                    i.ident,
                    i.dont_frag,
                    i.more_frags,
                    i.frag_offset,
                    i.ttl,
                    i.protocol,
                    l3_len
                ),
                format!(
                    "{} {} {} {} {} {} {} {} {} {} {}",
                    ip.src_v4(),
                    ip.dst_v4(),
                    ip.dscp,
                    ip.ecn,
                    ip.id,
                    ip.flags & 2 != 0,
                    ip.flags & 1 != 0,
                    ip.frag_offset,
                    ip.ttl,
                    ip.protocol,
                    ip.length
                ),
            );
            let l3 = layout.l3;
            chk("ihl", (frame[l3] & 0x0F).to_string(), ip.ihl.to_string());
            chk(
                "ip checksum",
                u16::from_be_bytes([frame[l3 + 10], frame[l3 + 11]]).to_string(),
                ip.checksum.to_string(),
            );
        }
        L3Repr::Ipv6(i) | L3Repr::Grh(i) => {
            let want = if matches!(h.l3, L3Repr::Grh(_)) {
                L3Kind::Grh
            } else {
                L3Kind::Ipv6
            };
            chk("l3", format!("{want:?}"), format!("{:?}", m.l3_kind));
            chk(
                "ipv6",
                format!(
                    "{} {} {} {} {} {} {} {}",
                    i.src,
                    i.dst,
                    i.dscp,
                    i.ecn,
                    i.flow_label,
                    i.next_header,
                    i.hop_limit,
                    l3_len - 40
                ),
                format!(
                    "{} {} {} {} {} {} {} {}",
                    ip.src_v6(),
                    ip.dst_v6(),
                    ip.dscp,
                    ip.ecn,
                    ip.flow_label,
                    ip.protocol,
                    ip.ttl,
                    ip.length
                ),
            );
        }
    }
    chk(
        "udp",
        format!(
            "{:?}",
            h.udp.map(|u| (
                u.src_port,
                u.dst_port,
                u.checksum,
                layout.end - layout.udp.unwrap_or(0)
            ))
        ),
        format!(
            "{:?}",
            m.udp
                .map(|u| (u.sport, u.dport, u.checksum, usize::from(u.length)))
        ),
    );
    let b = &h.bth;
    chk(
        "bth",
        format!(
            "{} {} {} {} {} {} {} {} {} {} {} {} {}",
            b.opcode.0,
            b.se,
            b.migreq,
            b.pad_count,
            b.tver,
            b.pkey,
            b.fecn,
            b.becn,
            b.resv6,
            b.dest_qp.value(),
            b.ack_req,
            b.resv7,
            b.psn.value()
        ),
        {
            let r = &m.bth;
            format!(
                "{} {} {} {} {} {} {} {} {} {} {} {} {}",
                r.opcode,
                r.se,
                r.migreq,
                r.padcnt,
                r.tver,
                r.pkey,
                r.fecn,
                r.becn,
                r.resv6,
                r.destqp,
                r.ackreq,
                r.resv7,
                r.psn
            )
        },
    );
    let e = &h.ext;
    let x = &m.ext;
    chk(
        "reth",
        format!("{:?}", e.reth.map(|r| (r.va, r.rkey.0, r.dma_len))),
        format!("{:?}", x.reth.map(|r| (r.va, r.rkey, r.dmalen))),
    );
    chk(
        "aeth",
        format!(
            "{:?}",
            e.aeth.map(|a| (a.syndrome.to_byte(), a.msn.value()))
        ),
        format!("{:?}", x.aeth.map(|a| (a.syndrome, a.msn))),
    );
    chk(
        "atomiceth",
        format!(
            "{:?}",
            e.atomic_eth
                .map(|a| (a.va, a.rkey.0, a.swap_add, a.compare))
        ),
        format!(
            "{:?}",
            x.atomiceth.map(|a| (a.va, a.rkey, a.swap_add, a.compare))
        ),
    );
    chk(
        "atomicacketh",
        format!("{:?}", e.atomic_ack_eth.map(|a| a.orig_rem_data)),
        format!("{:?}", x.atomicacketh),
    );
    chk(
        "immdt",
        format!("{:?}", e.immdt.map(|i| i.imm)),
        format!("{:?}", x.immdt),
    );
    chk(
        "ieth",
        format!("{:?}", e.ieth.map(|i| i.rkey.0)),
        format!("{:?}", x.ieth),
    );
    chk(
        "deth",
        format!("{:?}", e.deth.map(|i| (i.qkey.0, i.src_qp.value()))),
        format!("{:?}", x.deth.map(|i| (i.qkey, i.srcqp))),
    );
    chk(
        "cnp",
        format!("{:?}", e.cnp.map(|c| c.reserved)),
        format!("{:?}", x.cnp),
    );
    chk(
        "hdr_len",
        (layout.payload - layout.bth).to_string(),
        m.hdr_len.to_string(),
    );
    chk(
        "payload_offset",
        layout.payload.to_string(),
        m.payload_offset.to_string(),
    );
    chk(
        "payload_len",
        p.payload().len().to_string(),
        m.payload_len.to_string(),
    );
    chk("payload", super::hex(p.payload()), super::hex(&v.payload));
    chk("pad", super::hex(p.pad()), super::hex(m.pad_bytes()));
    chk(
        "icrc",
        format!("{:#010x}", p.icrc()),
        format!("{:#010x}", m.icrc),
    );
    chk(
        "icrc_calc",
        format!("{:#010x}", p.icrc()),
        format!("{:#010x}", m.icrc_calc),
    );
    chk(
        "trailer_len",
        p.trailer().len().to_string(),
        m.trailer_len.to_string(),
    );
    chk(
        "frame_len",
        frame.len().to_string(),
        m.frame_len.to_string(),
    );
    if d.is_empty() {
        Ok(())
    } else {
        Err(d.join("; "))
    }
}

pub fn compare(frame: &[u8], v: &RxVerdict) -> Result<(), String> {
    match (wire::parse(frame), v.error()) {
        (Ok(p), None) => compare_ok(&p, v, frame),
        (Ok(_), Some(e)) => Err(format!("core accepts the frame, RTL says {e}")),
        (Err(e), None) => Err(format!("core says {}, RTL accepts the frame", e.name())),
        (Err(e), Some(r)) if e.name() == r.name() => Ok(()),
        (Err(e), Some(r)) => Err(format!("core says {} ({e}), RTL says {r}", e.name())),
    }
}
