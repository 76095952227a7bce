//! The fast-path model (`roce_core::fastpath`, `docs/fastpath.md`) against the engine,
//! which stays the reference: the segmenter must put the engine's frames on the wire
//! byte for byte, and the receive placement must leave the engine's memory, PSNs and
//! ACKs.

mod common;

use common::{Node, Pair, QpOpts};
use proptest::prelude::*;
use roce_core::fastpath::{self, layout, MsgOp, TxMsg};
use roce_core::memory::MrKeys;
use roce_core::num::{Psn, Qpn};
use roce_core::transport::{Instant, Mtu, QpType, RecvWr, SendWr, SgList, Sge, WrOp};
use roce_core::wire;

/// One message of a random mix: its operation (0 SEND, 1 SEND_WITH_IMM, 2 WRITE,
/// 3 WRITE_WITH_IMM, 4 READ, 5 CMP_AND_SWP, 6 FETCH_AND_ADD), length, and how its SGEs
/// cut it.
#[derive(Clone, Debug)]
struct Msg {
    op: u8,
    len: u32,
    cuts: Vec<u32>,
}

fn msg() -> impl Strategy<Value = Msg> {
    (
        0u8..7,
        0u32..9000,
        proptest::collection::vec(1u32..4000, 0..3),
    )
        .prop_map(|(op, len, cuts)| Msg { op, len, cuts })
}

fn mtu() -> impl Strategy<Value = Mtu> {
    prop_oneof![Just(Mtu::Mtu256), Just(Mtu::Mtu1024), Just(Mtu::Mtu4096)]
}

/// The SGEs of a `len`-byte message in `buf`, cut at `cuts` (at most four).
fn sges(buf: u64, keys: MrKeys, len: u32, cuts: &[u32]) -> SgList {
    let mut out = SgList::new();
    let mut at = 0;
    for c in cuts {
        let n = (*c).min(len - at);
        if n > 0 && out.len() < 3 {
            out.push(Sge {
                addr: buf + u64::from(at),
                length: n,
                lkey: keys.lkey,
            })
            .unwrap();
            at += n;
        }
    }
    out.push(Sge {
        addr: buf + u64::from(at),
        length: len - at,
        lkey: keys.lkey,
    })
    .unwrap();
    out
}

/// The engine's WR and the model's descriptor for one message.
fn describe(
    m: &Msg,
    src: (u64, MrKeys),
    dst: (u64, MrKeys),
    qpn: Qpn,
    psn: Psn,
) -> (SendWr, TxMsg) {
    let (va, rkey) = (dst.0, dst.1.rkey);
    let (wr_op, op) = match m.op {
        0 => (WrOp::Send, MsgOp::Send),
        1 => (
            WrOp::SendWithImm {
                imm: 0xA5A5_0000 | m.len,
            },
            MsgOp::SendWithImm(0xA5A5_0000 | m.len),
        ),
        2 => (
            WrOp::RdmaWrite {
                remote_addr: va,
                rkey,
            },
            MsgOp::Write,
        ),
        3 => (
            WrOp::RdmaWriteWithImm {
                remote_addr: va,
                rkey,
                imm: m.len,
            },
            MsgOp::WriteWithImm(m.len),
        ),
        4 => (
            WrOp::RdmaRead {
                remote_addr: va,
                rkey,
            },
            MsgOp::Read,
        ),
        5 => (
            WrOp::AtomicCmpAndSwp {
                remote_addr: va,
                rkey,
                compare: u64::from(m.len),
                swap: 0x1234_5678_9ABC_DEF0,
            },
            MsgOp::CmpSwap {
                compare: u64::from(m.len),
                swap: 0x1234_5678_9ABC_DEF0,
            },
        ),
        _ => (
            WrOp::AtomicFetchAndAdd {
                remote_addr: va,
                rkey,
                add: u64::from(m.len),
            },
            MsgOp::FetchAdd {
                add: u64::from(m.len),
            },
        ),
    };
    // An atomic's one SGE holds the 8 bytes that come back.
    let (len, cuts) = if m.op >= 5 {
        (8, &[][..])
    } else {
        (m.len, &m.cuts[..])
    };
    let sg_list = sges(src.0, src.1, len, cuts);
    let mut wr = SendWr::new(u64::from(m.len), wr_op);
    wr.sg_list = sg_list.clone();
    let desc = TxMsg {
        qpn,
        op,
        solicited: false,
        sges: sg_list,
        length: len,
        remote_addr: va,
        rkey,
        first_psn: psn,
        replay: false,
        wqe_index: 0,
        start_pkt: 0,
        end_pkt: 0,
    };
    (wr, desc)
}

/// Frames `a` sent since trace entry `from`.
fn sent_by_a(p: &Pair, from: usize) -> Vec<Vec<u8>> {
    p.trace[from..]
        .iter()
        .filter(|t| t.1)
        .map(|t| t.2.clone())
        .collect()
}

fn recv_wr(n: &mut Node, len: usize) -> RecvWr {
    let (addr, keys) = n.buffer(len);
    let mut wr = RecvWr {
        wr_id: 7,
        sg_list: SgList::new(),
    };
    wr.sg_list
        .push(Sge {
            addr,
            length: len as u32,
            lkey: keys.lkey,
        })
        .unwrap();
    wr
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random SEND / WRITE mixes at random MTUs, selective repeat on or off: the
    /// segmenter, given the send context the engine hands out at bring-up and one
    /// descriptor per WQE, writes exactly the engine's frames, and its context follows
    /// the engine's requester (next PSN, packets since AckReq).
    #[test]
    fn segmenter_frames_equal_the_engines(mtu in mtu(), sr in any::<bool>(), msgs in proptest::collection::vec(msg(), 1..6)) {
        let mut p = Pair::new(1);
        p.keep_trace = true;
        let o = QpOpts {
            mtu,
            sr: sr.then(|| roce_core::transport::SrAttr { enabled: true, ..Default::default() }),
            ..QpOpts::default()
        };
        let (qa, qb) = p.connect(QpType::Rc, &o);
        let src = p.a.buffer(9000);
        let dst = p.b.buffer(9000);
        p.a.mem.fill_pattern(src.0, 9000, 3);
        let mut ctx = p.a.eng.fastpath_send_ctx(qa).unwrap();
        let mut buf = vec![0u8; 9000];
        for m in &msgs {
            if matches!(m.op, 0 | 1 | 3) {
                let wr = recv_wr(&mut p.b, 9000);
                p.b.post_recv(qb, &wr);
            }
            // The firmware's part: the acknowledged PSN it learnt from ACKs.
            ctx.una_psn = p.a.eng.fastpath_send_ctx(qa).unwrap().una_psn;
            let (wr, desc) = describe(m, src, dst, qa, ctx.next_psn);
            let from = p.trace.len();
            p.a.post_send(qa, &wr);
            p.settle();
            // Through the byte layout, as the firmware hands it to the hardware.
            let desc = layout::decode_txd(&layout::encode_txd(&desc)).unwrap();
            let engine = sent_by_a(&p, from);
            let (start, end) = desc.range(mtu);
            prop_assert_eq!(engine.len() as u32, end - start);
            for (k, want) in (start..end).zip(engine.iter()) {
                let len = fastpath::segment(&mut ctx, &desc, k, &mut p.a.mem, &mut buf).unwrap();
                prop_assert_eq!(&buf[..len], &want[..], "packet {} of {:?}", k, m);
            }
            let eng = p.a.eng.fastpath_send_ctx(qa).unwrap();
            prop_assert_eq!(ctx.next_psn, eng.next_psn);
            prop_assert_eq!(ctx.noack, eng.noack);
        }
    }

    /// A receiver whose packets go through the placement model first, and to its
    /// engine (the firmware) only as exceptions, ends with the same memory, ePSN and
    /// MSN as an engine that received them all, and sends the same ACKs byte for byte:
    /// random WRITE sizes at random MTUs, with duplicated frames in the stream (which
    /// the model must hand to the firmware).
    #[test]
    fn placement_leaves_the_engines_memory_and_acks(mtu in mtu(), lens in proptest::collection::vec(1u32..8000, 1..6), dups in proptest::collection::vec(any::<bool>(), 64)) {
        // The reference run: A writes, B's engine receives everything.
        let Writer { mut p, o, qa, qb, src, dst } = writer(mtu);
        // The model's receiver: a second B, built the same way.
        let mut q = Pair::new(2);
        let (_, qb2) = q.connect(QpType::Rc, &o);
        q.a.buffer(9000);
        let dst2 = q.b.buffer(9000);
        prop_assert_eq!(dst.0, dst2.0);
        let mut ctx = q.b.eng.fastpath_recv_ctx(qb2).unwrap();
        let tx = q.b.eng.fastpath_send_ctx(qb2).unwrap();
        let mut dup = dups.iter().cycle();
        let mut buf = vec![0u8; 9000];
        let now = Instant::ZERO;
        for (i, len) in lens.iter().enumerate() {
            let m = Msg { op: 2, len: *len, cuts: vec![] };
            let dst_i = (dst.0 + (i as u64 * 7) % 64, dst.1);
            let (wr, _) = describe(&m, src, dst_i, qa, Psn::ZERO);
            let from = p.trace.len();
            p.a.post_send(qa, &wr);
            p.settle();
            let want: Vec<Vec<u8>> = p.trace[from..].iter().filter(|t| !t.1).map(|t| t.2.clone()).collect();
            let mut got = Vec::new();
            for f in sent_by_a(&p, from) {
                let copies = if *dup.next().unwrap() { 2 } else { 1 };
                for copy in 0..copies {
                    let pkt = wire::parse(&f).unwrap();
                    let out = fastpath::receive(&mut ctx, &pkt, q.b.eng.memory(), &mut q.b.mem, 0);
                    if out.answered.is_some() {
                        // A duplicate, ACKed again by the PSN rule (`answers_as_the_engine`
                        // checks those ACKs).
                        prop_assert!(copy == 1, "an in-order packet was not placed");
                        continue;
                    }
                    if out.placed {
                        prop_assert!(copy == 0, "a duplicate was placed");
                        q.b.eng.fastpath_load_recv(qb2, &ctx).unwrap();
                        if let Some(ack) = out.ack {
                            let n = fastpath::ack_frame(&tx, &ack, &mut buf).unwrap();
                            got.push(buf[..n].to_vec());
                        }
                        continue;
                    }
                    // An exception: the firmware (the engine) handles the frame and
                    // writes the context back.
                    q.b.eng.handle_packet(now, &f, &mut q.b.mem);
                    while let Some(n) = q.b.eng.poll_transmit(now, &mut buf, &mut q.b.mem) {
                        if copy == 0 {
                            got.push(buf[..n].to_vec());
                        }
                    }
                    ctx = q.b.eng.fastpath_recv_ctx(qb2).unwrap();
                }
            }
            prop_assert_eq!(got, want);
        }
        prop_assert_eq!(q.b.mem.snapshot(), p.b.mem.snapshot());
        let (r1, r2) = (p.b.eng.fastpath_recv_ctx(qb).unwrap(), q.b.eng.fastpath_recv_ctx(qb2).unwrap());
        prop_assert_eq!((r1.epsn, r1.msn), (r2.epsn, r2.msn));
    }
}

/// One receiver's side of `answers_as_the_engine`: what it sent for each frame it took,
/// and its counters `out_of_seq_request` and `duplicate_request`.
struct Receiver {
    pair: Pair,
    qpn: Qpn,
    sent: Vec<Vec<u8>>,
    answered: [u64; 2],
    /// READ and atomic requests the model took itself.
    reads: u32,
}

impl Receiver {
    /// The engine's frames after it took one, as the firmware sends them.
    fn engine_frames(&mut self) {
        let mut buf = vec![0u8; 9000];
        while let Some(n) =
            self.pair
                .b
                .eng
                .poll_transmit(Instant::ZERO, &mut buf, &mut self.pair.b.mem)
        {
            self.sent.push(buf[..n].to_vec());
        }
    }

    fn counters(&self) -> [u64; 2] {
        let c = self.pair.b.eng.counters();
        [
            c.out_of_seq_request + self.answered[0],
            c.duplicate_request + self.answered[1],
        ]
    }
}

/// The sending side of the receiver tests: a traced pair with an RC QP at `mtu` and a
/// 9,000-byte buffer at each end, A's filled with pattern 5. `receiver` builds its B
/// the same way, so that this pair's frames are the receiver's.
struct Writer {
    p: Pair,
    o: QpOpts,
    qa: Qpn,
    qb: Qpn,
    src: (u64, MrKeys),
    dst: (u64, MrKeys),
}

fn writer(mtu: Mtu) -> Writer {
    let mut p = Pair::new(2);
    p.keep_trace = true;
    // READ resources the receive context holds (`fastpath::RD_MAX`): the hardware
    // answers the QP's READs.
    let o = QpOpts {
        mtu,
        max_rd_atomic: fastpath::RD_MAX,
        max_dest_rd_atomic: fastpath::RD_MAX,
        ..QpOpts::default()
    };
    let (qa, qb) = p.connect(QpType::Rc, &o);
    let src = p.a.buffer(9000);
    let dst = p.b.buffer(9000);
    p.a.mem.fill_pattern(src.0, 9000, 5);
    Writer {
        p,
        o,
        qa,
        qb,
        src,
        dst,
    }
}

/// The receivers of `answers_as_the_engine`: built as `p`'s B (the same QPN, buffers
/// and receive WQEs), so that `p`'s frames are theirs.
fn receiver(o: &QpOpts, msgs: &[Msg]) -> Receiver {
    let mut pair = Pair::new(2);
    let (_, qpn) = pair.connect(QpType::Rc, o);
    pair.a.buffer(9000);
    // The bytes a READ reads: the model's responses carry them as the engine's do.
    let dst = pair.b.buffer(9000);
    pair.b.mem.fill_pattern(dst.0, 9000, 6);
    for m in msgs {
        if matches!(m.op, 0 | 1 | 3) {
            let wr = recv_wr(&mut pair.b, 9000);
            pair.b.post_recv(qpn, &wr);
        }
    }
    Receiver {
        pair,
        qpn,
        sent: Vec::new(),
        answered: [0; 2],
        reads: 0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Requests out of sequence and duplicates (`docs/fastpath.md` §3.4): a receiver
    /// whose packets go through the placement model first (the engine, as the
    /// firmware, gets only its exceptions) answers a stream with losses, duplicates and
    /// Go-Back-N resends exactly as an engine that takes every packet: the same frames
    /// (one NAK "PSN sequence error" per gap, a duplicate SEND/WRITE ACKed again with
    /// the current MSN), the same memory, completions, ePSN and MSN, and the same
    /// out-of-sequence and duplicate counts (the model's answers added to its engine's).
    #[test]
    fn answers_as_the_engine(
        mtu in mtu(),
        msgs in proptest::collection::vec(msg(), 1..6),
        walk in proptest::collection::vec(any::<u16>(), 0..120),
    ) {
        // The sender's frames: A's, to a B that takes them all.
        let Writer { mut p, o, qa, qb, src, dst } = writer(mtu);
        p.b.mem.fill_pattern(dst.0, 9000, 6);
        for m in &msgs {
            if matches!(m.op, 0 | 1 | 3) {
                let wr = recv_wr(&mut p.b, 9000);
                p.b.post_recv(qb, &wr);
            }
        }
        for (i, m) in msgs.iter().enumerate() {
            let at = if m.op >= 5 { (i as u64 * 8) % 64 } else { (i as u64 * 7) % 64 };
            let (wr, _) = describe(m, src, (dst.0 + at, dst.1), qa, Psn::ZERO);
            p.a.post_send(qa, &wr);
        }
        p.settle();
        let frames = sent_by_a(&p, 0);
        // The order B's two copies take them in: in order, a frame lost (later ones out
        // of sequence until the resend), an earlier one again, a resend from the loss.
        let mut order = Vec::new();
        let (mut c, mut lost) = (0, None);
        for w in &walk {
            match w % 6 {
                0..=2 if c < frames.len() => {
                    order.push(c);
                    c += 1;
                }
                3 if c < frames.len() => {
                    lost.get_or_insert(c);
                    c += 1;
                }
                4 if c > 0 => order.push(usize::from(w / 6) % c),
                5 => c = lost.take().unwrap_or(c),
                _ => {}
            }
        }
        order.extend(lost.unwrap_or(c).min(c)..frames.len());
        let mut reference = receiver(&o, &msgs);
        let mut model = receiver(&o, &msgs);
        prop_assert_eq!(reference.qpn, qb);
        let tx = model.pair.b.eng.fastpath_send_ctx(qb).unwrap();
        // The model answers in-sequence READs itself (§3.4): its engine records them.
        model.pair.b.eng.set_fastpath_reads(true);
        let mut ctx = model.pair.b.eng.fastpath_recv_ctx(qb).unwrap();
        prop_assert!(ctx.reads);
        let mut buf = vec![0u8; 9000];
        for &i in &order {
            let f = &frames[i];
            reference.pair.b.eng.handle_packet(Instant::ZERO, f, &mut reference.pair.b.mem);
            reference.engine_frames();
            let pkt = wire::parse(f).unwrap();
            let m = &mut model.pair.b;
            let out = fastpath::receive(&mut ctx, &pkt, m.eng.memory(), &mut m.mem, 0);
            if out.is_exception() {
                // The firmware: the engine takes the frame where the hardware stopped,
                // and its receive state goes back.
                m.eng.fastpath_load_recv(qb, &ctx).unwrap();
                m.eng.handle_packet(Instant::ZERO, f, &mut m.mem);
                model.engine_frames();
                ctx = model.pair.b.eng.fastpath_recv_ctx(qb).unwrap();
                continue;
            }
            match out.event {
                Some(fastpath::Event::MsgDone { byte_len, solicited, .. }) => {
                    // (The engine takes the context at the next exception.)
                    let _ = m.eng.fastpath_msg_done(qb, true, byte_len, solicited, false);
                }
                Some(fastpath::Event::Read { psn, va, rkey, len, .. }) => {
                    model.reads += 1;
                    m.eng.fastpath_load_recv(qb, &ctx).unwrap();
                    m.eng.fastpath_read_taken(qb, psn, va, rkey, len);
                }
                // An atomic the model executed (§3.4, "Atomic requests"): its engine
                // keeps the original value for a duplicate.
                Some(fastpath::Event::Atomic { psn, orig, .. }) => {
                    model.reads += 1;
                    m.eng.fastpath_load_recv(qb, &ctx).unwrap();
                    m.eng.fastpath_atomic_taken(qb, psn, orig);
                }
                _ => m.eng.fastpath_load_recv(qb, &ctx).unwrap(),
            }
            match out.answered {
                Some(fastpath::Answered::OutOfSequence) => model.answered[0] += 1,
                Some(fastpath::Answered::Duplicate) => model.answered[1] += 1,
                None => {}
            }
            if let Some(ack) = out.ack {
                let n = fastpath::ack_frame(&tx, &ack, &mut buf).unwrap();
                model.sent.push(buf[..n].to_vec());
            }
            if let Some(a) = out.atomic {
                let n = fastpath::atomic_ack_frame(&tx, &a, &mut buf).unwrap();
                model.sent.push(buf[..n].to_vec());
            }
            if let Some(mut r) = out.read {
                while !r.done() {
                    let n = fastpath::read_response(&tx, &mut r, model.pair.b.eng.memory(), &mut model.pair.b.mem, &mut buf).unwrap();
                    model.sent.push(buf[..n].to_vec());
                }
            }
        }
        prop_assert_eq!(&model.sent, &reference.sent);
        prop_assert_eq!(model.counters(), reference.counters());
        prop_assert_eq!(model.pair.b.mem.snapshot(), reference.pair.b.mem.snapshot());
        prop_assert_eq!(model.pair.b.poll(), reference.pair.b.poll());
        // The state the hardware advanced goes to the engine as the firmware hands it
        // over (before it next handles a request of the QP, or takes the QP off).
        model.pair.b.eng.fastpath_load_recv(qb, &ctx).unwrap();
        let (r1, r2) = (
            reference.pair.b.eng.fastpath_recv_ctx(qb).unwrap(),
            model.pair.b.eng.fastpath_recv_ctx(qb).unwrap(),
        );
        prop_assert_eq!((r1.epsn, r1.msn, r1.nak_sent), (r2.epsn, r2.msn, r2.nak_sent));
        // A SEND the engine started and the model finished was completed at its
        // MSG_DONE (which took no context): the state loaded since owes it nothing, and
        // the QP may leave the context cache as the reference's may.
        prop_assert_eq!(
            model.pair.b.eng.qp_evictable(qb),
            reference.pair.b.eng.qp_evictable(qb)
        );
        // The model answered every request out of sequence itself (its engine met none;
        // with the counts equal, the reference's went to the model's answers).
        prop_assert_eq!(model.pair.b.eng.counters().out_of_seq_request, 0);
        // A READ of some bytes, or an atomic, delivered first, in sequence, was the
        // model's.
        let first = wire::parse(&frames[0]).unwrap();
        let read_first = order.first() == Some(&0)
            && (first.opcode() == roce_core::wire::Opcode::RC_RDMA_READ_REQUEST
                && first.reth().is_some_and(|r| r.dma_len > 0)
                || first.atomic_eth().is_some());
        prop_assert!(!read_first || model.reads > 0, "a READ or atomic the model could take went to the engine");
    }
}

/// A READ response checks its region again before it goes (`fastpath::read_response`,
/// as the engine's `resp_prepare` and rxe's `rxe_recheck_mr`): against a table without
/// the key (the region deregistered since the request) nothing is sent and the
/// descriptor stays as it was; against the engine's table the response goes.
#[test]
fn a_read_response_of_a_region_gone_is_not_sent() {
    let Writer {
        mut p,
        qa,
        qb,
        src,
        dst,
        ..
    } = writer(Mtu::Mtu1024);
    let m = Msg {
        op: 4,
        len: 3000,
        cuts: vec![],
    };
    let (wr, _) = describe(&m, src, dst, qa, Psn::ZERO);
    p.a.post_send(qa, &wr);
    p.settle();
    let frames = sent_by_a(&p, 0);
    let request = frames
        .iter()
        .find(|f| wire::parse(f).unwrap().opcode() == wire::Opcode::RC_RDMA_READ_REQUEST)
        .expect("A sent the READ request");
    // A second B, which the request reaches in sequence.
    let mut q = Pair::new(2);
    let (_, qb2) = q.connect(
        QpType::Rc,
        &QpOpts {
            mtu: Mtu::Mtu1024,
            max_dest_rd_atomic: fastpath::RD_MAX,
            ..QpOpts::default()
        },
    );
    assert_eq!(qb, qb2);
    q.a.buffer(9000);
    q.b.buffer(9000);
    q.b.eng.set_fastpath_reads(true);
    let mut ctx = q.b.eng.fastpath_recv_ctx(qb2).unwrap();
    let tx = q.b.eng.fastpath_send_ctx(qb2).unwrap();
    let pkt = wire::parse(request).unwrap();
    let out = fastpath::receive(&mut ctx, &pkt, q.b.eng.memory(), &mut q.b.mem, 0);
    let mut r = out.read.expect("the model took the READ");
    let before = r;
    let mut buf = vec![0u8; 9000];
    let gone = fastpath::MrTable::<4>::default();
    assert_eq!(
        fastpath::read_response(&tx, &mut r, &gone, &mut q.b.mem, &mut buf),
        Err(fastpath::TxError::Access)
    );
    assert_eq!(r, before);
    let n = fastpath::read_response(&tx, &mut r, q.b.eng.memory(), &mut q.b.mem, &mut buf)
        .expect("the region is the engine's");
    assert_eq!(
        wire::parse(&buf[..n]).unwrap().opcode(),
        wire::Opcode::RC_RDMA_READ_RESPONSE_FIRST
    );
}
