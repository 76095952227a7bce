//! QP contexts moved out of the engine and back (`Engine::evict_qp` / `restore_qp`,
//! `docs/scale.md`): a round trip through the bytes changes nothing a peer could see,
//! WQEs the engine had not started are handed back, a QP with work under way stays, and
//! stored bytes that are not a context are refused without a panic.

mod common;

use common::*;
use roce_core::engine::QP_CTX_LEN;
use roce_core::num::Qpn;
use roce_core::transport::{
    Error, Instant, QpInitAttr, QpType, SendFlags, SendWr, SrAttr, WcStatus, WrOp,
};

/// Moves `qpn` out of the engine and back, through a different slot when `shift`
/// (another QP takes its slot meanwhile). Returns whether it could.
fn round_trip(n: &mut Node, qpn: Qpn, shift: bool, now: u64) -> bool {
    if !n.eng.qp_evictable(qpn) {
        return false;
    }
    let before = format!("{:?} {:?}", n.eng.qp_context(qpn), n.eng.qp_cc(qpn));
    let mut ctx = [0u8; QP_CTX_LEN];
    let handed = n.eng.evict_qp(qpn, &mut ctx).unwrap();
    let info = n.eng.query_qp(qpn);
    assert_eq!(info, Err(Error::NoSuchQp(qpn)), "evicted QP still answers");
    // No WQE was held: this workload posts nothing the responder side fetches.
    assert_eq!((handed.sq_wqes, handed.rq_wqes), (0, 0));
    let squatter = shift.then(|| {
        let q = Qpn::new(0x400 + qpn.value());
        n.eng
            .create_qp_with(
                q,
                &QpInitAttr {
                    qp_type: QpType::Rc,
                    pd: n.pd,
                    send_cq: n.cq.0,
                    recv_cq: n.cq.0,
                    sq_sig_all: false,
                    max_inline_data: 0,
                    srq: None,
                },
            )
            .unwrap()
    });
    n.eng
        .restore_qp(qpn, &ctx, Instant::from_nanos(now))
        .unwrap();
    if let Some(q) = squatter {
        n.eng.destroy_qp(q).unwrap();
    }
    let after = format!("{:?} {:?}", n.eng.qp_context(qpn), n.eng.qp_cc(qpn));
    assert_eq!(before, after);
    true
}

/// Every frame on the wire: time, sent by A, bytes.
type Trace = Vec<(u64, bool, Vec<u8>)>;

/// WRITEs, READs and FETCH_ADDs over a lossy link; with `evict`, B's QP leaves the
/// engine and comes back after every step where it may. Returns what a peer sees: every
/// frame on the wire, both sides' completions and memory.
fn run(seed: u64, sr: bool, evict: bool) -> (Trace, String, usize) {
    let o = QpOpts {
        sr: sr.then_some(SrAttr {
            enabled: true,
            max_inflight: 0,
            rto_low: Default::default(),
        }),
        ..QpOpts::default()
    };
    let mut p = Pair::with_links(seed, LinkCfg::lossy(0.05));
    p.keep_trace = true;
    let (qa, qb) = p.connect(QpType::Rc, &o);
    let n = 24;
    let len = 2 * 1024 + 5;
    let (src, ka) = p.a.buffer(len * n);
    p.a.mem.fill_pattern(src, len * n, 1);
    let (dst, kb) = p.b.buffer(len * n);
    p.b.mem.fill_pattern(dst, len * n, 2);
    let (rdst, ka2) = p.a.buffer(len * n);
    let (ctr, kb3) = p.b.buffer(8);
    let (old, ka3) = p.a.buffer(8 * n);
    for i in 0..n {
        let off = (i * len) as u64;
        let wr = match i % 3 {
            0 => SendWr::new(i as u64, WrOp::rdma_write(dst + off, kb.rkey)).sge(
                src + off,
                len as u32,
                ka.lkey,
            ),
            1 => SendWr::new(i as u64, WrOp::rdma_read(dst + off, kb.rkey)).sge(
                rdst + off,
                len as u32,
                ka2.lkey,
            ),
            _ => SendWr::new(
                i as u64,
                WrOp::AtomicFetchAndAdd {
                    remote_addr: ctr,
                    rkey: kb3.rkey,
                    add: 1,
                },
            )
            .sge(old + 8 * i as u64, 8, ka3.lkey),
        };
        p.a.post_send(qa, &wr.flags(SendFlags::SIGNALED | SendFlags::FENCE));
    }
    let mut trips = 0;
    for step in 0..2_000_000u32 {
        let more = p.step();
        if evict && round_trip(&mut p.b, qb, step % 2 == 1, p.now) {
            trips += 1;
        }
        p.a.poll();
        p.b.poll();
        if !more {
            break;
        }
    }
    assert_eq!(
        p.a.wr_ids(),
        (0..n as u64).collect::<Vec<_>>(),
        "seed {seed}"
    );
    assert!(p.a.wcs.iter().all(|w| w.status == WcStatus::Success));
    let seen = format!(
        "{:?} {:?} {:?} {:?}",
        p.a.wcs,
        p.b.wcs,
        p.a.mem.snapshot(),
        p.b.mem.snapshot()
    );
    (p.trace, seen, trips)
}

#[test]
fn a_round_trip_through_the_store_changes_nothing_on_the_wire() {
    for (seed, sr) in [(1, false), (2, false), (3, true), (4, true)] {
        let (wire, seen, _) = run(seed, sr, false);
        let (wire_e, seen_e, trips) = run(seed, sr, true);
        assert!(trips > 50, "seed {seed}: only {trips} round trips");
        assert_eq!(wire.len(), wire_e.len(), "seed {seed}");
        assert!(wire == wire_e, "seed {seed}: frames differ");
        assert_eq!(seen, seen_e, "seed {seed}");
    }
}

#[test]
fn unstarted_wqes_are_handed_back_and_a_started_one_pins_the_qp() {
    let mut p = Pair::new(9);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer(4096);
    let (dst, kb) = p.b.buffer(4096);
    p.a.mem.fill_pattern(src, 4096, 5);
    let wr = |i: u64| {
        SendWr::new(i, WrOp::rdma_write(dst + i * 1024, kb.rkey))
            .sge(src + i * 1024, 1024, ka.lkey)
            .flags(SendFlags::SIGNALED)
    };
    for i in 0..3 {
        p.a.post_send(qa, &wr(i));
    }
    // Nothing sent yet: the three WQEs go back to the "host ring".
    let mut ctx = [0u8; QP_CTX_LEN];
    let handed = p.a.eng.evict_qp(qa, &mut ctx).unwrap();
    assert_eq!((handed.sq_wqes, handed.rq_wqes), (3, 0));
    p.a.eng.restore_qp(qa, &ctx, Instant::ZERO).unwrap();
    assert_eq!(p.a.eng.query_qp(qa).unwrap().sq_outstanding, 0);
    for i in 0..3 {
        p.a.post_send(qa, &wr(i));
    }
    // One frame out: the first WQE started, the QP stays.
    let mut buf = vec![0u8; 9000];
    assert!(p
        .a
        .eng
        .poll_transmit(Instant::ZERO, &mut buf, &mut p.a.mem)
        .is_some());
    assert!(!p.a.eng.qp_evictable(qa));
    assert_eq!(
        p.a.eng.evict_qp(qa, &mut ctx),
        Err(Error::Busy { what: "QP" })
    );
    p.settle();
    assert_eq!(p.a.wr_ids(), vec![0, 1, 2]);
    assert_eq!(p.b.mem.read(dst, 3072), p.a.mem.read(src, 3072));
    // Idle again: it may go.
    assert!(p.a.eng.qp_evictable(qa));
    assert!(p.b.eng.qp_evictable(qb));
}

#[test]
fn stored_bytes_that_are_not_the_context_are_refused() {
    let mut p = Pair::new(11);
    let (qa, _) = p.connect(QpType::Rc, &QpOpts::default());
    let mut ctx = [0u8; QP_CTX_LEN];
    p.a.eng.evict_qp(qa, &mut ctx).unwrap();
    let bad = Err(Error::BadContext(qa));
    // Any flipped bit: the CRC.
    let mut rng = Rng::new(3);
    for _ in 0..200 {
        let mut c = ctx;
        let i = rng.below(QP_CTX_LEN as u64) as usize;
        c[i] ^= 1 << rng.below(8);
        assert_eq!(p.a.eng.restore_qp(qa, &c, Instant::ZERO), bad);
    }
    // Another QP's context, with a valid CRC.
    assert_eq!(
        p.a.eng
            .restore_qp(Qpn::new(qa.value() + 1), &ctx, Instant::ZERO),
        { Err(Error::BadContext(Qpn::new(qa.value() + 1))) }
    );
    // Random bytes with a valid CRC: refused or accepted, never a panic.
    for _ in 0..2000 {
        let mut c = ctx;
        for _ in 0..1 + rng.below(8) {
            let i = rng.below((QP_CTX_LEN - 4) as u64) as usize;
            c[i] = rng.next_u64() as u8;
        }
        let sum = crc32fast::hash(&c[..QP_CTX_LEN - 4]);
        c[QP_CTX_LEN - 4..].copy_from_slice(&sum.to_le_bytes());
        if p.a.eng.restore_qp(qa, &c, Instant::ZERO).is_ok() {
            let mut again = [0u8; QP_CTX_LEN];
            // Accepted: it is a QP like any other (it may have to settle first).
            let _ = p.a.eng.evict_qp(qa, &mut again);
            if p.a.eng.query_qp(qa).is_ok() {
                p.a.eng.destroy_qp(qa).unwrap();
                let q = p.a.create_qp(QpType::Rc);
                p.a.eng.evict_qp(q, &mut ctx).unwrap();
                assert_eq!(q, qa);
            }
        }
    }
    assert_eq!(p.a.eng.restore_qp(qa, &ctx, Instant::ZERO), Ok(()));
}
