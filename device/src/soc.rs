//! The NIC SoC (`roce_hdl_sim::Soc`: the VexRiscv soft core running the firmware image
//! beside the RTL datapath, Verilated as one model) behind the device boundary: the
//! driver's register accesses go through the SoC's host port, one clock cycle each;
//! host memory is reached by the SoC's DMA engine; frames enter and leave on its wire
//! port. Time is the SoC's clock: cycles times `NS_PER_CYCLE`.

use crate::model::NicModel;
use roce_hdl_sim::soc::{FirmwareStats, Soc, SocError, NS_PER_CYCLE};
use roce_host::{Device, HostMemory};
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;

pub use roce_hdl_sim::soc::{default_image, soc_available, CLOCK_HZ};

/// Cycles a [`SocNic`] runs per `poll` by default: long enough for the firmware's loop
/// to notice new work and act on it, short enough to interleave two SoCs finely.
pub const POLL_CYCLES: u64 = 2_000;
/// Most steps one `poll` runs (a bound for a firmware that never goes idle).
pub const POLL_STEPS: u32 = 64;
/// Cycles booting may take before [`SocNic::new`] gives up.
pub const BOOT_CYCLES: u64 = 20_000_000;

/// The SoC as a NIC model.
pub struct SocNic {
    soc: RefCell<Soc>,
    mem: HostMemory,
    mac: [u8; 6],
    /// Cycles per `poll`.
    pub poll_cycles: Cell<u64>,
    boot_cycles: u64,
    log: RefCell<Vec<u8>>,
    /// The firmware's busy-poll count when `poll` last looked.
    busy_seen: Cell<u32>,
}

impl SocNic {
    /// Boots the SoC with the `$readmemh` image and the port addresses on its pins;
    /// `trace` dumps the whole SoC as an FST waveform there.
    pub fn new(
        image: &Path,
        mac: [u8; 6],
        gid: [u8; 16],
        trace: Option<&Path>,
    ) -> Result<Rc<Self>, SocError> {
        let mem = HostMemory::default();
        let mut soc = Soc::new(image, mac, gid, Box::new(mem.clone()), trace)?;
        let boot_cycles = soc.boot(BOOT_CYCLES)?;
        let log = soc.take_log();
        let busy = soc.busy_polls();
        Ok(Rc::new(Self {
            soc: RefCell::new(soc),
            mem,
            mac,
            poll_cycles: Cell::new(POLL_CYCLES),
            boot_cycles,
            log: RefCell::new(log),
            busy_seen: Cell::new(busy),
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

    /// What the firmware measured of itself (busy polls, frames, cycles, instructions).
    pub fn firmware_stats(&self) -> FirmwareStats {
        self.soc.borrow_mut().firmware_stats()
    }

    /// The firmware's log so far: defmt frames (rzCOBS), which `defmt-print -e
    /// firmware.elf` decodes.
    pub fn log(&self) -> Vec<u8> {
        self.log.borrow().clone()
    }

    /// One poll step: whether the SoC did something in it, and whether it is idle at
    /// its end (see `poll`).
    fn step(&self) -> (bool, bool) {
        let before = {
            let mut soc = self.soc.borrow_mut();
            let idle = soc.idle_polls();
            (soc.dma_requests(), soc.rx_queued(), soc.tx_queued(), idle)
        };
        self.run(self.poll_cycles.get());
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
    fn set_time(&self, now: u64) {
        let target = now.div_ceil(NS_PER_CYCLE);
        let cycles = self.cycles();
        if target > cycles {
            self.run(target - cycles);
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
        let mut any = false;
        for _ in 0..POLL_STEPS {
            let (did, idle) = self.step();
            any |= did;
            if idle {
                break;
            }
        }
        any
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.soc.borrow_mut().next_timeout()
    }

    fn receive_frame(&self, frame: &[u8]) {
        self.soc.borrow_mut().push_rx(frame);
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

    fn mac(&self) -> [u8; 6] {
        self.mac
    }
}

impl Device for SocNic {
    fn read_reg(&self, offset: u32) -> u32 {
        self.soc.borrow_mut().reg_read(offset)
    }

    fn write_reg(&self, offset: u32, value: u32) {
        self.soc.borrow_mut().reg_write(offset, value);
    }

    fn memory(&self) -> &HostMemory {
        &self.mem
    }

    fn progress(&self) {
        self.poll();
    }
}
