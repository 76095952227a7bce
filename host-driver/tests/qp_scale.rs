//! Many more QPs than the NIC has slots (`docs/scale.md`): with an ICM the firmware's 8
//! slots cache 1,024 QPs a side; every QP moves its bytes, the cache counts its misses
//! and write-backs, and the ABI's rules for the ICM hold.

mod common;

use common::{Model, Nic};
use roce_abi::CmdStatus;
use roce_core::memory::AccessFlags;
use roce_core::num::Psn;
use roce_core::transport::{
    QpType, RecvWr, SendFlags, SendWr, WcOpcode, WcStatus, WorkCompletion, WrOp,
};
use roce_core::wire::Position;
use roce_device::NicModel;
use roce_host::{
    CompletionQueue, ConnectOptions, Context, Error, MemoryRegion, ProtectionDomain, QpEndpoint,
    QueuePair,
};
use std::ops::Range;

const QPS: usize = 1024;
const LEN: usize = 1500;

/// Two NICs of one model with an ICM of `n` entries a side and `n` RC pairs (A's QP `i`
/// to B's QP `i`), one MR of `n * LEN` bytes a side, A's holding a pattern.
struct Pairs {
    qa: Vec<QueuePair>,
    qb: Vec<QueuePair>,
    cqa: CompletionQueue,
    cqb: CompletionQueue,
    ma: MemoryRegion,
    mb: MemoryRegion,
    pda: ProtectionDomain,
    a: Context,
    b: Context,
    na: Nic,
    nb: Nic,
    /// QP slots the firmware has (its cache's lines).
    slots: u32,
    src: Vec<u8>,
}

impl Pairs {
    fn new(m: Model, n: usize) -> Self {
        let (na, nb) = (m.boot(1), m.boot(2));
        let (a, b) = (
            Context::open(na.model.clone()).unwrap(),
            Context::open(nb.model.clone()).unwrap(),
        );
        let slots = a.query_device().max_qp.get();
        for c in [&a, &b] {
            c.set_icm(n as u32).unwrap();
            assert_eq!(c.query_device().max_qp.get(), n as u32);
        }
        let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
        let (pda, pdb) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
        let (cqa, cqb) = (a.create_cq(2 * n).unwrap(), b.create_cq(2 * n).unwrap());
        let (ma, mb) = (
            pda.reg_mr(n * LEN, access).unwrap(),
            pdb.reg_mr(n * LEN, access).unwrap(),
        );
        let src: Vec<u8> = (0..n * LEN).map(|i| (i * 7 + i / 251) as u8).collect();
        ma.write(0, &src).unwrap();
        let qa: Vec<_> = (0..n)
            .map(|_| pda.create_qp(QpType::Rc, &cqa, &cqa).build().unwrap())
            .collect();
        let qb: Vec<_> = (0..n)
            .map(|_| pdb.create_qp(QpType::Rc, &cqb, &cqb).build().unwrap())
            .collect();
        let ep = |c: &Context, q: &QueuePair| {
            let (gid, mac) = c.port_addr();
            QpEndpoint {
                qpn: q.qpn(),
                psn: Psn::new(q.qpn().value() * 3),
                gid,
                mac,
            }
        };
        let o = ConnectOptions::default();
        for (x, y) in qa.iter().zip(&qb) {
            x.connect(&ep(&b, y), ep(&a, x).psn, &o).unwrap();
            y.connect(&ep(&a, x), ep(&b, y).psn, &o).unwrap();
        }
        Self {
            qa,
            qb,
            cqa,
            cqb,
            ma,
            mb,
            pda,
            a,
            b,
            na,
            nb,
            slots,
            src,
        }
    }

    /// On each pair `i` of `pairs`, a signaled WR of `LEN` bytes from A's MR at `i * LEN`
    /// to B's: a WRITE for even `i`, a SEND into a receive posted there for odd `i`.
    fn post(&self, pairs: Range<usize>) {
        for i in pairs {
            let (x, y) = (&self.qa[i], &self.qb[i]);
            let off = (i * LEN) as u64;
            let op = if i % 2 == 0 {
                WrOp::rdma_write(self.mb.addr() + off, self.mb.rkey())
            } else {
                y.post_recv(&RecvWr::new(i as u64).sge(
                    self.mb.addr() + off,
                    LEN as u32,
                    self.mb.lkey(),
                ))
                .unwrap();
                WrOp::Send
            };
            x.post_send(
                &SendWr::new(i as u64, op)
                    .sge(self.ma.addr() + off, LEN as u32, self.ma.lkey())
                    .flags(SendFlags::SIGNALED),
            )
            .unwrap();
        }
    }

    /// Runs both NICs until idle, A's frames for which `lose(B's QP index, position)`
    /// says so never reaching B.
    fn run(&self, lose: impl FnMut(usize, Position) -> bool) {
        self.frames(true, lose);
    }

    /// Moves frames until neither NIC has one, without running timers; A's frames for
    /// which `hold(B's QP index, position)` says so are returned instead of delivered.
    fn pump(&self, hold: impl FnMut(usize, Position) -> bool) -> Vec<Vec<u8>> {
        self.frames(false, hold)
    }

    fn frames(&self, timers: bool, hold: impl FnMut(usize, Position) -> bool) -> Vec<Vec<u8>> {
        let first = self.qb.first().map_or(0, |q| q.qpn().value());
        run(&*self.na.model, &*self.nb.model, first, timers, hold)
    }

    /// Every completion on `cq` (at most `4 * QPS`).
    fn poll(cq: &CompletionQueue) -> Vec<WorkCompletion> {
        let mut wcs = vec![WorkCompletion::default(); 4 * QPS];
        let n = cq.poll(&mut wcs).unwrap().len();
        wcs.truncate(n);
        wcs
    }

    /// Asserts that `pairs` moved their bytes: A's completions (by `wr_id`) all
    /// successful, B's receive completions one per SEND, B's MR as A's there.
    fn check(&self, m: Model, pairs: impl Iterator<Item = usize>) {
        let pairs: Vec<usize> = pairs.collect();
        let mut ids: Vec<u64> = Self::poll(&self.cqa)
            .iter()
            .inspect(|w| assert_eq!(w.status, WcStatus::Success, "{m:?} {w:?}"))
            .map(|w| w.wr_id)
            .collect();
        ids.sort_unstable();
        assert_eq!(
            ids,
            pairs.iter().map(|&i| i as u64).collect::<Vec<_>>(),
            "{m:?}"
        );
        let got = Self::poll(&self.cqb);
        assert_eq!(
            got.len(),
            pairs.iter().filter(|&i| i % 2 == 1).count(),
            "{m:?}"
        );
        assert!(got
            .iter()
            .all(|w| w.opcode == WcOpcode::Recv && w.byte_len == LEN as u32));
        let mb = self.mb.to_vec();
        for i in pairs {
            let bytes = i * LEN..(i + 1) * LEN;
            assert!(
                mb[bytes.clone()] == self.src[bytes],
                "{m:?}: pair {i}'s bytes"
            );
        }
    }

    /// Asserts, on the fast path's model, that QPs in the ICM ran on it: B's fast path
    /// placed packets and QPs left its context entries (for the ICM or for another QP).
    fn check_fast_path(&self, m: Model) {
        if m != Model::FastPath {
            return;
        }
        let c = self.b.query_counters().unwrap().runtime;
        assert!(
            c.fastpath.rx_handled > 0 && c.fp_ctx_cache_evictions > 0,
            "ICM QPs off the fast path: {c:?}"
        );
    }
}

fn drive(m: Model) {
    let p = Pairs::new(m, QPS);
    // One more than the ICM holds: refused.
    assert!(p.pda.create_qp(QpType::Rc, &p.cqa, &p.cqa).build().is_err());
    // The ICM is set once, before any QP.
    assert!(matches!(
        p.a.set_icm(16),
        Err(Error::Command {
            status: CmdStatus::Busy,
            ..
        })
    ));
    p.post(0..QPS);
    p.run(|_, _| false);
    p.check(m, 0..QPS);
    p.check_fast_path(m);
    // A stored QP answers a query and can be destroyed.
    assert!(p.qa[3].query().is_ok());
    // The cache's counters, read through QUERY_COUNTERS as any host would.
    let c = p.a.query_counters().unwrap().runtime;
    assert!(c.qp_cache_misses >= QPS as u64, "{c:?}");
    assert!(
        c.qp_cache_evictions >= (QPS as u64) - u64::from(p.slots),
        "{c:?}"
    );
    assert_eq!(
        c.qp_ctx_dma_bytes,
        1024 * (c.qp_cache_misses + c.qp_cache_evictions)
    );
}

/// The stuck lines of 2026-12-02 (`docs/scale.md`): messages whose last packet never
/// arrives leave their responders half way through (on the fast path the hardware
/// placed the first packet), and their requesters give up (RETRY_EXC_ERR). A QP half
/// way through a message could not leave the cache then, so those responders held B's
/// lines for ever and B dropped every later frame for another QP. Now such a QP goes to
/// the ICM as it stands. Then each other pair's message loses its last packet once, so
/// its responder, too, waits half way, is written back among many others and comes
/// back: the resent message must complete from where the context says it stands.
fn half_received(m: Model) {
    let p = Pairs::new(m, 64);
    let abandoned = 2 * p.slots as usize;
    p.post(0..abandoned);
    p.run(|qp, pos| qp < abandoned && pos == Position::Last);
    let wcs = Pairs::poll(&p.cqa);
    assert_eq!(wcs.len(), abandoned, "{m:?}");
    assert!(
        wcs.iter().all(|w| w.status == WcStatus::RetryExcErr),
        "{m:?} {wcs:?}"
    );
    assert!(Pairs::poll(&p.cqb).is_empty(), "{m:?}");
    let evictions = p.b.query_counters().unwrap().runtime.qp_cache_evictions;
    let mut lost = vec![false; p.qb.len()];
    let rest = abandoned..p.qa.len();
    p.post(rest.clone());
    p.run(|qp, pos| pos == Position::Last && !std::mem::replace(&mut lost[qp], true));
    p.check(m, rest.clone());
    p.check_fast_path(m);
    let c = p.b.query_counters().unwrap().runtime;
    assert!(
        c.qp_cache_evictions >= evictions + rest.len() as u64,
        "{m:?}: {c:?}"
    );
}

/// Moves frames one at a time (each NIC answers before the next one arrives, as on a
/// link) and, with `timers`, runs the NICs' timers when nothing else happens, until both
/// are idle. A frame from `a` to B's QP `first + i` is held back (returned, in order)
/// when `hold(i, its position in the message)`.
fn run(
    a: &dyn NicModel,
    b: &dyn NicModel,
    first: u32,
    timers: bool,
    mut hold: impl FnMut(usize, Position) -> bool,
) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; 8192];
    let mut held = Vec::new();
    loop {
        let mut busy = a.poll() | b.poll();
        for (from, to, from_a) in [(a, b, true), (b, a, false)] {
            if let Some(n) = from.transmit_frame(&mut buf) {
                let frame = &buf[..n];
                let keep = from_a
                    && roce_core::wire::parse(frame).is_ok_and(|p| {
                        let qp = p.dest_qp().value().wrapping_sub(first) as usize;
                        hold(qp, p.info().position)
                    });
                if keep {
                    held.push(frame.to_vec());
                } else {
                    to.receive_frame(frame);
                }
                busy = true;
            }
        }
        if busy {
            continue;
        }
        let next = [a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = next.filter(|_| timers) else {
            return held;
        };
        a.set_time(t.max(a.now()));
        b.set_time(t.max(b.now()));
    }
}

#[test]
fn a_thousand_qps_through_eight_slots() {
    // The host-compiled runtime, with and without the fast path's model in front. The RTL and SoC models take minutes for
    // 2,048 QPs (device/tests/soc.rs runs 24 QPs through the SoC's 8 slots).
    for m in common::models() {
        if matches!(m, Model::Software | Model::FastPath) {
            drive(m);
        }
    }
}

#[test]
fn half_received_messages_do_not_pin_the_cache() {
    for m in [Model::Software, Model::FastPath] {
        half_received(m);
    }
}

/// A SEND the fast path finished while its MSG_DONE waits behind an exception that
/// needs a line: B's QP 1 is half way through a SEND (the engine took its first packet),
/// and is the least recently used of B's 8 lines when a frame for a QP in the ICM and
/// QP 1's last packet arrive together. The hardware places the last packet and queues
/// MSG_DONE behind the other QP's miss, which must not write QP 1 back before its
/// receive WQE completes (that completion would be lost).
#[test]
fn a_send_the_fast_path_finished_keeps_its_line_until_it_completes() {
    let m = Model::FastPath;
    let p = Pairs::new(m, 16);
    let lines = p.slots as usize;
    p.post(1..2);
    let last = p.pump(|qp, pos| qp == 1 && pos == Position::Last);
    assert_eq!(last.len(), 1);
    // B's QPs 2..=lines come in after QP 1.
    p.post(2..lines + 1);
    assert!(p.pump(|_, _| false).is_empty());
    // A WRITE (a receive posted on B would bring its QP in at the doorbell).
    let stored = lines + 2;
    p.post(stored..stored + 1);
    let miss = p.pump(|qp, _| qp == stored);
    assert!(!miss.is_empty());
    for f in miss.iter().chain(&last) {
        p.nb.model.receive_frame(f);
    }
    p.run(|_, _| false);
    p.check(m, (1..lines + 1).chain([stored]));
}

/// B's QP cache misses while its QP 0 receives through the fast path between the QPs
/// B brings in: six rounds of a WRITE on pair 0 (two packets, both placed by the
/// hardware once the QP holds its row), then one WRITE on each of the next four
/// pairs (B brings each in, in place of its least recently used QP). Every WR
/// completes and every byte is checked.
fn misses_beside_a_busy_receiver(m: Model) -> u64 {
    let p = Pairs::new(m, 32);
    let write = |i: usize, wr_id: u64| {
        let off = (i * LEN) as u64;
        p.qa[i]
            .post_send(
                &SendWr::new(wr_id, WrOp::rdma_write(p.mb.addr() + off, p.mb.rkey()))
                    .sge(p.ma.addr() + off, LEN as u32, p.ma.lkey())
                    .flags(SendFlags::SIGNALED),
            )
            .unwrap();
    };
    // B's QP 0 comes in, and onto the fast path at its first packet (the exception).
    write(0, 0);
    p.run(|_, _| false);
    let misses = || p.b.query_counters().unwrap().runtime.qp_cache_misses;
    let before = misses();
    let (mut next, mut ids) = (1, 1);
    for _ in 0..6 {
        write(0, ids);
        ids += 1;
        p.run(|_, _| false);
        for _ in 0..4 {
            write(next, ids);
            (next, ids) = (next + 1, ids + 1);
        }
        p.run(|_, _| false);
    }
    let wcs = Pairs::poll(&p.cqa);
    assert!(
        wcs.iter().all(|w| w.status == WcStatus::Success),
        "{m:?} {wcs:?}"
    );
    assert_eq!(wcs.len() as u64, ids, "{m:?}");
    let bytes = 0..next * LEN;
    assert!(p.mb.to_vec()[bytes.clone()] == p.src[bytes], "{m:?}");
    let c = p.b.query_counters().unwrap().runtime;
    if m != Model::Software {
        assert!(
            c.fastpath.rx_handled >= 12,
            "{m:?}: QP 0 not on the fast path: {c:?}"
        );
    }
    misses() - before
}

/// A QP the fast path serves is busy although the firmware handles none of its frames
/// (`docs/scale.md`, "The accessed bits"): the hardware marks its context entry on each
/// frame, and the cache's eviction counts a marked QP as used now (a CLOCK's second
/// chance). So B's misses with the fast path are those of the firmware alone, which
/// touches the QP's line on every frame. Without the bits B's QP 0 looked idle, was
/// written back after eight other QPs came in, and missed on its next WRITE.
#[test]
fn a_qp_the_fast_path_serves_keeps_its_line() {
    let firmware = misses_beside_a_busy_receiver(Model::Software);
    for m in common::models() {
        if matches!(m, Model::FastPath | Model::RtlFastPath) {
            let fast = misses_beside_a_busy_receiver(m);
            eprintln!("B's QP cache misses: firmware alone {firmware}, {m:?} {fast}");
            assert_eq!(fast, firmware, "{m:?}");
        }
    }
}

/// A response for a QP stored in the ICM does not bring it back: the QP was written
/// back with nothing outstanding, so the response is a duplicate the requester would
/// discard (`docs/scale.md`, "Responses for stored QPs"). A's QP 0 WRITEs and its ACK
/// is kept; eight other pairs push QP 0 out of A's eight lines; the ACK delivered again
/// costs A no context read, and QP 0 still works.
#[test]
fn a_late_ack_for_a_stored_qp_does_not_bring_it_back() {
    for m in [Model::Software, Model::FastPath] {
        let p = Pairs::new(m, 32);
        let (a, b) = (&*p.na.model, &*p.nb.model);
        p.post(0..1);
        let mut buf = vec![0u8; 8192];
        let mut acks = Vec::new();
        loop {
            let mut busy = a.poll() | b.poll();
            if let Some(n) = a.transmit_frame(&mut buf) {
                b.receive_frame(&buf[..n]);
                busy = true;
            }
            if let Some(n) = b.transmit_frame(&mut buf) {
                acks.push(buf[..n].to_vec());
                a.receive_frame(&buf[..n]);
                busy = true;
            }
            if !busy {
                break;
            }
        }
        assert_eq!(acks.len(), 1, "{m:?}: one ACK for the WRITE");
        let lines = p.slots as usize;
        p.post(2..2 + 2 * lines);
        p.run(|_, _| false);
        let before = p.a.query_counters().unwrap().runtime;
        assert!(
            before.qp_cache_evictions >= lines as u64,
            "{m:?}: {before:?}"
        );
        a.receive_frame(&acks[0]);
        p.run(|_, _| false);
        let after = p.a.query_counters().unwrap().runtime;
        assert_eq!(after.qp_cache_misses, before.qp_cache_misses, "{m:?}");
        // Dropped and counted as such, not as a drop the requester must repair.
        assert_eq!(
            after.qp_cache_stale_responses,
            before.qp_cache_stale_responses + 1,
            "{m:?}"
        );
        assert_eq!(after.qp_cache_drops, before.qp_cache_drops, "{m:?}");
        p.post(1..2);
        p.run(|_, _| false);
        p.check(m, 0..2 + 2 * lines);
    }
}
