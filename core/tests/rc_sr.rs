//! Selective repeat (IRN style, `docs/selective-repeat.md`): only what was lost is sent
//! again, data lands exactly once, completions stay in order, and a QP with selective
//! repeat still works with a Go-Back-N peer.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use roce_core::memory::MrKeys;
use roce_core::num::{Psn, Qpn, Rkey};
use roce_core::transport::{
    AckTimeout, Mtu, QpType, RecvWr, SendFlags, SendWr, SrAttr, WcStatus, WrOp, SACK_FLAG,
};
use roce_core::wire::aeth::{NakCode, Syndrome};
use roce_core::wire::Opcode;

fn sr(max_inflight: u16, rto_low: u8) -> Option<SrAttr> {
    Some(SrAttr {
        enabled: true,
        max_inflight,
        rto_low: AckTimeout::new(rto_low).unwrap(),
    })
}

/// The default QP with selective repeat.
fn sr_qp(max_inflight: u16, rto_low: u8) -> QpOpts {
    QpOpts {
        sr: sr(max_inflight, rto_low),
        ..QpOpts::default()
    }
}

/// Selective repeat with RTO_low code `rto_low`, on a QP whose own ACK timeout is code 14
/// (67 ms): a recovery by that timeout would show in the elapsed time and counters.
fn sr_67ms(rto_low: u8) -> QpOpts {
    QpOpts {
        timeout: 14,
        ..sr_qp(0, rto_low)
    }
}

/// For request frames (A to B): drops the first transmission of each PSN in `psns`
/// and lets every later copy through.
fn drop_first_copy_of(psns: BTreeSet<u32>) -> Filter {
    drop_copies_of(psns.into_iter().map(|p| (p, 1)).collect())
}

/// Drops the first `n` transmissions of each PSN `p` in `copies` (p -> n).
fn drop_copies_of(copies: BTreeMap<u32, u32>) -> Filter {
    let mut sent: BTreeMap<u32, u32> = BTreeMap::new();
    Box::new(move |f: &[u8]| {
        let Some(s) = seen(f) else { return true };
        let p = s.psn.value();
        let k = sent.entry(p).or_default();
        *k += 1;
        *k > copies.get(&p).copied().unwrap_or(0)
    })
}

/// `n` slots of `len` bytes, slot `i` at `i * len` in each of two buffers: A's source,
/// filled with a pattern, and B's destination.
struct Slots {
    n: usize,
    len: usize,
    src: u64,
    ka: MrKeys,
    dst: u64,
    kb: MrKeys,
}

impl Slots {
    fn new(p: &mut Pair, n: usize, len: usize, pattern: u8) -> Self {
        let (src, ka) = p.a.buffer(n * len);
        p.a.mem.fill_pattern(src, n * len, pattern);
        let (dst, kb) = p.b.buffer(n * len);
        Self {
            n,
            len,
            src,
            ka,
            dst,
            kb,
        }
    }

    fn off(&self, i: u64) -> u64 {
        i * self.len as u64
    }

    /// A posts slot `i` as signaled WR `i`; `op` is made from B's slot `i` (address,
    /// rkey).
    fn post(&self, p: &mut Pair, qa: Qpn, i: u64, op: impl FnOnce(u64, Rkey) -> WrOp) {
        let off = self.off(i);
        p.a.post_send(
            qa,
            &SendWr::new(i, op(self.dst + off, self.kb.rkey))
                .sge(self.src + off, self.len as u32, self.ka.lkey)
                .flags(SendFlags::SIGNALED),
        );
    }

    /// B posts a receive into slot `i` as WR `i`.
    fn recv(&self, p: &mut Pair, qb: Qpn, i: u64) {
        let wr = RecvWr::new(i).sge(self.dst + self.off(i), self.len as u32, self.kb.lkey);
        p.b.post_recv(qb, &wr);
    }

    /// All of A's slots, as sent.
    fn sent(&self, p: &Pair) -> Vec<u8> {
        p.a.mem.read(self.src, self.n * self.len)
    }

    /// All of B's slots, as they landed.
    fn landed(&self, p: &Pair) -> Vec<u8> {
        p.b.mem.read(self.dst, self.n * self.len)
    }
}

/// A writes `msgs` messages of `len` bytes into B (with immediate data `0x100 + i`, each
/// into a posted receive, when `imm`); returns the slots once the pair has settled.
fn writes(p: &mut Pair, o: &QpOpts, msgs: usize, len: usize, imm: bool) -> Slots {
    let (qa, qb) = p.connect(QpType::Rc, o);
    let s = Slots::new(p, msgs, len, 9);
    for i in 0..msgs as u64 {
        if imm {
            p.b.post_recv(qb, &RecvWr::new(i));
            s.post(p, qa, i, |remote_addr, rkey| WrOp::RdmaWriteWithImm {
                remote_addr,
                rkey,
                imm: 0x100 + i as u32,
            });
        } else {
            s.post(p, qa, i, WrOp::rdma_write);
        }
    }
    p.settle();
    s
}

/// Every completion on either side succeeded.
fn all_succeeded(p: &Pair) -> bool {
    p.a.wcs
        .iter()
        .chain(&p.b.wcs)
        .all(|w| w.status == WcStatus::Success)
}

#[test]
fn isolated_drops_are_the_only_retransmissions() {
    // 8 WRITEs of 16 packets (PSN 0x100..0x17F): drop 7 isolated packets once each,
    // none among the last ones (a tail loss needs a timeout, tested below).
    let drops: BTreeSet<u32> = [0x103, 0x111, 0x12A, 0x140, 0x141 + 9, 0x160, 0x170]
        .into_iter()
        .collect();
    let o = sr_67ms(0);
    let mut p = Pair::new(11);
    p.keep_trace = true;
    p.ab.filter = Some(drop_first_copy_of(drops.clone()));
    let s = writes(&mut p, &o, 8, 16 * 1024, false);

    // Data integrity against the memory model: B's memory is its zeroed buffers with
    // A's bytes written in; nothing else changed.
    assert_eq!(s.landed(&p), s.sent(&p));
    // Exactly once, in order, all successful.
    assert_eq!(p.a.wr_ids(), (0..8).collect::<Vec<_>>());
    assert!(p.a.wcs.iter().all(|w| w.status == WcStatus::Success));

    let ca = *p.a.eng.counters();
    assert_eq!(p.ab.dropped, drops.len() as u64);
    assert_eq!(ca.retransmitted_pkts, p.ab.dropped, "{ca:#?}");
    assert_eq!(ca.completer_retry_err, 0, "no timeout, no Go-Back-N");
    // Every request after a hole drew a SACK, and the requester acted on each.
    let cb = *p.b.eng.counters();
    assert!(cb.sent_sack > 0);
    assert_eq!(ca.rcvd_sack, cb.sent_sack);
    assert!(
        p.now < 1_000_000,
        "finished in {} ns: no 67 ms timeout",
        p.now
    );

    // On the wire: each dropped PSN went out twice, every other PSN once.
    let mut copies: BTreeMap<u32, u32> = BTreeMap::new();
    for s in p.seen(true) {
        *copies.entry(s.psn.value()).or_default() += 1;
    }
    assert_eq!(copies.len(), 128);
    for (psn, n) in copies {
        assert_eq!(n, if drops.contains(&psn) { 2 } else { 1 }, "PSN {psn:#x}");
    }
}

#[test]
fn a_lost_resend_is_seen_by_later_sacks_not_the_timer() {
    // PSN 0x105 is lost twice: its first resend is lost too. The SACK of a packet sent
    // after that resend shows it, long before the 67 ms timeout.
    let o = sr_67ms(0);
    let mut p = Pair::new(3);
    p.keep_trace = true;
    p.ab.filter = Some(drop_copies_of(
        [(0x105, 2), (0x120, 1)].into_iter().collect(),
    ));
    let s = writes(&mut p, &o, 4, 16 * 1024, false);
    assert_eq!(s.landed(&p), s.sent(&p));
    let ca = *p.a.eng.counters();
    assert_eq!(ca.retransmitted_pkts, 3, "{ca:#?}");
    assert_eq!(ca.completer_retry_err, 0);
    assert!(p.now < 1_000_000, "finished in {} ns", p.now);
    let copies = p
        .seen(true)
        .iter()
        .filter(|s| s.psn.value() == 0x105)
        .count();
    assert_eq!(copies, 3);
}

#[test]
fn psns_across_the_wrap_and_far_from_zero() {
    // The bitmaps and cursors work on 24-bit PSNs: start just before the wrap, and half
    // the PSN space away from zero.
    for start in [0xFF_FFF8u32, 0x9A_0000] {
        let o = QpOpts {
            a_psn: start,
            ..sr_67ms(0)
        };
        let at = |k: u32| Psn::new(start).add(k).value();
        let drops: BTreeSet<u32> = [at(4), at(9), at(20)].into_iter().collect();
        let mut p = Pair::new(4);
        p.ab.filter = Some(drop_first_copy_of(drops));
        let s = writes(&mut p, &o, 2, 16 * 1024, false);
        assert_eq!(s.landed(&p), s.sent(&p));
        let ca = *p.a.eng.counters();
        assert_eq!(ca.retransmitted_pkts, 3, "start {start:#x}: {ca:#?}");
        assert!(p.now < 1_000_000, "start {start:#x}: {} ns", p.now);
    }
}

#[test]
fn go_back_n_resends_more_for_the_same_drops() {
    // The baseline for the test above: the same drops without selective repeat.
    let drops: BTreeSet<u32> = [0x103, 0x111, 0x12A, 0x140].into_iter().collect();
    let mut p = Pair::new(11);
    p.ab.filter = Some(drop_first_copy_of(drops.clone()));
    let s = writes(&mut p, &QpOpts::default(), 8, 16 * 1024, false);
    assert_eq!(s.landed(&p), s.sent(&p));
    let ca = *p.a.eng.counters();
    assert!(ca.retransmitted_pkts > 4 * drops.len() as u64, "{ca:#?}");
}

#[test]
fn wire_format_of_pieces_and_sacks() {
    // One 5-packet WRITE, PSN 0x100..0x104; 0x102 is dropped once.
    let o = sr_qp(0, 0);
    let mut p = Pair::new(1);
    p.keep_trace = true;
    p.ab.filter = Some(drop_first_copy_of([0x102].into_iter().collect()));
    let s = writes(&mut p, &o, 1, 4 * 1024 + 100, false);
    assert_eq!(s.landed(&p), s.sent(&p));

    // Requests: every piece a WRITE_ONLY with the RETH of that piece.
    let mut got = Vec::new();
    for (_, _, f) in p.trace.iter().filter(|t| t.1) {
        let pkt = roce_core::wire::parse(f).unwrap();
        let h = pkt.headers();
        let reth = h.ext.reth.expect("RETH in every piece");
        assert_eq!(h.bth.opcode, Opcode::RC_RDMA_WRITE_ONLY);
        got.push((h.bth.psn.value(), reth.va - s.dst, reth.dma_len));
    }
    assert_eq!(
        got,
        vec![
            (0x100, 0, 1024),
            (0x101, 1024, 1024),
            (0x102, 2048, 1024), // dropped
            (0x103, 3072, 1024),
            (0x104, 4096, 100),
            (0x102, 2048, 1024), // the only resend
        ]
    );

    // Responses: every packet acknowledged; a SACK per packet after the hole (NAK
    // 0x60, PSN = the first missing, resv7 bit 0, trigger in the MSN field); then the
    // ACK of everything once the hole is filled.
    let mut resp = Vec::new();
    for (_, _, f) in p.trace.iter().filter(|t| !t.1) {
        let pkt = roce_core::wire::parse(f).unwrap();
        let h = pkt.headers();
        let aeth = h.ext.aeth.unwrap();
        resp.push((
            h.bth.psn.value(),
            aeth.syndrome,
            h.bth.resv7,
            aeth.msn.value(),
        ));
    }
    let (ack, nak) = (Syndrome::ACK, Syndrome::Nak(NakCode::PsnSequenceError));
    assert_eq!(
        resp,
        vec![
            (0x100, ack, 0, 1),
            (0x101, ack, 0, 2),
            (0x102, nak, SACK_FLAG, 0x103),
            (0x102, nak, SACK_FLAG, 0x104),
            (0x104, ack, 0, 5),
        ]
    );
}

#[test]
fn mixed_work_under_every_fault() {
    let link = LinkCfg {
        corrupt: 0.01,
        ..LinkCfg::lossy(0.05)
    };
    let o = QpOpts {
        timeout: 6,
        ..sr_qp(32, 3)
    };
    for seed in 0..10 {
        mixed_workload(seed, link, &o, 40);
    }
}

#[test]
fn writes_with_immediate_complete_once_in_order_under_loss() {
    for seed in 0..8 {
        let o = QpOpts {
            timeout: 6,
            ..sr_qp(0, 3)
        };
        let mut p = Pair::with_links(seed, LinkCfg::lossy(0.03));
        let s = writes(&mut p, &o, 12, 6 * 1024 + 3, true);
        assert_eq!(s.landed(&p), s.sent(&p), "seed {seed}");
        let recv: Vec<u32> = p.b.wcs.iter().map(|w| w.imm_data).collect();
        assert_eq!(recv, (0x100..0x10C).collect::<Vec<_>>(), "seed {seed}");
        assert!(p.b.wcs.iter().all(|w| w.byte_len == 6 * 1024 + 3));
        assert_eq!(p.a.wr_ids(), (0..12).collect::<Vec<_>>(), "seed {seed}");
        assert!(all_succeeded(&p));
    }
}

#[test]
fn tail_loss_is_recovered_by_rto_low() {
    // The last packet is lost: nothing after it can draw a SACK, so the timer must
    // fire. RTO_low (code 3: 32.8 us) applies with so few packets in flight; the QP's
    // timeout (code 14: 67 ms) would otherwise.
    let o = sr_67ms(3);
    let mut p = Pair::new(5);
    p.ab.filter = Some(drop_first_copy_of([0x103].into_iter().collect()));
    let s = writes(&mut p, &o, 1, 4 * 1024, false);
    assert_eq!(s.landed(&p), s.sent(&p));
    assert_eq!(p.a.wcs.len(), 1);
    assert!(p.now > 32_768 && p.now < 100_000, "done at {} ns", p.now);
    let ca = *p.a.eng.counters();
    assert_eq!(ca.retransmitted_pkts, 1, "{ca:#?}");
}

#[test]
fn max_inflight_caps_the_psns_in_flight() {
    // Long links (20 us each way) make the cap, not the 128-PSN port window, the limit.
    let cap = 8u32;
    let o = sr_qp(cap as u16, 0);
    let link = LinkCfg {
        delay_ns: 20_000,
        ..LinkCfg::default()
    };
    let mut p = Pair::with_links(2, link);
    p.keep_trace = true;
    writes(&mut p, &o, 4, 16 * 1024, false);
    // The cumulative ACK A can have seen by time t is at most the highest B sent by
    // t - 20 us (every ACK takes at least the propagation delay).
    let mut acks: Vec<(u64, u32)> = Vec::new();
    let mut worst = 0;
    for (t, from_a, f) in &p.trace {
        let s = seen(f).unwrap();
        if !from_a {
            let cum = match s.syndrome {
                Some(Syndrome::Ack(_)) => s.psn.next(),
                _ => s.psn,
            };
            acks.push((*t, cum.value()));
            continue;
        }
        let acked = acks
            .iter()
            .filter(|(ts, _)| ts + link.delay_ns <= *t)
            .map(|a| a.1)
            .max()
            .unwrap_or(0x100);
        let in_flight = Psn::new(s.psn.value()).diff(Psn::new(acked)) + 1;
        worst = worst.max(in_flight);
    }
    assert!(worst as u32 <= cap, "{worst} PSNs in flight");
    assert_eq!(worst as u32, cap, "the cap is what limits");
}

#[test]
fn one_sided_selective_repeat_falls_back_to_go_back_n() {
    // Only one end enables it: the frames of each side are ones the other understands
    // (pieces are ordinary WRITE_ONLYs, a SACK is an ordinary sequence NAK), so the
    // pair works, at Go-Back-N efficiency.
    for (sr_a, sr_b) in [(true, false), (false, true)] {
        for seed in 0..4 {
            let mut p = Pair::with_links(seed, LinkCfg::lossy(0.05));
            let base = QpOpts {
                timeout: 6,
                ..QpOpts::default()
            };
            let oa = QpOpts {
                sr: if sr_a { sr(0, 3) } else { None },
                ..base
            };
            let ob = QpOpts {
                sr: if sr_b { sr(0, 3) } else { None },
                ..base
            };
            let qa = p.a.create_qp(QpType::Rc);
            let qb = p.b.create_qp(QpType::Rc);
            let (ava, avb) = (p.a.av_to(&p.b), p.b.av_to(&p.a));
            bring_up(&mut p.a, qa, QpType::Rc, ava, qb, &oa, 0x100, 0x200);
            bring_up(&mut p.b, qb, QpType::Rc, avb, qa, &ob, 0x200, 0x100);
            let s = Slots::new(&mut p, 10, 5 * 1024 + 1, 3);
            for i in 0..10u64 {
                if i % 2 == 0 {
                    s.post(&mut p, qa, i, WrOp::rdma_write);
                } else {
                    s.recv(&mut p, qb, i);
                    s.post(&mut p, qa, i, |_, _| WrOp::Send);
                }
            }
            p.settle();
            let tag = format!("a {sr_a} b {sr_b} seed {seed}");
            assert_eq!(s.landed(&p), s.sent(&p), "{tag}");
            assert_eq!(p.a.wr_ids(), (0..10).collect::<Vec<_>>(), "{tag}");
            assert_eq!(p.b.wr_ids(), vec![1, 3, 5, 7, 9], "{tag}");
        }
    }
}

#[test]
fn attribute_rules() {
    use roce_core::transport::{AttrMask, QpAttr, QpState, SR_WINDOW};
    let mut p = Pair::new(0);
    // Only at INIT -> RTR on RC, and the cap cannot exceed the bitmap.
    let q = p.a.create_qp(QpType::Rc);
    let mut init = QpAttr::to_state(QpState::Init);
    init.pkey_index = Some(0);
    init.port_num = Some(1);
    init.qp_access_flags = Some(QpOpts::default().access);
    let mut bad = init;
    bad.selective_repeat = sr(0, 0);
    assert!(p.a.eng.modify_qp(q, &bad).is_err());
    p.a.eng.modify_qp(q, &init).unwrap();
    let mut rtr = QpAttr::to_state(QpState::Rtr);
    rtr.ah_attr = Some(p.a.av_to(&p.b));
    rtr.path_mtu = Some(Mtu::Mtu1024);
    rtr.dest_qp_num = Some(roce_core::num::Qpn::new(16));
    rtr.rq_psn = Some(Psn::new(0));
    rtr.max_dest_rd_atomic = Some(1);
    rtr.min_rnr_timer = roce_core::transport::RnrTimer::new(1);
    rtr.selective_repeat = sr(SR_WINDOW as u16 + 1, 0);
    assert!(p.a.eng.modify_qp(q, &rtr).is_err());
    rtr.selective_repeat = sr(SR_WINDOW as u16, 0);
    assert!(rtr.mask().contains(AttrMask::SELECTIVE_REPEAT));
    p.a.eng.modify_qp(q, &rtr).unwrap();
    let uc = p.a.create_qp(QpType::Uc);
    p.a.eng.modify_qp(uc, &init).unwrap();
    let mut rtr_uc = rtr;
    rtr_uc.max_dest_rd_atomic = None;
    rtr_uc.min_rnr_timer = None;
    assert!(p.a.eng.modify_qp(uc, &rtr_uc).is_err());
}

#[test]
fn rnr_naks_work_as_before() {
    // SENDs before any receive is posted: RNR NAKs, then the retry once receives are
    // there; WRITE pieces in between stay placed exactly once.
    let o = QpOpts {
        min_rnr_timer: 1,
        ..sr_qp(0, 3)
    };
    let mut p = Pair::with_links(7, LinkCfg::lossy(0.02));
    let (qa, qb) = p.connect(QpType::Rc, &o);
    let s = Slots::new(&mut p, 6, 3000, 4);
    for i in 0..6u64 {
        if i % 2 == 0 {
            s.post(&mut p, qa, i, |_, _| WrOp::Send);
        } else {
            s.post(&mut p, qa, i, WrOp::rdma_write);
        }
    }
    assert!(!p.run(200_000), "nothing can finish without receives");
    assert!(p.a.eng.counters().rcvd_rnr_err > 0);
    for i in [0u64, 2, 4] {
        s.recv(&mut p, qb, i);
    }
    p.settle();
    assert_eq!(s.landed(&p), s.sent(&p));
    assert_eq!(p.a.wr_ids(), (0..6).collect::<Vec<_>>());
    assert_eq!(p.b.wr_ids(), vec![0, 2, 4]);
    assert!(all_succeeded(&p));
}

#[test]
fn a_full_sack_queue_costs_resends_not_correctness() {
    // The way back is 50x slower than the way out, so SACKs pile up behind each other
    // at B beyond its queue of 16; B overwrites the newest, A resends a little more.
    let o = sr_qp(0, 3);
    let mut p = Pair::new(9);
    p.ba.cfg.ns_per_byte = 4.0;
    p.ab.filter = Some(drop_first_copy_of([0x102, 0x140].into_iter().collect()));
    let s = writes(&mut p, &o, 8, 16 * 1024, false);
    assert_eq!(s.landed(&p), s.sent(&p));
    assert_eq!(p.a.wr_ids(), (0..8).collect::<Vec<_>>());
    let ca = *p.a.eng.counters();
    let cb = *p.b.eng.counters();
    // Fewer SACKs went out than pieces were placed out of order.
    assert!(cb.sent_sack < cb.out_of_seq_request, "{cb:#?}");
    assert!(ca.retransmitted_pkts >= 2, "{ca:#?}");
}
