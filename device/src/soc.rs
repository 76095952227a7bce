//! The NIC SoC (`roce_hdl_sim::Soc`: the VexRiscv soft core running the firmware image
//! beside the RTL datapath, Verilated as one model) behind the device boundary: the
//! driver's register accesses go through the SoC's host port, one clock cycle each;
//! host memory is reached by the SoC's DMA engine; frames enter and leave on its wire
//! port. Time is the SoC's clock: cycles times `NS_PER_CYCLE`.
//!
//! Two ways to drive it. A harness that only polls (the verbs suites: poll until idle)
//! lets `poll` run the SoC until its firmware goes idle. A harness with a clock of its
//! own (a simulated fabric) calls `set_time`: from then on only `set_time` runs the SoC,
//! up to the time given, so the SoC's work takes simulated time; `poll` reports what
//! happened, and `poll_timeout` asks for the clock to move on a quantum at a time
//! while the SoC is busy (else when the firmware's next timer is due).

use crate::model::NicModel;
use roce_core::engine::PortConfig;
use roce_hdl_sim::soc::{FirmwareStats, LargestPoll, Soc, SocError, NS_PER_CYCLE};
use roce_hdl_sim::{DcbCounters, DcbCycle};
use roce_host::{Device, HostMemory};
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;

pub use roce_hdl_sim::soc::{default_image, soc_available, test_image, CLOCK_HZ};

/// Cycles a [`SocNic`] runs per `poll` by default: long enough for the firmware's loop
/// to notice new work and act on it, short enough to interleave two SoCs finely.
pub const POLL_CYCLES: u64 = 2_000;
/// Most steps one `poll` runs (a bound for a firmware that never goes idle).
pub const POLL_STEPS: u32 = 64;
/// Cycles booting may take before [`SocNic::new`] gives up.
pub const BOOT_CYCLES: u64 = 20_000_000;

/// CPU time of the calling thread in ns (Linux `/proc/thread-self/schedstat`; 0
/// elsewhere): the SoC's simulated cycles per CPU second do not depend on what else
/// the machine runs.
pub fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The SoC as a NIC model.
pub struct SocNic {
    soc: RefCell<Soc>,
    mem: HostMemory,
    /// The port addresses it booted with.
    boot: PortConfig,
    /// Cycles per `poll`.
    pub poll_cycles: Cell<u64>,
    boot_cycles: u64,
    log: RefCell<Vec<u8>>,
    /// The firmware's busy-poll count when `poll` last looked.
    busy_seen: Cell<u32>,
    /// A harness drives the clock (`set_time` was called).
    clocked: Cell<bool>,
    /// Clocked: the SoC did something since `poll` last asked.
    did: Cell<bool>,
    /// Clocked: the SoC was not idle at the end of its last run, or got input since.
    busy: Cell<bool>,
}

impl SocNic {
    /// Boots the SoC with the `$readmemh` image and the port addresses on its pins;
    /// `trace` dumps the whole SoC as an FST waveform there; `fastpath` sets the strap
    /// of its RC fast path (`Soc::new`).
    pub fn new(
        image: &Path,
        mac: [u8; 6],
        gid: [u8; 16],
        trace: Option<&Path>,
        fastpath: bool,
    ) -> Result<Rc<Self>, SocError> {
        let mem = HostMemory::default();
        let mut soc = Soc::new(image, mac, gid, Box::new(mem.clone()), trace, fastpath)?;
        let boot_cycles = soc.boot(BOOT_CYCLES)?;
        let log = soc.take_log();
        let busy = soc.busy_polls();
        Ok(Rc::new(Self {
            soc: RefCell::new(soc),
            mem,
            boot: PortConfig::new(mac, gid),
            poll_cycles: Cell::new(POLL_CYCLES),
            boot_cycles,
            log: RefCell::new(log),
            busy_seen: Cell::new(busy),
            clocked: Cell::new(false),
            did: Cell::new(false),
            busy: Cell::new(false),
        }))
    }

    /// Cycles the boot took (reset to `STATUS.ready`).
    pub fn boot_cycles(&self) -> u64 {
        self.boot_cycles
    }

    /// Clock cycles since reset.
    pub fn cycles(&self) -> u64 {
        self.soc.borrow().cycles()
    }

    /// Runs `cycles` clock cycles.
    pub fn run(&self, cycles: u64) {
        let mut soc = self.soc.borrow_mut();
        soc.run(cycles);
        self.log.borrow_mut().extend(soc.take_log());
    }

    /// Records what the SoC's DCB block shows each cycle from now on (`on`), or stops
    /// ([`Soc::watch_dcb`]).
    pub fn watch_dcb(&self, on: bool) {
        self.soc.borrow_mut().watch_dcb(on);
    }

    /// The DCB block's cycles recorded since the last call ([`Soc::take_dcb`]).
    pub fn take_dcb(&self) -> Vec<(DcbCycle, DcbCounters)> {
        self.soc.borrow_mut().take_dcb()
    }

    /// What the firmware measured of itself (busy polls, frames, cycles, instructions).
    pub fn firmware_stats(&self) -> FirmwareStats {
        self.soc.borrow_mut().firmware_stats()
    }

    /// The largest busy poll since the firmware's last command (read it while the
    /// firmware is idle: its four words are written one at a time).
    pub fn largest_poll(&self) -> LargestPoll {
        self.soc.borrow_mut().largest_poll()
    }

    /// The firmware's log so far: defmt frames (rzCOBS), which `defmt-print -e
    /// firmware.elf` decodes.
    pub fn log(&self) -> Vec<u8> {
        self.log.borrow().clone()
    }

    /// Runs `cycles`: whether the SoC did something meanwhile, and whether it is idle
    /// at the end (see `poll`).
    fn observe(&self, cycles: u64) -> (bool, bool) {
        let before = {
            let mut soc = self.soc.borrow_mut();
            let idle = soc.idle_polls();
            (soc.dma_requests(), soc.rx_queued(), soc.tx_queued(), idle)
        };
        self.run(cycles);
        let mut soc = self.soc.borrow_mut();
        let after = (soc.dma_requests(), soc.rx_queued(), soc.tx_queued());
        let idle = soc.idle_polls().wrapping_sub(before.3);
        let busy = soc.busy_polls();
        let did = busy != self.busy_seen.replace(busy) || (before.0, before.1, before.2) != after;
        (did, !did && idle >= 2)
    }

    /// Frames given to the SoC that it has not taken off the wire yet.
    pub fn rx_backlog(&self) -> usize {
        self.soc.borrow().rx_queued()
    }
}

impl NicModel for SocNic {
    /// Runs the SoC up to `now` (from now on only this runs it: see the module doc).
    fn set_time(&self, now: u64) {
        self.clocked.set(true);
        let target = now.div_ceil(NS_PER_CYCLE);
        let cycles = self.cycles();
        if target > cycles {
            let (did, idle) = self.observe(target - cycles);
            self.did.set(self.did.get() | did);
            self.busy.set(!idle);
        }
    }

    fn now(&self) -> u64 {
        self.cycles() * NS_PER_CYCLE
    }

    /// Runs the SoC in steps of [`SocNic::poll_cycles`] until the firmware has gone
    /// idle (at most [`POLL_STEPS`] steps), as the host runtime's `poll` does all pending
    /// work; true if it did anything. Idle: in one step, two polls of the firmware's loop
    /// found nothing to do and none found work (the first may have passed the doorbell
    /// before the host rang it), and no byte or frame moved.
    fn poll(&self) -> bool {
        if self.clocked.get() {
            return self.did.take();
        }
        let mut any = false;
        for _ in 0..POLL_STEPS {
            let (did, idle) = self.observe(self.poll_cycles.get());
            any |= did;
            if idle {
                break;
            }
        }
        any
    }

    /// Clocked and busy: a quantum ([`SocNic::poll_cycles`]) from now; else when the
    /// firmware's next timer is due.
    fn poll_timeout(&self) -> Option<u64> {
        if self.clocked.get() && self.busy.get() {
            return Some(self.now() + self.poll_cycles.get() * NS_PER_CYCLE);
        }
        self.soc.borrow_mut().next_timeout()
    }

    fn receive_frame(&self, frame: &[u8]) {
        self.soc.borrow_mut().push_rx(frame);
        self.busy.set(true);
    }

    fn transmit_frame(&self, buf: &mut [u8]) -> Option<usize> {
        let mut soc = self.soc.borrow_mut();
        let frame = soc.pop_tx()?;
        // Room for any frame the firmware builds; a longer one is a bug, dropped loudly.
        let Some(dst) = buf.get_mut(..frame.len()) else {
            panic!("the SoC sent a {}-byte frame", frame.len());
        };
        dst.copy_from_slice(&frame);
        Some(frame.len())
    }

    /// The addresses it booted with: the firmware keeps the live configuration in the
    /// SoC's RAM, where the harness does not look, so a MAC or PFC setting the host
    /// changes through the ABI is not seen here.
    fn port_config(&self) -> PortConfig {
        self.boot
    }
}

impl Device for SocNic {
    fn read_reg(&self, offset: u32) -> u32 {
        self.soc.borrow_mut().reg_read(offset)
    }

    fn write_reg(&self, offset: u32, value: u32) {
        self.soc.borrow_mut().reg_write(offset, value);
        self.busy.set(true);
    }

    fn memory(&self) -> &HostMemory {
        &self.mem
    }

    /// The driver waits (for a command, say): the SoC runs, also under a harness's
    /// clock, which it then leads by what ran here (a harness's setup, not its timing).
    fn progress(&self) {
        if self.clocked.get() {
            let (did, idle) = self.observe(self.poll_cycles.get());
            self.did.set(self.did.get() | did);
            self.busy.set(!idle);
        } else {
            self.poll();
        }
    }
}
