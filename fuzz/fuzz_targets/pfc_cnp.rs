//! PFC and CNP frames (issue 17): one script of frames, with the time between them, goes
//! to two places.
//!
//! * **The MAC** (`roce_sim`'s, which every switch port and host port of the fabric has):
//!   host A sends the frames over a 1 Gb/s link to host B, which always has a frame of
//!   every priority to send back. Invariants, against a reference model of 802.1Qbb
//!   (roce-facts §8) written here from the frame bytes and their arrival times:
//!   * every time the fabric asks B for a frame, the priorities it says are paused are
//!     exactly those the model says (a pause of q quanta stops a priority for q x 512
//!     bit times from the end of the pause frame, a later frame replaces the timer,
//!     quanta 0 resumes; a frame that is not PFC changes nothing);
//!   * when B had to say "nothing" (all eight paused), it is asked again no later than
//!     the first instant the model has a priority running again (no lost wake-up);
//!   * B's port counters: pause frames, XOFF and XON per priority and malformed MAC
//!     control frames as the model counts them, and the paused time per priority equal
//!     to the model's.
//!
//!   The NIC's own pause timers (`roce_core::dcb::PauseTimers`, the model the RTL is
//!   tested against) fed the same requests say the same priorities are paused at every
//!   one of those instants.
//! * **The engine's congestion control** (an engine with the DCQCN reaction point and
//!   the notification point on, two RC QPs with a send in flight and receives posted):
//!   the frames arrive at the script's times, templates being real CNPs, ACKs and
//!   CE-marked SENDs of its peer. Invariants:
//!   * every frame addressed to the engine that is a CNP is counted once, as handled or
//!     as ignored; handled exactly when it names an RC QP of the engine and comes from
//!     that QP's peer, and then it cuts that QP's rate (unless already at the floor);
//!   * every QP's rate stays within [minimum rate, target rate] and the target rate at
//!     most line rate, alpha at most 1;
//!   * the CNPs the engine sends name the peer QP of a QP that received CE-marked
//!     packets, at most one per QP per CNP interval;
//!   * after `handle_timeout(t)` no timer is due at or before `t` (no spinning timer).
//! * **Data Center Bridging** (the same input read as numbers): the NIC's classifier
//!   against the switch's, ETS selection against 802.1Qaz's rules and the fair-queuing
//!   bound, PFC generation against its thresholds, and the switch's PFC in a congested
//!   fabric (no lossless frame lost, no lost XON); see [`check_classifiers`],
//!   [`check_ets`], [`check_pfc_gen`] and [`check_switch`].

#![no_main]

use std::cell::RefCell;
use std::rc::Rc;

use libfuzzer_sys::fuzz_target;
use roce_core::cc::{CcConfig, DcqcnConfig, ONE};
use roce_core::dcb::{
    refresh_nanos, Ets, EtsConfig, PauseTimers, PfcGen, PfcThresholds, PriorityMap,
};
use roce_core::num::Qpn;
use roce_core::transport::{Instant, Mtu, QpType, RecvWr, SendFlags, SendWr, WrOp};
use roce_core::wire::ethernet::MacAddr;
use roce_core::wire::pfc::PfcRepr;
use roce_core::wire::{self, Transport};
use roce_core_fuzz::world::{connect, fix, Access, Conn, Side, FRAME_BUF};
use roce_sim::classify::classify;
use roce_sim::{
    serialization_ns, Fabric, LinkConfig, Nanos, Node, PfcConfig, Priorities, SwitchConfig,
    MAX_FRAME_LEN,
};

/// The link: 1 Gb/s, so a bit time is a nanosecond and a pause quantum 512 ns exactly.
const RATE: u64 = 1_000_000_000;
const DELAY: Nanos = 500;
/// B's frames: large, so a long pause costs few events.
const B_FRAME: usize = 9000;
/// The engine's line rate.
const LINE: u64 = 100_000_000_000;

// ---------------------------------------------------------------------------------------
// The script

/// The frames of an input with the nanoseconds before each. Per frame one op byte:
/// `op >> 2` x 16 us pass, then by `op & 3`: 0 a PFC frame (a 16-bit enable vector and
/// eight 16-bit pause times), 1 a template with byte patches (a template index, a byte
/// whose low 3 bits count the patches and whose top bit asks for the checksums to be
/// fixed, per patch a 16-bit offset and a value), 2 raw bytes (a length byte and the
/// bytes), 3 a MAC Control frame with an arbitrary body (a length byte and the body).
fn script(mut input: &[u8], templates: &[Vec<u8>]) -> Vec<(Nanos, Vec<u8>)> {
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, rest) = input.split_at_checked(n)?;
        input = rest;
        Some(head)
    };
    let mut out = Vec::new();
    while let Some(&[op]) = take(1) {
        let gap = Nanos::from(op >> 2) * 16_000;
        let frame = match op & 3 {
            0 => {
                let Some(body) = take(18) else { break };
                let mut f = mac_control_header();
                f.extend_from_slice(&[0x01, 0x01]);
                f.extend_from_slice(body);
                f.resize(60, 0);
                f
            }
            1 => {
                let Some(&[t, n]) = take(2) else { break };
                let mut f = templates[usize::from(t) % templates.len()].clone();
                for _ in 0..n & 7 {
                    let Some(&[o1, o2, v]) = take(3) else { break };
                    let at = usize::from(u16::from_be_bytes([o1, o2])) % f.len();
                    f[at] = v;
                }
                if n & 0x80 != 0 {
                    fix(&mut f);
                }
                f
            }
            2 => {
                let Some(&[len]) = take(1) else { break };
                let Some(bytes) = take(usize::from(len)) else {
                    break;
                };
                bytes.to_vec()
            }
            _ => {
                let Some(&[len]) = take(1) else { break };
                let Some(body) = take(usize::from(len)) else {
                    break;
                };
                let mut f = mac_control_header();
                f.extend_from_slice(body);
                f
            }
        };
        out.push((gap, frame));
    }
    out
}

/// Destination 01-80-C2-00-00-01, a source MAC, EtherType 0x8808.
fn mac_control_header() -> Vec<u8> {
    let mut f = vec![0x01, 0x80, 0xC2, 0x00, 0x00, 0x01, 0x02, 0, 0, 0, 0, 0xA];
    f.extend_from_slice(&[0x88, 0x08]);
    f
}

// ---------------------------------------------------------------------------------------
// The MAC half: the reference model

/// A PFC request as 802.1Qbb defines it, read from the bytes (not by roce-core): a MAC
/// Control frame (EtherType 0x8808) with opcode 0x0101, an enable vector whose high byte
/// is zero, eight pause times. `None` for a frame that is not MAC Control; `Some(None)`
/// for MAC Control that is not a valid PFC request.
fn pfc_of(frame: &[u8]) -> Option<Option<(u8, [u16; 8])>> {
    let be = |at: usize| u16::from_be_bytes([frame[at], frame[at + 1]]);
    if frame.len() < 14 || be(12) != 0x8808 {
        return None;
    }
    if frame.len() < 14 + 20 || be(14) != 0x0101 || be(16) > 0xFF {
        return Some(None);
    }
    Some(Some((
        be(16) as u8,
        std::array::from_fn(|p| be(18 + 2 * p)),
    )))
}

/// Where a pause of `quanta` arriving at `at` ends: a quantum is 512 bit times.
fn pause_end(at: Nanos, quanta: u16) -> Nanos {
    at + u64::from(quanta) * 512 * 1_000_000_000 / RATE
}

/// What B's MAC receives: the PFC requests with their arrival times, in order.
#[derive(Default)]
struct Model {
    /// (arrival, enable, quanta).
    requests: Vec<(Nanos, u8, [u16; 8])>,
    bad: u64,
}

impl Model {
    /// The instants up to `end` at which some priority runs (is not paused, counting
    /// the requests arriving at that instant), in order, among those where that can
    /// change: every request's arrival and every pause's end. Computed once per input
    /// with one sweep; answering each all-paused poll by folding over every request at
    /// every candidate instant was quadratic and a sixth of the target's time.
    fn running_instants(&self, end: Nanos) -> Vec<Nanos> {
        let mut candidates = Vec::with_capacity(self.requests.len() * 9);
        for &(at, enable, quanta) in &self.requests {
            candidates.push(at);
            for (p, &q) in quanta.iter().enumerate() {
                if enable & (1 << p) != 0 {
                    candidates.push(pause_end(at, q));
                }
            }
        }
        candidates.retain(|&c| c <= end);
        candidates.sort_unstable();
        candidates.dedup();
        let mut sweep = self.sweep();
        candidates.retain(|&c| sweep.paused(c).1 != Priorities::ALL);
        candidates
    }

    /// The first instant after `t` (and up to `end`) at which a priority runs, from
    /// [`Model::running_instants`]`(end)`.
    fn first_running_after(running: &[Nanos], t: Nanos, end: Nanos) -> Nanos {
        running
            .get(running.partition_point(|&c| c <= t))
            .copied()
            .unwrap_or(end)
    }

    /// The paused priorities at the instants of B's polls, in time order: one sweep over
    /// the requests (a fold over all of them per poll was a tenth of the target's time).
    fn sweep(&self) -> Sweep<'_> {
        Sweep {
            requests: &self.requests,
            applied: 0,
            until: [0; 8],
            last: 0,
        }
    }

    /// Nanoseconds priority `p` spent paused up to `end`, XOFF and XON counts.
    fn accounting(&self, p: usize, end: Nanos) -> (u64, u64, u64) {
        let mine: Vec<(Nanos, u16)> = self
            .requests
            .iter()
            .filter(|r| r.1 & (1 << p) != 0)
            .map(|r| (r.0, r.2[p]))
            .collect();
        let mut paused = 0;
        for (i, &(at, q)) in mine.iter().enumerate() {
            let until = pause_end(at, q);
            let next = mine.get(i + 1).map_or(end, |n| n.0).min(end);
            paused += until.min(next).saturating_sub(at);
        }
        let xoff = mine.iter().filter(|r| r.1 != 0).count() as u64;
        (paused, xoff, mine.len() as u64 - xoff)
    }
}

/// [`Model::until`] for non-decreasing instants, applying each request once.
struct Sweep<'a> {
    requests: &'a [(Nanos, u8, [u16; 8])],
    /// Requests arrived before the last instant asked for.
    applied: usize,
    until: [Nanos; 8],
    last: Nanos,
}

impl Sweep<'_> {
    /// [`Model::paused`] at `t`, without and with the requests arriving at `t` itself;
    /// `t` must not be earlier than the last call's.
    fn paused(&mut self, t: Nanos) -> (Priorities, Priorities) {
        fn apply(until: &mut [Nanos; 8], &(at, enable, quanta): &(Nanos, u8, [u16; 8])) {
            for p in 0..8 {
                if enable & (1 << p) != 0 {
                    until[p] = pause_end(at, quanta[p]);
                }
            }
        }
        fn paused(until: &[Nanos; 8], t: Nanos) -> Priorities {
            Priorities((0..8).fold(0, |m, p| m | (u8::from(t < until[p]) << p)))
        }
        assert!(t >= self.last, "B polled at {t} ns after {} ns", self.last);
        self.last = t;
        while let Some(r) = self.requests.get(self.applied).filter(|r| r.0 < t) {
            apply(&mut self.until, r);
            self.applied += 1;
        }
        let mut with_t = self.until;
        for r in self.requests[self.applied..]
            .iter()
            .take_while(|r| r.0 == t)
        {
            apply(&mut with_t, r);
        }
        (paused(&self.until, t), paused(&with_t, t))
    }
}

// ---------------------------------------------------------------------------------------
// The MAC half: the two hosts

/// A: sends the script's frames, each once its time has come and the wire is free.
struct Sender {
    /// (time due, frame), shared with the checks (not copied per input).
    frames: Rc<Vec<(Nanos, Vec<u8>)>>,
    next: usize,
    /// The last wake-up: a frame due by then waits for the wire to free up (the fabric
    /// polls an idle transmitter), not for another wake-up.
    woken: Option<Nanos>,
    /// (start of transmission, length) of each frame sent.
    sent: Rc<RefCell<Vec<(Nanos, usize)>>>,
}

impl Node for Sender {
    fn handle_frame(&mut self, _: Nanos, _: usize, _: &[u8]) {}

    fn poll_transmit(
        &mut self,
        now: Nanos,
        _: usize,
        _: Priorities,
        buf: &mut [u8],
    ) -> Option<usize> {
        let (at, frame) = self.frames.get(self.next)?;
        if *at > now {
            return None;
        }
        self.next += 1;
        let n = frame.len().min(MAX_FRAME_LEN);
        buf[..n].copy_from_slice(&frame[..n]);
        self.sent.borrow_mut().push((now, n));
        Some(n)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        let at = self.frames.get(self.next)?.0;
        self.woken.is_none_or(|w| at > w).then_some(at)
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.woken = Some(now);
    }
}

/// B: always has a frame of every priority (VLAN-tagged, PCP = priority), sends the
/// unpaused ones round robin and records what it was told.
#[derive(Default)]
struct Backlogged {
    next_prio: u8,
    /// (time, paused, whether it sent).
    polls: Rc<RefCell<Vec<(Nanos, Priorities, bool)>>>,
}

impl Node for Backlogged {
    fn handle_frame(&mut self, _: Nanos, _: usize, _: &[u8]) {}

    fn poll_transmit(
        &mut self,
        now: Nanos,
        _: usize,
        paused: Priorities,
        buf: &mut [u8],
    ) -> Option<usize> {
        let prio = (0..8)
            .map(|i| (self.next_prio + i) % 8)
            .find(|&p| !paused.contains(p));
        self.polls.borrow_mut().push((now, paused, prio.is_some()));
        let prio = prio?;
        self.next_prio = (prio + 1) % 8;
        // The header only: A ignores the body, and zeroing 9 KB per frame was an eighth
        // of the target's time.
        let f = &mut buf[..B_FRAME];
        f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xA]);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xB]);
        f[12..16].copy_from_slice(&[0x81, 0x00, prio << 5, 0]);
        f[16..18].copy_from_slice(&[0x88, 0xB5]); // local experimental EtherType
        Some(B_FRAME)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }

    fn handle_timeout(&mut self, _: Nanos) {}
}

fn check_mac(frames: &[(Nanos, Vec<u8>)]) {
    let mut at = 0;
    let timed: Rc<Vec<(Nanos, Vec<u8>)>> = Rc::new(
        frames
            .iter()
            .map(|(gap, f)| {
                at += gap;
                (at, f.clone())
            })
            .collect(),
    );
    let sent = Rc::new(RefCell::new(Vec::new()));
    let polls = Rc::new(RefCell::new(Vec::new()));
    let mut fab = fabric();
    let a = fab.add_host(Sender {
        frames: Rc::clone(&timed),
        next: 0,
        woken: None,
        sent: Rc::clone(&sent),
    });
    let b = fab.add_host(Backlogged {
        polls: Rc::clone(&polls),
        ..Default::default()
    });
    fab.connect(a, 0, b, 0, LinkConfig::new(RATE, DELAY));
    // Every frame of A is out and arrived by then.
    let wire: Nanos = timed
        .iter()
        .map(|(_, f)| serialization_ns(f.len().min(MAX_FRAME_LEN), RATE))
        .sum();
    let end = at + wire + DELAY + 100_000;
    fab.run_until(end);
    let end = fab.now();

    let sent = sent.borrow();
    assert_eq!(sent.len(), timed.len(), "A did not get to send every frame");
    let mut model = Model::default();
    for ((start, len), (_, frame)) in sent.iter().zip(timed.iter()) {
        let arrival = start + serialization_ns(*len, RATE) + DELAY;
        match pfc_of(&frame[..*len]) {
            Some(Some((enable, quanta))) => model.requests.push((arrival, enable, quanta)),
            Some(None) => model.bad += 1,
            None => {}
        }
    }

    let polls = polls.borrow();
    let running = model.running_instants(end);
    let mut sweep = model.sweep();
    // The NIC's pause timers, given the same requests as they arrive.
    let mut timers = PauseTimers::default();
    let mut applied = 0;
    for (i, &(t, paused, sent)) in polls.iter().enumerate() {
        let (before, with_t) = sweep.paused(t);
        assert!(
            paused == before || paused == with_t,
            "at {t} ns B was told {:#04x} is paused, the model says {:#04x} (or {:#04x} with \
             the requests arriving at that instant)",
            paused.0,
            before.0,
            with_t.0
        );
        if !sent {
            let next = polls.get(i + 1).map_or(end, |p| p.0);
            let due = Model::first_running_after(&running, t, end);
            assert!(
                next <= due,
                "B, all paused at {t} ns, was asked again only at {next} ns; a priority \
                 runs again at {due} ns"
            );
        }
        while let Some(&(at, enable, quanta)) = model.requests.get(applied).filter(|r| r.0 <= t) {
            timers.apply(at, &PfcRepr { enable, quanta }, RATE, Priorities::ALL);
            applied += 1;
        }
        assert_eq!(timers.paused(t), with_t, "the NIC's pause timers at {t} ns");
    }

    let c = fab.port_counters(b, 0);
    assert_eq!(
        c.pause_frames_rx,
        model.requests.len() as u64,
        "pause frames"
    );
    assert_eq!(c.bad_mac_control, model.bad, "malformed MAC Control frames");
    for p in 0..8 {
        let (paused, xoff, xon) = model.accounting(p, end);
        assert_eq!(
            (c.paused_ns[p], c.xoff_rx[p], c.xon_rx[p]),
            (paused, xoff, xon),
            "priority {p}: paused ns, XOFF, XON"
        );
    }
    keep(fab);
}

thread_local! {
    /// The last input's fabric, whose frame buffers the next fabric takes over.
    static SPARE: RefCell<Option<Fabric>> = const { RefCell::new(None) };
}

/// An empty fabric (seed 1), on the buffers of the last one [`keep`] was given: a new
/// fabric allocates and zeroes 9 KB per frame it holds, a quarter of this target's time.
fn fabric() -> Fabric {
    SPARE
        .take()
        .map_or_else(|| Fabric::new(1), |f| f.recycle(1))
}

fn keep(fab: Fabric) {
    SPARE.set(Some(fab));
}

// ---------------------------------------------------------------------------------------
// The congestion control half

struct CcWorld {
    pristine: Side,
    /// (QP of the engine, its peer QP).
    qps: [(Qpn, Qpn); 2],
    peer_gid: [u8; 16],
    templates: Vec<Vec<u8>>,
}

fn cc() -> CcConfig {
    CcConfig {
        np: true,
        rp: true,
        dcqcn: DcqcnConfig::new(LINE),
        ..CcConfig::default()
    }
}

/// Sets the ECN field of an IPv4 RoCE frame to CE and fixes its checksums.
fn mark_ce(frame: &mut [u8]) {
    let l3 = wire::parse(frame)
        .expect("a frame of the engine")
        .layout()
        .l3;
    frame[l3 + 1] |= 0b11;
    fix(frame);
}

fn is_cnp(frame: &[u8]) -> bool {
    wire::parse(frame).is_ok_and(|p| p.info().transport == Transport::Cnp)
}

/// The engine (side 1) with two RC QPs to side 2, each with a SEND in flight and
/// receives posted; the templates are what side 2 sends back: a CNP to each QP, the
/// ACK of each SEND, and a CE-marked SEND on each QP.
fn cc_world() -> CcWorld {
    let (mut a, mut b) = (Side::with_cc(1, cc()), Side::with_cc(2, cc()));
    let conn = Conn {
        mtu: Mtu::Mtu256,
        sq_psn: 100,
        rq_psn: 200,
        sr: false,
    };
    let back = Conn {
        sq_psn: 200,
        rq_psn: 100,
        ..conn
    };
    let (ava, avb) = (a.av_to(&b), b.av_to(&a));
    let (sa, ka) = a.buffer(256);
    a.mem.allow(sa, 256, Access::ReadWrite, "engine buffer");
    let (sb, kb) = b.buffer(256);
    b.mem.allow(sb, 256, Access::ReadWrite, "peer buffer");
    let mut qps = [(Qpn::new(0), Qpn::new(0)); 2];
    for q in &mut qps {
        let (qa, qb) = (a.create_qp(QpType::Rc), b.create_qp(QpType::Rc));
        connect(&mut a, qa, QpType::Rc, ava, qb, conn);
        connect(&mut b, qb, QpType::Rc, avb, qa, back);
        *q = (qa, qb);
    }
    let mut templates = Vec::new();
    for (i, &(qa, qb)) in qps.iter().enumerate() {
        let send = |lkey, addr| {
            SendWr::new(i as u64, WrOp::Send)
                .sge(addr, 64, lkey)
                .flags(SendFlags::SIGNALED)
        };
        let recv = |lkey, addr| RecvWr::new(10 + i as u64).sge(addr, 256, lkey);
        for _ in 0..4 {
            a.eng.post_recv(qa, &recv(ka.lkey, sa)).expect("post_recv");
        }
        b.eng.post_recv(qb, &recv(kb.lkey, sb)).expect("post_recv");
        // A's SEND, CE-marked on its way: B acknowledges it and owes A a CNP.
        a.eng.post_send(qa, &send(ka.lkey, sa)).expect("post_send");
        let mut out = a.drain(Instant::ZERO);
        assert_eq!(out.len(), 1, "one SEND");
        mark_ce(&mut out[0]);
        b.eng.handle_packet(Instant::ZERO, &out[0], &mut b.mem);
        let replies = b.drain(Instant::ZERO);
        assert!(replies.iter().any(|f| is_cnp(f)), "B answers CE with a CNP");
        templates.extend(replies);
        // B's SEND to A, CE-marked.
        b.eng.post_send(qb, &send(kb.lkey, sb)).expect("post_send");
        let mut out = b.drain(Instant::ZERO);
        assert_eq!(out.len(), 1, "one SEND");
        mark_ce(&mut out[0]);
        templates.push(out.remove(0));
    }
    while b.eng.poll_completion(b.cq).is_some() {}
    CcWorld {
        pristine: a,
        qps,
        peer_gid: b.gid,
        templates,
    }
}

thread_local! {
    static WORLD: RefCell<Option<(CcWorld, Side)>> = const { RefCell::new(None) };
}

/// Runs the engine's timers due up to `t`, each at its own time.
fn run_timers(s: &mut Side, t: u64) {
    for _ in 0..100_000 {
        match s.eng.poll_timeout() {
            Some(d) if d.as_nanos() <= t => {
                s.eng.handle_timeout(d);
                assert!(
                    s.eng.poll_timeout().is_none_or(|n| n > d),
                    "handle_timeout({d:?}) left a timer due"
                );
            }
            _ => return,
        }
    }
    panic!("more than 100000 timer expiries before {t} ns");
}

fn check_cc(w: &CcWorld, s: &mut Side, frames: &[(Nanos, Vec<u8>)]) {
    let cfg = cc();
    let mut now = 0;
    let mut buf = vec![0u8; FRAME_BUF];
    // Per QP of the engine: when it last sent a CNP.
    let mut last_cnp: [Option<u64>; 2] = [None; 2];
    for (gap, frame) in frames {
        now += gap;
        run_timers(s, now);
        let before = *s.eng.counters();
        let rates = w.qps.map(|(q, _)| s.eng.qp_cc(q).expect("a QP").rate);
        s.eng
            .handle_packet(Instant::from_nanos(now), frame, &mut s.mem);
        let after = *s.eng.counters();
        let counted = (after.rp_cnp_handled + after.rp_cnp_ignored)
            - (before.rp_cnp_handled + before.rp_cnp_ignored);
        let cnp = wire::parse(frame).ok().filter(|p| {
            p.dst_mac() == s.mac && p.gids().1 == s.gid && p.info().transport == Transport::Cnp
        });
        assert_eq!(
            counted,
            u64::from(cnp.is_some()),
            "a CNP is counted once: {frame:02x?}"
        );
        let handled = after.rp_cnp_handled - before.rp_cnp_handled;
        let target = cnp.as_ref().and_then(|p| {
            w.qps
                .iter()
                .position(|&(q, _)| q == p.dest_qp())
                .filter(|_| p.gids().0 == w.peer_gid)
        });
        assert_eq!(
            handled,
            u64::from(target.is_some()),
            "handled: {frame:02x?}"
        );
        if let Some(i) = target {
            let rate = s.eng.qp_cc(w.qps[i].0).expect("a QP").rate;
            assert!(
                rate < rates[i] || rates[i] == cfg.dcqcn.min_rate,
                "a CNP did not cut the rate ({} -> {rate})",
                rates[i]
            );
        }
        while let Some(n) = s
            .eng
            .poll_transmit(Instant::from_nanos(now), &mut buf, &mut s.mem)
        {
            let Ok(p) = wire::parse(&buf[..n]) else {
                panic!(
                    "the engine sent a frame it cannot parse: {:02x?}",
                    &buf[..n]
                );
            };
            if p.info().transport != Transport::Cnp {
                continue;
            }
            let i = w
                .qps
                .iter()
                .position(|&(_, peer)| peer == p.dest_qp())
                .unwrap_or_else(|| panic!("a CNP to QP {:?}, no peer of ours", p.dest_qp()));
            if let Some(t) = last_cnp[i] {
                assert!(
                    now >= t + cfg.cnp_interval_ns,
                    "two CNPs for one QP {} ns apart",
                    now - t
                );
            }
            last_cnp[i] = Some(now);
        }
        while s.eng.poll_completion(s.cq).is_some() {}
        for &(q, _) in &w.qps {
            let info = s.eng.qp_cc(q).expect("a QP");
            assert!(
                cfg.dcqcn.min_rate <= info.rate
                    && info.rate <= info.target_rate
                    && info.target_rate <= cfg.dcqcn.line_rate
                    && info.alpha <= ONE
                    && info.np_cnp_sent <= info.np_ecn_marked_roce_packets,
                "QP {q:?} out of bounds: {info:?}"
            );
        }
    }
}

fuzz_target!(|input: &[u8]| {
    WORLD.with_borrow_mut(|world| {
        let (w, side) = world.get_or_insert_with(|| {
            let w = cc_world();
            let side = w.pristine.clone();
            (w, side)
        });
        let frames = script(input, &w.templates);
        check_mac(&frames);
        side.restore(&w.pristine);
        check_cc(w, side, &frames);
        check_classifiers(input, &frames);
        check_ets(input);
        check_pfc_gen(input);
        check_switch(input);
    });
});

// ---------------------------------------------------------------------------------------
// The DCB half: roce_core::dcb's building blocks and the switch's PFC

/// The input read once more, as numbers: zeros past its end.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    /// How many items of `size` bytes are left, at most `max`.
    fn items(&self, size: usize, max: usize) -> usize {
        (self.0.len() / size).min(max)
    }
}

/// The NIC's classifier (`dcb::PriorityMap`, which the RTL matches) and the switch's
/// (`roce_sim::classify`) give every well-formed frame the same priority under the same
/// DSCP map: an 802.1Q frame its PCP (through the identity PCP map), an untagged IP
/// frame whose header the switch can read its DSCP's priority, anything else 0. (The
/// two differ on purpose only for a truncated IP header, which the NIC's RTL reads from
/// bytes 14-15 alone.) And the PCP map is applied as given.
fn check_classifiers(input: &[u8], frames: &[(Nanos, Vec<u8>)]) {
    let mut b = Bytes(input);
    let mut map = PriorityMap::new();
    for d in &mut map.dscp {
        *d = b.u8() & 7;
    }
    // PCPs 0..=7 in turn: a script has up to ~2,000 frames, and `0u8..` overflowed
    // (a panic with overflow checks) at its 256th.
    for (f, pcp) in frames.iter().map(|(_, f)| f).zip((0..8u8).cycle()) {
        let nic = map.of_frame(f);
        let Some(class) = classify(f, &map.dscp) else {
            continue;
        };
        let ethertype = [f[12], f[13]];
        let tagged = ethertype == [0x81, 0x00];
        let other = !tagged && !matches!(ethertype, [0x08, 0x00] | [0x86, 0xDD]);
        if (tagged && f.len() >= 18) || (!tagged && class.ip.is_some()) || other {
            assert_eq!(
                nic, class.priority,
                "the NIC and the switch classify differently: {f:02x?}"
            );
        }
        let mut remapped = map;
        remapped.pcp = [7, 6, 5, 4, 3, 2, 1, 0];
        assert_eq!(remapped.priority(0, Some(pcp & 7)), 7 - (pcp & 7));
    }
}

/// An ETS configuration from the input, checked against 802.1Qaz's rules as written
/// here, then made valid: strict classes share nothing, every ETS class has at least
/// 1 %, the ETS shares add up to 100.
fn ets_config(b: &mut Bytes) -> EtsConfig {
    let raw = EtsConfig {
        strict: Priorities(b.u8()),
        bw: std::array::from_fn(|_| b.u8() % 101),
        ..EtsConfig::STRICT
    };
    let ets: Vec<u8> = (0..8).filter(|&p| !raw.strict.contains(p)).collect();
    let sum: u32 = ets.iter().map(|&p| u32::from(raw.bw[usize::from(p)])).sum();
    let valid = (0..8u8).all(|p| raw.strict.contains(p) == (raw.bw[usize::from(p)] == 0))
        && (ets.is_empty() || sum == 100);
    assert_eq!(
        raw.validate().is_ok(),
        valid,
        "validate() of {raw:?}: {:?}",
        raw.validate()
    );
    let mut cfg = EtsConfig {
        strict: raw.strict,
        bw: [0; 8],
        ..EtsConfig::STRICT
    };
    let mut left = 100 - ets.len() as u8;
    for (i, &p) in ets.iter().enumerate() {
        let extra = if i + 1 == ets.len() {
            left
        } else {
            raw.bw[usize::from(p)].min(left)
        };
        cfg.bw[usize::from(p)] = 1 + extra;
        left -= extra;
    }
    assert_eq!(cfg.validate(), Ok(()), "{cfg:?}");
    cfg
}

/// ETS transmission selection (`dcb::Ets`) under arbitrary eligible sets and frame
/// lengths: it picks a frame whenever one is eligible, only an eligible one, the highest
/// eligible strict class first; and any two ETS classes eligible at every decision so
/// far have received service, in bytes over share, within one largest frame of each
/// other (self-clocked fair queuing's bound, Golestani 1994).
fn check_ets(input: &[u8]) {
    let mut b = Bytes(input);
    let cfg = ets_config(&mut b);
    let mut ets = Ets::default();
    let mut service = [0u64; 8];
    let mut always = Priorities::ALL.without(cfg.strict);
    let mut largest = 0u64;
    for _ in 0..b.items(3, 400) {
        let eligible = Priorities(b.u8());
        let len = 64 + u32::from(b.u16() % 9001);
        always = always.and(eligible);
        let Some(p) = ets.pick(&cfg, eligible) else {
            assert!(eligible.is_empty(), "nothing picked from {eligible:?}");
            continue;
        };
        assert!(eligible.contains(p), "picked {p} from {eligible:?}");
        if let Some(s) = eligible.and(cfg.strict).highest() {
            assert_eq!(p, s, "a strict class goes first");
        }
        ets.sent(&cfg, eligible, p, len);
        if cfg.strict.contains(p) {
            continue;
        }
        service[usize::from(p)] += u64::from(len) * u64::from(cfg.cost(p));
        largest = largest.max(u64::from(len));
        // Only the pairs with `p` can have broken the bound: the others' service did not
        // change, `always` only shrinks and the bound only grows, so every pair checked
        // at an earlier decision still holds (checking all 64 pairs at every decision
        // gave the same verdicts eight times slower).
        if !always.contains(p) {
            continue;
        }
        for j in (0..8u8).filter(|&j| always.contains(j)) {
            let bound = largest * u64::from(cfg.cost(p).max(cfg.cost(j)));
            assert!(
                service[usize::from(p)].abs_diff(service[usize::from(j)]) <= bound,
                "classes {p} and {j} of {cfg:?}: normalized service {:?}",
                service
            );
        }
    }
}

/// PFC generation (`dcb::PfcGen`) under arbitrary arrivals, departures and time: the
/// bytes held per priority are the saturating sum; a lossless priority above XOFF is
/// paused, none at or below XON is, only lossless ones ever are; every change of a
/// priority's state is announced in the next pause frame, whose quanta are the XOFF
/// time for paused priorities and 0 for the others; while anything is paused a refresh
/// is armed half a pause time after each frame, and when it fires every paused priority
/// is announced again.
fn check_pfc_gen(input: &[u8]) {
    const LINK: u64 = 100_000_000_000;
    let mut b = Bytes(input);
    let xoff = 1000 + u32::from(b.u16() % 20_000);
    let t = PfcThresholds {
        xoff,
        xon: xoff * u32::from(b.u8() % 100) / 100,
        quanta: b.u16(),
    };
    let lossless = Priorities(b.u8());
    let mut g = PfcGen::default();
    let mut bytes = [0u32; 8];
    let mut now = 0u64;
    let mut changed = Priorities::NONE;
    for _ in 0..b.items(3, 400) {
        let op = b.u8();
        let (p, n) = (op & 7, u32::from(b.u16()) * 4);
        let before = g.xoff();
        match op >> 3 & 3 {
            0 => g.add(p, n, lossless, &t),
            1 => g.remove(p, n, lossless, &t),
            2 => g.update(p, n, n / 3, lossless, &t),
            _ => {
                now += u64::from(n) * 10;
                let due = g.poll_timeout().is_some_and(|r| r <= now);
                let announce = g.announce();
                g.handle_timeout(now);
                let expect = if due {
                    Priorities(announce.0 | g.xoff().0)
                } else {
                    announce
                };
                assert_eq!(g.announce(), expect, "a refresh at {now}");
                if op & 0x20 != 0 {
                    let (xoff_now, announce) = (g.xoff(), g.announce());
                    assert!(
                        changed.without(announce).is_empty(),
                        "a change not announced"
                    );
                    match g.take_frame(now, &t, LINK) {
                        Some(f) => {
                            assert_eq!(f.enable, announce.0);
                            for q in 0..8u8 {
                                let want = if Priorities(f.enable).and(xoff_now).contains(q) {
                                    t.quanta
                                } else {
                                    0
                                };
                                assert_eq!(f.quanta[usize::from(q)], want, "quanta of {q}");
                            }
                        }
                        None => assert!(announce.is_empty()),
                    }
                    changed = Priorities::NONE;
                    assert!(g.announce().is_empty());
                    if !announce.is_empty() {
                        let refresh =
                            (!xoff_now.is_empty()).then(|| now + refresh_nanos(t.quanta, LINK));
                        assert_eq!(g.poll_timeout(), refresh, "the refresh");
                    }
                }
            }
        }
        let i = usize::from(p);
        bytes[i] = match op >> 3 & 3 {
            0 => bytes[i].saturating_add(n),
            1 => bytes[i].saturating_sub(n),
            2 => bytes[i].saturating_add(n).saturating_sub(n / 3),
            _ => bytes[i],
        };
        changed = Priorities(changed.0 | (before.0 ^ g.xoff().0));
        for q in 0..8u8 {
            let held = bytes[usize::from(q)];
            assert_eq!(g.bytes(q), held, "bytes of {q}");
            let paused = g.xoff().contains(q);
            assert!(!paused || lossless.contains(q), "{q} paused, not lossless");
            if lossless.contains(q) && held > t.xoff {
                assert!(paused, "{q} holds {held} > XOFF {}, not paused", t.xoff);
            }
            if held <= t.xon {
                assert!(!paused, "{q} holds {held} <= XON {}, paused", t.xon);
            }
        }
        assert!(
            g.xoff().is_empty() || g.has_frame() || g.poll_timeout().is_some(),
            "paused with no frame and no refresh: the partner would resume"
        );
    }
}

/// The switch's PFC (`roce_sim::Switch`): two hosts send frames of every priority at
/// 10 Gb/s through a switch to a third behind a 1 Gb/s link, with buffers, thresholds,
/// lossless priorities and the egress port's ETS shares from the input, and each
/// (ingress, lossless priority) given the headroom `PfcConfig` asks for beyond its XOFF
/// threshold (the frame that crosses it, then 2 x delay x rate + 2 largest frames).
/// Then: no lossless frame is lost and every frame of a (sender, priority) arrives in
/// order; a lossy frame is delivered or counted dropped; only lossless priorities are
/// ever paused; and everything has arrived well before a pause that was never lifted
/// could have expired (no lost XON).
fn check_switch(input: &[u8]) {
    const FAST: u64 = 10_000_000_000;
    const SLOW: u64 = 1_000_000_000;
    const DELAY: Nanos = 1000;
    const LARGEST: usize = 1522;
    let mut b = Bytes(input);
    let lossless = Priorities(b.u8());
    let xoff = 1600 + u64::from(b.u16() % 16_000);
    let pfc = PfcConfig {
        priorities: lossless.0,
        xoff,
        xon: xoff * u64::from(b.u8() % 90) / 100,
        headroom: xoff + LARGEST as u64 + 2 * (DELAY * FAST / 8_000_000_000) + 2 * LARGEST as u64,
        pause_quanta: 0xFFFF,
    };
    let cfg = SwitchConfig {
        port_buffer: 2000 + u64::from(b.u16() % 30_000),
        shared_buffer: u64::from(b.u16() % 30_000),
        pfc: Some(pfc),
        learning: false,
        flood_unknown: false,
        ..SwitchConfig::default()
    };
    let ets = ets_config(&mut b);
    let mut queues: [Vec<Vec<Vec<u8>>>; 2] = Default::default();
    let mut sent = [[0u32; 8]; 2];
    let mut wire_ns = 0;
    for _ in 0..b.items(3, 128) {
        let what = b.u8();
        let (s, p) = (usize::from(what >> 3 & 1), what & 7);
        let len = 64 + usize::from(b.u16()) % (LARGEST - 63);
        let mut f = vec![0u8; len];
        f[..6].copy_from_slice(&SINK_MAC);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 1, s as u8]);
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        f[14] = p << 5;
        f[16..18].copy_from_slice(&[0x88, 0xB5]);
        f[18] = s as u8;
        f[19] = p;
        f[20..24].copy_from_slice(&sent[s][usize::from(p)].to_be_bytes());
        sent[s][usize::from(p)] += 1;
        wire_ns += serialization_ns(len, SLOW);
        queues[s].resize(8, Vec::new());
        queues[s][usize::from(p)].push(f);
    }
    let mut fab = fabric();
    let sw = fab.add_switch(cfg, 3);
    fab.switch_mut(sw)
        .set_port_ets(2, ets)
        .expect("a valid ETS configuration");
    fab.switch_mut(sw).add_route(MacAddr(SINK_MAC), 2);
    let paused = Rc::new(RefCell::new(Priorities::NONE));
    let senders = queues.map(|q| {
        fab.add_host(PrioritySender {
            queues: q,
            paused: Rc::clone(&paused),
        })
    });
    let received = Rc::new(RefCell::new(Vec::new()));
    let sink = fab.add_host(Sink(Rc::clone(&received)));
    for (i, &h) in senders.iter().enumerate() {
        fab.connect(h, 0, sw, i, LinkConfig::new(FAST, DELAY));
    }
    fab.connect(sink, 0, sw, 2, LinkConfig::new(SLOW, DELAY));
    // A pause of 0xFFFF quanta at 10 Gb/s lasts 3.36 ms: everything is delivered by
    // then unless a sender stayed paused.
    let end = wire_ns + 1_000_000;
    assert!(end < 3_300_000);
    fab.run_until(end);

    assert!(
        paused.borrow().without(lossless).is_empty(),
        "a lossy priority was paused: {:?} of lossless {lossless:?}",
        paused.borrow()
    );
    let counters = fab.switch(sw).counters();
    // Per sender and priority: the next sequence number expected, frames delivered.
    let mut got = [[0u32; 8]; 2];
    let mut delivered = [0u32; 8];
    for &(s, p, seq) in received.borrow().iter() {
        delivered[usize::from(p)] += 1;
        let next = &mut got[usize::from(s)][usize::from(p)];
        assert!(seq >= *next, "sender {s} priority {p}: {seq} after {next}");
        if lossless.contains(p) {
            assert_eq!(
                seq, *next,
                "sender {s} lossless priority {p}: frame {next} lost"
            );
        }
        *next = seq + 1;
    }
    for p in 0..8u8 {
        let q = counters.ports[2].queues[usize::from(p)];
        let delivered = delivered[usize::from(p)];
        let total: u32 = (0..2).map(|s| sent[s][usize::from(p)]).sum();
        if lossless.contains(p) {
            assert_eq!(
                (q.dropped, q.headroom_drops, delivered),
                (0, 0, total),
                "lossless priority {p} (dropped, headroom drops, delivered)"
            );
        } else {
            assert_eq!(
                u64::from(delivered) + q.dropped,
                u64::from(total),
                "lossy priority {p}: delivered + dropped"
            );
        }
        for s in 0..2 {
            let pc = counters.ports[s].pfc[usize::from(p)];
            assert!(
                lossless.contains(p) || pc.xoff_sent == 0,
                "XOFF for lossy priority {p}"
            );
        }
    }
    keep(fab);
}

const SINK_MAC: [u8; 6] = [0x02, 0, 0, 0, 2, 0];

/// A host with a FIFO per priority that sends the first frame of the highest priority
/// its MAC does not hold; notes every priority it was ever told is paused.
struct PrioritySender {
    queues: Vec<Vec<Vec<u8>>>,
    paused: Rc<RefCell<Priorities>>,
}

impl Node for PrioritySender {
    fn handle_frame(&mut self, _: Nanos, _: usize, _: &[u8]) {}

    fn poll_transmit(
        &mut self,
        _: Nanos,
        _: usize,
        paused: Priorities,
        buf: &mut [u8],
    ) -> Option<usize> {
        let mut seen = self.paused.borrow_mut();
        *seen = Priorities(seen.0 | paused.0);
        let p = (0..self.queues.len())
            .rev()
            .find(|&p| !paused.contains(p as u8) && !self.queues[p].is_empty())?;
        let f = self.queues[p].remove(0);
        buf[..f.len()].copy_from_slice(&f);
        Some(f.len())
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }

    fn handle_timeout(&mut self, _: Nanos) {}
}

/// Notes (sender, priority, sequence number) of every frame it receives.
struct Sink(Rc<RefCell<Vec<(u8, u8, u32)>>>);

impl Node for Sink {
    fn handle_frame(&mut self, _: Nanos, _: usize, f: &[u8]) {
        let seq = u32::from_be_bytes([f[20], f[21], f[22], f[23]]);
        self.0.borrow_mut().push((f[18], f[19], seq));
    }

    fn poll_transmit(&mut self, _: Nanos, _: usize, _: Priorities, _: &mut [u8]) -> Option<usize> {
        None
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }

    fn handle_timeout(&mut self, _: Nanos) {}
}
