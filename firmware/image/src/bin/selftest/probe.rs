//! Instruction counting around the engine's per-frame work, for the budgets.
//!
//! The runtime calls the datapath right before and right after the engine's per-frame
//! entry points, so wrappers around the DMA and the datapath bracket them with
//! `minstret` reads:
//! * **TX**: from `can_transmit` (the runtime asks, then calls `poll_transmit`) to
//!   `transmit` (the frame is ready): the engine building one frame.
//! * **RX**: from `receive` returning a frame to the next `receive` call: the engine's
//!   `handle_packet` (plus a few instructions of loop).
//!
//! What the datapath does in hardware is outside the brackets (the loopback's own receive
//! checks and copies). DMA instructions inside a bracket are counted apart (a DMA engine
//! moves those bytes on a soft core), and so is the ICRC: the probe computes the ICRC of
//! the same frame itself and counts that, since the engine's `emit` (TX) and `parse` (RX)
//! each compute it once.

use core::cell::Cell;
use core::hint::black_box;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

use roce_core::fastpath::layout::{EventWords, MR_LEN, RCTX_LEN, SCTX_LEN, TXD_LEN};
use roce_core::fastpath::{Pace, PaceWrite, RecvCqe, SqIdle};
use roce_core::memory::{Dma, DmaError};
use roce_core::num::Qpn;
use roce_core::wire::aeth::RnrTimer;
use roce_core::wire::icrc::{self, IcrcKind};
use roce_firmware::hal::{Datapath, FastPath, FastPathCounters, SqBack, SqNews, SqRing, SqRung};
use roce_firmware_image::clock::instret;

/// Probes count only while this is set.
static ON: AtomicBool = AtomicBool::new(false);
/// Instructions spent inside DMA calls (wrapping; differences are what count).
static DMA_INSTRET: AtomicU32 = AtomicU32::new(0);
/// Instructions spent in what stands in for hardware: the software datapath's own work
/// (the loopback's receive checks and copies) and the fast path's model.
static HW_INSTRET: AtomicU32 = AtomicU32::new(0);
/// Instructions spent inside `Nic::poll` (all of it: firmware, DMA, hardware models,
/// and the probes' own bookkeeping, which `OVERHEAD` counts).
static POLL_INSTRET: AtomicU32 = AtomicU32::new(0);
/// Instructions the probes spent on their own bookkeeping inside polls.
static OVERHEAD: AtomicU32 = AtomicU32::new(0);
/// `Nic::poll` calls while probing.
static POLLS: AtomicU32 = AtomicU32::new(0);

fn add(counter: &AtomicU32, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n as u32), Relaxed);
}

/// The counters that make up a poll's instructions, read at one instant.
#[derive(Clone, Copy, Default)]
pub struct Split {
    pub poll: u32,
    pub dma: u32,
    pub hw: u32,
    pub overhead: u32,
    pub polls: u32,
}

impl Split {
    pub fn now() -> Self {
        Self {
            poll: POLL_INSTRET.load(Relaxed),
            dma: DMA_INSTRET.load(Relaxed),
            hw: HW_INSTRET.load(Relaxed),
            overhead: OVERHEAD.load(Relaxed),
            polls: POLLS.load(Relaxed),
        }
    }

    /// `Nic::poll` calls between `self` and `later`.
    pub fn polls_until(&self, later: &Self) -> u32 {
        later.polls.wrapping_sub(self.polls)
    }

    /// Instructions between `self` and `later` that are not the firmware's: DMA,
    /// hardware models and the probes.
    pub fn other_since(&self, earlier: &Self) -> u32 {
        let d = |a: u32, b: u32| b.wrapping_sub(a);
        d(earlier.dma, self.dma)
            .wrapping_add(d(earlier.hw, self.hw))
            .wrapping_add(d(earlier.overhead, self.overhead))
    }

    /// Instructions of the firmware proper between `self` and `later`: everything
    /// inside polls but DMA, hardware models and the probes.
    pub fn firmware_until(&self, later: &Self) -> u32 {
        let d = |a: u32, b: u32| b.wrapping_sub(a);
        d(self.poll, later.poll)
            .wrapping_sub(d(self.dma, later.dma))
            .wrapping_sub(d(self.hw, later.hw))
            .wrapping_sub(d(self.overhead, later.overhead))
    }
}

/// Polls in which the engine's local ACK timer fired: count, firmware instructions in
/// all, the most in one.
static TIMER_POLLS: [AtomicU32; 3] = [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];

/// One `Nic::poll`, counted while probing; whether it did anything.
pub fn poll(nic: &mut crate::TestNic) -> bool {
    if !on() {
        return nic.poll();
    }
    let timeouts = nic.engine().counters().local_ack_timeout_err;
    let s0 = Split::now();
    let t0 = instret();
    let busy = nic.poll();
    add(&POLL_INSTRET, instret() - t0);
    add(&POLLS, 1);
    if nic.engine().counters().local_ack_timeout_err != timeouts {
        let n = s0.firmware_until(&Split::now());
        let [count, total, max] = &TIMER_POLLS;
        add(count, 1);
        add(total, u64::from(n));
        max.store(max.load(Relaxed).max(n), Relaxed);
    }
    busy
}

/// The polls in which the engine's local ACK timer fired, since
/// [`reset_timer_polls`] (the local ACK timeout counted, `local_ack_timeout_err`): the
/// firmware's instructions in each (with the fast path's Go-Back-N: reading its news
/// and counting its retry; with a queue taken back: the take-back, the engine's timer
/// and its rewind).
pub fn timer_polls() -> Work {
    let [count, total, max] = &TIMER_POLLS;
    Work {
        count: count.load(Relaxed),
        total: u64::from(total.load(Relaxed)),
        max: max.load(Relaxed),
    }
}

pub fn reset_timer_polls() {
    for c in &TIMER_POLLS {
        c.store(0, Relaxed);
    }
}

/// Inside a hardware model's call: nested probes (the loopback's, under the fast
/// path's model) neither count nor bracket.
static IN_HW: AtomicBool = AtomicBool::new(false);

/// Runs `f` (work of a hardware model), counting its instructions as hardware.
fn hw<R>(f: impl FnOnce() -> R) -> R {
    if !on() || IN_HW.load(Relaxed) {
        return f();
    }
    // The probe's own bookkeeping around the call counts as hardware too.
    let t0 = instret();
    IN_HW.store(true, Relaxed);
    let r = f();
    IN_HW.store(false, Relaxed);
    add(&HW_INSTRET, instret() - t0);
    r
}

/// Probes bracket now: on, and not inside a hardware model.
fn bracketing() -> bool {
    on() && !IN_HW.load(Relaxed)
}

/// Starts or stops counting. Never inlined: a profiler finds the budget phases in an
/// instruction trace by this function's address.
#[inline(never)]
pub fn enable(on: bool) {
    ON.store(on, Relaxed);
}

fn on() -> bool {
    ON.load(Relaxed)
}

fn dma_instret() -> u32 {
    DMA_INSTRET.load(Relaxed)
}

/// Host memory whose calls are counted into [`DMA_INSTRET`] while probing.
pub struct DmaProbe<D> {
    /// The memory; the host side of the test uses it directly (not counted).
    pub inner: D,
}

impl<D: Dma> DmaProbe<D> {
    fn counted<R>(&mut self, f: impl FnOnce(&mut D) -> R) -> R {
        // A hardware model's DMA counts as the model's.
        if !bracketing() {
            return f(&mut self.inner);
        }
        let t0 = instret();
        let r = f(&mut self.inner);
        let dt = instret().wrapping_sub(t0) as u32;
        DMA_INSTRET.store(dma_instret().wrapping_add(dt), Relaxed);
        r
    }
}

impl<D: Dma> Dma for DmaProbe<D> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.counted(|m| m.read(addr, buf))
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        self.counted(|m| m.write(addr, data))
    }
}

/// What a frame is, for the statistics.
#[derive(Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum Class {
    /// RC SEND / WRITE request packets and READ response packets (carry payload).
    Data,
    /// ACK and atomic ACK.
    Ack,
    /// READ and atomic requests, anything else.
    Other,
}

/// Sums over the frames of one class and direction.
#[derive(Clone, Copy, Default)]
pub struct Sum {
    pub frames: u32,
    pub bytes: u32,
    /// Instructions inside the bracket.
    pub total: u64,
    /// Of which in DMA calls.
    pub dma: u64,
    /// The ICRC of the same frames, counted apart.
    pub icrc: u64,
}

impl Sum {
    fn add(&mut self, bytes: usize, total: u32, dma: u32, icrc: u32) {
        self.frames += 1;
        self.bytes += bytes as u32;
        self.total += u64::from(total);
        self.dma += u64::from(dma);
        self.icrc += u64::from(icrc);
    }

    /// Per-frame averages: (total, dma, icrc, rest).
    pub fn per_frame(&self) -> (u32, u32, u32, i32) {
        let n = u64::from(self.frames.max(1));
        let (t, d, c) = (self.total / n, self.dma / n, self.icrc / n);
        (t as u32, d as u32, c as u32, t as i32 - d as i32 - c as i32)
    }
}

/// Statistics per direction and class.
#[derive(Clone, Copy, Default)]
pub struct Stats {
    pub tx: [Sum; 3],
    pub rx: [Sum; 3],
    /// Instructions the probes spent measuring (their own ICRC runs), to take out of
    /// whole-loop counts.
    pub overhead: u64,
    /// The frames the firmware built, by kind ([`kind::FRAME`]).
    pub kinds: Kinds,
}

/// The class of a frame from its BTH opcode (untagged IPv4 RoCEv2, as the self-test
/// sends; anything else is `Other`).
fn classify(frame: &[u8]) -> Class {
    const BTH: usize = 14 + 20 + 8;
    if frame.get(12..14) != Some(&[0x08, 0x00]) {
        return Class::Other;
    }
    match frame.get(BTH) {
        Some(0x00..=0x0B | 0x0D..=0x0F) => Class::Data,
        Some(0x10 | 0x11) => Class::Ack,
        _ => Class::Other,
    }
}

/// The BTH opcode of an untagged IPv4 RoCEv2 frame.
fn opcode_of(frame: &[u8]) -> Option<u8> {
    const BTH: usize = 14 + 20 + 8;
    (frame.get(12..14) == Some(&[0x08, 0x00]))
        .then(|| frame.get(BTH).copied())
        .flatten()
}

/// [`kind::FRAME`]'s key of a frame: its opcode and, for an ACK, its syndrome's kind.
fn frame_kind(frame: &[u8]) -> u32 {
    const AETH: usize = 14 + 20 + 8 + 12;
    let op = opcode_of(frame).unwrap_or(0xFF);
    let syndrome = match op {
        0x11 => frame.get(AETH).map_or(0, |s| s >> 5),
        _ => 0,
    };
    kind::FRAME | u32::from(syndrome) << 8 | u32::from(op)
}

/// What a [`Fault`] does to its frame.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Lost on the wire.
    Drop,
    /// ECN CE set by a congested switch (the IPv4 checksum mended; the ICRC does not
    /// cover the field).
    MarkCe,
}

/// A fault the `skip + 1`-th next frame of BTH opcode `opcode` (an ACK: of AETH
/// syndrome bits 7..5 `syndrome`) meets between the port and the loopback: the
/// self-test's way to make the packets the fast path hands to the firmware.
#[derive(Clone, Copy)]
pub struct Fault {
    pub opcode: u8,
    pub syndrome: u8,
    pub skip: u8,
    pub what: FaultKind,
}

/// Instructions for the ICRC of `frame` (untagged IPv4), computed here on the same bytes.
fn icrc_cost(frame: &[u8]) -> u32 {
    let covered = frame.get(14..frame.len().saturating_sub(4)).unwrap_or(&[]);
    let t0 = instret();
    let _ = black_box(icrc::compute(IcrcKind::Ipv4, black_box(covered)));
    instret().wrapping_sub(t0) as u32
}

/// A datapath whose calls bracket the engine's per-frame work.
pub struct DpProbe<P> {
    pub inner: P,
    pub stats: Stats,
    /// `minstret` and DMA count when `can_transmit` was last asked.
    tx_open: Cell<Option<(u64, u32)>>,
    /// `minstret` and DMA count when `receive` last returned a frame, with its class,
    /// length and ICRC cost.
    rx_open: Option<(u64, u32, Class, usize, u32)>,
    /// The next fault to inject, and how many were.
    pub fault: Option<Fault>,
    pub faulted: u32,
    /// A frame being marked.
    marked: [u8; roce_firmware::runtime::FRAME_BUF],
}

impl<P> DpProbe<P> {
    pub fn new(inner: P) -> Self {
        Self {
            inner,
            stats: Stats::default(),
            tx_open: Cell::new(None),
            rx_open: None,
            fault: None,
            faulted: 0,
            marked: [0; roce_firmware::runtime::FRAME_BUF],
        }
    }

    /// The fault `frame` meets, if it is the one: consumed.
    fn fault_for(&mut self, frame: &[u8]) -> Option<FaultKind> {
        let f = self.fault.as_mut()?;
        let hit = opcode_of(frame) == Some(f.opcode)
            && (f.opcode != 0x11 || frame_kind(frame) >> 8 & 0xFF == u32::from(f.syndrome));
        if !hit {
            return None;
        }
        if f.skip > 0 {
            f.skip -= 1;
            return None;
        }
        let what = f.what;
        self.fault = None;
        self.faulted += 1;
        Some(what)
    }

    /// Forgets the statistics.
    pub fn reset(&mut self) {
        self.stats = Stats::default();
        self.tx_open.set(None);
        self.rx_open = None;
    }
}

impl<P: Datapath> Datapath for DpProbe<P> {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        let (t, dma) = (instret(), dma_instret());
        if let Some((t0, dma0)) = self.tx_open.take().filter(|_| bracketing()) {
            let cost = icrc_cost(frame);
            let sum = &mut self.stats.tx[classify(frame) as usize];
            sum.add(
                frame.len(),
                t.wrapping_sub(t0) as u32,
                dma.wrapping_sub(dma0),
                cost,
            );
            let own = (t.wrapping_sub(t0) as u32)
                .wrapping_sub(dma.wrapping_sub(dma0))
                .wrapping_sub(cost);
            self.stats.kinds.add(frame_kind(frame), own);
            self.stats.overhead += instret() - t;
            add(&OVERHEAD, instret() - t);
        }
        // The wire between the port and the loopback.
        match self.fault_for(frame) {
            None => hw(|| self.inner.transmit(frame)),
            Some(FaultKind::Drop) => true,
            Some(FaultKind::MarkCe) => {
                let Some(m) = self.marked.get_mut(..frame.len()) else {
                    return false;
                };
                m.copy_from_slice(frame);
                if let Some(h) = m.get_mut(14..34) {
                    h[1] |= 3;
                    h[10..12].fill(0);
                    let sum = roce_core::wire::ipv4::checksum(h);
                    h[10..12].copy_from_slice(&sum.to_be_bytes());
                }
                let inner = &mut self.inner;
                hw(|| inner.transmit(m))
            }
        }
    }

    fn verifies_icrc(&self) -> bool {
        self.inner.verifies_icrc()
    }

    fn can_transmit(&self) -> bool {
        let ready = hw(|| self.inner.can_transmit());
        if bracketing() {
            let t = instret();
            self.tx_open.set(Some((t, dma_instret())));
            add(&OVERHEAD, instret() - t);
        }
        ready
    }

    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        let (t, dma) = (instret(), dma_instret());
        if let Some((t0, dma0, class, len, cost)) = self.rx_open.take().filter(|_| bracketing()) {
            let sum = &mut self.stats.rx[class as usize];
            sum.add(len, t.wrapping_sub(t0) as u32, dma.wrapping_sub(dma0), cost);
        }
        let n = hw(|| self.inner.receive(buf))?;
        if bracketing() {
            let t = instret();
            let frame = buf.get(..n).unwrap_or(&[]);
            // A datapath that verifies the ICRC spares the engine its computation.
            let cost = if self.inner.verifies_icrc() {
                0
            } else {
                icrc_cost(frame)
            };
            let class = classify(frame);
            let t1 = instret();
            self.stats.overhead += t1 - t;
            add(&OVERHEAD, t1 - t);
            self.rx_open = Some((t1, dma_instret(), class, n, cost));
        }
        Some(n)
    }
}

/// Sums of one kind of firmware work the fast path's probe brackets.
#[derive(Clone, Copy, Default)]
pub struct Work {
    pub count: u32,
    /// Instructions, DMA excluded.
    pub total: u64,
    pub max: u32,
}

impl Work {
    pub fn add(&mut self, n: u32) {
        self.count += 1;
        self.total += u64::from(n);
        self.max = self.max.max(n);
    }

    pub fn avg(&self) -> u32 {
        (self.total / u64::from(self.count.max(1))) as u32
    }
}

/// Kinds of firmware work told apart for issue 14's "any one packet" bound: the key's
/// bits 16.. are the [`Kinds`] class, bits 8..16 and 0..8 what the class says.
pub mod kind {
    /// An event (bits 8..16: the reason of an EXCEPTION, bits 0..8: its BTH opcode);
    /// `EVENT + kind << 16` for MSG_DONE and ACKED.
    pub const EVENT: u32 = 0;
    /// A descriptor (bits 8..16: its REPLAY flag, bits 0..8: its `op`).
    pub const DESCRIPTOR: u32 = 4 << 16;
    /// A frame the firmware built (bits 8..16: an ACK's AETH syndrome bits 7..5, bits
    /// 0..8: the BTH opcode).
    pub const FRAME: u32 = 5 << 16;
    /// A poll in which the local ACK timer fired.
    pub const TIMER: u32 = 6 << 16;
    /// A `READ` event (the fast path took a READ request; `docs/fastpath.md` §3.4).
    pub const READ_EVENT: u32 = 8 << 16;
    /// A `CE` event (the fast path took a CE-marked request; `docs/fastpath.md` §3.4).
    pub const CE_EVENT: u32 = 9 << 16;
    /// An `ATOMIC` event (the fast path executed an atomic request; `docs/fastpath.md`
    /// §3.4, "Atomic requests").
    pub const ATOMIC_EVENT: u32 = 10 << 16;
    /// An `RNR` event (the fast path answered a SEND to an empty receive queue with an
    /// RNR NAK; `docs/fastpath.md` §3.4, "Receiver not ready").
    pub const RNR_EVENT: u32 = 11 << 16;
    /// A `CNP` event (a CNP for a QP the fast path paces; `docs/fastpath.md` §2.5).
    pub const CNP_EVENT: u32 = 13 << 16;
    /// A `BYTES` event (a paced QP's byte counter at its threshold; §2.5).
    pub const BYTES_EVENT: u32 = 14 << 16;
}

/// Classes of [`kind`] keys the self-test bounds apart: 0 an EXCEPTION of a request
/// (the responder's), 1 one of a response or CNP, 2 MSG_DONE, 3 ACKED, 4 a descriptor,
/// 5 a frame built off the fast path's kinds (a request of a QP off it), 6 the ACK
/// timeout's poll, 7 a response frame built (ACK, NAK, READ response, atomic ACK: the
/// responder's, of any QP), 8 a `READ` event, 9 a `CE` event, 10 an `ATOMIC` event,
/// 11 an `RNR` event, 12 a CNP built (the notification point's, for a CE-marked request
/// of a fast-path QP: bounded apart from class 5's request frames, three times its cost),
/// 13 a `CNP` event, 14 a `BYTES` event (DCQCN's reaction point of a paced QP).
pub const CLASSES: usize = 15;

pub fn class(key: u32) -> usize {
    match key >> 16 {
        0 if matches!(key as u8, 0x00..=0x0C | 0x13 | 0x14 | 0x16 | 0x17) => 0,
        0 => 1,
        5 if matches!(key as u8, 0x0D..=0x12) => 7,
        5 if key as u8 == 0x81 => 12,
        c => c as usize,
    }
}

/// Names of a [`kind`] key: what, and two qualifiers.
pub fn kind_name(key: u32) -> (&'static str, &'static str, &'static str) {
    let (a, b) = ((key >> 8 & 0xFF) as u8, key as u8);
    let opcode = || roce_core::wire::Opcode(b).name().unwrap_or("opcode?");
    match key >> 16 {
        0 => ("EXCEPTION", reason_name(a), opcode()),
        2 => ("event", "MSG_DONE", ""),
        3 => ("event", "ACKED", ""),
        8 => ("event", "READ", ""),
        9 => ("event", "CE", ""),
        10 => ("event", "ATOMIC", ""),
        11 => ("event", "RNR", ""),
        13 => ("event", "CNP", ""),
        14 => ("event", "BYTES", ""),
        4 => (
            "descriptor",
            if a != 0 { "REPLAY" } else { "new" },
            match b {
                0 => "SEND",
                1 => "SEND_WITH_IMM",
                2 => "SEND_WITH_INV",
                3 => "WRITE",
                4 => "WRITE_WITH_IMM",
                5 => "READ",
                6 => "CMP_SWAP",
                7 => "FETCH_ADD",
                15 => "FLUSH",
                _ => "op?",
            },
        ),
        5 => (
            "frame built",
            opcode(),
            match (b, a) {
                (0x11, 0) => "ACK",
                (0x11, 1) => "RNR NAK",
                (0x11, 3) => "NAK",
                _ => "",
            },
        ),
        6 => ("poll", "local ACK timeout", "(the fast path's Go-Back-N)"),
        _ => ("?", "", ""),
    }
}

/// The name of an EXCEPTION's reason (`docs/fastpath.md` §3.5).
fn reason_name(r: u8) -> &'static str {
    match r {
        1 => "off",
        2 => "opcode",
        3 => "PSN",
        4 => "sequence",
        5 => "ECN CE",
        6 => "length",
        7 => "key",
        8 => "NAK outstanding",
        9 => "no receive buffer",
        10 => "held",
        11 => "NAK",
        12 => "order",
        13 => "address",
        14 => "context miss",
        _ => "reason?",
    }
}

/// Firmware work per kind (keys of [`kind`]), in the order the kinds first came.
#[derive(Clone, Copy, Default)]
pub struct Kinds {
    pub keys: [u32; 24],
    pub work: [Work; 24],
    pub len: usize,
}

impl Kinds {
    fn add(&mut self, key: u32, n: u32) {
        let i = match self.keys.iter().take(self.len).position(|k| *k == key) {
            Some(i) => i,
            None if self.len < self.keys.len() => {
                self.len += 1;
                self.len - 1
            }
            // Full: the last entry takes the rest (never with the self-test's kinds).
            None => self.keys.len() - 1,
        };
        if let (Some(k), Some(w)) = (self.keys.get_mut(i), self.work.get_mut(i)) {
            *k = key;
            w.add(n);
        }
    }

    /// The kinds seen, with their work.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Work)> {
        self.keys
            .iter()
            .copied()
            .zip(self.work.iter())
            .take(self.len)
    }
}

/// What the firmware did around the fast path, bracketed.
#[derive(Clone, Copy, Default)]
pub struct FpStats {
    /// Handling one event, by kind (index: 1 EXCEPTION, 2 MSG_DONE, 3 ACKED, 4 READ, 5
    /// CE): from
    /// `poll_event` returning it to the firmware's next `poll_event` (the engine's
    /// handling, the take-back, the contexts written back), the fast path's own
    /// instructions in between (its calls, its DMA) taken out.
    pub events: [Work; 10],
    /// Building one descriptor: from `tx_room` saying yes to `post_tx` (the engine
    /// choosing the WQE and the descriptor's encoding).
    pub descriptors: Work,
    /// Of the events and descriptors above, those of QP [`FpProbe::receiver`]: the
    /// receiving end's own work, when one NIC is both ends.
    pub receiver: Work,
    /// The events and descriptors above by kind ([`kind`]).
    pub kinds: Kinds,
}

/// What an open bracket measures.
#[derive(Clone, Copy)]
enum Open {
    /// An event of this kind, its [`kind`] key.
    Event(usize, u32),
    /// `tx_room` said yes: a descriptor if `post_tx` follows.
    Descriptor,
}

/// An open bracket: the counters when it opened, what it measures, and its QPN (the
/// instruction count it opened at is `FpProbe::at`, read after the rest is stored).
#[derive(Clone, Copy)]
struct Bracket {
    split: Split,
    what: Open,
    qpn: u32,
}

/// The fast path's model behind probes: its instructions count as hardware, and the
/// firmware's work between its calls is bracketed per event and per descriptor.
pub struct FpProbe<F> {
    pub inner: F,
    pub stats: FpStats,
    /// The QPN whose work counts as the receiver's too (`FpStats::receiver`).
    pub receiver: u32,
    open: Cell<Option<Bracket>>,
    /// What `open` holds, checked without copying it: [`NONE`], [`EVENT`] or [`DESC`].
    open_kind: Cell<u8>,
    /// `minstret` when the open bracket opened.
    at: Cell<u64>,
}

/// `FpProbe::open_kind`: no bracket open, an event's (closes at `poll_event`), a
/// descriptor's (closes at any call).
const NONE: u8 = 0;
const EVENT: u8 = 1;
const DESC: u8 = 2;

impl<F> FpProbe<F> {
    pub fn new(inner: F) -> Self {
        Self {
            inner,
            stats: FpStats::default(),
            receiver: 0,
            open: Cell::new(None),
            open_kind: Cell::new(NONE),
            at: Cell::new(0),
        }
    }

    pub fn reset(&mut self) {
        self.stats = FpStats::default();
        self.open.set(None);
        self.open_kind.set(NONE);
    }

    /// Closes the open bracket (`posted`: with the descriptor a `Descriptor` bracket
    /// was waiting for). An event's bracket stays open across the firmware's other
    /// calls into the fast path (it closes at the next `poll_event`, `event` true);
    /// a descriptor's closes at any call.
    /// Inlined: with nothing to close (most calls, and every call the firmware makes
    /// while it handles an event) it costs the firmware a load and a branch or two.
    /// (It once called `close_open` whenever a bracket was open, which at each call
    /// the firmware made inside an event's bracket counted ~25 of the probe's own
    /// instructions as the firmware's.)
    #[inline(always)]
    fn close(&mut self, posted: Option<&[u8; TXD_LEN]>, event: bool) {
        // (A descriptor's closes at any call, an event's at `poll_event`: one compare.)
        if self.open_kind.get() > u8::from(!event) {
            self.close_open(posted);
        }
    }

    #[inline(never)]
    fn close_open(&mut self, posted: Option<&[u8; TXD_LEN]>) {
        // Read first: what follows is the probe's.
        let t = instret();
        let Some(b) = self.open.get() else {
            return;
        };
        self.open.set(None);
        self.open_kind.set(NONE);
        // Firmware only: the fast path's instructions (its calls, its DMA) and the
        // probes' own come out.
        let n =
            (t.wrapping_sub(self.at.get()) as u32).wrapping_sub(Split::now().other_since(&b.split));
        let qpn = match b.what {
            Open::Event(k, key) => {
                if let Some(w) = self.stats.events.get_mut(k) {
                    w.add(n);
                }
                self.stats.kinds.add(key, n);
                Some(b.qpn)
            }
            Open::Descriptor => posted.map(|d| {
                self.stats.descriptors.add(n);
                let replay = u32::from(d[4] & roce_core::fastpath::layout::TXD_REPLAY != 0);
                self.stats
                    .kinds
                    .add(kind::DESCRIPTOR | replay << 8 | u32::from(d[3]), n);
                u32::from_le_bytes([d[0], d[1], d[2], 0])
            }),
        };
        if qpn == Some(self.receiver) {
            self.stats.receiver.add(n);
        }
        add(&OVERHEAD, instret() - t);
    }

    fn open(&self, what: Open, qpn: u32) {
        if on() {
            self.open.set(Some(Bracket {
                split: Split::now(),
                what,
                qpn,
            }));
            self.open_kind.set(match what {
                Open::Event(..) => EVENT,
                Open::Descriptor => DESC,
            });
            // Read last: what came before is the probe's. (Read first, the bracket's
            // ~20 stores counted as the firmware's.)
            self.at.set(instret());
        }
    }
}

impl<F: FastPath> FpProbe<F> {
    /// A call into the model: the open bracket closes, the call counts as hardware.
    fn call<R>(&mut self, f: impl FnOnce(&mut F) -> R) -> R {
        self.close(None, false);
        let inner = &mut self.inner;
        hw(|| f(inner))
    }
}

impl<F: FastPath> FastPath for FpProbe<F> {
    fn set_port(&mut self, mac: [u8; 6], gid: [u8; 16]) {
        self.call(|f| f.set_port(mac, gid))
    }
    fn write_sctx(&mut self, qpn: Qpn, offset: usize, bytes: &[u8]) {
        self.call(|f| f.write_sctx(qpn, offset, bytes))
    }
    fn read_sctx(&mut self, qpn: Qpn) -> [u8; SCTX_LEN] {
        self.call(|f| f.read_sctx(qpn))
    }
    fn write_rctx(&mut self, qpn: Qpn, bytes: &[u8; RCTX_LEN]) {
        self.call(|f| f.write_rctx(qpn, bytes))
    }
    fn read_rctx(&mut self, qpn: Qpn) -> [u8; RCTX_LEN] {
        self.call(|f| f.read_rctx(qpn))
    }
    fn ctx_entries(&self) -> usize {
        self.inner.ctx_entries()
    }
    fn rx_answered(&self) -> [u64; 2] {
        self.inner.rx_answered()
    }

    fn events_waiting(&mut self) -> bool {
        self.inner.events_waiting()
    }
    fn read_responder(&self) -> bool {
        self.inner.read_responder()
    }
    fn recv_loads(&self) -> bool {
        self.inner.recv_loads()
    }
    fn load_recv(&mut self, qpn: Qpn, buf: Option<(u64, u32)>, cqe: Option<RecvCqe>) -> bool {
        self.call(|f| f.load_recv(qpn, buf, cqe))
    }
    fn rnr_responder(&self) -> bool {
        self.inner.rnr_responder()
    }
    fn msgs_in_flight(&self) -> u32 {
        self.inner.msgs_in_flight()
    }
    fn recv_rnr(&mut self, qpn: Qpn, t: Option<RnrTimer>) -> bool {
        self.call(|f| f.recv_rnr(qpn, t))
    }
    fn paces(&self) -> bool {
        self.inner.paces()
    }
    fn set_pace(&mut self, qpn: Qpn, pace: Option<&Pace>) {
        self.call(|f| f.set_pace(qpn, pace))
    }
    fn write_pace(&mut self, qpn: Qpn, w: &PaceWrite) {
        self.call(|f| f.write_pace(qpn, w))
    }

    fn ctx_hits_misses(&self) -> [u64; 2] {
        self.inner.ctx_hits_misses()
    }
    fn take_accessed(&mut self, word: usize) -> u32 {
        self.call(|f| f.take_accessed(word))
    }
    fn mr_entries(&self) -> usize {
        self.inner.mr_entries()
    }
    fn write_mr(&mut self, index: usize, bytes: &[u8; MR_LEN]) {
        self.call(|f| f.write_mr(index, bytes))
    }
    fn tx_room(&self) -> bool {
        let room = hw(|| self.inner.tx_room());
        if room {
            self.open(Open::Descriptor, 0);
        }
        room
    }
    fn post_tx(&mut self, desc: &[u8; TXD_LEN]) -> bool {
        self.close(Some(desc), false);
        let inner = &mut self.inner;
        hw(|| inner.post_tx(desc))
    }
    fn poll_event(&mut self, event: &mut EventWords, frame: &mut [u8]) -> bool {
        // The last event's handling ends here.
        self.close(None, true);
        let got = self.call(|f| f.poll_event(event, frame));
        if got && on() {
            let t = instret();
            // (bytes 0, 1 and 2..4 in word 0, the QPN and byte 7 in word 1)
            let (w0, w1) = (event[0], event[1]);
            let qpn = w1 & 0xFF_FFFF;
            let k = (w0 as u8).min(9);
            let key = match k {
                roce_core::fastpath::layout::EV_EXCEPTION => kind::EVENT | (w0 & 0xFF00) | w1 >> 24,
                // (kind 4 << 16 is a descriptor's key)
                roce_core::fastpath::layout::EV_READ => kind::READ_EVENT,
                roce_core::fastpath::layout::EV_CE => kind::CE_EVENT,
                roce_core::fastpath::layout::EV_ATOMIC => kind::ATOMIC_EVENT,
                roce_core::fastpath::layout::EV_RNR => kind::RNR_EVENT,
                roce_core::fastpath::layout::EV_CNP => kind::CNP_EVENT,
                roce_core::fastpath::layout::EV_BYTES => kind::BYTES_EVENT,
                _ => kind::EVENT | u32::from(k) << 16,
            };
            add(&OVERHEAD, instret() - t);
            self.open(Open::Event(usize::from(k), key), qpn);
        }
        got
    }
    fn run(&mut self, dma: &mut dyn roce_core::memory::Dma) -> bool {
        self.call(|f| f.run(dma))
    }
    fn run_at(&mut self, dma: &mut dyn roce_core::memory::Dma, now: u64) -> bool {
        self.call(|f| f.run_at(dma, now))
    }
    fn sq_hand_over(&mut self, qpn: Qpn, ring: SqRing, idle: &SqIdle) -> bool {
        self.call(|f| f.sq_hand_over(qpn, ring, idle))
    }
    fn sq_doorbell(
        &mut self,
        qpn: Qpn,
        pi: u32,
        now: u64,
        dma: &mut dyn roce_core::memory::Dma,
    ) -> SqRung {
        self.call(|f| f.sq_doorbell(qpn, pi, now, dma))
    }
    fn sq_take_back(&mut self, qpn: Qpn) -> Option<SqBack> {
        self.call(|f| f.sq_take_back(qpn))
    }
    fn sq_deadline(&mut self, qpn: Qpn) -> Option<u64> {
        self.call(|f| f.sq_deadline(qpn))
    }
    fn sq_stopped(&mut self, qpn: Qpn) -> bool {
        self.call(|f| f.sq_stopped(qpn))
    }
    fn sq_news(&mut self) -> SqNews {
        self.call(|f| f.sq_news())
    }
    fn counters(&self) -> FastPathCounters {
        self.inner.counters()
    }
    fn cq_writer(&mut self) -> Option<&mut roce_firmware::hal::CqWriter> {
        // The firmware reads and writes the writer's CQ entries as registers: counted
        // as its own work.
        self.close(None, false);
        self.inner.cq_writer()
    }
    // so are the writer's other accesses
    fn cq_ring(&mut self, cq: u16) -> Option<roce_firmware::hal::CqRing> {
        self.close(None, false);
        self.inner.cq_ring(cq)
    }
    fn set_cq_ring(&mut self, cq: u16, ring: Option<roce_firmware::hal::CqRing>) -> bool {
        self.close(None, false);
        self.inner.set_cq_ring(cq, ring)
    }
    fn cqe_port(&self) -> bool {
        self.inner.cqe_port()
    }
    fn post_cqe(
        &mut self,
        cq: u16,
        cqe: &[u8; 32],
        ci: u32,
    ) -> Option<roce_firmware::hal::CqePost> {
        self.close(None, false);
        self.inner.post_cqe(cq, cqe, ci)
    }
    fn set_send_cq(&mut self, qpn: Qpn, cq: Option<u16>) {
        self.call(|f| f.set_send_cq(qpn, cq))
    }
}

/// The firmware's own frames and the accessor pass straight through.
impl<F: Datapath + FastPath> Datapath for FpProbe<F> {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        self.inner.transmit(frame)
    }
    fn can_transmit(&self) -> bool {
        self.inner.can_transmit()
    }
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        self.inner.receive(buf)
    }
    fn verifies_icrc(&self) -> bool {
        self.inner.verifies_icrc()
    }
    fn fastpath(&mut self) -> Option<&mut dyn FastPath> {
        self.inner.fastpath()?;
        Some(self)
    }
}
