//! The byte layouts of `docs/fastpath.md` (`roce_core::fastpath::layout`): two entries
//! typed byte by byte from the document's tables, and round trips of every object
//! (random descriptors and events, the contexts of a connected QP).

mod common;

use common::{Pair, QpOpts};
use proptest::prelude::*;
use roce_core::fastpath::layout::{self, Invalid};
use roce_core::fastpath::{self, AckDesc, Event, Exception, MrEntry, MsgOp, RecvCtx, TxMsg};
use roce_core::num::{Lkey, Msn, Psn, Qpn, Rkey};
use roce_core::transport::{QpType, Sge};
use roce_core::wire::aeth::Syndrome;
use roce_core::wire::icrc::IcrcKind;
use roce_core::wire::{Opcode, RxMeta};

fn sge(addr: u64, length: u32) -> Sge {
    Sge {
        addr,
        length,
        lkey: Lkey(0),
    }
}

/// §2.2, field by field: an RDMA_WRITE_WITH_IMM of 0x1000 bytes over two SGEs.
#[test]
fn tx_descriptor_bytes_follow_the_table() {
    let mut sges = heapless::Vec::new();
    sges.push(sge(0x0102_0304_0506_0708, 0x800)).unwrap();
    sges.push(sge(0x1112_1314_1516_1718, 0x800)).unwrap();
    let m = TxMsg {
        qpn: Qpn::new(0x12_3456),
        op: MsgOp::WriteWithImm(0xAABB_CCDD),
        solicited: true,
        replay: true,
        wqe_index: 0x0102,
        sges,
        length: 0x1000,
        remote_addr: 0x1122_3344_5566_7788,
        rkey: Rkey(0x99AA_BBCC),
        first_psn: Psn::new(0xAB_CDEF),
        start_pkt: 3,
        end_pkt: 7,
    };
    #[rustfmt::skip]
    let want: [u8; 96] = [
        0x56, 0x34, 0x12,             // 0 qpn
        4,                            // 3 op RDMA_WRITE_WITH_IMM
        0b11,                         // 4 flags SE | REPLAY
        2,                            // 5 num_sge
        0x02, 0x01,                   // 6 wqe_index
        0x00, 0x10, 0, 0,             // 8 length
        0xDD, 0xCC, 0xBB, 0xAA,       // 12 imm
        0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // 16 remote_addr
        0xCC, 0xBB, 0xAA, 0x99,       // 24 rkey
        0xEF, 0xCD, 0xAB,             // 28 first_psn
        0,                            // 31
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x00, 0x08, 0, 0, // 32 sge0
        0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, 0x00, 0x08, 0, 0, // 44 sge1
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // 56 sge2
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // 68 sge3
        3, 0, 0, 0,                   // 80 start_pkt
        7, 0, 0, 0,                   // 84 end_pkt
        0, 0, 0, 0, 0, 0, 0, 0,       // 88 reserved
    ];
    assert_eq!(layout::encode_txd(&m), want);
    assert_eq!(layout::decode_txd(&want), Ok(m));
}

/// §2.2: a FLUSH carries the `una_psn` its rewind starts from in bytes 12..15, where
/// a SEND_WITH_IMM has its immediate (byte 15 zero).
#[test]
fn a_flush_carries_its_una_in_the_immediate_bytes() {
    let m = TxMsg {
        qpn: Qpn::new(0x12),
        op: MsgOp::Flush {
            una: Psn::new(0xAB_0203),
        },
        solicited: false,
        replay: false,
        wqe_index: 0,
        sges: heapless::Vec::new(),
        length: 0,
        remote_addr: 0,
        rkey: Rkey(0),
        first_psn: Psn::new(0xAB_0203),
        start_pkt: 0,
        end_pkt: 0,
    };
    let b = layout::encode_txd(&m);
    assert_eq!((b[3], &b[12..16]), (15, &[0x03, 0x02, 0xAB, 0][..]));
    assert_eq!(layout::decode_txd(&b), Ok(m));
}

/// §3.5, field by field: an exception for an out-of-sequence WRITE_MIDDLE over IPv4
/// with a VLAN tag.
#[test]
fn exception_event_bytes_follow_the_table() {
    let e = Event::Exception {
        qpn: Qpn::new(0x00_0011),
        psn: Psn::new(0x02_0304),
        reason: Exception::Psn,
        opcode: Opcode::RC_RDMA_WRITE_MIDDLE,
        slot: 5,
        frame_len: 0x0456,
        meta: RxMeta {
            l3_kind: IcrcKind::Ipv4,
            vlan: true,
            bth: 18 + 20 + 8,
            payload_off: 58,
            payload_len: 0x400,
            pad: 2,
        },
    };
    let mut want = [0u8; 64];
    want[..24].copy_from_slice(&[
        1, // kind EXCEPTION
        3, // reason PSN
        5,
        0, // frame_slot
        0x11,
        0,
        0,    // qpn
        0x07, // opcode RC_RDMA_WRITE_MIDDLE
        0x04,
        0x03,
        0x02,   // psn
        2 << 5, // flags: PadCnt
        58,
        0, // payload_off
        0x00,
        0x04, // payload_len
        58,
        0, // ext_off (BTH + 12)
        0x56,
        0x04, // frame_len
        0,
        0,
        0,     // msn
        0b100, // l3: IPv4, VLAN
    ]);
    assert_eq!(layout::encode_event(&e), want);
    assert_eq!(layout::decode_event(&want), Ok(e));
}

/// A `READ` event (§3.5, kind 4), typed byte by byte from the table.
#[test]
fn read_event_bytes_follow_the_table() {
    let e = Event::Read {
        qpn: Qpn::new(0x01_0203),
        psn: Psn::new(0xFF_FFFE),
        va: 0x1122_3344_5566_7788,
        rkey: Rkey(0xA1B2_C3D4),
        len: 0x0002_0001,
        ce: false,
    };
    let mut want = [0u8; 64];
    want[..28].copy_from_slice(&[
        4, // kind READ
        0, 0, 0, // reserved
        0x03, 0x02, 0x01, // qpn
        0,    // reserved
        0xFE, 0xFF, 0xFF, // psn
        0,    // reserved
        0xD4, 0xC3, 0xB2, 0xA1, // rkey
        0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // va
        0x01, 0x00, 0x02, 0x00, // length
    ]);
    assert_eq!(layout::encode_event(&e), want);
    assert_eq!(layout::decode_event(&want), Ok(e));
}

/// An `ATOMIC` event (§3.5, kind 6), typed byte by byte from the table: the original
/// value little-endian at 16, the CE mark in byte 11 bit 7.
#[test]
fn atomic_event_bytes_follow_the_table() {
    let e = Event::Atomic {
        qpn: Qpn::new(0x01_0203),
        psn: Psn::new(0xFF_FFFE),
        orig: 0x1122_3344_5566_7788,
        ce: true,
    };
    let mut want = [0u8; 64];
    want[..24].copy_from_slice(&[
        6, // kind ATOMIC
        0, 0, 0, // reserved
        0x03, 0x02, 0x01, // qpn
        0,    // reserved
        0xFE, 0xFF, 0xFF, // psn
        0x80, // ECN CE
        0, 0, 0, 0, // reserved
        0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // original value
    ]);
    assert_eq!(layout::encode_event(&e), want);
    assert_eq!(layout::decode_event(&want), Ok(e));
}

/// An `RD_DROP` event (§3.5, kind 10) is its kind, its QP and the CE mark (byte 11 bit
/// 7); the receive context's `rd_max` is byte 3 bits 4..6 beside the MTU (§3.2), which
/// the firmware's flag writes (`release_rctx`, `reads_rctx`, `cqe_rctx`) and the
/// receive load (`load_rctx`) leave.
#[test]
fn rd_drop_event_and_rd_max_bytes_follow_the_table() {
    let qpn = Qpn::new(0x01_0203);
    let e = Event::RdDropped { qpn, ce: true };
    let mut want = [0u8; 64];
    want[..12].copy_from_slice(&[10, 0, 0, 0, 0x03, 0x02, 0x01, 0, 0, 0, 0, 0x80]);
    assert_eq!(layout::encode_event(&e), want);
    assert_eq!(layout::decode_event(&want), Ok(e));
    let mut p = Pair::new(3);
    let (qa, _) = p.connect(QpType::Rc, &QpOpts::default());
    let r = p.a.eng.fastpath_recv_ctx(qa).unwrap();
    for rd_max in 0..=fastpath::RD_MAX {
        let c = RecvCtx {
            rd_max,
            held: true,
            ..r
        };
        let mut b = layout::encode_rctx(&c);
        assert_eq!(b[3] >> 4, rd_max, "byte 3 bits 4..6");
        let mtu = layout::encode_rctx(&RecvCtx { rd_max: 0, ..c })[3];
        assert_eq!(b[3] & 15, mtu, "the MTU's log2 beside it");
        assert_eq!(b[44] & 0xE0, 0, "flags bits 5..7");
        layout::release_rctx(&mut b);
        layout::reads_rctx(&mut b);
        // (`recv_cqe`, flags bit 5: not a field of the decoded context)
        layout::cqe_rctx(&mut b);
        assert!(layout::rctx_cqe(&b));
        assert_eq!(
            layout::decode_rctx(&b),
            Ok(RecvCtx {
                held: false,
                reads: true,
                ..c
            })
        );
    }
}

/// A `CE` event (§3.5, kind 5) is its kind and QP alone; a `MSG_DONE` or `READ` of a
/// CE-marked request says so in byte 11 bit 7.
#[test]
fn ce_event_bytes_follow_the_table() {
    let qpn = Qpn::new(0x01_0203);
    let mut want = [0u8; 64];
    want[..7].copy_from_slice(&[5, 0, 0, 0, 0x03, 0x02, 0x01]);
    assert_eq!(layout::encode_event(&Event::Ce { qpn }), want);
    assert_eq!(layout::decode_event(&want), Ok(Event::Ce { qpn }));
    let done = |ce| Event::MsgDone {
        qpn,
        msn: Msn::new(7),
        byte_len: 9,
        solicited: true,
        ce,
        cqe: false,
    };
    let (plain, marked) = (
        layout::encode_event(&done(false)),
        layout::encode_event(&done(true)),
    );
    assert_eq!((plain[11], marked[11]), (0x02, 0x82));
    assert_eq!(layout::decode_event(&marked), Ok(done(true)));
}

/// Contexts as the engine hands them out for a connected QP survive their bytes.
#[test]
fn contexts_round_trip() {
    let mut p = Pair::new(3);
    let (qa, _) = p.connect(QpType::Rc, &QpOpts::default());
    let s = p.a.eng.fastpath_send_ctx(qa).unwrap();
    assert!(s.valid);
    assert_eq!(layout::decode_sctx(&layout::encode_sctx(&s)), Ok(s));
    let r = p.a.eng.fastpath_recv_ctx(qa).unwrap();
    assert!(r.on);
    assert_eq!(layout::decode_rctx(&layout::encode_rctx(&r)), Ok(r));
    // A template whose offsets cannot be headers is refused, not used.
    let mut b = layout::encode_sctx(&s);
    b[1] = 60;
    assert_eq!(layout::decode_sctx(&b), Err(Invalid { offset: 0 }));
    let (addr, keys) = p.a.buffer(64);
    let mr = MrEntry::of(p.a.eng.memory().get(keys.lkey.0).unwrap());
    assert_eq!(mr.base, addr);
    assert_eq!(layout::decode_mr(&layout::encode_mr(&mr)), Ok(mr));
}

/// Releasing a held receive context (`layout::release_rctx`, after a response's
/// exception) clears `held` and nothing else, whatever the other flags; `hold_rctx`
/// sets it back alone.
#[test]
fn releasing_a_receive_context_clears_held_alone() {
    let mut p = Pair::new(3);
    let (qa, _) = p.connect(QpType::Rc, &QpOpts::default());
    let r = p.a.eng.fastpath_recv_ctx(qa).unwrap();
    for flags in 0..8u8 {
        let held = RecvCtx {
            held: true,
            nak_sent: flags & 1 != 0,
            recv_loaded: flags & 2 != 0,
            reads: flags & 4 != 0,
            ..r
        };
        let mut b = layout::encode_rctx(&held);
        layout::release_rctx(&mut b);
        assert_eq!(
            layout::decode_rctx(&b),
            Ok(RecvCtx {
                held: false,
                ..held
            })
        );
        assert!(!layout::rctx_held(&b));
        // and holding it again (`hold_rctx`, a release while an exception is in
        // flight) sets `held` alone
        layout::hold_rctx(&mut b);
        assert!(layout::rctx_held(&b));
        assert_eq!(layout::decode_rctx(&b), Ok(held));
    }
}

/// The firmware's load of a receive buffer ahead of a SEND (`layout::load_rctx`,
/// `docs/fastpath.md` §3.4 "The receive buffer loaded ahead") writes `recv_addr`,
/// `recv_resid` and `recv_loaded` and nothing else (a WRITE's `resid` and `length`
/// stay), only into the QP's own
/// context, on, between messages, with nothing loaded and not held; its unload (an MR
/// changed) clears `recv_loaded` alone, held or not, and only between messages. The
/// engine's `fastpath_recv_ctx` of the same QP with that WQE posted is the context
/// loaded (`set_fastpath_sends`), and without it the context as it was.
#[test]
fn a_receive_buffer_is_loaded_between_messages_only() {
    use roce_core::fastpath::RxCur;
    use roce_core::transport::RecvWr;
    let mut p = Pair::new(3);
    let (qa, _) = p.connect(QpType::Rc, &QpOpts::default());
    let r = RecvCtx {
        reads: true,
        nak_sent: true,
        va: 0x55,
        resid: 0x66,
        length: 0x77,
        ..p.a.eng.fastpath_recv_ctx(qa).unwrap()
    };
    let buf = (0x1234_5678_9ABC, 3000);
    let loaded = RecvCtx {
        recv_loaded: true,
        recv_addr: buf.0,
        recv_resid: buf.1,
        ..r
    };
    let mut b = layout::encode_rctx(&r);
    assert!(layout::load_rctx(&mut b, qa, Some(buf)));
    assert_eq!(layout::decode_rctx(&b), Ok(loaded));
    // nothing twice, nothing into another QP's entry
    assert!(!layout::load_rctx(&mut b, qa, Some((1, 1))));
    assert!(!layout::load_rctx(&mut b, Qpn::new(qa.value() + 1), None));
    assert_eq!(layout::decode_rctx(&b), Ok(loaded));
    let refused = [
        RecvCtx {
            cur: RxCur::Send,
            ..r
        },
        RecvCtx {
            cur: RxCur::Write,
            ..r
        },
        RecvCtx { held: true, ..r },
        RecvCtx { on: false, ..r },
    ];
    for c in refused {
        let mut b = layout::encode_rctx(&c);
        assert!(!layout::load_rctx(&mut b, qa, Some(buf)), "{c:?}");
        assert_eq!(layout::decode_rctx(&b), Ok(c));
    }
    // the unload: held or not; never in the middle of a message
    for held in [false, true] {
        let mut b = layout::encode_rctx(&RecvCtx { held, ..loaded });
        assert!(layout::load_rctx(&mut b, qa, None));
        let want = RecvCtx {
            held,
            recv_loaded: false,
            ..loaded
        };
        assert_eq!(layout::decode_rctx(&b), Ok(want));
        assert!(!layout::load_rctx(&mut b, qa, None));
    }
    let mut b = layout::encode_rctx(&RecvCtx {
        cur: RxCur::Send,
        ..loaded
    });
    assert!(!layout::load_rctx(&mut b, qa, None));
    // the engine loads the same between messages once told the datapath places a
    // SEND's first packet
    let (addr, keys) = p.a.buffer(4096);
    let wr = RecvWr::new(7).sge(addr, 4096, keys.lkey);
    p.a.eng.post_recv(qa, &wr).unwrap();
    let off = p.a.eng.fastpath_recv_ctx(qa).unwrap();
    assert!(!off.recv_loaded);
    assert_eq!(p.a.eng.fastpath_recv_next(qa), Err(None));
    p.a.eng.set_fastpath_sends(true);
    assert_eq!(
        p.a.eng
            .fastpath_recv_next(qa)
            .map(|b| (b.addr, b.len, b.cqe.wr_id)),
        Ok((addr, 4096, 7))
    );
    let on = p.a.eng.fastpath_recv_ctx(qa).unwrap();
    let mut b = layout::encode_rctx(&off);
    assert!(layout::load_rctx(&mut b, qa, Some((addr, 4096))));
    assert_eq!(layout::decode_rctx(&b), Ok(on));
}

fn psn() -> impl Strategy<Value = Psn> {
    (0u32..1 << 24).prop_map(Psn::new)
}

fn op() -> impl Strategy<Value = MsgOp> {
    prop_oneof![
        Just(MsgOp::Send),
        any::<u32>().prop_map(MsgOp::SendWithImm),
        any::<u32>().prop_map(|k| MsgOp::SendWithInv(Rkey(k))),
        Just(MsgOp::Write),
        any::<u32>().prop_map(MsgOp::WriteWithImm),
        Just(MsgOp::Read),
        (any::<u64>(), any::<u64>()).prop_map(|(compare, swap)| MsgOp::CmpSwap { compare, swap }),
        any::<u64>().prop_map(|add| MsgOp::FetchAdd { add }),
        psn().prop_map(|una| MsgOp::Flush { una }),
    ]
}

proptest! {
    #[test]
    fn tx_descriptors_round_trip(
        op in op(),
        qpn in 0u32..1 << 24,
        flags in (any::<bool>(), any::<bool>()),
        wqe_index in any::<u16>(),
        sges in proptest::collection::vec((any::<u64>(), any::<u32>()), 0..=4),
        length in any::<u32>(),
        remote_addr in any::<u64>(),
        rkey in any::<u32>(),
        first_psn in psn(),
        pkts in (any::<u32>(), any::<u32>()),
    ) {
        let n = if matches!(op, MsgOp::CmpSwap { .. } | MsgOp::FetchAdd { .. }) { 1 } else { 4 };
        let m = TxMsg {
            qpn: Qpn::new(qpn),
            op,
            solicited: flags.0,
            replay: flags.1,
            wqe_index,
            sges: sges.iter().take(n).map(|&(a, l)| sge(a, l)).collect(),
            length,
            remote_addr,
            rkey: Rkey(rkey),
            first_psn,
            start_pkt: pkts.0,
            end_pkt: pkts.1,
        };
        prop_assert_eq!(layout::decode_txd(&layout::encode_txd(&m)), Ok(m));
    }

    #[test]
    fn events_and_acks_round_trip(qpn in 0u32..1 << 24, p in psn(), q in psn(), x in any::<u32>(), y in any::<u16>(), b in any::<u8>()) {
        let qpn = Qpn::new(qpn);
        for e in [
            Event::MsgDone { qpn, msn: Msn::new(q.value()), byte_len: x, solicited: b & 1 != 0, ce: b & 32 != 0, cqe: b & 2 != 0 },
            Event::Acked { qpn, psn: p, una: q, read: b & 1 != 0, last: b & 2 != 0, done: b, wqe_index: y, cqe: b & 4 != 0, gbn: b & 8 != 0, atomic: b & 16 != 0 },
            Event::Read { qpn, psn: p, va: u64::from(x) << 17 | u64::from(y), rkey: Rkey(x.rotate_left(7)), len: x, ce: b & 64 != 0 },
            Event::Atomic { qpn, psn: p, orig: u64::from(x) << 29 ^ u64::from(y), ce: b & 64 != 0 },
            Event::Ce { qpn },
            Event::Rnr { qpn, ce: b & 64 != 0 },
            Event::Cnp { qpn },
            Event::ByteCounter { qpn, bytes: u64::from(x) << 31 ^ u64::from(y) },
        ] {
            let mut w = layout::encode_event(&e);
            prop_assert_eq!(layout::decode_event(&w), Ok(e));
            // Only the first EVENT_USED bytes carry the event (the SoC's firmware copies
            // only those): the rest is zero, and what it holds does not change the decode.
            let (_, reserved) = w.split_at_mut(layout::EVENT_USED);
            prop_assert!(reserved.iter().all(|&v| v == 0));
            reserved.fill(b | 1);
            prop_assert_eq!(layout::decode_event(&w), Ok(e));
        }
        let a = AckDesc { qpn, syndrome: Syndrome::from_byte(b), psn: p, msn: Msn::new(q.value()) };
        prop_assert_eq!(layout::decode_ackd(&layout::encode_ackd(&a)), a);
    }

    /// The receive state the firmware decodes before an exception
    /// (`decode_rctx_state`) is the whole decode's, and it rejects exactly the contexts
    /// the whole decode rejects, at the same offset (the first four bytes drawn near
    /// their valid ranges, so both outcomes come up).
    #[test]
    fn the_receive_state_is_the_whole_decodes(
        head in (0u8..3, 0u8..4, any::<u8>(), 6u8..14),
        rest in proptest::collection::vec(any::<u8>(), layout::RCTX_LEN - 4),
    ) {
        let mut b = [0u8; layout::RCTX_LEN];
        b[..4].copy_from_slice(&[head.0, head.1, head.2, head.3]);
        b[4..].copy_from_slice(&rest);
        prop_assert_eq!(
            layout::decode_rctx_state(&b),
            layout::decode_rctx(&b).map(|c| c.state())
        );
    }

    /// No byte pattern makes a decoder panic.
    #[test]
    fn decoders_take_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 96)) {
        let b96: [u8; 96] = bytes[..].try_into().unwrap();
        let _ = layout::decode_sctx(&b96);
        let _ = layout::decode_txd(&b96);
        let _ = layout::decode_rctx(b96[..layout::RCTX_LEN].try_into().unwrap());
        let _ = layout::decode_event(b96[..64].try_into().unwrap());
        let _ = layout::decode_mr(b96[..32].try_into().unwrap());
        let _ = layout::decode_ackd(b96[..16].try_into().unwrap());
    }
}
