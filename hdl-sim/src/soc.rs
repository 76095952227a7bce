//! The NIC SoC (`rtl/soc/nic_soc.sv`): the VexRiscv soft core running the firmware
//! image from `make-images.sh`, the register window the host sees, the DMA engine, the
//! datapath and the log channel, Verilated as one model.
//!
//! * [`Soc`]: the model at the level of its pins. The clock loop runs in C++; host
//!   memory stays here (any [`Dma`]) and the DMA engine reaches it through callbacks
//!   while the loop runs. Frames go in and out whole. [`Soc::firmware_stats`] reads
//!   what the firmware measured of itself (`mcycle`, `minstret`).
//! * [`SocNic`]: a [`Device`] the host driver opens: register accesses are
//!   clocked through the host port, `progress` runs the SoC for a while and moves
//!   frames between it and the port queues, as `roce_host::LocalNic` does for the
//!   firmware runtime compiled for the host.
//!
//! The SoC's clock is [`CLOCK_HZ`] (the `softcore` board's): simulated time is cycles
//! times [`NS_PER_CYCLE`].

use crate::sim::SimError;
use roce_core::memory::Dma;
use roce_firmware::abi::{self, reg, DeviceStatus};
use roce_host::{Device, HostMemory, PortQueues};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// The SoC's clock (the `softcore` board of `firmware/image/src/boards.rs`).
pub const CLOCK_HZ: u64 = 100_000_000;
/// Nanoseconds per clock cycle.
pub const NS_PER_CYCLE: u64 = 1_000_000_000 / CLOCK_HZ;

/// Environment variable naming the `$readmemh` image; else [`default_image`].
pub const IMAGE_ENV: &str = "ROCE_SOC_IMAGE";

/// Whether the SoC model was built (Verilator and the soft core's Verilog were found).
pub fn soc_available() -> bool {
    cfg!(not(roce_soc_unavailable))
}

/// Where `make-images.sh` writes the soft-core firmware image (`$ROCE_SOC_IMAGE`
/// overrides it).
pub fn default_image() -> PathBuf {
    if let Some(p) = std::env::var_os(IMAGE_ENV) {
        return PathBuf::from(p);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../firmware/image/target/images/softcore/firmware.hex")
}

/// What went wrong with the SoC.
#[derive(Debug)]
pub enum SocError {
    /// The model was not built; the reason the build gave.
    Unavailable(&'static str),
    /// The image file is missing or unreadable.
    Image(PathBuf, std::io::Error),
    /// The C++ side refused.
    Model(String),
    /// The firmware did not set `STATUS.ready` within the cycles given.
    BootTimeout { cycles: u64 },
    /// The firmware stopped: `STATUS.fatal` (a panic or a CPU exception; its log says
    /// which).
    Fatal { log: Vec<u8> },
}

impl fmt::Display for SocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SocError::Unavailable(why) => write!(f, "the SoC model was not built: {why}"),
            SocError::Image(p, e) => write!(
                f,
                "firmware image {}: {e} (run firmware/image/make-images.sh, or set {IMAGE_ENV})",
                p.display()
            ),
            SocError::Model(m) => write!(f, "Verilated SoC: {m}"),
            SocError::BootTimeout { cycles } => {
                write!(f, "the firmware did not become ready in {cycles} cycles")
            }
            SocError::Fatal { log } => write!(
                f,
                "the firmware stopped (STATUS.fatal); {} log bytes",
                log.len()
            ),
        }
    }
}

impl std::error::Error for SocError {}

impl From<SocError> for SimError {
    fn from(e: SocError) -> Self {
        SimError::Model(e.to_string())
    }
}

/// Host memory as the SoC's DMA engine sees it (the C++ clock loop calls in here).
pub struct SocHost {
    mem: Box<dyn Dma>,
    /// DMA requests served (each moves 1 to 4 bytes).
    requests: u64,
}

impl SocHost {
    #[cfg_attr(roce_soc_unavailable, allow(dead_code))]
    pub(crate) fn dma_read(&mut self, addr: u64, len: u32, data: &mut u32) -> bool {
        self.requests += 1;
        let mut b = [0u8; 4];
        let n = (len as usize).min(4);
        let ok = self.mem.read(addr, &mut b[..n]).is_ok();
        *data = u32::from_le_bytes(b);
        ok
    }

    #[cfg_attr(roce_soc_unavailable, allow(dead_code))]
    pub(crate) fn dma_write(&mut self, addr: u64, len: u32, data: u32) -> bool {
        self.requests += 1;
        let n = (len as usize).min(4);
        self.mem.write(addr, &data.to_le_bytes()[..n]).is_ok()
    }
}

#[cfg(not(roce_soc_unavailable))]
mod model {
    pub(super) use crate::soc_ffi::bridge::{new_soc_model, SocModel};
    pub(super) type Handle = cxx::UniquePtr<SocModel>;
}

#[cfg(roce_soc_unavailable)]
mod model {
    /// Never made: the model was not built.
    pub(super) enum Handle {}
}

/// The Verilated SoC, at its pins.
pub struct Soc {
    model: model::Handle,
    host: SocHost,
}

#[cfg(roce_soc_unavailable)]
impl Soc {
    /// The SoC running `image` with the port addresses `mac` and `gid`, its DMA engine
    /// reaching `mem`; with `trace`, an FST waveform of the whole SoC is written there.
    pub fn new(
        _image: &Path,
        _mac: [u8; 6],
        _gid: [u8; 16],
        _mem: Box<dyn Dma>,
        _trace: Option<&Path>,
    ) -> Result<Self, SocError> {
        Err(SocError::Unavailable(
            option_env!("ROCE_SOC_UNAVAILABLE").unwrap_or("unknown"),
        ))
    }
    pub fn run(&mut self, _cycles: u64) {
        match self.model {}
    }
    pub fn reg_read(&mut self, _offset: u32) -> u32 {
        match self.model {}
    }
    pub fn reg_write(&mut self, _offset: u32, _value: u32) {
        match self.model {}
    }
    pub fn push_rx(&mut self, _frame: &[u8]) {
        match self.model {}
    }
    pub fn rx_queued(&self) -> usize {
        match self.model {}
    }
    pub fn pop_tx(&mut self) -> Option<Vec<u8>> {
        match self.model {}
    }
    pub fn take_log(&mut self) -> Vec<u8> {
        match self.model {}
    }
    pub fn cycles(&self) -> u64 {
        match self.model {}
    }
}

#[cfg(not(roce_soc_unavailable))]
impl Soc {
    /// The SoC running `image` (a `$readmemh` file, the RAM's first word first) with
    /// the port addresses `mac` and `gid`, its DMA engine reaching `mem`; with `trace`,
    /// an FST waveform of the whole SoC is written there. Out of reset, not yet booted
    /// (see [`Soc::boot`]).
    pub fn new(
        image: &Path,
        mac: [u8; 6],
        gid: [u8; 16],
        mem: Box<dyn Dma>,
        trace: Option<&Path>,
    ) -> Result<Self, SocError> {
        // Verilator's $readmemh stops the process on a missing file: check first.
        std::fs::File::open(image).map_err(|e| SocError::Image(image.to_path_buf(), e))?;
        let path = image
            .to_str()
            .ok_or_else(|| SocError::Model(format!("{}: not UTF-8", image.display())))?;
        let mut model = model::new_soc_model(path, &mac, &gid, trace.is_some())
            .map_err(|e| SocError::Model(e.what().to_string()))?;
        if let Some(t) = trace {
            let t = t.to_string_lossy();
            model
                .pin_mut()
                .open_trace(&t)
                .map_err(|e| SocError::Model(e.what().to_string()))?;
        }
        Ok(Self {
            model,
            host: SocHost { mem, requests: 0 },
        })
    }

    /// Runs `cycles` clock cycles.
    pub fn run(&mut self, cycles: u64) {
        self.model.pin_mut().run(cycles, &mut self.host);
    }

    /// Reads a register of the host window (one cycle of the SoC's clock).
    pub fn reg_read(&mut self, offset: u32) -> u32 {
        // The model answers every read it is given; an error here is a bug in the RTL.
        self.model
            .pin_mut()
            .reg_read(offset, &mut self.host)
            .unwrap_or_else(|e| panic!("SoC host port: {}", e.what()))
    }

    /// Writes a register of the host window (one cycle).
    pub fn reg_write(&mut self, offset: u32, value: u32) {
        self.model
            .pin_mut()
            .reg_write(offset, value, &mut self.host);
    }

    /// Queues a frame for the SoC's wire input (empty frames are ignored).
    pub fn push_rx(&mut self, frame: &[u8]) {
        if !frame.is_empty() {
            self.model.pin_mut().push_rx(frame);
        }
    }

    /// Frames queued for the wire input that the SoC has not taken yet.
    pub fn rx_queued(&self) -> usize {
        self.model.rx_queued()
    }

    /// The oldest frame the SoC sent, ICRC included.
    pub fn pop_tx(&mut self) -> Option<Vec<u8>> {
        let mut v = Vec::new();
        self.model.pin_mut().pop_tx(&mut v).then_some(v)
    }

    /// The firmware's log bytes (defmt, rzCOBS frames) since the last call.
    pub fn take_log(&mut self) -> Vec<u8> {
        let mut v = Vec::new();
        self.model.pin_mut().take_log(&mut v);
        v
    }

    /// Clock cycles since reset.
    pub fn cycles(&self) -> u64 {
        self.model.cycles()
    }
}

/// Offsets of the firmware's statistics in the SoC's BAR, past the ABI's window (the
/// firmware side: `firmware/image/src/mmio.rs`, `stat_reg`).
pub mod stat_reg {
    pub const BUSY_POLLS: u32 = 0x4000;
    pub const FRAMES_TX: u32 = 0x4004;
    pub const FRAMES_RX: u32 = 0x4008;
    pub const BUSY_CYCLES: u32 = 0x4010;
    pub const BUSY_INSTRET: u32 = 0x4018;
    pub const BOOT_CYCLES: u32 = 0x4020;
}

/// What the firmware measured of itself with `mcycle` and `minstret`: the polls of its
/// main loop that found work, what they cost, and the frames they moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FirmwareStats {
    pub busy_polls: u32,
    pub frames_tx: u32,
    pub frames_rx: u32,
    pub busy_cycles: u64,
    pub busy_instret: u64,
    pub boot_cycles: u32,
}

impl FirmwareStats {
    /// Frames sent and received.
    pub fn frames(&self) -> u64 {
        u64::from(self.frames_tx) + u64::from(self.frames_rx)
    }

    /// The difference `self - earlier` (counters wrap).
    pub fn since(&self, earlier: &FirmwareStats) -> FirmwareStats {
        FirmwareStats {
            busy_polls: self.busy_polls.wrapping_sub(earlier.busy_polls),
            frames_tx: self.frames_tx.wrapping_sub(earlier.frames_tx),
            frames_rx: self.frames_rx.wrapping_sub(earlier.frames_rx),
            busy_cycles: self.busy_cycles.wrapping_sub(earlier.busy_cycles),
            busy_instret: self.busy_instret.wrapping_sub(earlier.busy_instret),
            boot_cycles: self.boot_cycles,
        }
    }
}

impl Soc {
    /// Reads a 64-bit statistic, low word first, again if the high word moved meanwhile.
    fn stat64(&mut self, offset: u32) -> u64 {
        loop {
            let hi = self.reg_read(offset + 4);
            let lo = self.reg_read(offset);
            if self.reg_read(offset + 4) == hi {
                return u64::from(hi) << 32 | u64::from(lo);
            }
        }
    }

    /// The firmware's statistics (a few host register reads: a few cycles).
    pub fn firmware_stats(&mut self) -> FirmwareStats {
        FirmwareStats {
            busy_polls: self.reg_read(stat_reg::BUSY_POLLS),
            frames_tx: self.reg_read(stat_reg::FRAMES_TX),
            frames_rx: self.reg_read(stat_reg::FRAMES_RX),
            busy_cycles: self.stat64(stat_reg::BUSY_CYCLES),
            busy_instret: self.stat64(stat_reg::BUSY_INSTRET),
            boot_cycles: self.reg_read(stat_reg::BOOT_CYCLES),
        }
    }

    /// DMA requests served so far (each moves 1 to 4 bytes).
    pub fn dma_requests(&self) -> u64 {
        self.host.requests
    }

    /// Runs until the firmware has booted (`STATUS.ready`, a device ID), at most
    /// `max_cycles`; returns the cycles it took.
    pub fn boot(&mut self, max_cycles: u64) -> Result<u64, SocError> {
        const STEP: u64 = 10_000;
        let start = self.cycles();
        while self.cycles() - start < max_cycles {
            self.run(STEP);
            let status = DeviceStatus(self.reg_read(reg::STATUS));
            if status.fatal() {
                return Err(SocError::Fatal {
                    log: self.take_log(),
                });
            }
            if status.ready() && self.reg_read(reg::DEVICE_ID) == abi::DEVICE_ID {
                return Ok(self.cycles() - start);
            }
        }
        Err(SocError::BootTimeout { cycles: max_cycles })
    }
}

/// Cycles a [`SocNic`] runs per `progress` call by default.
pub const PROGRESS_CYCLES: u64 = 2_000;
/// Cycles booting may take before [`SocNic::new`] gives up.
pub const BOOT_CYCLES: u64 = 20_000_000;

/// The SoC as a device of the host driver: the register window through the SoC's host
/// port, host memory through its DMA engine, frames through its wire port and the
/// port queues.
pub struct SocNic {
    soc: RefCell<Soc>,
    mem: HostMemory,
    port: Rc<RefCell<PortQueues>>,
    mac: [u8; 6],
    gid: [u8; 16],
    /// Cycles per `progress`.
    pub progress_cycles: Cell<u64>,
    log: RefCell<Vec<u8>>,
    boot_cycles: u64,
}

impl SocNic {
    /// Boots the SoC with `image` and the port addresses; `trace` dumps the whole SoC
    /// as FST there.
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
        let port = Rc::new(RefCell::new(PortQueues {
            tx_limit: usize::MAX,
            ..PortQueues::default()
        }));
        Ok(Rc::new(Self {
            soc: RefCell::new(soc),
            mem,
            port,
            mac,
            gid,
            progress_cycles: Cell::new(PROGRESS_CYCLES),
            log: RefCell::new(log),
            boot_cycles,
        }))
    }

    /// The port's MAC address and GID.
    pub fn port_addr(&self) -> ([u8; 6], [u8; 16]) {
        (self.mac, self.gid)
    }

    /// The port's frame queues: `rx` frames go to the SoC's wire input, frames it
    /// sends land in `tx`.
    pub fn port(&self) -> &Rc<RefCell<PortQueues>> {
        &self.port
    }

    /// Cycles the boot took (reset to `STATUS.ready`).
    pub fn boot_cycles(&self) -> u64 {
        self.boot_cycles
    }

    /// Clock cycles since reset.
    pub fn cycles(&self) -> u64 {
        self.soc.borrow().cycles()
    }

    /// The SoC's time, ns since reset.
    pub fn now(&self) -> u64 {
        self.cycles() * NS_PER_CYCLE
    }

    /// Runs `cycles`, moving frames: the port's `rx` into the SoC before, what it sent
    /// into the port's `tx` after. True if a frame moved.
    pub fn step(&self, cycles: u64) -> bool {
        let mut soc = self.soc.borrow_mut();
        let mut moved = false;
        {
            let mut port = self.port.borrow_mut();
            while let Some(f) = port.rx.pop_front() {
                soc.push_rx(&f);
                moved = true;
            }
        }
        soc.run(cycles);
        let mut port = self.port.borrow_mut();
        while let Some(f) = soc.pop_tx() {
            port.tx.push_back(f);
            moved = true;
        }
        self.log.borrow_mut().extend(soc.take_log());
        moved
    }

    /// Runs until the SoC's time reaches `ns` (frames move as in [`SocNic::step`]).
    pub fn run_until(&self, ns: u64) {
        let target = ns.div_ceil(NS_PER_CYCLE);
        let now = self.cycles();
        if target > now {
            self.step(target - now);
        }
    }

    /// Frames given to the SoC that it has not taken off the wire yet.
    pub fn rx_backlog(&self) -> usize {
        self.soc.borrow().rx_queued()
    }

    /// The firmware's log so far (defmt frames, rzCOBS; `defmt-print -e firmware.elf`
    /// decodes them).
    pub fn log(&self) -> Vec<u8> {
        self.log.borrow().clone()
    }

    /// What the firmware measured of itself.
    pub fn firmware_stats(&self) -> FirmwareStats {
        self.soc.borrow_mut().firmware_stats()
    }

    /// DMA requests the SoC made.
    pub fn dma_requests(&self) -> u64 {
        self.soc.borrow().dma_requests()
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
        self.step(self.progress_cycles.get());
    }
}
