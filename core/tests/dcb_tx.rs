//! The engine as the scheduler in front of per-priority transmit queues (issue 18):
//! `poll_transmit_except` builds no frame of a blocked (paused) priority and lets the
//! other priorities' QPs, and every CNP, go on. Priorities are read off the frames'
//! bytes here (IPv4 TOS byte 15, DSCP = TOS >> 2, priority = DSCP >> 3 under the
//! default map), not through the code under test.

mod common;

use common::{bring_up, Node, QpOpts};
use roce_core::cc::CcConfig;
use roce_core::dcb::Priorities;
use roce_core::num::Qpn;
use roce_core::transport::{Instant, QpType, SendWr, WrOp};
use roce_core::wire::{self, Opcode};

const G100: u64 = 100_000_000_000;

/// The 802.1p priority of an untagged IPv4 frame under the default map.
fn prio(frame: &[u8]) -> u8 {
    assert_eq!(&frame[12..14], &[0x08, 0x00], "untagged IPv4");
    frame[15] >> 2 >> 3
}

fn opcode(frame: &[u8]) -> Opcode {
    wire::parse(frame).unwrap().headers().bth.opcode
}

/// Connects an RC QP of `a` to one of `b`, both with traffic class DSCP `dscp`.
fn connect(a: &mut Node, b: &mut Node, dscp: u8, psn: u32) -> (Qpn, Qpn) {
    let o = QpOpts::default();
    let (qa, qb) = (a.create_qp(QpType::Rc), b.create_qp(QpType::Rc));
    let mut ava = a.av_to(b);
    ava.traffic_class = dscp << 2;
    let mut avb = b.av_to(a);
    avb.traffic_class = dscp << 2;
    bring_up(a, qa, QpType::Rc, ava, qb, &o, psn, psn + 0x1000);
    bring_up(b, qb, QpType::Rc, avb, qa, &o, psn + 0x1000, psn);
    (qa, qb)
}

fn post_write(from: &mut Node, to: &mut Node, q: Qpn, len: usize) {
    let (local, kl) = from.buffer(len);
    let (remote, kr) = to.buffer(len);
    from.post_send(
        q,
        &SendWr::new(1, WrOp::rdma_write(remote, kr.rkey)).sge(local, len as u32, kl.lkey),
    );
}

/// Every frame `n` has to send now with `blocked` held back.
fn drain(n: &mut Node, now: u64, blocked: Priorities) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 9000];
    while let Some(len) =
        n.eng
            .poll_transmit_except(Instant::from_nanos(now), &mut buf, &mut n.mem, blocked)
    {
        out.push(buf[..len].to_vec());
    }
    out
}

/// IPv4 ECN := CE with the header checksum recomputed (RFC 1071), as a switch marks.
fn mark_ce(frame: &mut [u8]) {
    frame[15] |= 0b11;
    frame[24..26].fill(0);
    let mut sum: u32 = frame[14..34]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    frame[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

#[test]
fn a_paused_priority_stops_only_its_own_qps() {
    let (mut a, mut b) = (Node::new(1), Node::new(2));
    let (q3, _) = connect(&mut a, &mut b, 26, 0x100); // priority 3
    let (q1, _) = connect(&mut a, &mut b, 8, 0x5000); // priority 1
    post_write(&mut a, &mut b, q3, 4096);
    post_write(&mut a, &mut b, q1, 4096);

    // Priority 3 paused: priority 1's four packets go, none of priority 3's.
    let sent = drain(&mut a, 0, Priorities::only(3));
    assert_eq!(sent.len(), 4, "4 KiB at MTU 1024");
    assert!(sent.iter().all(|f| prio(f) == 1));
    // Its pause ends: its whole message follows, from its first PSN.
    let sent = drain(&mut a, 1000, Priorities::NONE);
    assert_eq!(sent.len(), 4);
    assert!(sent.iter().all(|f| prio(f) == 3));
    let first = wire::parse(&sent[0]).unwrap().headers().bth.psn;
    assert_eq!(first.value(), 0x100);
    assert_eq!(opcode(&sent[0]), Opcode::RC_RDMA_WRITE_FIRST);

    // Nothing blocked and nothing posted: nothing to send.
    assert!(drain(&mut a, 2000, Priorities::NONE).is_empty());
}

#[test]
fn the_ports_dscp_map_decides_which_qps_a_pause_stops() {
    let (mut a, mut b) = (Node::new(1), Node::new(2));
    let (q26, _) = connect(&mut a, &mut b, 26, 0x100);
    let (q8, _) = connect(&mut a, &mut b, 8, 0x5000);
    // The host maps DSCP 26 to priority 5 and DSCP 8 to priority 3 (MODIFY_DCB).
    let mut cfg = *a.eng.config();
    cfg.dcb.map.dscp[26] = 5;
    cfg.dcb.map.dscp[8] = 3;
    a.eng.set_config(cfg).unwrap();
    post_write(&mut a, &mut b, q26, 2048);
    post_write(&mut a, &mut b, q8, 2048);
    // Priority 3 paused now holds back DSCP 8's QP (priority 1 by the default map),
    // and DSCP 26's (priority 3 by default) goes.
    let sent = drain(&mut a, 0, Priorities::only(3));
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|f| f[15] >> 2 == 26));
    let sent = drain(&mut a, 0, Priorities::only(5));
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|f| f[15] >> 2 == 8));
}

#[test]
fn cnps_and_acks_of_an_unpaused_priority_never_wait_behind_paused_data() {
    let cc = CcConfig {
        rp: false,
        ..CcConfig::dcqcn(G100)
    };
    let mut a = Node::with_port(1, |c| c.cc = cc);
    let mut b = Node::with_port(2, |c| c.cc = cc);
    let (a3, b3) = connect(&mut a, &mut b, 26, 0x100); // priority 3
    let (a1, _) = connect(&mut a, &mut b, 8, 0x5000); // priority 1
                                                      // b has data of its own on priority 3 (towards a), and the link partner has paused
                                                      // priority 3 at b.
    post_write(&mut b, &mut a, b3, 64 * 1024);
    // a's WRITE on priority 1 arrives CE-marked: b owes an ACK (priority 1) and a CNP
    // (DSCP 48, priority 6).
    post_write(&mut a, &mut b, a1, 512);
    let mut f = drain(&mut a, 0, Priorities::NONE);
    assert_eq!(f.len(), 1);
    mark_ce(&mut f[0]);
    b.eng
        .handle_packet(Instant::from_nanos(100), &f[0], &mut b.mem);

    let sent = drain(&mut b, 100, Priorities::only(3));
    let kinds: Vec<(u8, Opcode)> = sent.iter().map(|f| (prio(f), opcode(f))).collect();
    assert_eq!(
        kinds,
        [(6, Opcode::CNP), (1, Opcode::RC_ACKNOWLEDGE)],
        "the CNP and the ACK, and no paused data"
    );
    assert_eq!(b.eng.counters().np_cnp_sent, 1);
    // The CNP's priority paused too: the ACK alone.
    let cnp_and_data = Priorities::only(3).with(6);
    post_write(&mut a, &mut b, a1, 512);
    let mut f = drain(&mut a, 200, Priorities::NONE);
    mark_ce(&mut f[0]);
    b.eng
        .handle_packet(Instant::from_nanos(100_000), &f[0], &mut b.mem);
    let sent = drain(&mut b, 100_000, cnp_and_data);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (prio(&sent[0]), opcode(&sent[0])),
        (1, Opcode::RC_ACKNOWLEDGE)
    );
    // The CNP waits for its priority; the data for its own.
    let sent = drain(&mut b, 100_000, Priorities::only(3));
    assert_eq!(sent.len(), 1);
    assert_eq!(opcode(&sent[0]), Opcode::CNP);
    let sent = drain(&mut b, 100_000, Priorities::NONE);
    assert_eq!(sent.len(), 64, "64 KiB at MTU 1024");
    assert!(sent.iter().all(|f| prio(f) == 3));
    let _ = a3;
}
