//! A deterministic two-engine harness (quinn-proto's `Pair` shape): two nodes, each an
//! engine with its own plain host memory, joined by two one-way links driven by a
//! seeded random generator that can drop, duplicate, reorder, delay and corrupt frames.
//! Time is virtual and jumps to the next event; same seed, same run.

#![allow(dead_code)]

use std::collections::BTreeMap;

use roce_core::engine::{CqHandle, Engine, PortConfig};
use roce_core::memory::{AccessFlags, Dma, DmaError, MrKeys, Pd};
use roce_core::num::{Psn, Qkey, Qpn};
use roce_core::transport::{
    ipv4_gid, AckTimeout, AddressVector, Instant, Mtu, QpAttr, QpInitAttr, QpState, QpType, RecvWr,
    RetryCount, RnrTimer, SendFlags, SendWr, SrAttr, WcStatus, WorkCompletion, WrOp,
};

/// The engine configuration the tests use.
pub type Eng = Engine<8, 4, 2, 32, 64, 64, 1024, 8>;

/// SplitMix64: small, fast, good enough for fault injection.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

/// Plain host memory: a few byte vectors at fixed addresses.
#[derive(Default)]
pub struct Memory {
    regions: Vec<(u64, Vec<u8>)>,
    next: u64,
}

impl Memory {
    pub fn new(base: u64) -> Self {
        Self {
            regions: Vec::new(),
            next: base,
        }
    }
    /// Allocates `len` zero bytes; a 4 KiB gap separates allocations.
    pub fn alloc(&mut self, len: usize) -> u64 {
        let addr = self.next;
        self.regions.push((addr, vec![0; len]));
        self.next = addr + len as u64 + 4096;
        self.next = (self.next + 4095) & !4095;
        addr
    }
    fn find(&self, addr: u64, len: usize) -> Option<(usize, usize)> {
        self.regions.iter().enumerate().find_map(|(i, (base, v))| {
            let off = addr.checked_sub(*base)? as usize;
            (off.checked_add(len)? <= v.len()).then_some((i, off))
        })
    }
    pub fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let (i, off) = self.find(addr, len).expect("read outside memory");
        self.regions[i].1[off..off + len].to_vec()
    }
    pub fn write(&mut self, addr: u64, data: &[u8]) {
        let (i, off) = self.find(addr, data.len()).expect("write outside memory");
        self.regions[i].1[off..off + data.len()].copy_from_slice(data);
    }
    pub fn fill_pattern(&mut self, addr: u64, len: usize, seed: u8) {
        let d: Vec<u8> = (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect();
        self.write(addr, &d);
    }
    /// Every region's bytes, for whole-memory comparisons.
    pub fn snapshot(&self) -> Vec<(u64, Vec<u8>)> {
        self.regions.clone()
    }
}

impl Dma for Memory {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let (i, off) = self.find(addr, buf.len()).ok_or(DmaError {
            addr,
            len: buf.len(),
        })?;
        buf.copy_from_slice(&self.regions[i].1[off..off + buf.len()]);
        Ok(())
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let (i, off) = self.find(addr, data.len()).ok_or(DmaError {
            addr,
            len: data.len(),
        })?;
        self.regions[i].1[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }
}

/// One side: an engine, its memory, a PD and a CQ.
pub struct Node {
    pub eng: Box<Eng>,
    pub mem: Memory,
    pub pd: Pd,
    pub cq: CqHandle,
    pub mac: [u8; 6],
    pub gid: [u8; 16],
    /// Every completion polled so far, per CQ poll order.
    pub wcs: Vec<WorkCompletion>,
}

impl Node {
    pub fn new(id: u8) -> Self {
        Self::with_port(id, |_| {})
    }

    /// A node whose port configuration `adjust` changes first (congestion control, say).
    pub fn with_port(id: u8, adjust: impl FnOnce(&mut PortConfig)) -> Self {
        let mac = [0x02, 0, 0, 0, 0, id];
        let gid = ipv4_gid([10, 0, 0, id]);
        let mut cfg = PortConfig::new(mac, gid);
        adjust(&mut cfg);
        let mut eng = Box::new(Eng::new(cfg));
        let pd = eng.alloc_pd().unwrap();
        let cq = eng.create_cq().unwrap();
        Self {
            eng,
            mem: Memory::new(0x1000_0000 * u64::from(id)),
            pd,
            cq,
            mac,
            gid,
            wcs: Vec::new(),
        }
    }

    /// Allocates and registers a buffer with every access right.
    pub fn buffer(&mut self, len: usize) -> (u64, MrKeys) {
        self.buffer_with(len, AccessFlags::ALL)
    }

    pub fn buffer_with(&mut self, len: usize, access: AccessFlags) -> (u64, MrKeys) {
        let addr = self.mem.alloc(len.max(1));
        let keys = self.eng.reg_mr(self.pd, addr, len as u64, access).unwrap();
        (addr, keys)
    }

    pub fn av_to(&self, peer: &Node) -> AddressVector {
        AddressVector {
            dmac: peer.mac,
            dgid: peer.gid,
            hop_limit: 64,
            ..Default::default()
        }
    }

    pub fn create_qp(&mut self, qp_type: QpType) -> Qpn {
        self.eng
            .create_qp(&QpInitAttr {
                qp_type,
                pd: self.pd,
                send_cq: self.cq.0,
                recv_cq: self.cq.0,
                sq_sig_all: false,
                max_inline_data: 0,
                srq: None,
            })
            .unwrap()
    }

    pub fn post_send(&mut self, qpn: Qpn, wr: &SendWr) {
        self.eng.post_send(qpn, wr).unwrap();
    }

    pub fn post_recv(&mut self, qpn: Qpn, wr: &RecvWr) {
        self.eng.post_recv(qpn, wr).unwrap();
    }

    /// Polls everything that is there into `wcs`; returns the new ones.
    pub fn poll(&mut self) -> Vec<WorkCompletion> {
        let mut out = Vec::new();
        while let Some(wc) = self.eng.poll_completion(self.cq) {
            out.push(wc);
        }
        self.wcs.extend(out.iter().copied());
        out
    }

    pub fn state(&mut self, qpn: Qpn) -> QpState {
        self.eng.query_qp(qpn).unwrap().state
    }

    /// The `wr_id` of every completion polled so far, in poll order.
    pub fn wr_ids(&self) -> Vec<u64> {
        self.wcs.iter().map(|w| w.wr_id).collect()
    }
}

/// QP parameters for `connect`.
#[derive(Clone, Copy, Debug)]
pub struct QpOpts {
    pub mtu: Mtu,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub a_psn: u32,
    pub b_psn: u32,
    pub access: AccessFlags,
    /// Selective repeat (set at INIT -> RTR), or Go-Back-N when `None`.
    pub sr: Option<SrAttr>,
}

impl Default for QpOpts {
    fn default() -> Self {
        Self {
            mtu: Mtu::Mtu1024,
            timeout: 8, // 1.05 ms
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1, // 10 us
            max_rd_atomic: 8,
            max_dest_rd_atomic: 8,
            a_psn: 0x100,
            b_psn: 0x200,
            access: AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
            sr: None,
        }
    }
}

/// Brings an RC or UC QP through INIT, RTR and RTS towards `remote`.
#[allow(clippy::too_many_arguments)]
pub fn bring_up(
    n: &mut Node,
    qpn: Qpn,
    qp_type: QpType,
    av: AddressVector,
    remote: Qpn,
    o: &QpOpts,
    sq_psn: u32,
    rq_psn: u32,
) {
    let mut init = QpAttr::to_state(QpState::Init);
    init.pkey_index = Some(0);
    init.port_num = Some(1);
    init.qp_access_flags = Some(o.access);
    n.eng.modify_qp(qpn, &init).unwrap();
    let mut rtr = QpAttr::to_state(QpState::Rtr);
    rtr.ah_attr = Some(av);
    rtr.path_mtu = Some(o.mtu);
    rtr.dest_qp_num = Some(remote);
    rtr.rq_psn = Some(Psn::new(rq_psn));
    if qp_type == QpType::Rc {
        rtr.max_dest_rd_atomic = Some(o.max_dest_rd_atomic);
        rtr.min_rnr_timer = RnrTimer::new(o.min_rnr_timer);
        rtr.selective_repeat = o.sr;
    }
    n.eng.modify_qp(qpn, &rtr).unwrap();
    let mut rts = QpAttr::to_state(QpState::Rts);
    rts.sq_psn = Some(Psn::new(sq_psn));
    if qp_type == QpType::Rc {
        rts.timeout = AckTimeout::new(o.timeout);
        rts.retry_cnt = RetryCount::new(o.retry_cnt);
        rts.rnr_retry = RetryCount::new(o.rnr_retry);
        rts.max_rd_atomic = Some(o.max_rd_atomic);
    }
    n.eng.modify_qp(qpn, &rts).unwrap();
}

/// Brings a UD QP to RTS.
pub fn bring_up_ud(n: &mut Node, qpn: Qpn, qkey: Qkey) {
    let mut init = QpAttr::to_state(QpState::Init);
    init.pkey_index = Some(0);
    init.port_num = Some(1);
    init.qkey = Some(qkey);
    n.eng.modify_qp(qpn, &init).unwrap();
    n.eng
        .modify_qp(qpn, &QpAttr::to_state(QpState::Rtr))
        .unwrap();
    let mut rts = QpAttr::to_state(QpState::Rts);
    rts.sq_psn = Some(Psn::new(0));
    n.eng.modify_qp(qpn, &rts).unwrap();
}

/// What a link does to frames.
#[derive(Clone, Copy, Debug)]
pub struct LinkCfg {
    /// One-way propagation delay.
    pub delay_ns: u64,
    /// Serialization time per byte (0.08 = 100 Gb/s).
    pub ns_per_byte: f64,
    pub drop: f64,
    pub dup: f64,
    /// Probability a frame is held back by up to `reorder_ns` extra.
    pub reorder: f64,
    pub reorder_ns: u64,
    pub corrupt: f64,
}

impl Default for LinkCfg {
    fn default() -> Self {
        Self {
            delay_ns: 1_000,
            ns_per_byte: 0.08,
            drop: 0.0,
            dup: 0.0,
            reorder: 0.0,
            reorder_ns: 5_000,
            corrupt: 0.0,
        }
    }
}

impl LinkCfg {
    pub fn lossy(p: f64) -> Self {
        Self {
            drop: p,
            dup: p,
            reorder: p,
            ..Self::default()
        }
    }
}

/// A frame filter: returning false drops the frame.
pub type Filter = Box<dyn FnMut(&[u8]) -> bool>;

/// A one-way link: frames in flight keyed by (arrival time, sequence).
#[derive(Default)]
pub struct Link {
    pub cfg: LinkCfg,
    in_flight: BTreeMap<(u64, u64), Vec<u8>>,
    seq: u64,
    /// When the transmitter is free again (serialization).
    busy_until: u64,
    pub sent: u64,
    pub dropped: u64,
    /// If set, called on every frame before faults; returning false drops it.
    pub filter: Option<Filter>,
}

impl Link {
    fn send(&mut self, now: u64, frame: Vec<u8>, rng: &mut Rng) {
        self.sent += 1;
        if let Some(f) = self.filter.as_mut() {
            if !f(&frame) {
                self.dropped += 1;
                return;
            }
        }
        let start = self.busy_until.max(now);
        let ser = (frame.len() as f64 * self.cfg.ns_per_byte) as u64;
        self.busy_until = start + ser;
        let mut at = start + ser + self.cfg.delay_ns;
        if rng.chance(self.cfg.drop) {
            self.dropped += 1;
            return;
        }
        let mut frame = frame;
        if rng.chance(self.cfg.corrupt) {
            let i = rng.below(frame.len() as u64) as usize;
            frame[i] ^= 1 << rng.below(8);
        }
        if rng.chance(self.cfg.reorder) {
            at += 1 + rng.below(self.cfg.reorder_ns);
        }
        if rng.chance(self.cfg.dup) {
            let extra = rng.below(self.cfg.reorder_ns + 1);
            self.seq += 1;
            self.in_flight.insert((at + extra, self.seq), frame.clone());
        }
        self.seq += 1;
        self.in_flight.insert((at, self.seq), frame);
    }
    fn next_arrival(&self) -> Option<u64> {
        self.in_flight.keys().next().map(|k| k.0)
    }
    fn take_due(&mut self, now: u64) -> Option<Vec<u8>> {
        let (&k, _) = self.in_flight.iter().next()?;
        if k.0 <= now {
            self.in_flight.remove(&k)
        } else {
            None
        }
    }
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

/// Two nodes and the links between them.
pub struct Pair {
    pub now: u64,
    pub a: Node,
    pub b: Node,
    /// a -> b.
    pub ab: Link,
    /// b -> a.
    pub ba: Link,
    pub rng: Rng,
    /// Frames each side transmitted (for tracing in tests).
    pub trace: Vec<(u64, bool, Vec<u8>)>,
    pub keep_trace: bool,
}

impl Pair {
    pub fn new(seed: u64) -> Self {
        Self {
            now: 0,
            a: Node::new(1),
            b: Node::new(2),
            ab: Link::default(),
            ba: Link::default(),
            rng: Rng::new(seed),
            trace: Vec::new(),
            keep_trace: false,
        }
    }

    pub fn with_links(seed: u64, cfg: LinkCfg) -> Self {
        let mut p = Self::new(seed);
        p.ab.cfg = cfg;
        p.ba.cfg = cfg;
        p
    }

    /// An RC (or UC) QP on each side, connected, both in RTS.
    pub fn connect(&mut self, qp_type: QpType, o: &QpOpts) -> (Qpn, Qpn) {
        let qa = self.a.create_qp(qp_type);
        let qb = self.b.create_qp(qp_type);
        let ava = self.a.av_to(&self.b);
        let avb = self.b.av_to(&self.a);
        bring_up(&mut self.a, qa, qp_type, ava, qb, o, o.a_psn, o.b_psn);
        bring_up(&mut self.b, qb, qp_type, avb, qa, o, o.b_psn, o.a_psn);
        (qa, qb)
    }

    /// Lets each node send while its link is free: transmission is paced at link rate,
    /// as a NIC's TX is, so no node queues more than one frame ahead of the wire.
    fn transmit_all(&mut self) {
        let mut buf = vec![0u8; 9000];
        let now = Instant::from_nanos(self.now);
        while self.ab.busy_until <= self.now {
            let Some(n) = self.a.eng.poll_transmit(now, &mut buf, &mut self.a.mem) else {
                break;
            };
            if self.keep_trace {
                self.trace.push((self.now, true, buf[..n].to_vec()));
            }
            self.ab.send(self.now, buf[..n].to_vec(), &mut self.rng);
        }
        while self.ba.busy_until <= self.now {
            let Some(n) = self.b.eng.poll_transmit(now, &mut buf, &mut self.b.mem) else {
                break;
            };
            if self.keep_trace {
                self.trace.push((self.now, false, buf[..n].to_vec()));
            }
            self.ba.send(self.now, buf[..n].to_vec(), &mut self.rng);
        }
    }

    /// Processes everything due now, then advances time to the next event. False when
    /// there is nothing left to happen.
    pub fn step(&mut self) -> bool {
        self.transmit_all();
        let now = Instant::from_nanos(self.now);
        while let Some(f) = self.ab.take_due(self.now) {
            self.b.eng.handle_packet(now, &f, &mut self.b.mem);
        }
        while let Some(f) = self.ba.take_due(self.now) {
            self.a.eng.handle_packet(now, &f, &mut self.a.mem);
        }
        if self.a.eng.poll_timeout().is_some_and(|t| t <= now) {
            self.a.eng.handle_timeout(now);
        }
        if self.b.eng.poll_timeout().is_some_and(|t| t <= now) {
            self.b.eng.handle_timeout(now);
        }
        self.transmit_all();
        let next = [
            self.ab.next_arrival(),
            self.ba.next_arrival(),
            self.a.eng.poll_timeout().map(|t| t.as_nanos()),
            self.b.eng.poll_timeout().map(|t| t.as_nanos()),
            (self.ab.busy_until > self.now).then_some(self.ab.busy_until),
            (self.ba.busy_until > self.now).then_some(self.ba.busy_until),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) => {
                self.now = self.now.max(t);
                true
            }
            None => false,
        }
    }

    /// Steps until nothing is left to happen or `limit_ns` of virtual time passed;
    /// polls both CQs as it goes. Returns true if it went idle.
    pub fn run(&mut self, limit_ns: u64) -> bool {
        let end = self.now + limit_ns;
        loop {
            let more = self.step();
            self.a.poll();
            self.b.poll();
            if !more {
                return true;
            }
            if self.now > end {
                return false;
            }
        }
    }

    /// `run` with a generous limit, asserting that the pair goes idle.
    pub fn settle(&mut self) {
        assert!(self.run(60_000_000_000), "pair did not go idle");
    }
}

/// What a frame is, for tests that watch the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    pub opcode: roce_core::wire::Opcode,
    pub psn: Psn,
    pub ack_req: bool,
    pub syndrome: Option<roce_core::wire::aeth::Syndrome>,
    pub payload: usize,
}

pub fn seen(frame: &[u8]) -> Option<Seen> {
    let p = roce_core::wire::parse(frame).ok()?;
    Some(Seen {
        opcode: p.headers().bth.opcode,
        psn: p.headers().bth.psn,
        ack_req: p.headers().bth.ack_req,
        syndrome: p.headers().ext.aeth.map(|a| a.syndrome),
        payload: p.payload().len(),
    })
}

impl Pair {
    /// Frames a sent (`true`) or b sent (`false`), decoded.
    pub fn seen(&self, from_a: bool) -> Vec<Seen> {
        self.trace
            .iter()
            .filter(|t| t.1 == from_a)
            .filter_map(|t| seen(&t.2))
            .collect()
    }
}

/// Posts a mix of WRITE, SEND, READ and FETCH_ADD on A and checks every result.
pub fn mixed_workload(seed: u64, link: LinkCfg, o: &QpOpts, n: usize) -> Pair {
    let mut p = Pair::with_links(seed, link);
    let (qa, qb) = p.connect(QpType::Rc, o);
    let len = 3 * 1024 + 17;
    let (src, ka) = p.a.buffer(len * n);
    p.a.mem.fill_pattern(src, len * n, 1);
    let (wdst, kb) = p.b.buffer(len * n);
    let (rdst, ka2) = p.a.buffer(len * n);
    p.b.mem.fill_pattern(wdst, len * n, 2);
    let (sdst, kb2) = p.b.buffer(len * n);
    let (ctr, kb3) = p.b.buffer(8);
    let (old, ka3) = p.a.buffer(8 * n);
    let mut expect_sends = Vec::new();
    for i in 0..n {
        let off = (i * len) as u64;
        let wr = match i % 4 {
            0 => SendWr::new(i as u64, WrOp::rdma_write(wdst + off, kb.rkey)).sge(
                src + off,
                len as u32,
                ka.lkey,
            ),
            1 => {
                p.b.post_recv(
                    qb,
                    &RecvWr::new(i as u64).sge(sdst + off, len as u32, kb2.lkey),
                );
                expect_sends.push(i);
                SendWr::new(i as u64, WrOp::Send).sge(src + off, len as u32, ka.lkey)
            }
            2 => SendWr::new(i as u64, WrOp::rdma_read(wdst + off, kb.rkey)).sge(
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
        // READs of a region that a WRITE fills are ordered by a fence.
        let f = if i % 4 == 2 {
            SendFlags::SIGNALED | SendFlags::FENCE
        } else {
            SendFlags::SIGNALED
        };
        p.a.post_send(qa, &wr.flags(f));
    }
    assert!(p.run(20_000_000_000), "seed {seed}: did not go idle");
    assert_eq!(
        p.a.wr_ids(),
        (0..n as u64).collect::<Vec<_>>(),
        "seed {seed}: send completions"
    );
    assert!(
        p.a.wcs.iter().all(|w| w.status == WcStatus::Success),
        "seed {seed}: {:?}",
        p.a.wcs
    );
    for i in 0..n {
        let off = (i * len) as u64;
        match i % 4 {
            0 => assert_eq!(
                p.b.mem.read(wdst + off, len),
                p.a.mem.read(src + off, len),
                "seed {seed} write {i}"
            ),
            1 => assert_eq!(
                p.b.mem.read(sdst + off, len),
                p.a.mem.read(src + off, len),
                "seed {seed} send {i}"
            ),
            2 => assert_eq!(
                p.a.mem.read(rdst + off, len),
                p.b.mem.read(wdst + off, len),
                "seed {seed} read {i}"
            ),
            _ => {}
        }
    }
    // Atomics executed exactly once each, and their results are a permutation.
    let adds = (0..n).filter(|i| i % 4 == 3).count() as u64;
    assert_eq!(
        p.b.mem.read(ctr, 8),
        adds.to_le_bytes(),
        "seed {seed}: atomics"
    );
    assert_eq!(
        p.b.wr_ids(),
        expect_sends.iter().map(|&i| i as u64).collect::<Vec<_>>()
    );
    p
}
