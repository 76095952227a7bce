// The boards the image links for: one memory map each, and where the NIC's register
// window sits. This file is the single source: `build.rs` `include!`s it to write
// `memory.x`, and the crate reads the selected board's constants at run time.
// (Plain comments, no inner doc comments: `build.rs` includes it in the middle of a file.)

/// How the board tells time (the runtime wants nanoseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockSource {
    /// The `time` CSR (`rdtime`), counting at `hz`: QEMU `virt` backs it with the
    /// ACLINT `mtime` (10 MHz), also with `-bios none`.
    TimeCsr { hz: u32 },
    /// The `mcycle` CSR, counting CPU cycles at `hz`: every RV32 core with Zicsr and the
    /// counters has it, even those without an `mtime`.
    Mcycle { hz: u32 },
}

/// One board.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Board {
    /// Name (the `board-*` cargo feature without the prefix; `qemu-virt` is the default).
    pub name: &'static str,
    /// RAM: code, data, bss and stack all live here (one block RAM on a soft core).
    pub ram_origin: u32,
    /// Bytes of RAM.
    pub ram_len: u32,
    /// The link fails unless at least this much RAM is left for the stack. The `firmware`
    /// binary's NIC is built at compile time in its static (`.data`), never on the
    /// stack, so the stack holds only call frames: the SoC measures what the firmware
    /// used (`stat_reg::STACK_USED`; `hdl-sim/tests/soc.rs` checks it against this).
    pub stack_min: u32,
    /// Base of the NIC's MMIO block: the host-visible register window (`abi::reg`),
    /// then the DMA engine and the datapath frame buffers (see `mmio.rs`).
    pub nic_mmio_base: u32,
    /// The clock.
    pub clock: ClockSource,
}

/// QEMU's `virt` machine (`-machine virt -bios none`): RAM at 0x8000_0000 (16 MiB given
/// by QEMU's default `-m 128M` and more; the image uses 16 MiB). `virt` has no RNIC: the
/// MMIO base is a free address in its PCIe MMIO window (0x4000_0000..0x8000_0000), so
/// the MMIO firmware links here but only the self-test (RAM HAL) runs.
pub const QEMU_VIRT: Board = Board {
    name: "qemu-virt",
    ram_origin: 0x8000_0000,
    ram_len: 16 * 1024 * 1024,
    stack_min: 1024 * 1024,
    nic_mmio_base: 0x4000_0000,
    clock: ClockSource::TimeCsr { hz: 10_000_000 },
};

/// The stack reserve of the soft-core boards: the deepest stack the SoC tests measured,
/// 16,276 bytes (a QP brought in from host memory: `main`, `Nic::poll`, `bring_in` and
/// `Engine::restore_qp`, whose frame alone is 10,384 bytes; `device/tests/soc.rs`
/// `qps_in_host_memory_ring_through_qp_db` checks it), and half as much again for the
/// paths the tests do not reach, rounded up to 24 KiB (`BENCHMARKS.md`, "The firmware's
/// stack").
const SOFTCORE_STACK_MIN: u32 = 24 * 1024;

/// A typical FPGA soft core (VexRiscv, PicoRV32, NEORV32 style): one 512 KiB block RAM
/// at address 0 initialised from the `.hex` image, peripherals high; `mcycle` at the
/// 100 MHz core clock.
pub const SOFTCORE: Board = Board {
    name: "softcore",
    ram_origin: 0x0000_0000,
    ram_len: 512 * 1024,
    stack_min: SOFTCORE_STACK_MIN,
    nic_mmio_base: 0xF000_0000,
    clock: ClockSource::Mcycle { hz: 100_000_000 },
};

/// The SoC on a Lattice LFE5UM5G-85F (`cargo xtask synth soc-ecp5`): the RAM is what
/// 160 of the part's 208 block RAMs hold (2 KiB each); the SoC's other memories (core
/// caches, register file, host window, datapath buffers) take 39. Same map,
/// clock and stack reserve as [`SOFTCORE`]; the image also runs on the simulated SoC,
/// whose RAM is larger.
pub const ECP5_85F: Board = Board {
    name: "ecp5-85f",
    ram_origin: 0x0000_0000,
    ram_len: 320 * 1024,
    stack_min: SOFTCORE_STACK_MIN,
    nic_mmio_base: 0xF000_0000,
    clock: ClockSource::Mcycle { hz: 100_000_000 },
};

/// Every board, for tools.
pub const ALL: [Board; 3] = [QEMU_VIRT, SOFTCORE, ECP5_85F];
