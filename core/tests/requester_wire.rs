//! The requester and completer at the packet level: a real requester, a scripted
//! responder that answers (or not) exactly as each test says.

mod common;

use common::*;
use core::net::Ipv4Addr;
use roce_core::num::{Msn, Psn, Qpn};
use roce_core::transport::{Instant, Mtu, QpType, SendFlags, SendWr, WcStatus, WrOp};
use roce_core::wire::aeth::{AethRepr, NakCode, RnrTimer, Syndrome};
use roce_core::wire::atomic::AtomicAckEthRepr;
use roce_core::wire::bth::BthRepr;
use roce_core::wire::ethernet::{EthernetRepr, MacAddr};
use roce_core::wire::ipv4::Ipv4Repr;
use roce_core::wire::udp::UdpRepr;
use roce_core::wire::{emit, ExtHeaders, Headers, L3Repr, Opcode};

const MTU: usize = 256;

struct Script {
    node: Node,
    qpn: Qpn,
    peer_mac: [u8; 6],
    now: u64,
}

impl Script {
    /// A requester (node 1, first PSN 100, timeout code 10 = 4.2 ms) whose peer QP 0x77
    /// is this script.
    fn new() -> Self {
        let peer = Node::new(2);
        let mut node = Node::new(1);
        let qpn = node.create_qp(QpType::Rc);
        let av = node.av_to(&peer);
        let o = QpOpts {
            mtu: Mtu::Mtu256,
            timeout: 10,
            retry_cnt: 2,
            rnr_retry: 1,
            ..QpOpts::default()
        };
        bring_up(&mut node, qpn, QpType::Rc, av, Qpn::new(0x77), &o, 100, 0);
        Self {
            node,
            qpn,
            peer_mac: peer.mac,
            now: 0,
        }
    }

    fn post(&mut self, wr: SendWr) {
        let q = self.qpn;
        self.node.post_send(q, &wr.flags(SendFlags::SIGNALED));
    }

    /// What the requester sends now: (opcode, psn, ack_req).
    fn sent(&mut self) -> Vec<(Opcode, u32, bool)> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 9000];
        while let Some(n) =
            self.node
                .eng
                .poll_transmit(Instant::from_nanos(self.now), &mut buf, &mut self.node.mem)
        {
            let s = seen(&buf[..n]).unwrap();
            out.push((s.opcode, s.psn.value(), s.ack_req));
        }
        out
    }

    fn answer(
        &mut self,
        opcode: Opcode,
        psn: u32,
        syndrome: Syndrome,
        orig: Option<u64>,
        payload: &[u8],
    ) {
        let bth = BthRepr::new(opcode, self.qpn, Psn::new(psn));
        let ext = ExtHeaders {
            aeth: Some(AethRepr {
                syndrome,
                msn: Msn::new(1),
            }),
            atomic_ack_eth: orig.map(|o| AtomicAckEthRepr { orig_rem_data: o }),
            ..ExtHeaders::default()
        };
        let h = Headers {
            eth: EthernetRepr {
                dst: MacAddr(self.node.mac),
                src: MacAddr(self.peer_mac),
                ethertype: 0,
            },
            vlan: None,
            l3: L3Repr::Ipv4(Ipv4Repr {
                src: Ipv4Addr::new(10, 0, 0, 2),
                dst: Ipv4Addr::new(10, 0, 0, 1),
                ..Ipv4Repr::default()
            }),
            udp: Some(UdpRepr {
                src_port: 0xC002,
                dst_port: 4791,
                checksum: 0,
            }),
            bth,
            ext,
        };
        let mut buf = vec![0u8; 9000];
        let n = emit(&h, payload, &mut buf).unwrap();
        self.node
            .eng
            .handle_packet(Instant::from_nanos(self.now), &buf[..n], &mut self.node.mem);
    }

    fn ack(&mut self, psn: u32) {
        self.answer(Opcode::RC_ACKNOWLEDGE, psn, Syndrome::ACK, None, &[]);
    }

    fn advance_to_timer(&mut self) {
        let t = self.node.eng.poll_timeout().expect("a timer");
        self.now = t.as_nanos();
        self.node.eng.handle_timeout(t);
    }

    fn completions(&mut self) -> Vec<(u64, WcStatus)> {
        self.node
            .poll()
            .iter()
            .map(|w| (w.wr_id, w.status))
            .collect()
    }
}

fn write(s: &mut Script, id: u64, len: usize) -> SendWr {
    let (src, k) = s.node.buffer(len.max(1));
    let (dst, rk) = (0x9000_0000u64, roce_core::num::Rkey(0x1234));
    SendWr::new(id, WrOp::rdma_write(dst, rk)).sge(src, len as u32, k.lkey)
}

#[test]
fn segmentation_and_ack_requests() {
    let mut s = Script::new();
    let w = write(&mut s, 1, 3 * MTU + 1);
    s.post(w);
    s.post(SendWr::new(2, WrOp::Send));
    // requester sends WRITE_FIRST 100, MIDDLE 101, MIDDLE 102, LAST 103 (AckReq), SEND_ONLY 104 (AckReq)
    assert_eq!(
        s.sent(),
        vec![
            (Opcode::RC_RDMA_WRITE_FIRST, 100, false),
            (Opcode::RC_RDMA_WRITE_MIDDLE, 101, false),
            (Opcode::RC_RDMA_WRITE_MIDDLE, 102, false),
            (Opcode::RC_RDMA_WRITE_LAST, 103, true),
            (Opcode::RC_SEND_ONLY, 104, true),
        ]
    );
    // responder ACKs 104 only: both complete, in order
    s.ack(104);
    assert_eq!(
        s.completions(),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(
        s.node.eng.poll_timeout(),
        None,
        "nothing outstanding, no timer"
    );
}

#[test]
fn a_read_response_implicitly_acknowledges_an_earlier_write() {
    let mut s = Script::new();
    let w = write(&mut s, 1, 10);
    s.post(w);
    let (dst, k) = s.node.buffer(4);
    s.post(
        SendWr::new(
            2,
            WrOp::rdma_read(0x9000_0000, roce_core::num::Rkey(0x1234)),
        )
        .sge(dst, 4, k.lkey),
    );
    assert_eq!(
        s.sent(),
        vec![
            (Opcode::RC_RDMA_WRITE_ONLY, 100, true),
            (Opcode::RC_RDMA_READ_REQUEST, 101, true)
        ]
    );
    // responder's ACK for 100 is lost; READ_RESPONSE_ONLY 101 arrives
    s.answer(
        Opcode::RC_RDMA_READ_RESPONSE_ONLY,
        101,
        Syndrome::ACK,
        None,
        &[1, 2, 3, 4],
    );
    assert_eq!(
        s.completions(),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(s.node.mem.read(dst, 4), vec![1, 2, 3, 4]);
}

#[test]
fn an_ack_past_an_unanswered_read_means_its_response_was_lost() {
    let mut s = Script::new();
    let (dst, k) = s.node.buffer(4);
    s.post(
        SendWr::new(
            1,
            WrOp::rdma_read(0x9000_0000, roce_core::num::Rkey(0x1234)),
        )
        .sge(dst, 4, k.lkey),
    );
    s.post(SendWr::new(2, WrOp::Send));
    assert_eq!(s.sent().len(), 2);
    // responder ACKs the SEND at 101, but the READ response for 100 never came
    s.ack(101);
    assert_eq!(s.completions(), vec![]);
    // requester goes back to the READ at once
    assert_eq!(
        s.sent(),
        vec![
            (Opcode::RC_RDMA_READ_REQUEST, 100, true),
            (Opcode::RC_SEND_ONLY, 101, true)
        ]
    );
    assert_eq!(s.node.eng.counters().completer_retry_err, 1);
    assert_eq!(
        s.node.eng.counters().local_ack_timeout_err,
        0,
        "not a timeout"
    );
}

#[test]
fn psn_sequence_nak_goes_back_to_the_naked_psn() {
    let mut s = Script::new();
    let w = write(&mut s, 1, 4 * MTU);
    s.post(w);
    assert_eq!(s.sent().len(), 4);
    // responder NAKs PSN_SEQ_ERR 102: 100 and 101 are implicitly acknowledged
    s.answer(
        Opcode::RC_ACKNOWLEDGE,
        102,
        Syndrome::Nak(NakCode::PsnSequenceError),
        None,
        &[],
    );
    assert_eq!(
        s.sent(),
        vec![
            (Opcode::RC_RDMA_WRITE_MIDDLE, 102, false),
            (Opcode::RC_RDMA_WRITE_LAST, 103, true)
        ]
    );
    s.ack(103);
    assert_eq!(s.completions(), vec![(1, WcStatus::Success)]);
}

#[test]
fn rnr_nak_waits_the_timer_then_resends_and_exhausts() {
    let mut s = Script::new();
    s.post(SendWr::new(1, WrOp::Send));
    assert_eq!(s.sent(), vec![(Opcode::RC_SEND_ONLY, 100, true)]);
    // responder RNR-NAKs 100 with timer code 14 (1.28 ms)
    s.answer(
        Opcode::RC_ACKNOWLEDGE,
        100,
        Syndrome::RnrNak(RnrTimer::new(14)),
        None,
        &[],
    );
    assert_eq!(s.sent(), vec![], "nothing before the RNR timer");
    let t0 = s.now;
    s.advance_to_timer();
    assert_eq!(s.now - t0, 1_280_000);
    assert_eq!(s.sent(), vec![(Opcode::RC_SEND_ONLY, 100, true)]);
    // rnr_retry = 1 is used up: the next RNR NAK fails the WR
    s.answer(
        Opcode::RC_ACKNOWLEDGE,
        100,
        Syndrome::RnrNak(RnrTimer::new(14)),
        None,
        &[],
    );
    assert_eq!(s.completions(), vec![(1, WcStatus::RnrRetryExcErr)]);
}

#[test]
fn local_ack_timeout_resends_from_the_oldest_unacknowledged_psn() {
    let mut s = Script::new();
    let w = write(&mut s, 1, 2 * MTU);
    s.post(w);
    s.post(SendWr::new(2, WrOp::Send));
    assert_eq!(s.sent().len(), 3);
    s.ack(100);
    let t0 = s.now;
    s.advance_to_timer();
    // 4.096 us * 2^10
    assert_eq!(s.now - t0, 4_194_304);
    assert_eq!(
        s.sent(),
        vec![
            (Opcode::RC_RDMA_WRITE_LAST, 101, true),
            (Opcode::RC_SEND_ONLY, 102, true)
        ]
    );
    // retry_cnt = 2: two more silent timeouts end it
    s.advance_to_timer();
    assert_eq!(s.sent().len(), 2);
    s.advance_to_timer();
    assert_eq!(
        s.completions(),
        vec![(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(s.node.eng.poll_timeout(), None);
}

#[test]
fn responses_that_fit_nothing_are_dropped() {
    let mut s = Script::new();
    let w = write(&mut s, 1, 10);
    s.post(w);
    let (dst, k) = s.node.buffer(8);
    s.post(
        SendWr::new(
            2,
            WrOp::AtomicFetchAndAdd {
                remote_addr: 0x9000_0000,
                rkey: roce_core::num::Rkey(1),
                add: 1,
            },
        )
        .sge(dst, 8, k.lkey),
    );
    assert_eq!(s.sent().len(), 2);
    // an ACK for a PSN never sent, a READ response for a WRITE, an atomic ACK for the
    // wrong PSN: all ignored
    s.ack(500);
    s.answer(
        Opcode::RC_RDMA_READ_RESPONSE_ONLY,
        100,
        Syndrome::ACK,
        None,
        &[0; 10],
    );
    s.answer(
        Opcode::RC_ATOMIC_ACKNOWLEDGE,
        100,
        Syndrome::ACK,
        Some(7),
        &[],
    );
    assert_eq!(s.completions(), vec![]);
    assert_eq!(s.node.eng.counters().rcvd_bad_resp, 3);
    // the genuine ATOMIC ACK completes both
    s.answer(
        Opcode::RC_ATOMIC_ACKNOWLEDGE,
        101,
        Syndrome::ACK,
        Some(41),
        &[],
    );
    assert_eq!(
        s.completions(),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(s.node.mem.read(dst, 8), 41u64.to_le_bytes());
}

#[test]
fn a_read_response_of_the_wrong_size_is_dropped() {
    let mut s = Script::new();
    let (dst, k) = s.node.buffer(2 * MTU);
    s.post(
        SendWr::new(1, WrOp::rdma_read(0x9000_0000, roce_core::num::Rkey(1))).sge(
            dst,
            2 * MTU as u32,
            k.lkey,
        ),
    );
    assert_eq!(s.sent(), vec![(Opcode::RC_RDMA_READ_REQUEST, 100, true)]);
    s.answer(
        Opcode::RC_RDMA_READ_RESPONSE_FIRST,
        100,
        Syndrome::ACK,
        None,
        &[1; MTU - 4],
    );
    s.answer(
        Opcode::RC_RDMA_READ_RESPONSE_ONLY,
        100,
        Syndrome::ACK,
        None,
        &[1; 2 * MTU],
    );
    assert_eq!(s.node.eng.counters().rcvd_bad_resp, 2);
    s.answer(
        Opcode::RC_RDMA_READ_RESPONSE_FIRST,
        100,
        Syndrome::ACK,
        None,
        &[1; MTU],
    );
    s.answer(
        Opcode::RC_RDMA_READ_RESPONSE_LAST,
        101,
        Syndrome::ACK,
        None,
        &[2; MTU],
    );
    assert_eq!(s.completions(), vec![(1, WcStatus::Success)]);
    let mut want = vec![1u8; MTU];
    want.extend(vec![2u8; MTU]);
    assert_eq!(s.node.mem.read(dst, 2 * MTU), want);
}
