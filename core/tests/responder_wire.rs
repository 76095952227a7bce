//! The responder at the packet level: a scripted requester sends exactly the frames a
//! test names, and the test reads back exactly what the responder answers.

mod common;

use common::*;
use core::net::Ipv4Addr;
use roce_core::num::{Msn, Psn, Qpn, Rkey};
use roce_core::transport::{Instant, Mtu, QpType, RecvWr};
use roce_core::wire::aeth::{NakCode, RnrTimer, Syndrome};
use roce_core::wire::atomic::AtomicEthRepr;
use roce_core::wire::bth::BthRepr;
use roce_core::wire::ethernet::{EthernetRepr, MacAddr};
use roce_core::wire::ipv4::Ipv4Repr;
use roce_core::wire::reth::RethRepr;
use roce_core::wire::udp::UdpRepr;
use roce_core::wire::{emit, parse, ExtHeaders, Headers, L3Repr, Opcode};

/// A fake requester (node 1's addresses, QPN 0x99) talking to a real responder.
struct Script {
    node: Node,
    qpn: Qpn,
    peer_mac: [u8; 6],
    now: u64,
}

/// One response as the test sees it.
#[derive(Debug, PartialEq, Eq)]
struct Resp {
    opcode: Opcode,
    psn: u32,
    syndrome: Option<Syndrome>,
    msn: Option<u32>,
    payload: Vec<u8>,
    orig: Option<u64>,
}

const MTU: usize = 256;

impl Script {
    fn new() -> Self {
        let peer = Node::new(1);
        let mut node = Node::new(2);
        let qpn = node.create_qp(QpType::Rc);
        let av = node.av_to(&peer);
        let o = QpOpts {
            mtu: Mtu::Mtu256,
            min_rnr_timer: 12,
            ..QpOpts::default()
        };
        bring_up(
            &mut node,
            qpn,
            QpType::Rc,
            av,
            Qpn::new(0x99),
            &o,
            0x500,
            10,
        );
        Self {
            node,
            qpn,
            peer_mac: peer.mac,
            now: 0,
        }
    }

    /// The first of a two-packet WRITE of `2 * MTU` bytes to `dst` (PSN 10, no AckReq).
    fn write_first_of_two(&mut self, dst: u64, rkey: Rkey, payload: &[u8]) {
        let reth = Self::reth(dst, rkey, 2 * MTU as u32);
        self.send(Opcode::RC_RDMA_WRITE_FIRST, 10, false, reth, payload);
    }

    /// The last of that WRITE (PSN 11, AckReq).
    fn write_last_of_two(&mut self, payload: &[u8]) {
        self.send(
            Opcode::RC_RDMA_WRITE_LAST,
            11,
            true,
            ExtHeaders::default(),
            payload,
        );
    }

    fn send(&mut self, opcode: Opcode, psn: u32, ack_req: bool, ext: ExtHeaders, payload: &[u8]) {
        let mut bth = BthRepr::new(opcode, self.qpn, Psn::new(psn));
        bth.ack_req = ack_req;
        let h = Headers {
            eth: EthernetRepr {
                dst: MacAddr(self.node.mac),
                src: MacAddr(self.peer_mac),
                ethertype: 0,
            },
            vlan: None,
            l3: L3Repr::Ipv4(Ipv4Repr {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 0, 0, 2),
                ..Ipv4Repr::default()
            }),
            udp: Some(UdpRepr {
                src_port: 0xC001,
                dst_port: 4791,
                checksum: 0,
            }),
            bth,
            ext,
        };
        let mut buf = vec![0u8; 9000];
        let n = emit(&h, payload, &mut buf).unwrap();
        self.now += 1000;
        self.node
            .eng
            .handle_packet(Instant::from_nanos(self.now), &buf[..n], &mut self.node.mem);
    }

    fn reth(va: u64, rkey: Rkey, len: u32) -> ExtHeaders {
        ExtHeaders {
            reth: Some(RethRepr {
                va,
                rkey,
                dma_len: len,
            }),
            ..ExtHeaders::default()
        }
    }

    /// An RDMA READ request at `psn` for `len` bytes at `va`, asking an ACK.
    fn read_request(&mut self, psn: u32, va: u64, rkey: Rkey, len: u32) {
        let reth = Self::reth(va, rkey, len);
        self.send(Opcode::RC_RDMA_READ_REQUEST, psn, true, reth, &[]);
    }

    /// A CMP_SWAP at `psn` of the 8 bytes at `va` (`compare`, then `swap`), asking an ACK.
    fn cmp_swap(&mut self, psn: u32, va: u64, rkey: Rkey, compare: u64, swap: u64) {
        let ext = ExtHeaders {
            atomic_eth: Some(AtomicEthRepr {
                va,
                rkey,
                swap_add: swap,
                compare,
            }),
            ..ExtHeaders::default()
        };
        self.send(Opcode::RC_CMP_SWAP, psn, true, ext, &[]);
    }

    /// What the responder sends now, as (opcode, PSN, AETH MSN).
    fn answered_opcode_psn_msn(&mut self) -> Vec<(Opcode, u32, Option<u32>)> {
        self.answers()
            .iter()
            .map(|r| (r.opcode, r.psn, r.msn))
            .collect()
    }

    fn answers(&mut self) -> Vec<Resp> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 9000];
        while let Some(n) =
            self.node
                .eng
                .poll_transmit(Instant::from_nanos(self.now), &mut buf, &mut self.node.mem)
        {
            let p = parse(&buf[..n]).unwrap();
            assert_eq!(p.headers().bth.dest_qp, Qpn::new(0x99));
            out.push(Resp {
                opcode: p.headers().bth.opcode,
                psn: p.headers().bth.psn.value(),
                syndrome: p.headers().ext.aeth.map(|a| a.syndrome),
                msn: p.headers().ext.aeth.map(|a| a.msn.value()),
                payload: p.payload().to_vec(),
                orig: p.headers().ext.atomic_ack_eth.map(|a| a.orig_rem_data),
            });
        }
        out
    }
}

fn ack(psn: u32, msn: u32) -> Resp {
    Resp {
        opcode: Opcode::RC_ACKNOWLEDGE,
        psn,
        syndrome: Some(Syndrome::ACK),
        msn: Some(msn),
        payload: vec![],
        orig: None,
    }
}

fn nak(psn: u32, msn: u32, code: NakCode) -> Resp {
    Resp {
        opcode: Opcode::RC_ACKNOWLEDGE,
        psn,
        syndrome: Some(Syndrome::Nak(code)),
        msn: Some(msn),
        payload: vec![],
        orig: None,
    }
}

#[test]
fn acks_coalesce_and_carry_the_msn() {
    let mut s = Script::new();
    let (dst, k) = s.node.buffer(4096);
    let qpn = s.qpn;
    s.node.post_recv(qpn, &RecvWr::new(1));
    // requester sends WRITE_ONLY psn 10 and SEND_ONLY psn 11, both asking for an ACK
    s.send(
        Opcode::RC_RDMA_WRITE_ONLY,
        10,
        true,
        Script::reth(dst, k.rkey, 4),
        &[1, 2, 3, 4],
    );
    s.send(Opcode::RC_SEND_ONLY, 11, true, ExtHeaders::default(), &[]);
    // responder answers once: ACK psn 11, MSN 2
    assert_eq!(s.answers(), vec![ack(11, 2)]);
    assert_eq!(s.node.mem.read(dst, 4), vec![1, 2, 3, 4]);
}

#[test]
fn one_psn_sequence_nak_per_gap_then_recovery() {
    let mut s = Script::new();
    let (dst, k) = s.node.buffer(4096);
    let p = vec![7u8; MTU];
    // requester sends WRITE_FIRST psn 10; psn 11 is lost; 12 and 13 arrive
    s.send(
        Opcode::RC_RDMA_WRITE_FIRST,
        10,
        false,
        Script::reth(dst, k.rkey, 4 * MTU as u32),
        &p,
    );
    s.send(
        Opcode::RC_RDMA_WRITE_MIDDLE,
        12,
        false,
        ExtHeaders::default(),
        &p,
    );
    s.send(
        Opcode::RC_RDMA_WRITE_LAST,
        13,
        true,
        ExtHeaders::default(),
        &p,
    );
    // responder NAKs PSN_SEQ_ERR 11, once
    assert_eq!(s.answers(), vec![nak(11, 0, NakCode::PsnSequenceError)]);
    // requester goes back to 11
    s.send(
        Opcode::RC_RDMA_WRITE_MIDDLE,
        11,
        false,
        ExtHeaders::default(),
        &p,
    );
    s.send(
        Opcode::RC_RDMA_WRITE_MIDDLE,
        12,
        false,
        ExtHeaders::default(),
        &p,
    );
    s.send(
        Opcode::RC_RDMA_WRITE_LAST,
        13,
        true,
        ExtHeaders::default(),
        &p,
    );
    assert_eq!(s.answers(), vec![ack(13, 1)]);
    assert_eq!(s.node.mem.read(dst, 4 * MTU), vec![7u8; 4 * MTU]);
}

#[test]
fn duplicate_write_is_reacked_at_epsn_minus_one() {
    let mut s = Script::new();
    let (dst, k) = s.node.buffer(64);
    s.send(
        Opcode::RC_RDMA_WRITE_ONLY,
        10,
        true,
        Script::reth(dst, k.rkey, 4),
        &[1, 1, 1, 1],
    );
    s.send(
        Opcode::RC_RDMA_WRITE_ONLY,
        11,
        true,
        Script::reth(dst, k.rkey, 4),
        &[2, 2, 2, 2],
    );
    assert_eq!(s.answers(), vec![ack(11, 2)]);
    // requester sends psn 10 again, with other data: not executed, re-ACKed at 11
    s.send(
        Opcode::RC_RDMA_WRITE_ONLY,
        10,
        true,
        Script::reth(dst, k.rkey, 4),
        &[9, 9, 9, 9],
    );
    assert_eq!(s.answers(), vec![ack(11, 2)]);
    assert_eq!(s.node.mem.read(dst, 4), vec![2, 2, 2, 2]);
}

#[test]
fn read_responses_and_a_replay_from_the_middle() {
    let mut s = Script::new();
    let (src, k) = s.node.buffer(3 * MTU);
    s.node.mem.fill_pattern(src, 3 * MTU, 1);
    let data = s.node.mem.read(src, 3 * MTU);
    // requester sends READ_REQUEST psn 10 for 3 MTUs
    s.read_request(10, src, k.rkey, 3 * MTU as u32);
    let r = s.answers();
    let ops: Vec<_> = r.iter().map(|r| (r.opcode, r.psn, r.msn)).collect();
    // responder sends READ_RESPONSE FIRST 10, MIDDLE 11 (no AETH), LAST 12; MSN counts the READ
    assert_eq!(
        ops,
        vec![
            (Opcode::RC_RDMA_READ_RESPONSE_FIRST, 10, Some(1)),
            (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 11, None),
            (Opcode::RC_RDMA_READ_RESPONSE_LAST, 12, Some(1)),
        ]
    );
    assert_eq!(
        r.iter().flat_map(|r| r.payload.clone()).collect::<Vec<_>>(),
        data
    );
    // requester lost 11 and asks again from there: the tail of the same READ
    s.read_request(11, src + MTU as u64, k.rkey, 2 * MTU as u32);
    let r = s.answers();
    let ops: Vec<_> = r.iter().map(|r| (r.opcode, r.psn)).collect();
    assert_eq!(
        ops,
        vec![
            (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 11),
            (Opcode::RC_RDMA_READ_RESPONSE_LAST, 12)
        ]
    );
    assert_eq!(r[0].payload, data[MTU..2 * MTU].to_vec());
    // a duplicate READ asking for more than the original is dropped
    s.read_request(11, src + MTU as u64, k.rkey, 3 * MTU as u32);
    assert_eq!(s.answers(), vec![]);
    // the next new request is at psn 13
    s.send(Opcode::RC_SEND_ONLY, 13, true, ExtHeaders::default(), &[]);
    assert_eq!(
        s.answers()[0].syndrome,
        Some(Syndrome::RnrNak(RnrTimer::new(12)))
    );
}

/// Two READs taken before the first one's responses go: each stream carries its own
/// READ's MSN (rxe finishes a READ before taking the next request, so its first READ
/// answers with MSN 1), not the MSN the responder has reached when it sends. A
/// duplicate carries the MSN current when it is taken, as rxe's duplicate_request.
#[test]
fn pipelined_reads_carry_their_own_msn() {
    let mut s = Script::new();
    let (src, k) = s.node.buffer(3 * MTU);
    s.node.mem.fill_pattern(src, 3 * MTU, 1);
    s.read_request(10, src, k.rkey, 2 * MTU as u32);
    s.read_request(12, src + 2 * MTU as u64, k.rkey, MTU as u32);
    let ops = s.answered_opcode_psn_msn();
    assert_eq!(
        ops,
        vec![
            (Opcode::RC_RDMA_READ_RESPONSE_FIRST, 10, Some(1)),
            (Opcode::RC_RDMA_READ_RESPONSE_LAST, 11, Some(1)),
            (Opcode::RC_RDMA_READ_RESPONSE_ONLY, 12, Some(2)),
        ]
    );
    // the first READ again: replayed with the MSN of now, past both READs
    s.read_request(10, src, k.rkey, 2 * MTU as u32);
    let ops = s.answered_opcode_psn_msn();
    assert_eq!(
        ops,
        vec![
            (Opcode::RC_RDMA_READ_RESPONSE_FIRST, 10, Some(2)),
            (Opcode::RC_RDMA_READ_RESPONSE_LAST, 11, Some(2)),
        ]
    );
}

// The requester's Go-Back-N after a lost READ response (perf read_bw with loss): it asks
// again from the lost PSN of an answered READ, then repeats the READs after it, while the
// responder still has those queued. The requester discards every response after the lost
// PSN until the repeat's, so the queued ones go and the repeats are answered in the
// order they came. Restarting each queued READ in place instead sent them ahead of the
// earlier READ's repeat, all discarded, and the requester waited for its ACK timeout.
#[test]
fn a_duplicate_read_drops_the_queued_responses_after_it() {
    let mut s = Script::new();
    let (src, k) = s.node.buffer(4 * MTU);
    s.node.mem.fill_pattern(src, 4 * MTU, 1);
    // Z at 10 answered; A at 12 and B at 14 taken, their responses not sent yet
    s.read_request(10, src, k.rkey, 2 * MTU as u32);
    assert_eq!(s.answers().len(), 2);
    s.read_request(12, src + 2 * MTU as u64, k.rkey, 2 * MTU as u32);
    s.read_request(14, src, k.rkey, 2 * MTU as u32);
    // Z again from its second response (lost), then A and B again
    s.read_request(11, src + MTU as u64, k.rkey, MTU as u32);
    s.read_request(12, src + 2 * MTU as u64, k.rkey, 2 * MTU as u32);
    s.read_request(14, src, k.rkey, 2 * MTU as u32);
    let ops = s.answered_opcode_psn_msn();
    use Opcode as O;
    assert_eq!(
        ops,
        vec![
            (O::RC_RDMA_READ_RESPONSE_LAST, 11, Some(3)),
            (O::RC_RDMA_READ_RESPONSE_FIRST, 12, Some(3)),
            (O::RC_RDMA_READ_RESPONSE_LAST, 13, Some(3)),
            (O::RC_RDMA_READ_RESPONSE_FIRST, 14, Some(3)),
            (O::RC_RDMA_READ_RESPONSE_LAST, 15, Some(3)),
        ]
    );
}

/// An atomic taken while a READ's responses still wait answers with its own MSN (rxe
/// sends an atomic's ACKNOWLEDGE before it takes the next request), not the MSN the
/// responder has reached when the ACKNOWLEDGE goes out behind the READ.
#[test]
fn an_atomic_behind_a_read_carries_its_own_msn() {
    let mut s = Script::new();
    let (src, k) = s.node.buffer(2 * MTU + 8);
    let t = src + 2 * MTU as u64;
    s.read_request(10, src, k.rkey, 2 * MTU as u32);
    s.cmp_swap(12, t, k.rkey, 0, 7);
    s.send(
        Opcode::RC_RDMA_WRITE_ONLY,
        13,
        true,
        Script::reth(src, k.rkey, 4),
        &[1, 2, 3, 4],
    );
    let ops = s.answered_opcode_psn_msn();
    assert_eq!(
        ops,
        vec![
            (Opcode::RC_RDMA_READ_RESPONSE_FIRST, 10, Some(1)),
            (Opcode::RC_RDMA_READ_RESPONSE_LAST, 11, Some(1)),
            (Opcode::RC_ATOMIC_ACKNOWLEDGE, 12, Some(2)),
            (Opcode::RC_ACKNOWLEDGE, 13, Some(3)),
        ]
    );
}

#[test]
fn atomic_executes_once_and_replays_its_result() {
    let mut s = Script::new();
    let (t, k) = s.node.buffer(8);
    s.node.mem.write(t, &5u64.to_le_bytes());
    s.cmp_swap(10, t, k.rkey, 5, 9);
    let first = s.answers();
    s.cmp_swap(10, t, k.rkey, 5, 9);
    let again = s.answers();
    assert_eq!(first.len(), 1);
    assert_eq!(
        (first[0].opcode, first[0].psn, first[0].orig, first[0].msn),
        (Opcode::RC_ATOMIC_ACKNOWLEDGE, 10, Some(5), Some(1))
    );
    assert_eq!(again[0].orig, Some(5));
    assert_eq!(s.node.mem.read(t, 8), 9u64.to_le_bytes());
}

#[test]
fn rnr_nak_names_the_packet_and_the_timer() {
    let mut s = Script::new();
    s.send(
        Opcode::RC_SEND_ONLY,
        10,
        true,
        ExtHeaders::default(),
        &[1, 2, 3],
    );
    let r = s.answers();
    assert_eq!(
        (r[0].psn, r[0].syndrome),
        (10, Some(Syndrome::RnrNak(RnrTimer::new(12))))
    );
    // ePSN did not move: the same packet is accepted once a receive is posted
    let (d, k) = s.node.buffer(16);
    let qpn = s.qpn;
    s.node.post_recv(qpn, &RecvWr::new(1).sge(d, 16, k.lkey));
    s.send(
        Opcode::RC_SEND_ONLY,
        10,
        true,
        ExtHeaders::default(),
        &[1, 2, 3],
    );
    assert_eq!(s.answers(), vec![ack(10, 1)]);
}

#[test]
fn protocol_violations_are_naked_invalid_request() {
    type Case = (Opcode, bool, usize);
    let cases: [Case; 4] = [
        // a MIDDLE with no message in progress
        (Opcode::RC_RDMA_WRITE_MIDDLE, false, MTU),
        // a FIRST shorter than the MTU
        (Opcode::RC_RDMA_WRITE_FIRST, true, MTU - 4),
        // an ONLY longer than the MTU
        (Opcode::RC_RDMA_WRITE_ONLY, true, MTU + 4),
        // an ONLY whose payload disagrees with its RETH length
        (Opcode::RC_RDMA_WRITE_ONLY, true, 8),
    ];
    for (op, reth, len) in cases {
        let mut s = Script::new();
        let (dst, k) = s.node.buffer(4096);
        let ext = if reth {
            Script::reth(dst, k.rkey, if len == 8 { 12 } else { 2 * MTU as u32 })
        } else {
            ExtHeaders::default()
        };
        s.send(op, 10, true, ext, &vec![1u8; len]);
        assert_eq!(
            s.answers(),
            vec![nak(10, 0, NakCode::InvalidRequest)],
            "{op:?} {len}"
        );
        let q = s.qpn;
        assert_eq!(s.node.state(q), roce_core::transport::QpState::Err);
        assert_eq!(s.node.mem.read(dst, 16), vec![0; 16]);
        // Nothing more is answered in ERR.
        s.send(Opcode::RC_SEND_ONLY, 11, true, ExtHeaders::default(), &[]);
        assert_eq!(s.answers(), vec![]);
    }
}

#[test]
fn msn_counts_messages_not_packets() {
    let mut s = Script::new();
    let (dst, k) = s.node.buffer(4096);
    let p = vec![3u8; MTU];
    s.write_first_of_two(dst, k.rkey, &p);
    s.write_last_of_two(&p);
    assert_eq!(s.answers(), vec![ack(11, 1)]);
    s.read_request(12, dst, k.rkey, 4);
    assert_eq!(s.answers()[0].msn, Some(2));
    let _ = Msn::ZERO;
}

/// A packet that asks for no ACK leaves the responder nothing to send, and the engine
/// says so without a poll (`tx_waiting`, the flag a poll with nothing to do reads):
/// the receiver of a stream is not visited at every packet to find no ACK owed.
#[test]
fn a_packet_asking_no_ack_leaves_nothing_waiting() {
    let mut s = Script::new();
    let (dst, k) = s.node.buffer(4096);
    let p = vec![3u8; MTU];
    s.write_first_of_two(dst, k.rkey, &p);
    assert!(!s.node.eng.tx_waiting(), "no ACK owed, yet marked ready");
    assert_eq!(s.answers(), vec![]);
    s.write_last_of_two(&p);
    assert!(s.node.eng.tx_waiting(), "an ACK owed, not marked ready");
    assert_eq!(s.answers(), vec![ack(11, 1)]);
    assert!(!s.node.eng.tx_waiting());
    assert_eq!(s.node.mem.read(dst, 2 * MTU), [p.clone(), p].concat());
}
