//! Property tests: random mixes of WRITE / WRITE_WITH_IMM / SEND / READ / FETCH_ADD /
//! CMP_SWAP over a link that drops, duplicates and reorders up to 10 % of frames, with
//! Go-Back-N or (about half the cases) selective repeat.
//!
//! * every signaled WR completes exactly once, in order, with SUCCESS; unsignaled ones
//!   never show up;
//! * every receive completes in order with the right length, opcode and immediate;
//! * remote memory equals a simple sequential model, READ data and atomic results match
//!   it, and no byte outside the regions the operations may touch changes, on either
//!   side.

mod common;

use common::*;
use proptest::prelude::*;
use roce_core::transport::{
    AckTimeout, Mtu, QpType, RecvWr, SendFlags, SendWr, SrAttr, WcOpcode, WcStatus, WrOp,
};

const TARGET: usize = 32 * 1024;
const SLOTS: usize = 8;

#[derive(Clone, Debug)]
enum Op {
    Write {
        off: usize,
        len: usize,
        src: usize,
    },
    WriteImm {
        off: usize,
        len: usize,
        src: usize,
        imm: u32,
    },
    Send {
        len: usize,
        src: usize,
    },
    Read {
        off: usize,
        len: usize,
    },
    FetchAdd {
        slot: usize,
        add: u64,
    },
    CmpSwap {
        slot: usize,
        compare: u64,
        swap: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let range = (0..TARGET).prop_flat_map(|off| (Just(off), 0..=(TARGET - off).min(9000)));
    prop_oneof![
        3 => (range.clone(), 0..4096usize).prop_map(|((off, len), src)| Op::Write { off, len, src }),
        1 => (range.clone(), 0..4096usize, any::<u32>()).prop_map(|((off, len), src, imm)| Op::WriteImm { off, len, src, imm }),
        2 => (0..9000usize, 0..4096usize).prop_map(|(len, src)| Op::Send { len, src }),
        2 => range.prop_map(|(off, len)| Op::Read { off, len }),
        1 => (0..SLOTS, any::<u64>()).prop_map(|(slot, add)| Op::FetchAdd { slot, add }),
        1 => (0..SLOTS, 0..3u64, any::<u64>()).prop_map(|(slot, compare, swap)| Op::CmpSwap { slot, compare, swap }),
    ]
}

fn mtu() -> impl Strategy<Value = Mtu> {
    prop_oneof![
        Just(Mtu::Mtu256),
        Just(Mtu::Mtu512),
        Just(Mtu::Mtu1024),
        Just(Mtu::Mtu2048),
        Just(Mtu::Mtu4096)
    ]
}

fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.0 + b.1 && b.0 < a.0 + a.1
}

#[allow(clippy::too_many_arguments)]
fn run(
    ops: Vec<Op>,
    signaled: Vec<bool>,
    mtu: Mtu,
    drop: f64,
    dup: f64,
    reorder: f64,
    seed: u64,
    bad: Option<usize>,
    sr: Option<(u16, u8)>,
) -> Result<(), TestCaseError> {
    let link = LinkCfg {
        drop,
        dup,
        reorder,
        ..LinkCfg::default()
    };
    let mut p = Pair::with_links(seed, link);
    let o = QpOpts {
        mtu,
        timeout: 7,
        a_psn: (seed as u32) & 0xFF_FFFF,
        b_psn: !(seed as u32) & 0xFF_FFFF,
        sr: sr.map(|(max_inflight, rto_low)| SrAttr {
            enabled: true,
            max_inflight,
            rto_low: AckTimeout::new(rto_low).unwrap_or(AckTimeout::INFINITE),
        }),
        ..QpOpts::default()
    };
    let (qa, qb) = p.connect(QpType::Rc, &o);

    // A: sources (never change), READ destinations, atomic results, and a guard buffer.
    let (src, ka) = p.a.buffer(16 * 1024);
    p.a.mem.fill_pattern(src, 16 * 1024, seed as u8);
    let (rdst, ka_r) = p.a.buffer(ops.len() * 9000 + 1);
    let (ares, ka_at) = p.a.buffer(ops.len() * 8 + 1);
    let _guard_a = p.a.mem.alloc(4096);
    // B: the WRITE/READ target, the atomic slots, receive buffers, and a guard buffer.
    let (tgt, kb) = p.b.buffer(TARGET);
    p.b.mem.fill_pattern(tgt, TARGET, 0x5A);
    let (slots, kb_at) = p.b.buffer(SLOTS * 8);
    let (rbuf, kb_r) = p.b.buffer(ops.len() * 9000 + 1);
    let _guard_b = p.b.mem.alloc(4096);
    let before_a = p.a.mem.snapshot();
    let before_b = p.b.mem.snapshot();

    // The sequential model.
    let a_src = p.a.mem.read(src, 16 * 1024);
    let mut m_tgt = p.b.mem.read(tgt, TARGET);
    let mut m_slots = [0u64; SLOTS];
    let mut m_rdst = vec![0u8; ops.len() * 9000 + 1];
    let mut m_ares = vec![0u8; ops.len() * 8 + 1];
    let mut m_rbuf = vec![0u8; ops.len() * 9000 + 1];
    let mut expect_recv = Vec::new();
    let mut reads_since_fence: Vec<(usize, usize)> = Vec::new();
    let mut writes_since_fence: Vec<(usize, usize)> = Vec::new();

    for (i, op) in ops.iter().enumerate() {
        let id = i as u64;
        if bad == Some(i) {
            // A WRITE with a key the responder does not know: NAK remote access error.
            let wr = SendWr::new(
                id,
                WrOp::rdma_write(tgt, roce_core::num::Rkey(kb.rkey.0 ^ 0x8000)),
            )
            .sge(src, 16, ka.lkey)
            .flags(SendFlags::SIGNALED);
            p.a.post_send(qa, &wr);
            continue;
        }
        if bad.is_some_and(|b| i > b) {
            // Never executed: post it, expect a flush, model nothing. Receives posted for
            // it are flushed too.
            if matches!(op, Op::Send { .. } | Op::WriteImm { .. }) {
                p.b.post_recv(qb, &RecvWr::new(id));
            }
            p.a.post_send(qa, &SendWr::new(id, WrOp::Send).flags(SendFlags::NONE));
            continue;
        }
        let mut flags = if signaled[i] {
            SendFlags::SIGNALED
        } else {
            SendFlags::NONE
        };
        // A write to a range an earlier READ may still be reading waits (fence). With
        // selective repeat, so does a plain WRITE to a range an earlier write may still
        // be filling: its pieces may be placed before the earlier write's missing ones
        // (docs/selective-repeat.md, "Ordering").
        let writes = match *op {
            Op::Write { off, len, .. } | Op::WriteImm { off, len, .. } => Some((off, len)),
            _ => None,
        };
        let placed_early = sr.is_some() && matches!(op, Op::Write { .. });
        if writes.is_some_and(|w| {
            reads_since_fence.iter().any(|&r| overlaps(r, w))
                || (placed_early && writes_since_fence.iter().any(|&e| overlaps(e, w)))
        }) {
            flags = flags | SendFlags::FENCE;
            reads_since_fence.clear();
            writes_since_fence.clear();
        }
        if let Some(w) = writes {
            writes_since_fence.push(w);
        }
        let rb = rbuf + (i * 9000) as u64;
        let wr = match *op {
            Op::Write { off, len, src: s } => {
                let len = len.min(16 * 1024 - s);
                m_tgt[off..off + len].copy_from_slice(&a_src[s..s + len]);
                SendWr::new(id, WrOp::rdma_write(tgt + off as u64, kb.rkey)).sge(
                    src + s as u64,
                    len as u32,
                    ka.lkey,
                )
            }
            Op::WriteImm {
                off,
                len,
                src: s,
                imm,
            } => {
                let len = len.min(16 * 1024 - s);
                m_tgt[off..off + len].copy_from_slice(&a_src[s..s + len]);
                p.b.post_recv(qb, &RecvWr::new(id));
                expect_recv.push((id, WcOpcode::RecvRdmaWithImm, len as u32, Some(imm)));
                SendWr::new(
                    id,
                    WrOp::RdmaWriteWithImm {
                        remote_addr: tgt + off as u64,
                        rkey: kb.rkey,
                        imm,
                    },
                )
                .sge(src + s as u64, len as u32, ka.lkey)
            }
            Op::Send { len, src: s } => {
                let len = len.min(16 * 1024 - s);
                m_rbuf[i * 9000..i * 9000 + len].copy_from_slice(&a_src[s..s + len]);
                // Receive buffer: two SGEs, the split at a random-ish point.
                let cut = (len / 3) as u32;
                p.b.post_recv(
                    qb,
                    &RecvWr::new(id).sge(rb, cut, kb_r.lkey).sge(
                        rb + u64::from(cut),
                        9000 - cut,
                        kb_r.lkey,
                    ),
                );
                expect_recv.push((id, WcOpcode::Recv, len as u32, None));
                SendWr::new(id, WrOp::Send).sge(src + s as u64, len as u32, ka.lkey)
            }
            Op::Read { off, len } => {
                m_rdst[i * 9000..i * 9000 + len].copy_from_slice(&m_tgt[off..off + len]);
                reads_since_fence.push((off, len));
                SendWr::new(id, WrOp::rdma_read(tgt + off as u64, kb.rkey)).sge(
                    rdst + (i * 9000) as u64,
                    len as u32,
                    ka_r.lkey,
                )
            }
            Op::FetchAdd { slot, add } => {
                let old = m_slots[slot];
                m_slots[slot] = old.wrapping_add(add);
                m_ares[i * 8..i * 8 + 8].copy_from_slice(&old.to_le_bytes());
                SendWr::new(
                    id,
                    WrOp::AtomicFetchAndAdd {
                        remote_addr: slots + 8 * slot as u64,
                        rkey: kb_at.rkey,
                        add,
                    },
                )
                .sge(ares + 8 * i as u64, 8, ka_at.lkey)
            }
            Op::CmpSwap {
                slot,
                compare,
                swap,
            } => {
                let old = m_slots[slot];
                if old == compare {
                    m_slots[slot] = swap;
                }
                m_ares[i * 8..i * 8 + 8].copy_from_slice(&old.to_le_bytes());
                SendWr::new(
                    id,
                    WrOp::AtomicCmpAndSwp {
                        remote_addr: slots + 8 * slot as u64,
                        rkey: kb_at.rkey,
                        compare,
                        swap,
                    },
                )
                .sge(ares + 8 * i as u64, 8, ka_at.lkey)
            }
        };
        p.a.post_send(qa, &wr.flags(flags));
    }

    prop_assert!(p.run(120_000_000_000), "did not go idle");

    if let Some(b) = bad {
        // Success for (signaled) WRs before the bad one, one error, then flushes of every
        // later WR, signaled or not; each WR at most once, in order.
        let got: Vec<(u64, WcStatus)> = p.a.wcs.iter().map(|w| (w.wr_id, w.status)).collect();
        let err_at = got.iter().position(|w| w.1 != WcStatus::Success);
        prop_assert!(err_at.is_some(), "no error completion: {:?}", got);
        let e = err_at.unwrap_or(0);
        let (ok, rest) = got.split_at(e);
        prop_assert!(ok
            .iter()
            .all(|w| (w.0 as usize) < b && signaled[w.0 as usize]));
        prop_assert!(ok.windows(2).all(|w| w[0].0 < w[1].0));
        let (first_err, flushed) = rest.split_first().unwrap_or((&(0, WcStatus::Success), &[]));
        if first_err.0 as usize == b {
            // RETRY_EXC_ERR when the NAK itself was lost: the responder, now in ERR,
            // answers nothing more.
            prop_assert!(matches!(
                first_err.1,
                WcStatus::RemAccessErr | WcStatus::RetryExcErr
            ));
        } else {
            // An earlier READ/ATOMIC whose answer was lost when the responder died.
            prop_assert!((first_err.0 as usize) < b);
            prop_assert_eq!(first_err.1, WcStatus::RetryExcErr);
        }
        let want_flushed: Vec<u64> = (first_err.0 + 1..ops.len() as u64).collect();
        let got_flushed: Vec<u64> = flushed.iter().map(|w| w.0).collect();
        prop_assert!(
            flushed.iter().all(|w| w.1 == WcStatus::WrFlushErr),
            "{:?}",
            flushed
        );
        prop_assert_eq!(got_flushed, want_flushed);
        prop_assert_eq!(p.a.state(qa), roce_core::transport::QpState::Err);
        // B executed everything before the bad WR and nothing after it.
        prop_assert!(
            p.b.mem.read(tgt, TARGET) == m_tgt,
            "B target differs from the model"
        );
        let slot_bytes: Vec<u8> = m_slots.iter().flat_map(|v| v.to_le_bytes()).collect();
        prop_assert!(p.b.mem.read(slots, SLOTS * 8) == slot_bytes);
        return Ok(());
    }

    // Completions: exactly the signaled WRs, in order, all successful.
    let got: Vec<(u64, WcStatus)> = p.a.wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    let want: Vec<(u64, WcStatus)> = (0..ops.len())
        .filter(|&i| signaled[i])
        .map(|i| (i as u64, WcStatus::Success))
        .collect();
    prop_assert_eq!(got, want);
    prop_assert_eq!(p.a.eng.query_qp(qa).unwrap().sq_outstanding, 0);
    let recv: Vec<_> =
        p.b.wcs
            .iter()
            .map(|w| {
                (
                    w.wr_id,
                    w.opcode,
                    w.byte_len,
                    (w.opcode == WcOpcode::RecvRdmaWithImm).then_some(w.imm_data),
                )
            })
            .collect();
    prop_assert!(p.b.wcs.iter().all(|w| w.status == WcStatus::Success));
    prop_assert_eq!(recv, expect_recv);

    // Memory: every region equals the model; every other region is untouched.
    let slot_bytes: Vec<u8> = m_slots.iter().flat_map(|v| v.to_le_bytes()).collect();
    for ((base, now), (_, was)) in p.b.mem.snapshot().iter().zip(before_b.iter()) {
        let want: &[u8] = match *base {
            b if b == tgt => &m_tgt,
            b if b == slots => &slot_bytes,
            b if b == rbuf => &m_rbuf,
            _ => was,
        };
        prop_assert!(now == want, "B region {:#x} differs from the model", base);
    }
    for ((base, now), (_, was)) in p.a.mem.snapshot().iter().zip(before_a.iter()) {
        let want: &[u8] = match *base {
            b if b == rdst => &m_rdst,
            b if b == ares => &m_ares,
            _ => was,
        };
        prop_assert!(now == want, "A region {:#x} differs from the model", base);
    }
    Ok(())
}

proptest! {
    // Thousands of random workloads (each a whole two-engine run; about 2 ms apiece in
    // release builds).
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_workloads_over_a_faulty_link(
        ops in prop::collection::vec(op(), 1..24),
        sig_bits in any::<u32>(),
        mtu in mtu(),
        drop in 0.0..0.1f64,
        dup in 0.0..0.1f64,
        reorder in 0.0..0.1f64,
        seed in any::<u64>(),
        sr in prop::option::of((0..64u16, 0..5u8)),
    ) {
        let n = ops.len();
        let signaled: Vec<bool> = (0..n).map(|i| sig_bits & (1 << i) != 0 || i == n - 1).collect();
        run(ops, signaled, mtu, drop, dup, reorder, seed, None, sr)?;
    }

    #[test]
    fn a_bad_rkey_fails_one_wr_and_flushes_the_rest(
        ops in prop::collection::vec(op(), 2..20),
        sig_bits in any::<u32>(),
        bad_at in any::<prop::sample::Index>(),
        mtu in mtu(),
        drop in 0.0..0.1f64,
        dup in 0.0..0.1f64,
        reorder in 0.0..0.1f64,
        seed in any::<u64>(),
        sr in prop::option::of((0..64u16, 0..5u8)),
    ) {
        let n = ops.len();
        let signaled: Vec<bool> = (0..n).map(|i| sig_bits & (1 << i) != 0).collect();
        let b = bad_at.index(n);
        run(ops, signaled, mtu, drop, dup, reorder, seed, Some(b), sr)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// UC: the sender completes everything; the receiver gets an in-order subsequence of
    /// the messages, each one intact, one receive WQE per delivered message.
    #[test]
    fn uc_delivers_an_intact_in_order_subsequence(
        lens in prop::collection::vec(4..6000usize, 1..30),
        mtu in mtu(),
        drop in 0.0..0.1f64,
        dup in 0.0..0.1f64,
        reorder in 0.0..0.1f64,
        seed in any::<u64>(),
    ) {
        let link = LinkCfg { drop, dup, reorder, ..LinkCfg::default() };
        let mut p = Pair::with_links(seed, link);
        let o = QpOpts { mtu, ..QpOpts::default() };
        let (qa, qb) = p.connect(QpType::Uc, &o);
        let n = lens.len();
        let (src, ka) = p.a.buffer(n * 6000);
        p.a.mem.fill_pattern(src, n * 6000, seed as u8);
        let (dst, kb) = p.b.buffer(n * 6000);
        for (i, &len) in lens.iter().enumerate() {
            let s = src + (i * 6000) as u64;
            p.a.mem.write(s, &(i as u32).to_le_bytes());
            p.b.post_recv(qb, &RecvWr::new(i as u64).sge(dst + (i * 6000) as u64, 6000, kb.lkey));
            p.a.post_send(qa, &SendWr::new(i as u64, WrOp::Send).sge(s, len as u32, ka.lkey).flags(SendFlags::SIGNALED));
        }
        prop_assert!(p.run(10_000_000_000));
        let ids: Vec<u64> = p.a.wcs.iter().map(|w| w.wr_id).collect();
        prop_assert_eq!(ids, (0..n as u64).collect::<Vec<_>>());
        let mut last = None;
        for (slot, w) in p.b.wcs.iter().enumerate() {
            prop_assert_eq!(w.status, WcStatus::Success);
            prop_assert_eq!(w.wr_id, slot as u64);
            let got = p.b.mem.read(dst + (slot * 6000) as u64, w.byte_len as usize);
            let i = u32::from_le_bytes([got[0], got[1], got[2], got[3]]) as usize;
            prop_assert!(i < n && last.is_none_or(|l| i > l), "out of order: {} after {:?}", i, last);
            prop_assert_eq!(w.byte_len as usize, lens[i]);
            prop_assert!(got == p.a.mem.read(src + (i * 6000) as u64, lens[i]));
            last = Some(i);
        }
    }
}
