//! The engine-level fuzz targets' world: engines small enough to snapshot, host memory
//! that checks every DMA access against the windows the target allows, the frame script
//! a fuzz input encodes, and the completion bookkeeping the invariants need.
//!
//! A target builds its world once (both engines, real frames of a real exchange as
//! templates) and keeps a [`Side`] as the snapshot; each input starts from a clone of
//! it (`Clone` of a 15 KB engine and a few KB of memory) instead of building engines,
//! registering memory and bringing QPs up again.

use roce_core::cc::CcConfig;
use roce_core::engine::{CqHandle, Engine, PortConfig};
use roce_core::memory::{AccessFlags, Dma, DmaError, MrKeys, Pd};
use roce_core::num::{Psn, Qkey, Qpn};
use roce_core::transport::{
    ipv4_gid, AckTimeout, AddressVector, Instant, Mtu, QpAttr, QpInitAttr, QpState, QpType,
    RetryCount, RnrTimer, SrAttr, WcStatus, WorkCompletion,
};
use roce_core::wire::{self, icrc, ipv4};

/// The engine the targets run: 4 QPs, 2 CQs, 2 PDs, 16 MRs, 16 send and 16 receive
/// WQEs, 64 CQEs per CQ, 4 READ/atomic resources.
pub type Eng = Engine<4, 2, 2, 16, 16, 16, 64, 4>;

/// Frame buffer: the largest MTU plus headers.
pub const FRAME_BUF: usize = 4096 + 256;

/// What a window lets the engine do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    fn allows(self, write: bool) -> bool {
        match self {
            Access::Read => !write,
            Access::Write => write,
            Access::ReadWrite => true,
        }
    }
}

/// A range of host memory the engine may touch, and why.
#[derive(Clone, Debug)]
struct Window {
    addr: u64,
    len: u64,
    access: Access,
    what: &'static str,
}

/// One side's host memory: a flat arena at `base`, allocated front to back with a gap
/// between allocations. Every DMA access must lie inside one window the target declared
/// ([`Arena::allow`]); any other access, even one inside the arena, panics there, so the
/// fuzzer reports the engine call that made it.
#[derive(Clone, Debug)]
pub struct Arena {
    base: u64,
    bytes: Vec<u8>,
    next: u64,
    windows: Vec<Window>,
}

/// Bytes between allocations: an access that runs past a buffer lands in no window.
const GAP: u64 = 256;

impl Arena {
    pub fn new(base: u64, size: usize) -> Self {
        Self {
            base,
            bytes: vec![0; size],
            next: base + GAP,
            windows: Vec::new(),
        }
    }

    /// `len` bytes of fresh memory (zero), not yet in any window.
    pub fn alloc(&mut self, len: usize) -> u64 {
        let addr = self.next;
        self.next = (addr + len as u64 + GAP + 63) & !63;
        assert!(
            self.next - self.base <= self.bytes.len() as u64,
            "arena too small"
        );
        addr
    }

    /// Lets the engine access `[addr, addr + len)`.
    pub fn allow(&mut self, addr: u64, len: usize, access: Access, what: &'static str) {
        self.windows.push(Window {
            addr,
            len: len as u64,
            access,
            what,
        });
    }

    fn range(&self, addr: u64, len: usize) -> Option<core::ops::Range<usize>> {
        let off = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        let end = off.checked_add(len)?;
        (end <= self.bytes.len()).then_some(off..end)
    }

    pub fn bytes(&self, addr: u64, len: usize) -> &[u8] {
        let r = self.range(addr, len).expect("inside the arena");
        &self.bytes[r]
    }

    pub fn set(&mut self, addr: u64, data: &[u8]) {
        let r = self.range(addr, data.len()).expect("inside the arena");
        self.bytes[r].copy_from_slice(data);
    }

    /// Fills `[addr, addr + len)` with a pattern that differs per `seed`.
    pub fn fill(&mut self, addr: u64, len: usize, seed: u8) {
        let d: Vec<u8> = (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect();
        self.set(addr, &d);
    }

    /// Panics unless `[addr, addr + len)` lies in a window allowing the access.
    fn check(&self, addr: u64, len: usize, write: bool) {
        if len == 0 {
            return;
        }
        let inside = self.windows.iter().any(|w| {
            w.access.allows(write)
                && roce_core::memory::range_within(w.addr, w.len, addr, len as u64)
        });
        if !inside {
            let near: Vec<String> = self
                .windows
                .iter()
                .map(|w| format!("{} [{:#x}, +{:#x}) {:?}", w.what, w.addr, w.len, w.access))
                .collect();
            panic!(
                "DMA {} of [{addr:#x}, +{len:#x}) outside every allowed window: {near:?}",
                if write { "write" } else { "read" }
            );
        }
    }

    /// Restores the bytes of `pristine` (same layout) without reallocating.
    pub fn restore(&mut self, pristine: &Arena) {
        self.bytes.copy_from_slice(&pristine.bytes);
        self.windows.clone_from(&pristine.windows);
    }
}

impl Dma for Arena {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.check(addr, buf.len(), false);
        let r = self.range(addr, buf.len()).ok_or(DmaError {
            addr,
            len: buf.len(),
        })?;
        buf.copy_from_slice(&self.bytes[r]);
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        self.check(addr, data.len(), true);
        let r = self.range(addr, data.len()).ok_or(DmaError {
            addr,
            len: data.len(),
        })?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }
}

/// One end: an engine, its memory, two PDs (the second owns memory no QP of the first
/// may reach) and one CQ.
#[derive(Clone)]
pub struct Side {
    pub eng: Eng,
    pub mem: Arena,
    pub pd: Pd,
    /// A protection domain no QP of the world belongs to.
    pub other_pd: Pd,
    pub cq: CqHandle,
    pub mac: [u8; 6],
    pub gid: [u8; 16],
}

impl Side {
    pub fn new(id: u8) -> Self {
        Self::with_cc(id, CcConfig::default())
    }

    /// A side whose engine runs congestion control `cc` (DCQCN, CNPs).
    pub fn with_cc(id: u8, cc: CcConfig) -> Self {
        let mac = [0x02, 0, 0, 0, 0, id];
        let gid = ipv4_gid([10, 0, 0, id]);
        let mut cfg = PortConfig::new(mac, gid);
        cfg.cc = cc;
        let mut eng = Eng::new(cfg);
        let pd = eng.alloc_pd().expect("a PD");
        let other_pd = eng.alloc_pd().expect("a second PD");
        let cq = eng.create_cq().expect("a CQ");
        Self {
            eng,
            mem: Arena::new(0x1000_0000 * u64::from(id), 32 * 1024),
            pd,
            other_pd,
            cq,
            mac,
            gid,
        }
    }

    /// Becomes `pristine` again (a snapshot of this side): the engine by `clone_from`,
    /// the memory by copying its bytes, with no allocation.
    pub fn restore(&mut self, pristine: &Side) {
        self.eng.clone_from(&pristine.eng);
        self.mem.restore(&pristine.mem);
    }

    /// Allocates `len` bytes and registers them in `pd` with `access`.
    pub fn register(&mut self, pd: Pd, len: usize, access: AccessFlags) -> (u64, MrKeys) {
        let addr = self.mem.alloc(len);
        let keys = self
            .eng
            .reg_mr(pd, addr, len as u64, access)
            .expect("reg_mr");
        (addr, keys)
    }

    /// A buffer in the side's own PD with every right.
    pub fn buffer(&mut self, len: usize) -> (u64, MrKeys) {
        self.register(self.pd, len, AccessFlags::ALL)
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
            .expect("create_qp")
    }

    pub fn av_to(&self, peer: &Side) -> AddressVector {
        AddressVector {
            dmac: peer.mac,
            dgid: peer.gid,
            hop_limit: 64,
            ..Default::default()
        }
    }

    /// Every frame the engine has ready at `now`, in order.
    pub fn drain(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; FRAME_BUF];
        while let Some(n) = self.eng.poll_transmit(now, &mut buf, &mut self.mem) {
            out.push(buf[..n].to_vec());
        }
        out
    }
}

/// The connection parameters of the fuzz worlds: small MTU (multi-packet messages from
/// short buffers), one retry, so a stalled QP gives up after two timeouts.
#[derive(Clone, Copy, Debug)]
pub struct Conn {
    pub mtu: Mtu,
    pub sq_psn: u32,
    pub rq_psn: u32,
    /// Selective repeat instead of Go-Back-N (RC only).
    pub sr: bool,
}

/// Brings an RC or UC QP through INIT, RTR and RTS towards `remote`.
pub fn connect(s: &mut Side, qpn: Qpn, qp_type: QpType, av: AddressVector, remote: Qpn, c: Conn) {
    let rc = qp_type == QpType::Rc;
    let mut init = QpAttr::to_state(QpState::Init);
    init.pkey_index = Some(0);
    init.port_num = Some(1);
    init.qp_access_flags =
        Some(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC);
    s.eng.modify_qp(qpn, &init).expect("INIT");
    let mut rtr = QpAttr::to_state(QpState::Rtr);
    rtr.ah_attr = Some(av);
    rtr.path_mtu = Some(c.mtu);
    rtr.dest_qp_num = Some(remote);
    rtr.rq_psn = Some(Psn::new(c.rq_psn));
    if rc {
        rtr.max_dest_rd_atomic = Some(4);
        rtr.min_rnr_timer = RnrTimer::new(1);
        rtr.selective_repeat = c.sr.then(|| SrAttr {
            enabled: true,
            max_inflight: 0,
            rto_low: AckTimeout::new(3).unwrap_or(AckTimeout::INFINITE),
        });
    }
    s.eng.modify_qp(qpn, &rtr).expect("RTR");
    let mut rts = QpAttr::to_state(QpState::Rts);
    rts.sq_psn = Some(Psn::new(c.sq_psn));
    if rc {
        rts.timeout = AckTimeout::new(8);
        rts.retry_cnt = RetryCount::new(1);
        rts.rnr_retry = RetryCount::new(1);
        rts.max_rd_atomic = Some(4);
    }
    s.eng.modify_qp(qpn, &rts).expect("RTS");
}

/// Brings a UD QP to RTS with `qkey`.
pub fn connect_ud(s: &mut Side, qpn: Qpn, qkey: Qkey) {
    let mut init = QpAttr::to_state(QpState::Init);
    init.pkey_index = Some(0);
    init.port_num = Some(1);
    init.qkey = Some(qkey);
    s.eng.modify_qp(qpn, &init).expect("INIT");
    s.eng
        .modify_qp(qpn, &QpAttr::to_state(QpState::Rtr))
        .expect("RTR");
    let mut rts = QpAttr::to_state(QpState::Rts);
    rts.sq_psn = Some(Psn::new(0));
    s.eng.modify_qp(qpn, &rts).expect("RTS");
}

/// Delivers `frames` to a copy of `s` in order, at time zero, and returns the
/// completions: a world checks with it that its templates do what they should.
pub fn replay(s: &Side, frames: &[Vec<u8>]) -> Vec<WorkCompletion> {
    let mut s = s.clone();
    let mut out = Vec::new();
    for f in frames {
        s.eng.handle_packet(Instant::ZERO, f, &mut s.mem);
        s.drain(Instant::ZERO);
        while let Some(wc) = s.eng.poll_completion(s.cq) {
            out.push(wc);
        }
    }
    out
}

/// Recomputes the IPv4 checksum and the ICRC of a frame that still parses far enough,
/// so a forgery reaches the transport instead of the datapath's drop counters. The
/// checksum comes first: `parse_unverified` checks it, so a frame whose IPv4 header was
/// patched would otherwise never parse and keep its stale checksum.
pub fn fix(frame: &mut [u8]) {
    let l3 = if frame.get(12..14) == Some(&[0x81, 0x00]) {
        18
    } else {
        14
    };
    let room = frame.len().saturating_sub(l3);
    if frame.get(l3 - 2..l3) == Some(&[0x08, 0x00]) {
        if let Ok(mut ip) = ipv4::Packet::new_checked(&mut frame[l3..]) {
            if (20..=room).contains(&ip.header_len()) {
                ip.fill_checksum();
            }
        }
    }
    let Ok(p) = wire::parse_unverified(frame) else {
        return;
    };
    let (layout, kind) = (p.layout(), p.l3().icrc_kind());
    let (l3, at) = (layout.l3, layout.icrc);
    if let Ok(crc) = icrc::compute(kind, &frame[l3..at]) {
        frame[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The frames a fuzz input encodes. Per frame: one op byte, then either a raw frame
/// (`op & 3 == 0`: a big-endian length, taken modulo 4400, and that many bytes) or a
/// template (a template index, a count of byte patches mod 8, and per patch a
/// big-endian offset and a value); `op & 4` recomputes the checksums of a template;
/// `op >> 3` milliseconds pass before the frame arrives.
pub struct Script<'a> {
    input: &'a [u8],
}

impl<'a> Script<'a> {
    pub fn new(input: &'a [u8]) -> Self {
        Self { input }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.input.split_at_checked(n)?;
        self.input = rest;
        Some(head)
    }

    /// The next frame and the nanoseconds to wait before it.
    pub fn next_frame(&mut self, templates: &[Vec<u8>]) -> Option<(u64, Vec<u8>)> {
        let &[op] = self.take(1)? else { return None };
        let frame = if op & 3 == 0 || templates.is_empty() {
            let &[hi, lo] = self.take(2)? else {
                return None;
            };
            let len = usize::from(u16::from_be_bytes([hi, lo])) % 4400;
            self.take(len)?.to_vec()
        } else {
            let &[t, n] = self.take(2)? else { return None };
            let mut f = templates[usize::from(t) % templates.len()].clone();
            for _ in 0..n % 8 {
                let Some(&[o1, o2, v]) = self.take(3) else {
                    break;
                };
                let at = usize::from(u16::from_be_bytes([o1, o2])) % f.len();
                f[at] = v;
            }
            if op & 4 != 0 {
                fix(&mut f);
            }
            f
        };
        Some((u64::from(op >> 3) * 1_000_000, frame))
    }
}

/// The work requests of one queue (a send or receive queue of one QP), in posting order:
/// each completion must be the next one, exactly once, and after an error completion on
/// the QP everything else of the QP completes as flushed (IBTA 10.8.3, o10-2.2-2 ...;
/// rxe flushes the same way).
#[derive(Clone, Debug)]
pub struct Queue {
    pub qpn: Qpn,
    pub recv: bool,
    posted: Vec<u64>,
    done: usize,
}

impl Queue {
    pub fn new(qpn: Qpn, recv: bool, posted: Vec<u64>) -> Self {
        Self {
            qpn,
            recv,
            posted,
            done: 0,
        }
    }

    pub fn all_done(&self) -> bool {
        self.done == self.posted.len()
    }
}

/// Completion bookkeeping for every queue of a world.
#[derive(Clone, Debug)]
pub struct Completions {
    pub queues: Vec<Queue>,
    /// QPs that have reported an error completion.
    failed: Vec<Qpn>,
    pub seen: Vec<WorkCompletion>,
}

impl Completions {
    pub fn new(queues: Vec<Queue>) -> Self {
        Self {
            queues,
            failed: Vec::new(),
            seen: Vec::new(),
        }
    }

    /// Checks one completion against the queues; panics on a violation.
    pub fn check(&mut self, wc: &WorkCompletion) {
        let recv = wc.opcode as u8 & 0x80 != 0;
        let q = self
            .queues
            .iter_mut()
            .find(|q| q.qpn == wc.qp_num && q.recv == recv)
            .unwrap_or_else(|| panic!("completion for a queue with no posted work: {wc:?}"));
        let next = q.posted.get(q.done).copied();
        assert_eq!(
            next,
            Some(wc.wr_id),
            "completion out of order or not posted (after {} of {:?}): {wc:?}",
            q.done,
            q.posted
        );
        q.done += 1;
        if self.failed.contains(&wc.qp_num) {
            assert_eq!(
                wc.status,
                WcStatus::WrFlushErr,
                "a completion after the QP's error is not flushed: {wc:?}"
            );
        } else if wc.status != WcStatus::Success {
            self.failed.push(wc.qp_num);
        }
        self.seen.push(*wc);
    }

    /// Polls every completion `s` has and checks it.
    pub fn poll(&mut self, s: &mut Side) {
        while let Some(wc) = s.eng.poll_completion(s.cq) {
            self.check(&wc);
        }
    }
}

/// Feeds the script's frames to `s`, running its timers and draining its transmitter
/// after each (`sent` sees every frame it sends) and checking completions as they come.
/// Returns the time reached.
pub fn run_script(
    s: &mut Side,
    script: &mut Script<'_>,
    templates: &[Vec<u8>],
    done: &mut Completions,
    sent: &mut impl FnMut(&[u8]),
) -> u64 {
    let mut now = 0u64;
    let mut buf = vec![0u8; FRAME_BUF];
    while let Some((wait, frame)) = script.next_frame(templates) {
        now += wait;
        let t = Instant::from_nanos(now);
        s.eng.handle_packet(t, &frame, &mut s.mem);
        if s.eng.poll_timeout().is_some_and(|d| d <= t) {
            s.eng.handle_timeout(t);
        }
        while let Some(n) = s.eng.poll_transmit(t, &mut buf, &mut s.mem) {
            sent(&buf[..n]);
        }
        done.poll(s);
    }
    now
}

/// With no more frames arriving, runs `s`'s timers until none is armed: every QP gives
/// up (retry and RNR counts are 1) or finishes. Returns false if timers are still armed
/// after `rounds` expiries: a QP that never gives up.
pub fn settle(s: &mut Side, mut now: u64, rounds: usize, done: &mut Completions) -> bool {
    let mut buf = vec![0u8; FRAME_BUF];
    for _ in 0..rounds {
        let t = Instant::from_nanos(now);
        while s.eng.poll_transmit(t, &mut buf, &mut s.mem).is_some() {}
        done.poll(s);
        let Some(next) = s.eng.poll_timeout() else {
            return true;
        };
        now = now.max(next.as_nanos());
        s.eng.handle_timeout(Instant::from_nanos(now));
    }
    false
}
