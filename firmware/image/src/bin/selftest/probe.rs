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

use roce_core::memory::{Dma, DmaError};
use roce_core::wire::icrc::{self, IcrcKind};
use roce_firmware::hal::Datapath;
use roce_firmware_image::clock::instret;

/// Probes count only while this is set.
static ON: AtomicBool = AtomicBool::new(false);
/// Instructions spent inside DMA calls (wrapping; differences are what count).
static DMA_INSTRET: AtomicU32 = AtomicU32::new(0);

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
        if !on() {
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
}

impl<P> DpProbe<P> {
    pub fn new(inner: P) -> Self {
        Self {
            inner,
            stats: Stats::default(),
            tx_open: Cell::new(None),
            rx_open: None,
        }
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
        if let Some((t0, dma0)) = self.tx_open.take() {
            let cost = icrc_cost(frame);
            let sum = &mut self.stats.tx[classify(frame) as usize];
            sum.add(
                frame.len(),
                t.wrapping_sub(t0) as u32,
                dma.wrapping_sub(dma0),
                cost,
            );
            self.stats.overhead += instret() - t;
        }
        self.inner.transmit(frame)
    }

    fn verifies_icrc(&self) -> bool {
        self.inner.verifies_icrc()
    }

    fn can_transmit(&self) -> bool {
        let ready = self.inner.can_transmit();
        if on() {
            self.tx_open.set(Some((instret(), dma_instret())));
        }
        ready
    }

    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        let (t, dma) = (instret(), dma_instret());
        if let Some((t0, dma0, class, len, cost)) = self.rx_open.take() {
            let sum = &mut self.stats.rx[class as usize];
            sum.add(len, t.wrapping_sub(t0) as u32, dma.wrapping_sub(dma0), cost);
        }
        let n = self.inner.receive(buf)?;
        if on() {
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
            self.rx_open = Some((t1, dma_instret(), class, n, cost));
        }
        Some(n)
    }
}
