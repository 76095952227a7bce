//! The NIC SoC (`rtl/soc/nic_soc.sv`): the VexRiscv soft core running the firmware
//! image from `make-images.sh`, the register window the host sees, the DMA engine, the
//! datapath and the log channel, Verilated as one model.
//!
//! * [`Soc`]: the model at the level of its pins. The clock loop runs in C++; host
//!   memory stays here (any [`Dma`]) and the DMA engine reaches it through callbacks
//!   while the loop runs. Frames go in and out whole. [`Soc::firmware_stats`] reads
//!   what the firmware measured of itself (`mcycle`, `minstret`).
//!
//! `roce_device::SocNic` puts it behind the host driver's device boundary.
//!
//! The SoC's clock is [`CLOCK_HZ`] (the `softcore` board's): simulated time is cycles
//! times [`NS_PER_CYCLE`].

use crate::dcb::{DcbCounters, DcbCycle};
use crate::sim::SimError;
use elf2img::sources::{self, ImageError};
use roce_core::memory::Dma;
use roce_firmware::abi::{self, reg, DeviceStatus};
use std::fmt;
use std::path::{Path, PathBuf};

/// The SoC's clock (the `softcore` board of `firmware/image/src/boards.rs`).
pub const CLOCK_HZ: u64 = 100_000_000;
/// Nanoseconds per clock cycle.
pub const NS_PER_CYCLE: u64 = 1_000_000_000 / CLOCK_HZ;

/// The boards the firmware image links for: `firmware/image/src/boards.rs` itself (the
/// image's build script includes the same file), so the SoC's tests hold the stack the
/// firmware measures to the reserve its link made.
pub mod boards {
    include!("../../firmware/image/src/boards.rs");
}

/// Environment variable naming the `$readmemh` image; else [`default_image`].
pub const IMAGE_ENV: &str = "ROCE_SOC_IMAGE";

/// Whether the SoC model was built (Verilator and the soft core's Verilog were found).
pub fn soc_available() -> bool {
    cfg!(not(roce_soc_unavailable))
}

/// Where `make-images.sh` writes the soft-core firmware image (`$ROCE_SOC_IMAGE`
/// overrides it).
pub fn default_image() -> PathBuf {
    match std::env::var_os(IMAGE_ENV) {
        Some(p) => PathBuf::from(p),
        None => board_image("softcore"),
    }
}

/// The image for a test, or `None` when the test should print SKIPPED and pass: the
/// model was not built (an error under `CI=true`) or the image was not made (an error
/// when `ROCE_SOC_REQUIRED=1`, which `cargo xtask ci`'s `soc` step sets after making it).
/// An image not built from the checkout's sources fails the test (see [`Soc::new`]).
pub fn test_image() -> Option<PathBuf> {
    if !soc_available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the SoC model is required under CI"
        );
        eprintln!("SKIPPED: the SoC model was not built");
        return None;
    }
    let image = default_image();
    if image.exists() {
        // `Soc::new` refuses an image of other sources too; here the test fails with the
        // reason in words rather than the error's `Debug`.
        if let Err(e) = sources::check_image(checkout(), &image) {
            panic!("{e}");
        }
        return Some(image);
    }
    assert!(
        std::env::var("ROCE_SOC_REQUIRED").as_deref() != Ok("1"),
        "{} missing: run firmware/image/make-images.sh",
        image.display()
    );
    eprintln!("SKIPPED: no firmware image at {}", image.display());
    None
}

/// Where `make-images.sh` writes the `firmware` image of a board
/// (`firmware/image/src/boards.rs`).
pub fn board_image(board: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../firmware/image/target/images")
        .join(board)
        .join("firmware.hex")
}

/// The checkout this crate is built from, whose sources an image must be built from
/// ([`Soc::new`] checks, with `elf2img::sources::check_image`).
pub fn checkout() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// What went wrong with the SoC.
#[derive(Debug)]
pub enum SocError {
    /// The model was not built; the reason the build gave.
    Unavailable(&'static str),
    /// The image file is missing or unreadable.
    Image(PathBuf, std::io::Error),
    /// The image was not built from the checkout's sources, or that cannot be told.
    ImageSources(ImageError),
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
            SocError::ImageSources(e) => write!(f, "{e}"),
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

/// Host memory as the SoC's DMA engine sees it (the C++ clock loop calls in here), and
/// what the DCB block showed while [`Soc::watch_dcb`] is on.
pub struct SocHost {
    mem: Box<dyn Dma>,
    /// DMA requests served (each moves 1 to 4 bytes).
    requests: u64,
    /// The DCB block's cycles not yet taken, and the number of the next one (filled by
    /// the SoC's clock loop, so never without the SoC model).
    #[cfg_attr(roce_soc_unavailable, allow(dead_code))]
    dcb: Vec<(DcbCycle, DcbCounters)>,
    #[cfg_attr(roce_soc_unavailable, allow(dead_code))]
    dcb_next: u64,
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

    #[cfg(not(roce_soc_unavailable))]
    pub(crate) fn dcb_cycle(&mut self, out: &crate::ffi::bridge::DcbOut) {
        self.dcb.push(crate::dcb::observe(self.dcb_next, out));
        self.dcb_next += 1;
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
    /// reaching `mem`; with `trace`, an FST waveform of the whole SoC is written there;
    /// with `fastpath`, the fast path's strap is set.
    pub fn new(
        _image: &Path,
        _mac: [u8; 6],
        _gid: [u8; 16],
        _mem: Box<dyn Dma>,
        _trace: Option<&Path>,
        _fastpath: bool,
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
    pub fn tx_queued(&self) -> usize {
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
    pub fn watch_dcb(&mut self, _on: bool) {
        match self.model {}
    }
    pub fn take_dcb(&mut self) -> Vec<(DcbCycle, DcbCounters)> {
        match self.model {}
    }
}

#[cfg(not(roce_soc_unavailable))]
impl Soc {
    /// The SoC running `image` (a `$readmemh` file, the RAM's first word first) with
    /// the port addresses `mac` and `gid`, its DMA engine reaching `mem`; with `trace`,
    /// an FST waveform of the whole SoC is written there. With `fastpath`, the strap of
    /// the SoC's RC fast path is set (`nic_soc`'s `fp_strap`): every frame from the wire
    /// goes through it and the firmware drives it (`docs/fastpath.md` §6, "In the
    /// SoC"); without, the wire goes straight to the firmware's frame buffers, as in a
    /// SoC built without it. Out of reset, not yet booted (see [`Soc::boot`]).
    ///
    /// Refuses ([`SocError::ImageSources`]) an image not built from this checkout's
    /// sources as they are now (`elf2img::sources::check_image`: the record
    /// `make-images.sh` wrote beside it, unless `ROCE_SOC_IMAGE_UNCHECKED=1`).
    pub fn new(
        image: &Path,
        mac: [u8; 6],
        gid: [u8; 16],
        mem: Box<dyn Dma>,
        trace: Option<&Path>,
        fastpath: bool,
    ) -> Result<Self, SocError> {
        // Verilator's $readmemh stops the process on a missing file: check first.
        std::fs::File::open(image).map_err(|e| SocError::Image(image.to_path_buf(), e))?;
        sources::check_image(checkout(), image).map_err(SocError::ImageSources)?;
        let path = image
            .to_str()
            .ok_or_else(|| SocError::Model(format!("{}: not UTF-8", image.display())))?;
        let mut model = model::new_soc_model(path, &mac, &gid, trace.is_some(), fastpath)
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
            host: SocHost {
                mem,
                requests: 0,
                dcb: Vec::new(),
                dcb_next: 0,
            },
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

    /// Frames the SoC sent that [`Soc::pop_tx`] has not taken yet.
    pub fn tx_queued(&self) -> usize {
        self.model.tx_queued()
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

    /// From the next cycle on (`on`), records what the DCB block between the datapath
    /// and the wire (`nic_soc`'s observation ports) shows each cycle, for
    /// [`Soc::take_dcb`]; the cycles are numbered as [`Soc::cycles`] counts.
    pub fn watch_dcb(&mut self, on: bool) {
        self.host.dcb_next = self.cycles();
        self.model.pin_mut().watch_dcb(on);
    }

    /// The DCB block's cycles recorded since the last call, with its counters after
    /// each (a [`crate::DcbLockstep`] checks them).
    pub fn take_dcb(&mut self) -> Vec<(DcbCycle, DcbCounters)> {
        std::mem::take(&mut self.host.dcb)
    }
}

pub use roce_firmware::stats::{stat_reg, PollWork};

/// The largest busy poll of the firmware's loop since its last command
/// ([`stat_reg::MAX_POLL_INSTRET`]): issue 14's "any single packet the firmware
/// handles", as the firmware measured it with `minstret` and `mcycle`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LargestPoll {
    pub instret: u32,
    pub cycles: u32,
    /// What it handled.
    pub work: PollWork,
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
    /// When the engine's next timer is due (ns of the SoC's clock), if one is armed.
    pub next_timeout: Option<u64>,
    /// Bytes of stack the firmware has used since reset, as far as it has measured
    /// (it probes while idle).
    pub stack_used: u32,
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
            next_timeout: self.next_timeout,
            stack_used: self.stack_used,
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

    /// The busy polls of the firmware's loop so far (one host register read).
    pub fn busy_polls(&mut self) -> u32 {
        self.reg_read(stat_reg::BUSY_POLLS)
    }

    /// The polls of the firmware's loop that found nothing to do (one host register
    /// read).
    pub fn idle_polls(&mut self) -> u32 {
        self.reg_read(stat_reg::IDLE_POLLS)
    }

    /// When the engine's next timer is due, ns of the SoC's clock, if one is armed.
    pub fn next_timeout(&mut self) -> Option<u64> {
        Some(self.stat64(stat_reg::NEXT_TIMEOUT)).filter(|&t| t != u64::MAX)
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
            next_timeout: Some(self.stat64(stat_reg::NEXT_TIMEOUT)).filter(|&t| t != u64::MAX),
            stack_used: self.reg_read(stat_reg::STACK_USED),
        }
    }

    /// The largest busy poll since the firmware's last command (a few host register
    /// reads); a command (any, e.g. QUERY_COUNTERS) starts the next measure.
    pub fn largest_poll(&mut self) -> LargestPoll {
        let work = [
            self.reg_read(stat_reg::MAX_POLL_WORK),
            self.reg_read(stat_reg::MAX_POLL_WORK + 4),
        ];
        LargestPoll {
            instret: self.reg_read(stat_reg::MAX_POLL_INSTRET),
            cycles: self.reg_read(stat_reg::MAX_POLL_CYCLES),
            work: PollWork::from_words(work),
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
