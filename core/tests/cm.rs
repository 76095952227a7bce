//! The communication manager between two endpoints: MADs carried by a lossy "wire" in
//! between, time stepped by hand. Each test reads like the exchange it checks.

use roce_core::cm::{eui64_from_mac, timeout_duration, CmAddr, CmConfig, CmEvent, CmState, ConnId};
use roce_core::num::{Psn, Qkey, Qpn};
use roce_core::transport::Instant;
use roce_core::wire::cm::{
    port_space, rdma_cm_service_id, rej_reason, sidr_status, CmMsg, PrivateData, RepRepr, ReqRepr,
    SidrRepRepr, SidrReqRepr,
};

type Cm = roce_core::cm::Cm<8, 2, 8>;

const A: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 1];
const B: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 2];
const SERVICE: u64 = rdma_cm_service_id(port_space::TCP, 7174);

struct Pair {
    a: Cm,
    b: Cm,
    now: Instant,
    /// Every MAD sent, in order: (from A, message).
    log: Vec<(bool, CmMsg)>,
    /// Names of messages to drop once each (e.g. "REQ").
    drop: Vec<&'static str>,
}

fn addr(gid: [u8; 16]) -> CmAddr {
    CmAddr { gid, sgid_index: 0 }
}

impl Pair {
    fn new() -> Self {
        let cfg = |mac, id| CmConfig {
            ca_guid: eui64_from_mac(mac),
            first_comm_id: id,
        };
        Self {
            a: Cm::new(cfg([2, 0, 0, 0, 0, 1], 0x1000)),
            b: Cm::new(cfg([2, 0, 0, 0, 0, 2], 0x9000)),
            now: Instant::ZERO,
            log: Vec::new(),
            drop: Vec::new(),
        }
    }

    /// B listens, A sends a REQ, B receives it: the two sides' IDs.
    fn requested(&mut self) -> (ConnId, ConnId) {
        self.b.listen(SERVICE).unwrap();
        let a = self.a.connect(self.now, addr(B), req()).unwrap();
        self.run();
        let Some(CmEvent::ReqReceived { id: b, .. }) = self.b.poll_event() else {
            panic!("no REQ at B")
        };
        (a, b)
    }

    /// Moves MADs both ways until neither side has one to send.
    fn run(&mut self) {
        let mut buf = [0u8; 256];
        loop {
            let mut moved = false;
            while let Some((to, n)) = self.a.poll_transmit(&mut buf) {
                assert_eq!(to.gid, B, "A sends to B");
                moved = true;
                self.deliver(true, &buf[..n]);
            }
            while let Some((to, n)) = self.b.poll_transmit(&mut buf) {
                assert_eq!(to.gid, A, "B sends to A");
                moved = true;
                self.deliver(false, &buf[..n]);
            }
            if !moved {
                return;
            }
        }
    }

    fn deliver(&mut self, from_a: bool, mad: &[u8]) {
        let (_, msg) = CmMsg::parse(mad).expect("the CM emits valid MADs");
        self.log.push((from_a, msg));
        if let Some(i) = self.drop.iter().position(|d| *d == msg.name()) {
            self.drop.remove(i);
            return;
        }
        if from_a {
            self.b.handle_mad(self.now, addr(A), mad);
        } else {
            self.a.handle_mad(self.now, addr(B), mad);
        }
    }

    /// Advances the clock to the earlier of both sides' timers and runs them.
    fn tick(&mut self) {
        let t = [self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .expect("a timer is armed");
        self.now = t;
        self.a.handle_timeout(t);
        self.b.handle_timeout(t);
        self.run();
    }

    fn sent(&self) -> Vec<(&'static str, &'static str)> {
        self.log
            .iter()
            .map(|(a, m)| (if *a { "A" } else { "B" }, m.name()))
            .collect()
    }
}

fn req() -> ReqRepr {
    ReqRepr {
        max_cm_retries: 3,
        ..ReqRepr::rc(SERVICE, Qpn::new(0x11), Psn::new(0x123456), A, B)
    }
}

fn rep() -> RepRepr {
    RepRepr {
        local_qpn: Qpn::new(0x22),
        starting_psn: Psn::new(0x654321),
        responder_resources: 1,
        initiator_depth: 1,
        rnr_retry_count: 7,
        private_data: PrivateData::from_slice(b"hello").unwrap(),
        ..RepRepr::default()
    }
}

/// Connects A (active) to B (passive); returns both IDs.
fn connect(p: &mut Pair) -> (ConnId, ConnId) {
    p.b.listen(SERVICE).unwrap();
    let a = p.a.connect(p.now, addr(B), req()).unwrap();
    p.run();
    let Some(CmEvent::ReqReceived {
        id: b,
        from,
        req: r,
    }) = p.b.poll_event()
    else {
        panic!("B gets the REQ");
    };
    assert_eq!(from.gid, A);
    assert_eq!(r.local_qpn, Qpn::new(0x11));
    assert_eq!(r.local_ca_guid, eui64_from_mac([2, 0, 0, 0, 0, 1]));
    p.b.accept(p.now, b, rep()).unwrap();
    p.run();
    let Some(CmEvent::RepReceived { id, rep: got }) = p.a.poll_event() else {
        panic!("A gets the REP");
    };
    assert_eq!(id, a);
    assert_eq!(got.local_qpn, Qpn::new(0x22));
    assert_eq!(got.remote_comm_id, p.a.local_comm_id(a).unwrap());
    assert_eq!(&got.private_data.0[..5], b"hello");
    p.a.rtu(a).unwrap();
    p.run();
    assert_eq!(p.b.poll_event(), Some(CmEvent::Established { id: b }));
    assert_eq!(p.a.state(a), Some(CmState::Established));
    assert_eq!(p.b.state(b), Some(CmState::Established));
    (a, b)
}

#[test]
fn req_rep_rtu_then_dreq_drep_and_timewait() {
    let mut p = Pair::new();
    let (a, b) = connect(&mut p);
    p.a.disconnect(p.now, a).unwrap();
    p.run();
    let Some(CmEvent::DreqReceived { id, dreq }) = p.b.poll_event() else {
        panic!("B gets the DREQ");
    };
    assert_eq!((id, dreq.remote_qpn), (b, Qpn::new(0x22)));
    p.b.disconnect(p.now, b).unwrap();
    p.run();
    assert_eq!(p.a.poll_event(), Some(CmEvent::DrepReceived { id: a }));
    assert_eq!(
        p.sent(),
        [
            ("A", "REQ"),
            ("B", "REP"),
            ("A", "RTU"),
            ("A", "DREQ"),
            ("B", "DREP")
        ]
    );
    // Both wait out twice the ACK timeout (14: 67 ms), then the entries are free.
    p.tick();
    assert!(p.now.as_nanos() >= 2 * timeout_duration(14).as_nanos() as u64);
    assert_eq!(p.a.poll_event(), Some(CmEvent::TimewaitExit { id: a }));
    assert_eq!(p.b.poll_event(), Some(CmEvent::TimewaitExit { id: b }));
    assert_eq!(p.a.state(a), None);
    assert_eq!(p.a.poll_timeout(), None);
}

#[test]
fn a_req_for_no_listener_is_rejected_invalid_service_id() {
    let mut p = Pair::new();
    let a = p.a.connect(p.now, addr(B), req()).unwrap();
    p.run();
    let Some(CmEvent::Rejected { id, rej }) = p.a.poll_event() else {
        panic!("A is rejected");
    };
    assert_eq!(id, a);
    assert_eq!(rej.reason, rej_reason::INVALID_SERVICE_ID);
    assert_eq!(p.a.state(a), None);
    assert_eq!(p.b.poll_event(), None);
}

#[test]
fn the_passive_side_rejects_with_private_data() {
    let mut p = Pair::new();
    p.b.listen(SERVICE).unwrap();
    let a = p.a.connect(p.now, addr(B), req()).unwrap();
    let a_comm_id = p.a.local_comm_id(a).unwrap();
    p.run();
    let Some(CmEvent::ReqReceived { id: b, .. }) = p.b.poll_event() else {
        panic!()
    };
    p.b.reject(
        b,
        rej_reason::CONSUMER_DEFINED,
        PrivateData::from_slice(b"no").unwrap(),
    )
    .unwrap();
    p.run();
    let Some(CmEvent::Rejected { id, rej }) = p.a.poll_event() else {
        panic!()
    };
    assert_eq!(id, a);
    assert_eq!(rej.reason, rej_reason::CONSUMER_DEFINED);
    assert_eq!(&rej.private_data.0[..2], b"no");
    assert_eq!(rej.remote_comm_id, a_comm_id);
    assert_eq!(p.a.state(a), None);
    assert_eq!(p.b.state(b), None);
}

#[test]
fn a_lost_req_is_sent_again_after_the_response_timeout() {
    let mut p = Pair::new();
    p.b.listen(SERVICE).unwrap();
    p.drop.push("REQ");
    p.a.connect(p.now, addr(B), req()).unwrap();
    p.run();
    assert_eq!(p.b.poll_event(), None);
    p.tick();
    assert_eq!(p.now, Instant::ZERO + timeout_duration(20));
    assert!(matches!(
        p.b.poll_event(),
        Some(CmEvent::ReqReceived { .. })
    ));
    assert_eq!(p.sent(), [("A", "REQ"), ("A", "REQ")]);
}

#[test]
fn lost_rep_and_rtu_are_recovered() {
    let mut p = Pair::new();
    let (a, b) = p.requested();
    p.drop.push("REP");
    p.b.accept(p.now, b, rep()).unwrap();
    p.run();
    // A's REQ timer fires first (it was armed earlier): B answers the duplicate REQ
    // with its REP.
    p.tick();
    assert!(matches!(
        p.a.poll_event(),
        Some(CmEvent::RepReceived { .. })
    ));
    p.drop.push("RTU");
    p.a.rtu(a).unwrap();
    p.run();
    assert_eq!(p.b.poll_event(), None);
    // B's REP timer: the REP again; A, established, answers with the RTU again.
    p.tick();
    assert_eq!(p.b.poll_event(), Some(CmEvent::Established { id: b }));
    assert_eq!(
        p.sent(),
        [
            ("A", "REQ"),
            ("B", "REP"),
            ("A", "REQ"),
            ("B", "REP"),
            ("A", "RTU"),
            ("B", "REP"),
            ("A", "RTU")
        ]
    );
}

#[test]
fn an_unanswered_req_times_out_after_its_retries() {
    let mut p = Pair::new();
    let a = p.a.connect(p.now, addr([9; 16]), req()).unwrap();
    let mut buf = [0u8; 256];
    let mut sent = 0;
    loop {
        while p.a.poll_transmit(&mut buf).is_some() {
            sent += 1;
        }
        if let Some(e) = p.a.poll_event() {
            assert_eq!(
                e,
                CmEvent::Timeout {
                    id: a,
                    state: CmState::ReqSent
                }
            );
            break;
        }
        let t = p.a.poll_timeout().expect("retry timer");
        p.a.handle_timeout(t);
    }
    // The first REQ and max_cm_retries (3) more.
    assert_eq!(sent, 4);
    assert_eq!(p.a.state(a), None);
}

#[test]
fn an_mra_makes_the_active_side_wait_longer() {
    let mut p = Pair::new();
    let (a, b) = p.requested();
    p.b.mra(b, 24).unwrap();
    p.run();
    assert_eq!(p.a.state(a), Some(CmState::MraReqRcvd));
    let due = p.a.poll_timeout().unwrap();
    assert_eq!(
        due,
        Instant::ZERO + timeout_duration(20) + timeout_duration(24)
    );
    // A duplicate REQ in MRA_REQ_SENT is answered with the MRA again.
    p.a.handle_timeout(due);
    p.run();
    assert_eq!(
        p.sent(),
        [("A", "REQ"), ("B", "MRA"), ("A", "REQ"), ("B", "MRA")]
    );
    p.b.accept(p.now, b, rep()).unwrap();
    p.run();
    assert!(matches!(
        p.a.poll_event(),
        Some(CmEvent::RepReceived { .. })
    ));
}

#[test]
fn a_dreq_for_an_unknown_connection_gets_a_drep() {
    let mut p = Pair::new();
    let (a, b) = connect(&mut p);
    // B forgets the connection (its process died); A's DREQ is still answered.
    p.b.destroy(b);
    p.a.disconnect(p.now, a).unwrap();
    p.run();
    assert_eq!(p.a.poll_event(), Some(CmEvent::DrepReceived { id: a }));
    assert_eq!(p.b.poll_event(), None);
}

#[test]
fn sidr_finds_a_ud_service_or_says_it_is_unsupported() {
    let mut p = Pair::new();
    let service = rdma_cm_service_id(port_space::UDP, 7174);
    let req = SidrReqRepr {
        pkey: 0xFFFF,
        service_id: service,
        ..SidrReqRepr::default()
    };
    // Nobody listens: status UNSUPPORTED.
    let a1 = p.a.sidr_request(p.now, addr(B), req, 20, 3).unwrap();
    p.run();
    let Some(CmEvent::SidrRepReceived { id, rep }) = p.a.poll_event() else {
        panic!()
    };
    assert_eq!((id, rep.status), (a1, sidr_status::UNSUPPORTED));
    // B listens and answers with its QP and Q_Key.
    p.b.listen(service).unwrap();
    let a2 = p.a.sidr_request(p.now, addr(B), req, 20, 3).unwrap();
    p.run();
    let Some(CmEvent::SidrReqReceived {
        id: b, req: got, ..
    }) = p.b.poll_event()
    else {
        panic!()
    };
    assert_eq!(got.service_id, service);
    p.b.sidr_reply(
        b,
        SidrRepRepr {
            status: sidr_status::SUCCESS,
            qpn: Qpn::new(0x33),
            qkey: Qkey(0x0123_4567),
            service_id: service,
            ..SidrRepRepr::default()
        },
    )
    .unwrap();
    p.run();
    let Some(CmEvent::SidrRepReceived { id, rep }) = p.a.poll_event() else {
        panic!()
    };
    assert_eq!(id, a2);
    assert_eq!(
        (rep.status, rep.qpn, rep.qkey),
        (0, Qpn::new(0x33), Qkey(0x0123_4567))
    );
    assert_eq!(p.a.state(a2), None);
}

#[test]
fn calls_out_of_state_are_refused() {
    let mut p = Pair::new();
    let (a, b) = connect(&mut p);
    assert!(p.a.rtu(a).is_err());
    assert!(p.b.accept(p.now, b, rep()).is_err());
    assert!(p.b.mra(b, 1).is_err());
    assert!(p.a.listen(SERVICE).is_ok());
    assert!(p.a.listen(SERVICE).is_err());
    assert!(p.a.disconnect(p.now, ConnId(7)).is_err());
}
