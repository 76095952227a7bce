//! DCQCN wired into the engine (roce-facts §3.4, §7): the notification point answers
//! CE-marked packets with CNPs laid out as a real ConnectX-4 Lx CNP, at most one per
//! interval; the reaction point cuts the rate by the DCQCN equations, paces data at it
//! and recovers. Expected numbers are computed by hand in the comments.

mod common;

use common::{Node, Pair, QpOpts};
use roce_core::cc::{CcConfig, ONE};
use roce_core::num::{Qpn, Rkey};
use roce_core::transport::{Instant, QpType, SendWr, WrOp};
use roce_core::wire::{self, L3Repr, Opcode};

const G100: u64 = 100_000_000_000;

/// The first frame of a little-endian pcap file (the capture has one).
fn first_pcap_frame(path: &str) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "little-endian pcap");
    let rec = &bytes[24..];
    let incl = u32::from_le_bytes(rec[8..12].try_into().unwrap()) as usize;
    rec[16..16 + incl].to_vec()
}

fn connectx_cnp() -> Vec<u8> {
    first_pcap_frame(&format!(
        "{}/../tests/data/vectors/real/scapy_roce_uts_connectx4lx_cnp.pcap",
        env!("CARGO_MANIFEST_DIR")
    ))
}

/// What a switch does under congestion: IPv4 ECN := CE, header checksum recomputed
/// (RFC 1071, written here independently of the core). The ICRC masks the TOS byte.
fn mark_ce(frame: &mut [u8]) {
    assert_eq!(&frame[12..14], &[0x08, 0x00], "IPv4");
    frame[15] |= 0b11;
    frame[24] = 0;
    frame[25] = 0;
    let mut sum: u32 = frame[14..34]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    let c = !(sum as u16);
    frame[24..26].copy_from_slice(&c.to_be_bytes());
}

/// A pair whose two ports use `cc`, with one RC QP each, connected.
fn pair(cc: CcConfig) -> (Pair, Qpn, Qpn) {
    let mut p = Pair::new(1);
    p.a = Node::with_port(1, |c| c.cc = cc);
    p.b = Node::with_port(2, |c| c.cc = cc);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    (p, qa, qb)
}

/// DCQCN with the reaction point off for new QPs: the notification point alone.
fn np_only() -> CcConfig {
    CcConfig {
        rp: false,
        ..CcConfig::dcqcn(G100)
    }
}

/// Posts WR `wr_id` of `len` bytes on `from`'s QP `q`: its SGE a fresh buffer of `from`,
/// `op` made from a fresh buffer of `to` (address, rkey).
fn post(from: &mut Node, to: &mut Node, q: Qpn, wr_id: u64, len: usize, op: fn(u64, Rkey) -> WrOp) {
    let (local, kl) = from.buffer(len);
    let (remote, kr) = to.buffer(len);
    from.post_send(
        q,
        &SendWr::new(wr_id, op(remote, kr.rkey)).sge(local, len as u32, kl.lkey),
    );
}

/// Posts a WRITE of `len` bytes from a to b.
fn post_write(p: &mut Pair, qa: Qpn, len: usize) {
    post(&mut p.a, &mut p.b, qa, 1, len, WrOp::rdma_write);
}

fn tx(n: &mut Node, now: u64) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 9000];
    let len = n
        .eng
        .poll_transmit(Instant::from_nanos(now), &mut buf, &mut n.mem)?;
    buf.truncate(len);
    Some(buf)
}

fn rx(n: &mut Node, now: u64, frame: &[u8]) {
    n.eng
        .handle_packet(Instant::from_nanos(now), frame, &mut n.mem);
}

fn ecn(frame: &[u8]) -> u8 {
    match wire::parse(frame).unwrap().l3() {
        L3Repr::Ipv4(ip) => ip.ecn,
        _ => panic!("IPv4 expected"),
    }
}

/// b's CNP to a, made by b's notification point from a CE-marked frame of a.
fn cnp_for_a(p: &mut Pair, qa: Qpn) -> Vec<u8> {
    post_write(p, qa, 100);
    let mut f = tx(&mut p.a, 0).unwrap();
    mark_ce(&mut f);
    rx(&mut p.b, 0, &f);
    tx(&mut p.b, 0).unwrap()
}

#[test]
fn ce_marked_packet_gets_a_cnp_laid_out_as_connectx_sends_it() {
    let (mut p, qa, qb) = pair(CcConfig::dcqcn(G100));
    post_write(&mut p, qa, 100);
    let mut data = tx(&mut p.a, 0).unwrap();
    assert_eq!(ecn(&data), 0b10, "data of a rate-controlled QP is ECT(0)");
    mark_ce(&mut data);
    rx(&mut p.b, 1000, &data);
    let cnp = tx(&mut p.b, 1000).expect("the CNP");
    let real = connectx_cnp();

    // Field by field against the ConnectX-4 Lx capture (roce-facts §5.4).
    assert_eq!(cnp.len(), real.len(), "74-byte frame");
    assert_eq!(&cnp[0..6], &p.a.mac, "to the data sender");
    assert_eq!(&cnp[6..12], &p.b.mac);
    assert_eq!(cnp[12..14], real[12..14], "EtherType IPv4");
    assert_eq!(
        cnp[14..16],
        real[14..16],
        "version, IHL, TOS 0xC2 = DSCP 48 + ECT(0)"
    );
    assert_eq!(cnp[16..18], real[16..18], "IPv4 total length 60");
    // 18..20 is the Identification: a per-packet value (0x718c in the capture, 0 here).
    assert_eq!(
        cnp[20..24],
        real[20..24],
        "DF, fragment offset 0, TTL 64, UDP"
    );
    assert_eq!(&cnp[26..30], &p.b.gid[12..], "source address");
    assert_eq!(&cnp[30..34], &p.a.gid[12..], "destination address");
    assert_eq!(
        cnp[34..42],
        real[34..42],
        "UDP sport 0, dport 4791, length 40, csum 0"
    );
    assert_eq!(
        cnp[42..47],
        real[42..47],
        "opcode 0x81, flags 0, P_Key 0xFFFF, BECN"
    );
    assert_eq!(
        &cnp[47..50],
        &qa.value().to_be_bytes()[1..],
        "DestQP = the sender's QP"
    );
    assert_eq!(cnp[50..54], real[50..54], "AckReq 0, PSN 0");
    assert_eq!(cnp[54..70], real[54..70], "16 reserved zero bytes");
    // The ICRC and the IPv4 checksum verify (parse checks both).
    let pkt = wire::parse(&cnp).expect("a valid RoCEv2 frame");
    assert_eq!(pkt.bth().opcode, Opcode::CNP);
    assert!(pkt.icrc_verified());
    assert_eq!(p.b.eng.counters().np_cnp_sent, 1);
    assert_eq!(p.b.eng.counters().np_ecn_marked_roce_packets, 1);
    let info = p.b.eng.qp_cc(qb).unwrap();
    assert_eq!((info.np_cnp_sent, info.np_ecn_marked_roce_packets), (1, 1));

    // The sender's reaction point takes it.
    rx(&mut p.a, 2000, &cnp);
    assert_eq!(p.a.eng.counters().rp_cnp_handled, 1);
    assert_eq!(p.a.eng.qp_cc(qa).unwrap().rate, G100 / 2);
}

#[test]
fn one_cnp_per_qp_per_interval() {
    let mut cc = CcConfig::dcqcn(G100);
    cc.cnp_interval_ns = 50_000;
    let (mut p, qa, _) = pair(cc);
    post_write(&mut p, qa, 8 * 1024); // 8 packets at MTU 1024
    let mut frames: Vec<_> = std::iter::from_fn(|| tx(&mut p.a, 0)).collect();
    assert_eq!(frames.len(), 8);
    let mut cnps = Vec::new();
    // CE-marked arrivals at these times: CNPs at 0 and 50 us only; 100 us would be the
    // next, but nothing is marked after 60 us.
    for (f, at) in frames
        .iter_mut()
        .zip([0, 1_000, 20_000, 49_999, 50_000, 50_001, 60_000])
    {
        mark_ce(f);
        rx(&mut p.b, at, f);
        while let Some(out) = tx(&mut p.b, at) {
            if wire::parse(&out).unwrap().bth().opcode == Opcode::CNP {
                cnps.push(at);
            }
        }
    }
    // The eighth arrives unmarked: no CNP.
    rx(&mut p.b, 200_000, &frames[7]);
    while let Some(out) = tx(&mut p.b, 200_000) {
        assert_ne!(wire::parse(&out).unwrap().bth().opcode, Opcode::CNP);
    }
    assert_eq!(cnps, [0, 50_000]);
    let c = p.b.eng.counters();
    assert_eq!((c.np_ecn_marked_roce_packets, c.np_cnp_sent), (7, 2));
}

#[test]
fn cnp_cuts_the_rate_by_the_dcqcn_equations_and_timers_recover_it() {
    let cfg = CcConfig::dcqcn(G100);
    let (mut p, qa, _) = pair(cfg);
    let cnp = cnp_for_a(&mut p, qa);
    let info = p.a.eng.qp_cc(qa).unwrap();
    assert_eq!((info.rate, info.target_rate, info.alpha), (G100, G100, ONE));

    // CNP at t = 1 us: alpha = (1 - 1/256) * 1 + 1/256 = 1; Rt = 100G;
    // Rc = 100G * (1 - 1/2) = 50G.
    rx(&mut p.a, 1_000, &cnp);
    let i = p.a.eng.qp_cc(qa).unwrap();
    assert_eq!(
        (i.rate, i.target_rate, i.alpha),
        (50_000_000_000, G100, ONE)
    );
    // A second CNP at once: Rt = 50G, Rc = 25G.
    rx(&mut p.a, 1_000, &cnp);
    let i = p.a.eng.qp_cc(qa).unwrap();
    assert_eq!((i.rate, i.target_rate), (25_000_000_000, 50_000_000_000));
    assert_eq!(i.rp_cnp_handled, 2);

    // Both DCQCN timers (K = 55 us, rate increase 55 us) fire at 56 us: the engine asks
    // to be woken then.
    assert_eq!(p.a.eng.poll_timeout(), Some(Instant::from_nanos(56_000)));
    p.a.eng.handle_timeout(Instant::from_nanos(56_000));
    // alpha = 1 * 255/256 (Q20 1044480); fast recovery T = 1: Rc = (50G + 25G) / 2.
    let i = p.a.eng.qp_cc(qa).unwrap();
    assert_eq!(
        (i.rate, i.target_rate, i.alpha),
        (37_500_000_000, 50_000_000_000, 1_044_480)
    );
    // T = 2, 3, 4: Rc = 43.75G, 46.875G, 48.4375G; T = 5 >= F: additive, Rt = 50.04G,
    // Rc = (50.04 + 48.4375) / 2 = 49.23875G.
    let mut expect = Vec::new();
    for k in 2..=5u64 {
        p.a.eng
            .handle_timeout(Instant::from_nanos(1_000 + 55_000 * k));
        expect.push(p.a.eng.qp_cc(qa).unwrap().rate);
    }
    assert_eq!(
        expect,
        [
            43_750_000_000,
            46_875_000_000,
            48_437_500_000,
            49_238_750_000
        ]
    );
    assert_eq!(p.a.eng.qp_cc(qa).unwrap().target_rate, 50_040_000_000);
    // Left to itself the QP climbs back to line rate.
    let mut now = 0;
    while p.a.eng.qp_cc(qa).unwrap().rate < G100 {
        now = p.a.eng.poll_timeout().unwrap().as_nanos();
        p.a.eng.handle_timeout(Instant::from_nanos(now));
        assert!(now < 1_000_000_000, "no recovery within 1 s");
    }
    assert_eq!(p.a.eng.qp_cc(qa).unwrap().target_rate, G100);
    assert!(now > 300_000);
    // A destroyed QP leaves no DCQCN timer behind (only alpha's was still running).
    assert!(p.a.eng.poll_timeout().is_some());
    p.a.eng.destroy_qp(qa).unwrap();
    assert_eq!(p.a.eng.poll_timeout(), None);
}

#[test]
fn pacing_spaces_data_packets_at_the_current_rate() {
    let (mut p, qa, _) = pair(CcConfig::dcqcn(G100));
    let cnp = cnp_for_a(&mut p, qa);
    rx(&mut p.a, 0, &cnp); // 50 Gb/s from now
    post_write(&mut p, qa, 16 * 1024); // 16 packets of 1024 bytes
    let t0 = 1_000;
    // Drive a like a NIC does: send what it allows, sleep until poll_timeout.
    let mut sent = Vec::new();
    let mut now = t0;
    while sent.len() < 16 {
        while let Some(f) = tx(&mut p.a, now) {
            sent.push((now, f.len()));
        }
        let next = p.a.eng.poll_timeout().unwrap().as_nanos();
        assert!(next > now);
        // Nothing may leave before that time.
        assert!(tx(&mut p.a, next - 1).is_none(), "sent before its time");
        now = next;
        p.a.eng.handle_timeout(Instant::from_nanos(now));
    }
    // FIRST (RETH): 14 + 20 + 8 + 12 + 16 + 1024 + 4 = 1098 bytes, 1122 on the wire:
    // 1122 * 8 / 50 Gb/s = 179.52 ns -> 180. MIDDLE/LAST: 1082 bytes, 1106 on the
    // wire, 176.96 ns -> 177.
    assert_eq!(sent[0], (t0, 1098));
    assert_eq!(sent[1], (t0 + 180, 1082));
    for w in sent[1..].windows(2) {
        assert_eq!(w[1].0 - w[0].0, 177, "{sent:?}");
    }
}

#[test]
fn cc_off_changes_nothing_on_the_wire() {
    // Off (the default): Not-ECT, CNPs ignored, CE only counted.
    let mut p = Pair::new(1);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    post_write(&mut p, qa, 100);
    let mut f = tx(&mut p.a, 0).unwrap();
    assert_eq!(ecn(&f), 0);
    mark_ce(&mut f);
    rx(&mut p.b, 0, &f);
    let ack = tx(&mut p.b, 0).unwrap();
    assert_eq!(
        wire::parse(&ack).unwrap().bth().opcode,
        Opcode::RC_ACKNOWLEDGE
    );
    assert!(tx(&mut p.b, 0).is_none(), "no CNP");
    assert_eq!(p.b.eng.counters().np_ecn_marked_roce_packets, 1);
    assert!(!p.b.eng.qp_cc(qb).unwrap().rp_enabled);
}

#[test]
fn cnp_from_a_stranger_or_for_a_qp_without_cc_is_ignored() {
    let (mut p, qa, _) = pair(np_only());
    post_write(&mut p, qa, 100);
    let mut f = tx(&mut p.a, 0).unwrap();
    assert_eq!(ecn(&f), 0, "reaction point off: Not-ECT");
    mark_ce(&mut f);
    rx(&mut p.b, 0, &f);
    let cnp = tx(&mut p.b, 0).unwrap();
    assert_eq!(wire::parse(&cnp).unwrap().bth().opcode, Opcode::CNP);
    rx(&mut p.a, 0, &cnp);
    assert_eq!(p.a.eng.counters().rp_cnp_ignored, 1);
    // Switched on for this QP: handled.
    p.a.eng.set_qp_cc(qa, true).unwrap();
    rx(&mut p.a, 0, &cnp);
    assert_eq!(p.a.eng.counters().rp_cnp_handled, 1);
    assert_eq!(p.a.eng.qp_cc(qa).unwrap().rate, G100 / 2);
    // The same CNP from another address (source IP changed; the ICRC covers it).
    let mut forged = cnp.clone();
    let mut h = wire::parse(&cnp).unwrap().headers();
    if let L3Repr::Ipv4(ip) = &mut h.l3 {
        let mut o = ip.src.octets();
        o[3] ^= 1;
        ip.src = o.into();
    }
    let n = wire::emit(&h, &[], &mut forged).unwrap();
    rx(&mut p.a, 0, &forged[..n]);
    assert_eq!(p.a.eng.counters().rp_cnp_ignored, 2);
}

#[test]
fn read_responses_are_paced() {
    let (mut p, qa, qb) = pair(CcConfig::dcqcn(G100));
    // a's notification point answers a CE-marked ACK from b: a CNP that slows b.
    let _ = cnp_for_a(&mut p, qa);
    let mut ack = tx(&mut p.b, 0).expect("b's ACK of the WRITE");
    mark_ce(&mut ack);
    rx(&mut p.a, 0, &ack);
    let cnp_for_b = tx(&mut p.a, 0).unwrap();
    assert_eq!(wire::parse(&cnp_for_b).unwrap().dest_qp(), qb);
    rx(&mut p.b, 0, &cnp_for_b);
    assert_eq!(p.b.eng.qp_cc(qb).unwrap().rate, G100 / 2);

    // a READs 4 KiB from b: b's four responses leave at b's 50 Gb/s.
    post(&mut p.a, &mut p.b, qa, 2, 4096, WrOp::rdma_read);
    let req = tx(&mut p.a, 1_000).unwrap();
    rx(&mut p.b, 1_000, &req);
    let mut sent = Vec::new();
    let mut now = 1_000;
    while sent.len() < 4 {
        while let Some(f) = tx(&mut p.b, now) {
            sent.push((now, wire::parse(&f).unwrap().bth().opcode, f.len()));
        }
        now = p.b.eng.poll_timeout().unwrap().as_nanos();
        p.b.eng.handle_timeout(Instant::from_nanos(now));
    }
    // FIRST and LAST carry an AETH: 14 + 20 + 8 + 12 + 4 + 1024 + 4 = 1086 bytes, 1110 on
    // the wire, 1110 * 8 / 50 Gb/s = 177.6 -> 178 ns; MIDDLE: 1082 bytes, 177 ns.
    assert_eq!(
        sent,
        [
            (1_000, Opcode::RC_RDMA_READ_RESPONSE_FIRST, 1086),
            (1_178, Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 1082),
            (1_355, Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 1082),
            (1_532, Opcode::RC_RDMA_READ_RESPONSE_LAST, 1086),
        ]
    );
}

#[test]
fn acks_are_not_held_back_by_the_pacer() {
    let (mut p, qa, qb) = pair(CcConfig::dcqcn(G100));
    let cnp = cnp_for_a(&mut p, qa);
    while tx(&mut p.b, 0).is_some() {} // b's ACK, not needed
    rx(&mut p.a, 0, &cnp); // a at 50 Gb/s
    post_write(&mut p, qa, 8192);
    let first = tx(&mut p.a, 1_000).unwrap();
    assert_eq!(
        wire::parse(&first).unwrap().bth().opcode,
        Opcode::RC_RDMA_WRITE_FIRST
    );
    assert!(tx(&mut p.a, 1_000).is_none(), "the next data packet waits");
    // b writes to a: a acknowledges at once, though its own data is held.
    post(&mut p.b, &mut p.a, qb, 3, 8, WrOp::rdma_write);
    let w = tx(&mut p.b, 1_000).unwrap();
    rx(&mut p.a, 1_000, &w);
    let ack = tx(&mut p.a, 1_000).expect("the ACK");
    assert_eq!(
        wire::parse(&ack).unwrap().bth().opcode,
        Opcode::RC_ACKNOWLEDGE
    );
    assert!(tx(&mut p.a, 1_000).is_none());
}

/// The engine keeps each QP's headers as a template: switching the reaction point on or
/// off must change the ECN field of the very next data frame (ECT(0) = 0b10, RFC 3168),
/// and the IPv4 checksum must follow (`wire::parse` checks it).
#[test]
fn switching_the_reaction_point_remarks_the_next_frame() {
    let (mut p, qa, _) = pair(np_only());
    post_write(&mut p, qa, 100);
    assert_eq!(ecn(&tx(&mut p.a, 0).unwrap()), 0, "off: Not-ECT");
    p.a.eng.set_qp_cc(qa, true).unwrap();
    post_write(&mut p, qa, 100);
    assert_eq!(ecn(&tx(&mut p.a, 0).unwrap()), 0b10, "on: ECT(0)");
    p.a.eng.set_qp_cc(qa, false).unwrap();
    post_write(&mut p, qa, 100);
    assert_eq!(ecn(&tx(&mut p.a, 0).unwrap()), 0, "off again: Not-ECT");
}

/// A pair whose a-side QP took two CNPs at 1 us (Rc 25G, Rt 50G, alpha 1) and has
/// nothing in flight (b's ACK came back); returns the CNP, to send again later.
fn cut_twice() -> (Pair, Qpn, Vec<u8>) {
    let (mut p, qa, _) = pair(CcConfig::dcqcn(G100));
    let cnp = cnp_for_a(&mut p, qa);
    let ack = tx(&mut p.b, 0).expect("b's ACK for the marked WRITE");
    rx(&mut p.a, 0, &ack);
    rx(&mut p.a, 1_000, &cnp);
    rx(&mut p.a, 1_000, &cnp);
    let i = p.a.eng.qp_cc(qa).unwrap();
    assert_eq!(
        (i.rate, i.target_rate, i.alpha),
        (25_000_000_000, 50_000_000_000, ONE)
    );
    (p, qa, cnp)
}

/// A QP whose context goes to host memory (`Engine::evict_qp`) right after two CNPs
/// and comes back (`restore_qp`) 7.5 timer periods later, when a third CNP arrives,
/// must meet that CNP in the state of a QP that stayed resident and had its timers run
/// at each deadline (the engine's DCQCN, checked by hand above, is the reference): the
/// stored QP's alpha decays and its rate recovers while it is away.
#[test]
fn a_stored_qp_s_dcqcn_timers_advance_while_it_is_away() {
    use roce_core::engine::QP_CTX_LEN;
    let back = 1_000 + 55_000 * 7 + 27_500;
    // The reference: resident, woken at every deadline up to `back`.
    let (mut stay, qs, cnp_s) = cut_twice();
    while let Some(t) = stay.a.eng.poll_timeout().filter(|t| t.as_nanos() <= back) {
        stay.a.eng.handle_timeout(t);
    }
    // Evicted at 1 us: no timer of it is left in the engine while it is away.
    let (mut away, qa, cnp_a) = cut_twice();
    let mut ctx = [0u8; QP_CTX_LEN];
    away.a.eng.evict_qp(qa, &mut ctx).unwrap();
    assert_eq!(away.a.eng.poll_timeout(), None);
    away.a
        .eng
        .restore_qp(qa, &ctx, Instant::from_nanos(back))
        .unwrap();
    let (s, a) = (stay.a.eng.qp_cc(qs).unwrap(), away.a.eng.qp_cc(qa).unwrap());
    assert_eq!(
        (a.rate, a.target_rate, a.alpha),
        (s.rate, s.target_rate, s.alpha)
    );
    // Seven alpha periods: 1 * (255/256)^7 (floored each time); T = 1..4 fast recovery,
    // T = 5, 6, 7 additive (+40M each): Rt 50.12G.
    assert!(s.alpha < ONE && s.alpha > ONE / 100 * 97, "{}", s.alpha);
    assert_eq!(s.target_rate, 50_120_000_000);
    assert_eq!(
        away.a.eng.poll_timeout(),
        stay.a.eng.poll_timeout(),
        "both timers back on their grid"
    );
    // The third CNP meets the same state on both.
    rx(&mut stay.a, back, &cnp_s);
    rx(&mut away.a, back, &cnp_a);
    let (s, a) = (stay.a.eng.qp_cc(qs).unwrap(), away.a.eng.qp_cc(qa).unwrap());
    assert_eq!(
        (a.rate, a.target_rate, a.alpha),
        (s.rate, s.target_rate, s.alpha)
    );
}
