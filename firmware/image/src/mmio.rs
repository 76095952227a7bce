//! The HAL of a soft core next to the RNIC datapath: everything is memory-mapped at the
//! board's [`crate::Board::nic_mmio_base`].
//!
//! | offset | block | what |
//! |---|---|---|
//! | `0x0_0000` | host window | the 16 KiB register window the host sees (`abi::reg`, `docs/abi.md`); the firmware reads doorbells and writes status, indices and events; then, at `0x4000`, the firmware's statistics ([`stat_reg`]), which the host reads at the same offsets past the ABI's window, and at `0x4100` the queue of `QP_DB` doorbells ([`qpdb_reg`]) |
//! | `0x1_0000` | DMA engine | copies between host memory and the core's RAM ([`dma_reg`]) |
//! | `0x2_0000` | datapath | one received frame and one frame to send, with their status ([`dp_reg`]) |
//! | `0x3_0000` | timer | cycle counter and compare interrupt ([`timer_reg`]) |
//! | `0x4_0000` | log | the defmt byte stream ([`log_reg`], [`log_write`]) |
//! | `0x5_0000` | DCB | the port's PFC block between the datapath and the wire: its configuration registers and the paused priorities ([`dcb_reg`]) |
//! | `0x6_0000` | fast path | the RC fast path (`roce_fp_top`, `docs/fastpath.md` §6 "In the SoC"): its table port, descriptor and event registers ([`fp_reg`]); reads 0 in a SoC built without it |
//!
//! The host window is the ABI. The other blocks are the NIC-internal interface, the
//! smallest one the runtime needs; the SoC RTL (`hdl-sim/rtl/soc/nic_soc.sv`, one
//! module per block) implements exactly this map, and whichever side changes updates
//! the other. QEMU `virt` has no such device, so this HAL builds (the `firmware`
//! binary) but is not exercised there; the QEMU self-test uses [`crate::ram_hal`].
//!
//! Two rules of the hardware this HAL follows:
//! * `EVENT_STATUS` is write-one-to-set from the NIC side (write-one-to-clear from the
//!   host's), so a host clear between the runtime's read and its write is not undone:
//!   [`MmioHal`] turns the runtime's read-modify-write into a write of the bits it adds.
//! * The DMA engine writes the core's RAM behind its data cache (VexRiscv's, write
//!   through): after a transfer into RAM, [`MmioDma`] invalidates the data cache
//!   before the runtime reads the buffer.
//!
//! Every access is a 32-bit volatile load or store; `unsafe` is confined to
//! [`Mmio::read`] and [`Mmio::write`], and [`MmioHal::new`] states what makes them sound.

use core::ptr;

use roce_core::dcb::Priorities;
use roce_core::engine::DcbConfig;
use roce_core::fastpath::layout::{
    self, EventWords, EVENT_USED, EV_EXCEPTION, MR_LEN, RCTX_LEN, SCTX_LEN, TXD_LEN, TXD_OP_FLUSH,
};
use roce_core::fastpath::{RecvCqe, SqIdle, SqSpent};
use roce_core::memory::{Dma, DmaError};
use roce_core::num::{Psn, Qpn};
use roce_core::wire::aeth::RnrTimer;
use roce_firmware::abi::{reg, DeviceStatus};
use roce_firmware::fastpath::CQ_ENTRIES;
use roce_firmware::hal::{
    CqRing, CqePost, Datapath, FastPath, FastPathCounters, Hal, QpMap, SqBack, SqNews, SqRing,
    SqRung,
};

/// Offsets of the blocks from the MMIO base.
pub mod map {
    /// The host-visible register window (`abi::reg`).
    pub const HOST_WINDOW: u32 = 0x0_0000;
    /// The DMA engine ([`super::dma_reg`]).
    pub const DMA: u32 = 0x1_0000;
    /// The datapath's frame interface ([`super::dp_reg`]).
    pub const DATAPATH: u32 = 0x2_0000;
    /// The timer ([`super::timer_reg`]).
    pub const TIMER: u32 = 0x3_0000;
    /// The log channel ([`super::log_reg`]).
    pub const LOG: u32 = 0x4_0000;
    /// The DCB block ([`super::dcb_reg`]).
    pub const DCB: u32 = 0x5_0000;
    /// The RC fast path ([`super::fp_reg`]).
    pub const FASTPATH: u32 = 0x6_0000;
    /// Bytes of the whole block.
    pub const LEN: u32 = 0x7_0000;
}

/// DMA engine registers (offsets in [`map::DMA`]).
pub mod dma_reg {
    /// Host address, low word.
    pub const HOST_ADDR_LO: u32 = 0x00;
    /// Host address, high word.
    pub const HOST_ADDR_HI: u32 = 0x04;
    /// Address of the buffer in the core's RAM.
    pub const LOCAL_ADDR: u32 = 0x08;
    /// Bytes to move.
    pub const LEN: u32 = 0x0C;
    /// Write [`CTRL_START`], with [`CTRL_TO_HOST`] for a write to host memory.
    pub const CTRL: u32 = 0x10;
    /// [`STATUS_BUSY`] while the transfer runs; [`STATUS_ERROR`] if it failed.
    pub const STATUS: u32 = 0x14;
    /// `CTRL`: start the transfer.
    pub const CTRL_START: u32 = 1 << 0;
    /// `CTRL`: direction core RAM to host (else host to core RAM).
    pub const CTRL_TO_HOST: u32 = 1 << 1;
    /// `STATUS`: transfer running.
    pub const STATUS_BUSY: u32 = 1 << 0;
    /// `STATUS`: the last transfer failed (no such host address, bus error).
    pub const STATUS_ERROR: u32 = 1 << 1;
}

/// Datapath registers (offsets in [`map::DATAPATH`]). Frames are whole Ethernet frames
/// without FCS; the datapath has checked the ICRC of received frames and dropped the
/// bad ones, and computes it for frames to send (the engine writes it anyway).
pub mod dp_reg {
    /// Bit 31: a received frame is waiting in [`RX_BUF`]; bits 15..0: its length.
    pub const RX_STATUS: u32 = 0x0000;
    /// Write 1: the frame in `RX_BUF` is consumed; the next one (if any) takes its place.
    pub const RX_POP: u32 = 0x0004;
    /// Bit 0: [`TX_BUF`] is free for a frame.
    pub const TX_STATUS: u32 = 0x0008;
    /// Write the length of the frame in [`TX_BUF`] to send it.
    pub const TX_LEN: u32 = 0x000C;
    /// The port's MAC address, bytes 0..4 (byte 0 in bits 7..0).
    pub const MAC_LO: u32 = 0x0010;
    /// The port's MAC address, bytes 4..6.
    pub const MAC_HI: u32 = 0x0014;
    /// Bit 0: the host wrote a doorbell (`SRQ_DB`, `SQ_DB`, `RQ_DB`, `CQ_DB`, `CMDQ_PI`) since
    /// this register was last read; reading clears it.
    pub const DOORBELL: u32 = 0x0018;
    /// Received frames the datapath dropped (a parser error such as a bad ICRC, or
    /// longer than its buffer), since reset.
    pub const RX_DROPS: u32 = 0x001C;
    /// The port's GID, 16 bytes in four words (byte 0 in bits 7..0 of the first).
    pub const GID: u32 = 0x0020;
    /// The received frame (read-only), 8 KiB.
    pub const RX_BUF: u32 = 0x2000;
    /// The frame to send (write-only), 8 KiB.
    pub const TX_BUF: u32 = 0x4000;
    /// Bytes of each frame buffer.
    pub const BUF_LEN: u32 = 0x2000;
    /// `RX_STATUS`: a frame is waiting.
    pub const RX_VALID: u32 = 1 << 31;
    /// `TX_STATUS`: the transmit buffer is free.
    pub const TX_READY: u32 = 1 << 0;
}

pub use roce_firmware::stats::{stat_reg, PollCounts, PollWork};

/// The DCB block's registers (offsets in [`map::DCB`]; `docs/dcb.md` §3): PFC reception
/// with its pause timers, PFC generation from its receive buffer, no transmit queues.
pub mod dcb_reg {
    /// Configuration register `n` (`roce_core::dcb::reg`) is written at `CONFIG + 4 n`.
    pub const CONFIG: u32 = 0x00;
    /// Bits 7..0: the priorities the link partner has paused (PFC on, timer running).
    pub const PAUSED: u32 = 0x80;
    /// Bits 7..0: the priorities this port has paused towards its link partner.
    pub const XOFF: u32 = 0x84;
    /// PFC frames received.
    pub const RX_PFC_FRAMES: u32 = 0x88;
    /// Frames the receive buffer had no room for.
    pub const RX_DROPS: u32 = 0x8C;
    /// The link's bit times per clock cycle, Q16.8: what pause quanta are counted in.
    pub const LINK_BPC: u32 = 0x90;
    /// The receive buffer's size in bytes (`nic_soc`'s `DCB_BUF_BYTES`): XOFF must fit
    /// in it.
    pub const BUF_BYTES: u32 = 0x94;
}

/// The RC fast path's registers (offsets in [`map::FASTPATH`]; `soc_fp.sv`): the table
/// port of `roce_fp_top` one word at a time, a descriptor staged and posted whole, the
/// oldest event, counters. A SoC built without the fast path reads 0 everywhere here.
pub mod fp_reg {
    /// Bit 31 ([`CONFIG_ON`]): the fast path is between the wire and the datapath (the
    /// board's strap); bits 15..0: its context entries.
    pub const CONFIG: u32 = 0x000;
    /// Entries of the MR table.
    pub const MR_ENTRIES: u32 = 0x004;
    /// [`ST_BUSY`], [`ST_RDATA`], [`ST_TXD`], [`ST_EVENT`], [`ST_RX_IDLE`]; bits 13..8
    /// the segmenter's slots in use.
    pub const STATUS: u32 = 0x008;
    /// The table word the next access names: [`sel`].
    pub const CFG_SEL: u32 = 0x00C;
    /// Write: writes the word `CFG_SEL` names; `CFG_SEL`'s word then moves on by one.
    /// The store waits on the bus while [`ST_BUSY`] (the port takes it then).
    pub const CFG_WDATA: u32 = 0x010;
    /// Write: reads the word `CFG_SEL` names into [`CFG_RDATA`] ([`ST_RDATA`] when
    /// there); `CFG_SEL`'s word then moves on by one. Waits on the bus as `CFG_WDATA`.
    pub const CFG_RD: u32 = 0x014;
    /// The word read; a load waits on the bus until the read's word is there.
    pub const CFG_RDATA: u32 = 0x018;
    /// Write: offers the descriptor in [`TXD`] to the segmenter ([`ST_TXD`] until taken).
    pub const TXD_POST: u32 = 0x01C;
    /// Frames the segmenter and the ACK path sent.
    pub const TX_FRAMES: u32 = 0x020;
    /// Frames the fast path took from the wire.
    pub const RX_FRAMES: u32 = 0x024;
    /// Frames its parser dropped.
    pub const RX_DROPS: u32 = 0x028;
    /// Packets aborted for a host read error.
    pub const TX_DMA_ERRORS: u32 = 0x02C;
    /// Request packets sent again.
    pub const TX_RESENT: u32 = 0x030;
    /// Frames whose QP's context was in its entry.
    pub const CTX_HITS: u32 = 0x034;
    /// Frames whose entry held another QP's.
    pub const CTX_MISSES: u32 = 0x038;
    /// Write: the event in [`EV`] is consumed.
    pub const EV_POP: u32 = 0x044;
    /// Requests out of sequence the receive path dropped (one NAK per gap).
    pub const RX_OOS: u32 = 0x048;
    /// Duplicate SEND/WRITE requests it acknowledged again.
    pub const RX_DUPS: u32 = 0x04C;
    /// The WQE fetch's news word (table [`T_PORT`]'s word 23 as a plain register:
    /// [`SQ_NEWS_CQE`] and [`SQ_NEWS_GBN`] cleared by the read, as that word's read
    /// clears them). The firmware reads it at every poll while the fetch holds a queue:
    /// one load, where the table port's select, read command and wait for the word cost
    /// ~70 instructions.
    pub const SQ_NEWS: u32 = 0x050;
    /// The fetch's running counts of WQEs taken and of them SENDs (words 21 and 22).
    pub const SQ_TAKEN: u32 = 0x054;
    pub const SQ_SENDS: u32 = 0x058;
    /// The oldest event, 64 bytes (`docs/fastpath.md` §3.5).
    pub const EV: u32 = 0x080;
    /// The descriptor to post, 96 bytes (§2.2), write-only.
    pub const TXD: u32 = 0x100;
    /// `CONFIG`: the fast path is in use.
    pub const CONFIG_ON: u32 = 1 << 31;
    /// `STATUS`: a table access is in progress.
    pub const ST_BUSY: u32 = 1 << 0;
    /// `STATUS`: the word read is in `CFG_RDATA`.
    pub const ST_RDATA: u32 = 1 << 1;
    /// `STATUS`: the posted descriptor waits for the segmenter.
    pub const ST_TXD: u32 = 1 << 2;
    /// `STATUS`: an event is in `EV`.
    pub const ST_EVENT: u32 = 1 << 3;
    /// `STATUS`: the receive side (and its CQE writer) holds no frame.
    pub const ST_RX_IDLE: u32 = 1 << 17;
    /// The segmenter's slots (the descriptors it holds at once).
    pub const SLOTS: u32 = 32;
    /// Tables of the port: send contexts, receive contexts, MR entries, the port's
    /// addresses (words 0..5) and accessed bits (word [`ACCESSED_WORD`]).
    pub const T_SCTX: u32 = 0;
    pub const T_RCTX: u32 = 1;
    pub const T_MR: u32 = 2;
    pub const T_PORT: u32 = 3;
    /// Table [`T_PORT`]'s word of accessed bits, 32 entries per index.
    pub const ACCESSED_WORD: u32 = 8;
    /// Table [`T_PORT`]'s words of the CQE writer (`fp_cqw.sv`, `docs/fastpath.md`
    /// §3.7), index = CQ: ring address low (then high, {valid bit 8, log2 depth},
    /// producer index, the host's consumer index as last told).
    pub const CQW_RING: u32 = 16;
    pub const CQW_PI: u32 = 19;
    pub const CQW_CI: u32 = 20;
    /// Index = context entry: the QP's send CQ ({valid bit 8, CQ}); with
    /// [`CQW_RECV_CQ`], its receive CQ.
    pub const CQW_SEND_CQ: u32 = 24;
    /// Index = context entry: the wr_id (low word; then [`CQW_SEND_CQ`] with
    /// [`CQW_RECV_CQ`], the receive CQ) and at [`CQW_RECV_WRID_HI`] its high word, of
    /// the receive WQE loaded next with [`RL_CQE`] (`docs/fastpath.md` §3.7, "Receive
    /// CQEs").
    pub const CQW_RECV_WRID_LO: u32 = 23;
    pub const CQW_RECV_WRID_HI: u32 = 31;
    pub const CQW_RECV_CQ: u32 = 1 << 31;
    /// The CQE port. Read: bit 0, the last CQE posted was written (then word 26, the
    /// CQ's producer index after it; both wait for the post).
    pub const CQW_POSTED: u32 = 25;
    /// Write: the next word of the CQE to post (bytes 0..27, a word each, in order;
    /// with [`SEL_HOLD`]).
    pub const CQW_STAGE: u32 = 29;
    /// Write, index = CQ: posts the staged CQE with this word as its last (bytes
    /// 28..31; the writer sets the owner bit).
    pub const CQW_POST: u32 = 30;
    /// `CFG_SEL`: accesses leave the word as it is (else it moves on by one).
    pub const SEL_HOLD: u32 = 1 << 31;
    /// Table [`T_PORT`]'s words of the WQE fetch (`fp_sqf.sv`, `docs/fastpath.md` §3.8).
    /// Writes: a hand-over staged from [`SQ_W_STAGE`] (ring low, ring high, config,
    /// consumer index, PSN, PD, depth: words 9..15, any index) and [`SQ_W_RTO`] (the
    /// local ACK timeout, low then high); [`SQ_W_CMD`] (index = the QP's entry)
    /// [`SQ_HAND_OVER`] or [`SQ_TAKE_BACK`]. Words 26 (a doorbell) and 27/28 (the
    /// time) are not written here: the SoC's fetch hears the host's doorbells and keeps
    /// the SoC's time itself (`soc_fp.sv`).
    pub const SQ_W_STAGE: u32 = 9;
    pub const SQ_W_RTO: u32 = 21;
    pub const SQ_W_CMD: u32 = 25;
    /// Reads, index = the entry: from [`SQ_R_STATE`] the consumer index, WQEs done,
    /// the oldest unfinished WQE's first PSN, `una_psn`, the deadline (low, high) and
    /// [`SQ_R_FLAGS`]. (The global words 21..23, WQEs taken, of them SENDs and the news
    /// word, are read as the registers [`SQ_TAKEN`], [`SQ_SENDS`] and [`SQ_NEWS`].)
    pub const SQ_R_STATE: u32 = 9;
    pub const SQ_R_DL: u32 = 13;
    pub const SQ_R_FLAGS: u32 = 15;
    /// Global: Go-Back-N's running counts (docs/fastpath.md §3.8), from here: NAK
    /// sequence errors taken (dropped ones too), retries started, of them at the local
    /// ACK timeout; then (word 30) the RNR NAKs taken. [`SQ_NEWS_GBN`] says any of the
    /// four moved (`fp_sqf` sets it for an RNR NAK too), so they are read together.
    pub const SQ_R_GBN: u32 = 27;
    /// `SQ_R_FLAGS` bits.
    pub const SQ_ACTIVE: u32 = 1 << 0;
    pub const SQ_STOPPED: u32 = 1 << 1;
    pub const SQ_DL_VALID: u32 = 1 << 2;
    /// The Go-Back-N retries spent since the last progress (docs/fastpath.md §3.8).
    pub const SQ_SPENT: u32 = 7 << 3;
    /// The RNR NAKs waited out since the last progress, and an RNR wait under way (the
    /// deadline is then its end, and no ACK timer runs).
    pub const SQ_RNR_SPENT: u32 = 7 << 6;
    pub const SQ_RNR_WAIT: u32 = 1 << 9;
    /// [`SQ_NEWS`] bits: CQEs written since the last read, a queue it holds stopped (at
    /// a WQE it does not take, or its deadline passed). (Bit 1, a fetch under way, is
    /// not news to this firmware.)
    pub const SQ_NEWS_CQE: u32 = 1 << 0;
    pub const SQ_NEWS_STOPPED: u32 = 1 << 2;
    /// Go-Back-N's counts moved since the last read (they are read only then).
    pub const SQ_NEWS_GBN: u32 = 1 << 3;
    /// `SQ_W_CMD` commands.
    pub const SQ_HAND_OVER: u32 = 1;
    pub const SQ_TAKE_BACK: u32 = 2;
    /// Table [`T_RCTX`]'s words of the receive load (`fp_rx.sv`, `docs/fastpath.md` §6
    /// "In the SoC"): a buffer staged from [`RL_W_STAGE`] (address low, high, length;
    /// any index), then [`RL_W_CMD`] (index = the QPN) with [`RL_LOAD`],
    /// [`RL_UNLOAD`], [`RL_RNR`] (the timer in bits 15..8) or [`RL_RNR_CLEAR`]: the
    /// hardware applies `layout::load_rctx` / `rnr_rctx` to the context between two
    /// frames' checks. Read of [`RL_W_CMD`]: bit 0, the command changed the context.
    pub const RL_W_STAGE: u32 = 20;
    pub const RL_W_CMD: u32 = 23;
    pub const RL_LOAD: u32 = 0;
    pub const RL_UNLOAD: u32 = 1;
    pub const RL_RNR: u32 = 2;
    pub const RL_RNR_CLEAR: u32 = 3;
    /// With [`RL_LOAD`]: `recv_cqe`, the CQE writer holds the WQE's wr_id.
    pub const RL_CQE: u32 = 1 << 2;

    /// `CFG_SEL`'s value for word `word` of entry `index` of `table`.
    pub const fn sel(table: u32, index: u32, word: u32) -> u32 {
        (table & 3) << 29 | (word & 31) << 24 | (index & 0xFF_FFFF)
    }
}

/// The queue of `QP_DB` doorbells (offset in [`map::HOST_WINDOW`], firmware side only):
/// the register file queues each QP index the host writes to `reg::QP_DB`, so the
/// firmware learns which QPs rang at the cost of one read per doorbell
/// ([`Hal::take_rung_qps`], `docs/scale.md`).
pub mod qpdb_reg {
    /// Read: [`VALID`] with the oldest queued index in [`INDEX`] (the read takes it),
    /// and [`OVERFLOW`] if an index was lost to a full queue since the last read.
    pub const POP: u32 = 0x4100;
    /// `POP`: an index was queued.
    pub const VALID: u32 = 1 << 31;
    /// `POP`: the queue was full when the host wrote an index (cleared by the read).
    pub const OVERFLOW: u32 = 1 << 30;
    /// `POP`: the QP index.
    pub const INDEX: u32 = 0xFFFF;
    /// Entries of the queue (`soc_host_regs.sv`'s `QPDB_DEPTH`).
    pub const DEPTH: u32 = 64;
}

/// What the firmware's main loop measures of itself ([`stat_reg`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopStats {
    pub busy_polls: u32,
    pub frames_tx: u32,
    pub frames_rx: u32,
    pub busy_cycles: u64,
    pub busy_instret: u64,
    pub next_timeout: u64,
}

/// Timer registers (offsets in [`map::TIMER`]): a cycle counter and a compare value
/// that raises the core's timer interrupt (RISC-V `mtime` / `mtimecmp`).
pub mod timer_reg {
    /// Cycles since reset, low word; reading it latches the high word.
    pub const MTIME_LO: u32 = 0x0;
    /// The high word, as latched by the last read of `MTIME_LO`.
    pub const MTIME_HI: u32 = 0x4;
    /// Compare value, low word (reset: all ones).
    pub const MTIMECMP_LO: u32 = 0x8;
    /// Compare value, high word.
    pub const MTIMECMP_HI: u32 = 0xC;
}

/// Log channel registers (offsets in [`map::LOG`]).
pub mod log_reg {
    /// Write: bits 7..0 are the next byte of the log stream.
    pub const DATA: u32 = 0x0;
    /// Bit 0: the queue has room for a byte; bit 1: a byte was lost (cleared by
    /// reading).
    pub const STATUS: u32 = 0x4;
    /// `STATUS`: room for a byte.
    pub const STATUS_ROOM: u32 = 1 << 0;
}

/// Writes `bytes` to the log channel of the NIC block at `base`, waiting for room
/// (a bounded wait per byte: a stream nobody drains loses bytes instead of hanging
/// the firmware).
///
/// # Safety
///
/// `base` is the NIC's MMIO block as for [`MmioHal::new`]; the caller holds the
/// logger (one writer at a time).
pub unsafe fn log_write(base: usize, bytes: &[u8]) {
    let m = Mmio { base };
    for &b in bytes {
        let mut spins = 1u32 << 16;
        while m.read(map::LOG + log_reg::STATUS) & log_reg::STATUS_ROOM == 0 && spins > 0 {
            spins -= 1;
        }
        m.write(map::LOG + log_reg::DATA, u32::from(b));
    }
}

/// Invalidates the core's data cache: VexRiscv's flush instruction (MISC-MEM with
/// funct3 5, `DBusCachedPlugin`'s `MANAGEMENT` encoding), which drops every line. The
/// cache writes through, so nothing is lost; lines are refilled from RAM, where the
/// DMA engine wrote.
#[inline]
fn invalidate_dcache() {
    // SAFETY: the instruction only invalidates cache lines (the data cache writes
    // through: RAM is current); it touches no register and no Rust-visible state.
    // It exists on the soft core this HAL is for (nic_soc); `elf2img --check-isa`
    // admits it.
    unsafe { core::arch::asm!(".word 0x0000500F", options(nostack, preserves_flags)) }
}

/// The MMIO block: 32-bit volatile accesses at `base + offset`, `offset < map::LEN`.
#[derive(Debug)]
struct Mmio {
    base: usize,
}

impl Mmio {
    /// Reads the register at `offset`; offsets outside the block or unaligned read 0.
    #[inline]
    fn read(&self, offset: u32) -> u32 {
        if offset % 4 != 0 || offset >= map::LEN {
            return 0;
        }
        let addr = self.base + offset as usize;
        // SAFETY: `MmioHal::new`'s contract: `[base, base + map::LEN)` is the NIC's MMIO
        // block (device registers, no Rust object lives there) and `base` is 4-byte
        // aligned; `offset` was checked to be an aligned offset inside it.
        unsafe { ptr::read_volatile(addr as *const u32) }
    }

    /// Writes the register at `offset`; offsets outside the block or unaligned are
    /// ignored.
    #[inline]
    fn write(&self, offset: u32, value: u32) {
        if offset % 4 != 0 || offset >= map::LEN {
            return;
        }
        let addr = self.base + offset as usize;
        // SAFETY: as in `read`: an aligned register inside the NIC's MMIO block.
        unsafe { ptr::write_volatile(addr as *mut u32, value) }
    }

    /// Reads `dst.len()` bytes of the registers from `offset` on (a frame buffer, an
    /// event), little-endian words.
    /// Whole words first: a copy of each word's slice, of a length the compiler cannot
    /// see, was a `memcpy` call per word (~14 instructions a byte on the soft core).
    fn read_buf(&self, offset: u32, dst: &mut [u8]) {
        let mut words = dst.chunks_exact_mut(4);
        let mut at = offset;
        for w in &mut words {
            w.copy_from_slice(&self.read(at).to_le_bytes());
            at += 4;
        }
        let tail = words.into_remainder();
        if !tail.is_empty() {
            tail.copy_from_slice(&self.read(at).to_le_bytes()[..tail.len()]);
        }
    }

    /// Writes `src` into the registers from `offset` on, little-endian words, the last
    /// one padded with zeros (whole words first, as in `read_buf`).
    fn write_buf(&self, offset: u32, src: &[u8]) {
        let mut words = src.chunks_exact(4);
        let mut at = offset;
        for w in &mut words {
            self.write(at, u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            at += 4;
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let mut w = [0u8; 4];
            w[..tail.len()].copy_from_slice(tail);
            self.write(at, u32::from_le_bytes(w));
        }
    }
}

/// Host memory through the NIC's DMA engine.
#[derive(Debug)]
pub struct MmioDma {
    mmio: Mmio,
    /// Polls of `STATUS` before a transfer counts as failed.
    pub timeout_polls: u32,
}

impl MmioDma {
    fn transfer(&mut self, host: u64, local: usize, len: usize, to_host: bool) -> bool {
        let m = &self.mmio;
        let base = map::DMA;
        m.write(base + dma_reg::HOST_ADDR_LO, host as u32);
        m.write(base + dma_reg::HOST_ADDR_HI, (host >> 32) as u32);
        m.write(base + dma_reg::LOCAL_ADDR, local as u32);
        m.write(base + dma_reg::LEN, len as u32);
        // The engine must see our stores to the buffer before it starts, and we its
        // stores after it finishes: `fence` orders memory and device accesses (and is
        // a compiler barrier for the buffer, whose address the device now has).
        riscv::asm::fence();
        let dir = if to_host { dma_reg::CTRL_TO_HOST } else { 0 };
        m.write(base + dma_reg::CTRL, dma_reg::CTRL_START | dir);
        let mut polls = self.timeout_polls;
        let status = loop {
            let s = m.read(base + dma_reg::STATUS);
            if s & dma_reg::STATUS_BUSY == 0 || polls == 0 {
                break s;
            }
            polls -= 1;
        };
        riscv::asm::fence();
        let ok = status & (dma_reg::STATUS_BUSY | dma_reg::STATUS_ERROR) == 0;
        if ok && !to_host {
            invalidate_dcache();
        }
        ok
    }
}

impl Dma for MmioDma {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let len = buf.len();
        if len == 0 || self.transfer(addr, buf.as_mut_ptr() as usize, len, false) {
            Ok(())
        } else {
            Err(DmaError { addr, len })
        }
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let len = data.len();
        if len == 0 || self.transfer(addr, data.as_ptr() as usize, len, true) {
            Ok(())
        } else {
            Err(DmaError { addr, len })
        }
    }
}

/// The ECP5 board's SoC is built without the fast path (`nic_soc_ecp5`, `FASTPATH` 0):
/// its firmware hands no send queue to a WQE fetch, so the compiler drops the runtime's
/// side of it (3.7 KB of code the board's RAM need not hold).
const NO_FASTPATH: bool = cfg!(feature = "board-ecp5-85f");

/// Polls of a fast-path status bit before an access counts as failed (the hardware
/// answers a table access within a few cycles; a bound keeps a broken one from hanging
/// the firmware).
const FP_POLLS: u32 = 1 << 16;

/// The RC fast path in the SoC (`soc_fp.sv`), as the runtime's [`FastPath`]: tables one
/// word at a time through its port, descriptors staged and posted whole, events read
/// from its register, exception frames from the datapath's receive buffer (the fast
/// path hands them on there, in event order). The hardware runs by itself:
/// [`FastPath::run`] has nothing to do.
#[derive(Debug)]
pub struct MmioFastPath {
    mmio: Mmio,
    /// The CQs handed to the CQE writer, a bit each (their rings are read from it:
    /// a mirror of 64 rings would not fit the ECP5 board's RAM beside its stack
    /// reserve).
    cqs_held: u64,
    /// EXCEPTION events taken (the hardware counts frames in; the difference is what it
    /// handled).
    exceptions: u64,
    /// The send queues handed to the WQE fetch (`fp_sqf`, §3.8), a bit per QPN below 64
    /// (the SoC's context entries; a QPN past them is fetched by the firmware).
    sq_held: u64,
    /// A queue was handed over once: the fetch's counts are read from then on.
    sq_used: bool,
    /// The fetch's running counts (WQEs taken, of them SENDs) as last reported.
    sq_taken: [u32; 2],
    /// Go-Back-N's running counts (NAKs taken, retries, of them at the timeout) and
    /// the RNR NAKs taken, as last reported.
    sq_gbn: [u32; 4],
    /// News bits read by `run_at` and not yet reported by `sq_news` (the read clears
    /// the CQE bit in the hardware).
    sq_news_seen: u32,
}

impl MmioFastPath {
    /// Whether CQ `cq` was handed to the CQE writer.
    fn holds_cq(&self, cq: u16) -> bool {
        usize::from(cq) < CQ_ENTRIES && self.cqs_held & (1u64 << cq) != 0
    }

    fn reg(&self, offset: u32) -> u32 {
        self.mmio.read(map::FASTPATH + offset)
    }

    fn set(&self, offset: u32, value: u32) {
        self.mmio.write(map::FASTPATH + offset, value);
    }

    /// `poll_event` once `STATUS` said an event is there: the event (an exception's
    /// frame, which follows its event into the datapath's receive buffer, into
    /// `frame`); false if that frame is not there yet. It saves no register: an
    /// exception's frame is a tail call (with the frame's copy inline every event
    /// saved and restored six registers, ~14 instructions).
    #[inline(never)]
    fn take_event(&mut self, event: &mut EventWords, frame: &mut [u8]) -> bool {
        let first = self.reg(fp_reg::EV);
        if first as u8 == EV_EXCEPTION {
            return self.take_exception(event, frame);
        }
        self.take_words(first, event)
    }

    /// An exception's event and its frame (`take_event`); false if the frame is not
    /// there yet. The event's first word is read again: the queue's head stays until
    /// `EV_POP` (given as an argument, its moves cost `take_event` 3 instructions).
    #[cold]
    #[inline(never)]
    fn take_exception(&mut self, event: &mut EventWords, frame: &mut [u8]) -> bool {
        let m = &self.mmio;
        let status = m.read(map::DATAPATH + dp_reg::RX_STATUS);
        if status & dp_reg::RX_VALID == 0 {
            return false;
        }
        let len = (status & 0xFFFF) as usize;
        if let Some(dst) = frame.get_mut(..len) {
            m.read_buf(map::DATAPATH + dp_reg::RX_BUF, dst);
        }
        m.write(map::DATAPATH + dp_reg::RX_POP, 1);
        self.exceptions += 1;
        self.take_words(self.reg(fp_reg::EV), event)
    }

    /// The event's words (`first` its first, read already) into `event`, and the
    /// event off the queue; true. Only the words that carry fields (every kind's are
    /// in the first 32 bytes): the other 8 words' reads cost ~80 instructions an
    /// event, and the decode does not look at them (what the buffer holds there is an
    /// earlier event's). A word a load and a store, written out: as a loop (which
    /// `opt-level = "s"` does not unroll) each word cost 6 instructions. Inlined into
    /// both: out of line, its call made `take_event` save its return address.
    #[inline(always)]
    fn take_words(&self, first: u32, event: &mut EventWords) -> bool {
        const _: () = assert!(EVENT_USED == 32);
        let ev = |i: u32| self.reg(fp_reg::EV + 4 * i);
        if let Some(w) = event.first_chunk_mut::<8>() {
            *w = [first, ev(1), ev(2), ev(3), ev(4), ev(5), ev(6), ev(7)];
        }
        self.set(fp_reg::EV_POP, 1);
        true
    }

    /// Waits until `STATUS & mask == want`; false after [`FP_POLLS`] polls.
    fn wait(&self, mask: u32, want: u32) -> bool {
        (0..FP_POLLS).any(|_| self.reg(fp_reg::STATUS) & mask == want)
    }

    /// Writes `bytes` (whole words) from word `word` of entry `index` of `table`.
    fn write_words(&self, table: u32, index: u32, word: u32, bytes: &[u8]) {
        self.write_sel(fp_reg::sel(table, index, word), bytes);
    }

    /// Writes `bytes` (whole words) at `CFG_SEL` value `sel`.
    fn write_sel(&self, sel: u32, bytes: &[u8]) {
        self.write_sel_u32s(
            sel,
            bytes
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])),
        );
    }

    /// Writes `words` at `CFG_SEL` value `sel`. No `STATUS` poll: `soc_fp` holds a
    /// `CFG_WDATA` store on the bus until the port takes it (a table access already
    /// under way keeps the select it was given, so `CFG_SEL` may change beside it).
    fn write_sel_u32s(&self, sel: u32, words: impl IntoIterator<Item = u32>) {
        self.set(fp_reg::CFG_SEL, sel);
        for w in words {
            self.set(fp_reg::CFG_WDATA, w);
        }
    }

    /// Writes `words` from word `word` of entry `index` of `table`.
    fn write_u32s(&self, table: u32, index: u32, word: u32, words: &[u32]) {
        self.write_sel_u32s(fp_reg::sel(table, index, word), words.iter().copied());
    }

    /// Reads word `word` of entry `index` of `table`.
    fn read_u32(&self, table: u32, index: u32, word: u32) -> u32 {
        let mut w = [0u8; 4];
        self.read_words(table, index, word, &mut w);
        u32::from_le_bytes(w)
    }

    /// Runs receive-load command `cmd` on QP `qpn`'s context (staged words first,
    /// when given) and answers whether it changed the context. The read waits for the
    /// command: one step in the hardware, between two frames' checks.
    fn recv_cmd(&self, qpn: Qpn, stage: Option<[u32; 3]>, cmd: u32) -> bool {
        if NO_FASTPATH {
            return false;
        }
        if let Some(stage) = stage {
            self.write_u32s(fp_reg::T_RCTX, 0, fp_reg::RL_W_STAGE, &stage);
        }
        self.write_u32s(fp_reg::T_RCTX, qpn.value(), fp_reg::RL_W_CMD, &[cmd]);
        self.read_u32(fp_reg::T_RCTX, qpn.value(), fp_reg::RL_W_CMD) & 1 != 0
    }

    /// Whether QP `qpn` may have `rq_empty` set: `soc_fp` masks a stale flag only for
    /// QPNs below its context entries (64), where a QPN is its entry; one past them
    /// shares its entry's mask with the QPN below, whose doorbell reads would unmask it.
    fn rnr_entry(qpn: Qpn) -> bool {
        qpn.value() < 64
    }

    /// QP `qpn`'s bit in `sq_held` (None past the bitmap: not handed over).
    fn sq_bit(qpn: Qpn) -> Option<u64> {
        (!NO_FASTPATH && qpn.value() < 64).then(|| 1u64 << qpn.value())
    }

    /// How far Go-Back-N's running counts ([`fp_reg::SQ_R_GBN`]) moved since the last
    /// look. Out of line: rare (a NAK, a timeout), and inlined into `sq_news` its table
    /// read made every news save and restore 11 registers.
    #[inline(never)]
    fn sq_gbn_moved(&mut self) -> [u32; 4] {
        let mut w = [0u8; 16];
        self.read_words(fp_reg::T_PORT, 0, fp_reg::SQ_R_GBN, &mut w);
        let mut moved = [0u32; 4];
        for ((d, last), b) in moved
            .iter_mut()
            .zip(&mut self.sq_gbn)
            .zip(w.chunks_exact(4))
        {
            let now = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            *d = now.wrapping_sub(*last);
            *last = now;
        }
        moved
    }

    /// QP `qpn`'s fetch flags if the fetch holds its send queue (a send context written
    /// with `valid` clear drops it there: forgotten here too).
    fn sq_flags(&mut self, qpn: Qpn) -> Option<u32> {
        let bit = Self::sq_bit(qpn).filter(|b| self.sq_held & b != 0)?;
        let flags = self.read_u32(fp_reg::T_PORT, qpn.value(), fp_reg::SQ_R_FLAGS);
        if flags & fp_reg::SQ_ACTIVE == 0 {
            self.sq_held &= !bit;
            return None;
        }
        Some(flags)
    }

    /// Reads `out.len() / 4` words from word `word` of entry `index` of `table`.
    /// No `STATUS` poll: `soc_fp` holds the `CFG_RD` store until the port takes it and
    /// the `CFG_RDATA` load until the word is there.
    fn read_words(&self, table: u32, index: u32, word: u32, out: &mut [u8]) {
        self.set(fp_reg::CFG_SEL, fp_reg::sel(table, index, word));
        for w in out.chunks_exact_mut(4) {
            self.set(fp_reg::CFG_RD, 1);
            w.copy_from_slice(&self.reg(fp_reg::CFG_RDATA).to_le_bytes());
        }
    }
}

impl FastPath for MmioFastPath {
    fn set_port(&mut self, mac: [u8; 6], gid: [u8; 16]) {
        let mut rec = [0u8; 24];
        rec[..6].copy_from_slice(&mac);
        rec[8..].copy_from_slice(&gid);
        self.write_words(fp_reg::T_PORT, 0, 0, &rec);
    }

    fn write_sctx(&mut self, qpn: Qpn, offset: usize, bytes: &[u8]) {
        let Some(end) = offset.checked_add(bytes.len()).filter(|&e| e <= SCTX_LEN) else {
            return;
        };
        let (first, last) = (offset / 4, end.div_ceil(4));
        let mut rec = [0u8; SCTX_LEN];
        let words = &mut rec[first * 4..last * 4];
        if offset % 4 != 0 || end % 4 != 0 {
            // the port writes whole words: read the ones written in part first
            self.read_words(fp_reg::T_SCTX, qpn.value(), first as u32, words);
        }
        words[offset - first * 4..end - first * 4].copy_from_slice(bytes);
        self.write_words(fp_reg::T_SCTX, qpn.value(), first as u32, words);
        // `valid` (byte 2 bit 2) cleared: the fetch drops the QP's queue
        if offset <= 2 && end > 2 && bytes[2 - offset] & 4 == 0 {
            if let Some(bit) = Self::sq_bit(qpn) {
                self.sq_held &= !bit;
            }
        }
    }

    fn read_sctx(&mut self, qpn: Qpn) -> [u8; SCTX_LEN] {
        let mut rec = [0u8; SCTX_LEN];
        self.read_words(fp_reg::T_SCTX, qpn.value(), 0, &mut rec);
        rec
    }

    fn write_rctx(&mut self, qpn: Qpn, bytes: &[u8; RCTX_LEN]) {
        if Self::rnr_entry(qpn) {
            self.write_words(fp_reg::T_RCTX, qpn.value(), 0, bytes);
        } else {
            // (`recv_rnr`: no `rq_empty` for this QPN, whatever the engine says)
            let mut b = *bytes;
            layout::rnr_rctx(&mut b, qpn, None);
            self.write_words(fp_reg::T_RCTX, qpn.value(), 0, &b);
        }
    }

    fn read_rctx(&mut self, qpn: Qpn) -> [u8; RCTX_LEN] {
        let mut rec = [0u8; RCTX_LEN];
        self.read_words(fp_reg::T_RCTX, qpn.value(), 0, &mut rec);
        rec
    }

    fn ctx_entries(&self) -> usize {
        (self.reg(fp_reg::CONFIG) & 0xFFFF) as usize
    }

    fn mr_entries(&self) -> usize {
        self.reg(fp_reg::MR_ENTRIES) as usize
    }

    fn write_mr(&mut self, index: usize, bytes: &[u8; MR_LEN]) {
        if let Ok(i) = u32::try_from(index) {
            self.write_words(fp_reg::T_MR, i, 0, bytes);
        }
    }

    fn tx_room(&self) -> bool {
        let s = self.reg(fp_reg::STATUS);
        s & fp_reg::ST_TXD == 0 && (s >> 8) & 0x3F < fp_reg::SLOTS
    }

    fn post_tx(&mut self, desc: &[u8; TXD_LEN]) -> bool {
        if desc[3] == TXD_OP_FLUSH {
            // A FLUSH takes no slot (§2.2): it waits only for the descriptor register,
            // which the segmenter empties within a packet (a descriptor posted with
            // room at once, a FLUSH at the next packet boundary). Refused, it would be
            // lost: the engine owes it no more, and the rewind's `una_psn` rides in it
            // (§3.2).
            if !self.wait(fp_reg::ST_TXD, 0) {
                return false;
            }
        } else if !self.tx_room() {
            return false;
        }
        self.mmio.write_buf(map::FASTPATH + fp_reg::TXD, desc);
        self.set(fp_reg::TXD_POST, 1);
        true
    }

    /// (The look alone here: every poll makes it, most find no event, and with the
    /// copy inlined each saved and restored 5 registers.)
    fn poll_event(&mut self, event: &mut EventWords, frame: &mut [u8]) -> bool {
        self.reg(fp_reg::STATUS) & fp_reg::ST_EVENT != 0 && self.take_event(event, frame)
    }

    fn events_waiting(&mut self) -> bool {
        let s = self.reg(fp_reg::STATUS);
        s & fp_reg::ST_EVENT != 0 || s & fp_reg::ST_RX_IDLE == 0
    }

    /// `soc_fp`'s `roce_fp_top` has the RTL's READ responder (`docs/fastpath.md` §6,
    /// "READ requests in RTL"): its receive path takes in-sequence READ requests and
    /// its segmenter sends the responses; the firmware hears a `READ` event per READ.
    /// The runtime asks only through `Datapath::fastpath`, which answers only with the
    /// strap set (`MmioDatapath::fp_on`); the ECP5 board's SoC has no fast path.
    fn read_responder(&self) -> bool {
        !NO_FASTPATH
    }

    /// `soc_fp`'s receive load (table 1 words 20..23, `fp_rx.sv`) applies the load to
    /// the context in one step with respect to the receive check, which runs beside the
    /// core: a SEND into a WQE loaded ahead is placed from its first packet.
    fn recv_loads(&self) -> bool {
        !NO_FASTPATH
    }

    fn load_recv(&mut self, qpn: Qpn, buf: Option<(u64, u32)>, cqe: Option<RecvCqe>) -> bool {
        match buf {
            Some((addr, len)) => {
                // The WQE's wr_id and the receive CQ into the CQE writer's table
                // before the load that says they are there (§3.7).
                let mut cmd = fp_reg::RL_LOAD;
                if let Some(c) = cqe.filter(|c| !NO_FASTPATH && self.holds_cq(c.cq)) {
                    let q = qpn.value();
                    let cq = fp_reg::CQW_RECV_CQ | 0x100 | u32::from(c.cq);
                    self.write_u32s(
                        fp_reg::T_PORT,
                        q,
                        fp_reg::CQW_RECV_WRID_LO,
                        &[c.wr_id as u32, cq],
                    );
                    self.write_u32s(
                        fp_reg::T_PORT,
                        q,
                        fp_reg::CQW_RECV_WRID_HI,
                        &[(c.wr_id >> 32) as u32],
                    );
                    cmd |= fp_reg::RL_CQE;
                }
                self.recv_cmd(qpn, Some([addr as u32, (addr >> 32) as u32, len]), cmd)
            }
            None => self.recv_cmd(qpn, None, fp_reg::RL_UNLOAD),
        }
    }

    /// `soc_fp`'s receive check answers a SEND to an empty receive queue with an RNR
    /// NAK (`docs/fastpath.md` §3.4 "Receiver not ready"). The flag is this firmware's
    /// view, which a host receive doorbell makes stale before the firmware has fetched
    /// the WQE: `soc_fp` masks the flag of a QP from its receive doorbell until this
    /// firmware sets the flag again having read that doorbell register since (it reads
    /// it and fetches up to it in one go, `Nic::fetch_wqes`), so such a SEND is an
    /// exception, which the engine places once it has fetched the WQE.
    fn rnr_responder(&self) -> bool {
        !NO_FASTPATH
    }

    /// `fp_inflight`'s row, the messages of a QP its response path knows.
    fn msgs_in_flight(&self) -> u32 {
        layout::IF_ENTRIES
    }

    fn recv_rnr(&mut self, qpn: Qpn, t: Option<RnrTimer>) -> bool {
        match t {
            Some(t) if Self::rnr_entry(qpn) => {
                self.recv_cmd(qpn, None, fp_reg::RL_RNR | u32::from(t.code()) << 8)
            }
            Some(_) => false,
            None => self.recv_cmd(qpn, None, fp_reg::RL_RNR_CLEAR),
        }
    }

    /// The hardware runs by itself: the runtime reads its news once a poll and its
    /// counters when the host asks.
    fn runs_by_itself(&self) -> bool {
        true
    }

    /// The hardware runs by itself.
    fn run(&mut self, _dma: &mut dyn Dma) -> bool {
        false
    }

    /// The hardware runs by itself, its WQE fetch too: in the SoC it keeps its own time
    /// and hears the host's send doorbells (`soc_fp`, fp_sqf's HW_NOW), so a WQE costs
    /// the firmware nothing until it completes. While the fetch holds a queue its news
    /// word says whether `sq_news` has something: CQEs it wrote, or a queue that
    /// stopped (at a WQE it does not take, or its local ACK deadline passed). What it
    /// took meanwhile comes with those news (its counts run on).
    fn run_at(&mut self, _dma: &mut dyn Dma, _now: u64) -> bool {
        if NO_FASTPATH || self.sq_held == 0 {
            return false;
        }
        let news = self.reg(fp_reg::SQ_NEWS);
        self.sq_news_seen |= news;
        news & (fp_reg::SQ_NEWS_CQE | fp_reg::SQ_NEWS_STOPPED) != 0
    }

    fn counters(&self) -> FastPathCounters {
        let c = |r| u64::from(self.reg(r));
        let rx_dropped = c(fp_reg::RX_DROPS);
        FastPathCounters {
            tx_frames: c(fp_reg::TX_FRAMES),
            rx_handled: c(fp_reg::RX_FRAMES).saturating_sub(self.exceptions + rx_dropped),
            rx_exceptions: self.exceptions,
            rx_dropped,
            tx_dma_errors: c(fp_reg::TX_DMA_ERRORS),
            tx_resent: c(fp_reg::TX_RESENT),
        }
    }

    fn rx_answered(&self) -> [u64; 2] {
        [fp_reg::RX_OOS, fp_reg::RX_DUPS].map(|r| u64::from(self.reg(r)))
    }

    fn ctx_hits_misses(&self) -> [u64; 2] {
        [fp_reg::CTX_HITS, fp_reg::CTX_MISSES].map(|r| u64::from(self.reg(r)))
    }

    fn take_accessed(&mut self, word: usize) -> u32 {
        let Ok(index) = u32::try_from(word) else {
            return 0;
        };
        let mut w = [0u8; 4];
        self.read_words(fp_reg::T_PORT, index, fp_reg::ACCESSED_WORD, &mut w);
        u32::from_le_bytes(w)
    }

    fn set_send_cq(&mut self, qpn: Qpn, cq: Option<u16>) {
        // a CQ past the writer's table is the firmware's alone (`CqWriter::set`); the
        // index names the QP's context entry by its low bits
        let cq = cq.filter(|&c| usize::from(c) < CQ_ENTRIES);
        let word = cq.map_or(0, |c| 0x100 | u32::from(c));
        self.write_words(
            fp_reg::T_PORT,
            qpn.value(),
            fp_reg::CQW_SEND_CQ,
            &word.to_le_bytes(),
        );
    }

    fn cq_ring(&mut self, cq: u16) -> Option<CqRing> {
        if !self.holds_cq(cq) {
            return None;
        }
        // ring low, ring high, {valid, log2 depth}, producer index, consumer index
        let mut w = [0u8; 20];
        self.read_words(fp_reg::T_PORT, u32::from(cq), fp_reg::CQW_RING, &mut w);
        let word =
            |i: usize| u32::from_le_bytes([w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]]);
        Some(CqRing {
            ring: u64::from(word(0)) | u64::from(word(1)) << 32,
            log_depth: (word(2) & 31) as u8,
            pi: word(3),
            ci: word(4),
        })
    }

    fn cq_pi(&mut self, cq: u16) -> Option<u32> {
        self.holds_cq(cq)
            .then(|| self.read_u32(fp_reg::T_PORT, u32::from(cq), fp_reg::CQW_PI))
    }

    fn set_cq_ring(&mut self, cq: u16, ring: Option<CqRing>) -> bool {
        if usize::from(cq) >= CQ_ENTRIES {
            return false;
        }
        let bit = 1u64 << cq;
        self.cqs_held = if ring.is_some() {
            self.cqs_held | bit
        } else {
            self.cqs_held & !bit
        };
        let words = ring.map_or([0; 5], |r| {
            [
                r.ring as u32,
                (r.ring >> 32) as u32,
                0x100 | u32::from(r.log_depth & 31),
                r.pi,
                r.ci,
            ]
        });
        let mut bytes = [0u8; 20];
        for (b, w) in bytes.chunks_exact_mut(4).zip(words) {
            b.copy_from_slice(&w.to_le_bytes());
        }
        self.write_words(fp_reg::T_PORT, u32::from(cq), fp_reg::CQW_RING, &bytes);
        true
    }

    /// The writer runs beside the firmware: its CQEs go through the port.
    fn cqe_port(&self) -> bool {
        true
    }

    fn post_cqe(&mut self, cq: u16, cqe: &[u8; 32], ci: u32) -> Option<CqePost> {
        if !self.holds_cq(cq) {
            return None;
        }
        let index = u32::from(cq);
        self.write_words(fp_reg::T_PORT, index, fp_reg::CQW_CI, &ci.to_le_bytes());
        let stage = fp_reg::sel(fp_reg::T_PORT, 0, fp_reg::CQW_STAGE) | fp_reg::SEL_HOLD;
        self.write_sel(stage, &cqe[..28]);
        self.write_words(fp_reg::T_PORT, index, fp_reg::CQW_POST, &cqe[28..]);
        let mut r = [0u8; 8];
        self.read_words(fp_reg::T_PORT, index, fp_reg::CQW_POSTED, &mut r);
        Some(CqePost {
            written: r[0] & 1 != 0,
            pi: u32::from_le_bytes([r[4], r[5], r[6], r[7]]),
        })
    }

    // ---- The WQE fetch (`fp_sqf`, §3.8). It runs beside the core: a doorbell only
    // hands the index on, what it took and a stop come with `sq_news`, and a take-back
    // stops it before its state is read (the state then holds still).

    fn sq_hand_over(&mut self, qpn: Qpn, ring: SqRing, idle: &SqIdle) -> bool {
        let Some(bit) = Self::sq_bit(qpn).filter(|b| self.sq_held & b == 0) else {
            return false;
        };
        if ring.log > 31 {
            return false;
        }
        let index = qpn.value();
        // Nothing of the QP under way: its send context valid, `una_psn` and `next_psn`
        // at the engine's next PSN (every descriptor it posted sent and acknowledged),
        // the receive context's tag its own.
        let mut sctx = [0u8; 20];
        self.read_words(fp_reg::T_SCTX, index, 0, &mut sctx);
        let mut w11 = [0u8; 4];
        self.read_words(fp_reg::T_RCTX, index, 11, &mut w11);
        let psn = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], 0]);
        let quiet = sctx[2] & 4 != 0
            && psn(&w11[1..]) == index
            && psn(&sctx[16..]) == idle.psn.value()
            && psn(&sctx[12..]) == idle.psn.value();
        if !quiet {
            return false;
        }
        let rto = idle.rto.unwrap_or(0);
        let cfg = u32::from(ring.log)
            | u32::from(idle.sig_all) << 8
            | u32::from(idle.rto.is_some()) << 9
            | u32::from(sctx[2] >> 4) << 12
            | u32::from(idle.retry_cnt & 7) << 16
            | u32::from(idle.rnr_retry & 7) << 20
            | u32::from(idle.max_rd_atomic) << 24;
        let stage = [
            ring.ring as u32,
            (ring.ring >> 32) as u32,
            cfg,
            ring.ci,
            idle.psn.value(),
            u32::from(idle.pd.index()),
            idle.depth,
        ];
        self.write_u32s(fp_reg::T_PORT, 0, fp_reg::SQ_W_STAGE, &stage);
        self.write_u32s(
            fp_reg::T_PORT,
            0,
            fp_reg::SQ_W_RTO,
            &[rto as u32, (rto >> 32) as u32],
        );
        self.write_u32s(
            fp_reg::T_PORT,
            index,
            fp_reg::SQ_W_CMD,
            &[fp_reg::SQ_HAND_OVER],
        );
        let ok = self.read_u32(fp_reg::T_PORT, index, fp_reg::SQ_R_FLAGS) & fp_reg::SQ_ACTIVE != 0;
        if ok {
            self.sq_held |= bit;
            self.sq_used = true;
        }
        ok
    }

    /// Nothing to do: the SoC hands the host's doorbells of the queues the fetch holds
    /// to it (`soc_fp`; also the latest one when a queue is handed over), so the
    /// firmware, which reads the doorbell later, never writes an index older than the
    /// hardware's. The WQEs it takes and a stop come with the news.
    fn sq_doorbell(&mut self, _qpn: Qpn, _pi: u32, _now: u64, _dma: &mut dyn Dma) -> SqRung {
        SqRung::default()
    }

    fn sq_take_back(&mut self, qpn: Qpn) -> Option<SqBack> {
        let bit = Self::sq_bit(qpn).filter(|b| self.sq_held & b != 0)?;
        let index = qpn.value();
        // Stopped first: the fetch and its retirements run beside the core, and a queue
        // taken back keeps its state as the command left it, the RNR wait too (an ACKED
        // after this reaches the firmware).
        self.write_u32s(
            fp_reg::T_PORT,
            index,
            fp_reg::SQ_W_CMD,
            &[fp_reg::SQ_TAKE_BACK],
        );
        self.sq_held &= !bit;
        let mut w = [0u8; 28];
        self.read_words(fp_reg::T_PORT, index, fp_reg::SQ_R_STATE, &mut w);
        let word =
            |i: usize| u32::from_le_bytes([w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]]);
        let flags = word(6);
        if flags & fp_reg::SQ_ACTIVE != 0 {
            // the command did not land (a port access that timed out): the hardware still
            // fetches; the firmware must not
            self.sq_held |= bit;
            return None;
        }
        let deadline = (flags & fp_reg::SQ_DL_VALID != 0)
            .then(|| u64::from(word(4)) | u64::from(word(5)) << 32);
        // In an RNR wait the deadline is the wait's end, and no ACK timer runs.
        let wait = flags & fp_reg::SQ_RNR_WAIT != 0;
        Some(SqBack {
            ci: word(0),
            done: word(1),
            base: Psn::new(word(2)),
            una: Psn::new(word(3)),
            deadline: deadline.filter(|_| !wait),
            spent: SqSpent {
                retries: ((flags & fp_reg::SQ_SPENT) >> 3) as u8,
                rnr: ((flags & fp_reg::SQ_RNR_SPENT) >> 6) as u8,
                rnr_at: deadline.filter(|_| wait),
            },
        })
    }

    fn sq_deadline(&mut self, qpn: Qpn) -> Option<u64> {
        let flags = self.sq_flags(qpn)?;
        // (an RNR wait's end is the fetch's to act on: it replays then by itself)
        if flags & fp_reg::SQ_DL_VALID == 0 || flags & fp_reg::SQ_RNR_WAIT != 0 {
            return None;
        }
        let mut w = [0u8; 8];
        self.read_words(fp_reg::T_PORT, qpn.value(), fp_reg::SQ_R_DL, &mut w);
        Some(u64::from_le_bytes(w))
    }

    fn sq_stopped(&mut self, qpn: Qpn) -> bool {
        self.sq_flags(qpn)
            .is_some_and(|f| f & fp_reg::SQ_STOPPED != 0)
    }

    /// (Without the counters: the runtime reads them when the host asks,
    /// `runs_by_itself`.)
    fn sq_news(&mut self) -> SqNews {
        if NO_FASTPATH || !self.sq_used {
            return SqNews::default();
        }
        let (taken, sends) = (self.reg(fp_reg::SQ_TAKEN), self.reg(fp_reg::SQ_SENDS));
        let news = self.reg(fp_reg::SQ_NEWS) | core::mem::take(&mut self.sq_news_seen);
        let counts = (
            taken.wrapping_sub(self.sq_taken[0]),
            sends.wrapping_sub(self.sq_taken[1]),
        );
        self.sq_taken = [taken, sends];
        let gbn = if news & fp_reg::SQ_NEWS_GBN != 0 {
            self.sq_gbn_moved()
        } else {
            [0; 4]
        };
        // No deadline: the fetch watches its own (a passed one stops the queue, and the
        // runtime takes it back with it).
        SqNews {
            counters: None,
            cqe: news & fp_reg::SQ_NEWS_CQE != 0,
            cq_full: false,
            taken: counts.0,
            sends: counts.1,
            deadline: None,
            due: None,
            stopped: news & fp_reg::SQ_NEWS_STOPPED != 0,
            naks: gbn[0],
            retries: gbn[1],
            timeouts: gbn[2],
            rnr_naks: gbn[3],
        }
    }
}

/// Whether the SoC's fast path is in use: not yet asked, no, yes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FpState {
    Unknown,
    Off,
    On,
}

/// The datapath's frame buffers, and the fast path in front of them when the SoC has
/// one and its strap is set.
#[derive(Debug)]
pub struct MmioDatapath {
    mmio: Mmio,
    /// Received frames longer than the runtime's buffer, dropped.
    pub rx_oversize: u32,
    fp: MmioFastPath,
    fp_state: FpState,
}

impl MmioDatapath {
    fn reg(&self, offset: u32) -> u32 {
        self.mmio.read(map::DATAPATH + offset)
    }

    /// Whether the fast path is in use (asked once: a strap does not change).
    fn fp_on(&mut self) -> bool {
        if self.fp_state == FpState::Unknown {
            self.fp_state = if self.fp.reg(fp_reg::CONFIG) & fp_reg::CONFIG_ON != 0 {
                FpState::On
            } else {
                FpState::Off
            };
        }
        self.fp_state == FpState::On
    }

    /// The port's MAC address and GID, as the datapath holds them.
    fn port_address(&self) -> ([u8; 6], [u8; 16]) {
        let lo = self.reg(dp_reg::MAC_LO).to_le_bytes();
        let hi = self.reg(dp_reg::MAC_HI).to_le_bytes();
        let mac = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1]];
        let mut gid = [0u8; 16];
        self.mmio.read_buf(map::DATAPATH + dp_reg::GID, &mut gid);
        (mac, gid)
    }
}

impl Datapath for MmioDatapath {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        if !self.can_transmit() || frame.len() > dp_reg::BUF_LEN as usize {
            return false;
        }
        self.mmio.write_buf(map::DATAPATH + dp_reg::TX_BUF, frame);
        self.mmio
            .write(map::DATAPATH + dp_reg::TX_LEN, frame.len() as u32);
        true
    }

    fn can_transmit(&self) -> bool {
        self.reg(dp_reg::TX_STATUS) & dp_reg::TX_READY != 0
    }

    /// The DCB block has no transmit queues: a frame of a paused priority would wait in
    /// the transmit buffer (holding back every other), so the engine builds none.
    fn tx_blocked(&self) -> Priorities {
        if !self.can_transmit() {
            return Priorities::ALL;
        }
        Priorities(self.mmio.read(map::DCB + dcb_reg::PAUSED) as u8)
    }

    fn rx_buffer_bytes(&self) -> u32 {
        self.mmio.read(map::DCB + dcb_reg::BUF_BYTES)
    }

    fn set_dcb(&mut self, dcb: &DcbConfig, mac: [u8; 6]) {
        let regs = dcb.registers(mac, self.mmio.read(map::DCB + dcb_reg::LINK_BPC));
        for (addr, value) in regs.writes() {
            self.mmio
                .write(map::DCB + dcb_reg::CONFIG + 4 * u32::from(addr), value);
        }
    }

    /// The datapath checks the ICRC in hardware and drops what fails.
    fn verifies_icrc(&self) -> bool {
        true
    }

    fn fastpath(&mut self) -> Option<&mut dyn FastPath> {
        if self.fp_on() {
            Some(&mut self.fp)
        } else {
            None
        }
    }

    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        // with the fast path, the frames here are its exceptions: they come with their
        // events (`MmioFastPath::poll_event`)
        if self.fp_on() {
            return None;
        }
        loop {
            let status = self.reg(dp_reg::RX_STATUS);
            if status & dp_reg::RX_VALID == 0 {
                return None;
            }
            let len = (status & 0xFFFF) as usize;
            let fits = len <= buf.len() && len <= dp_reg::BUF_LEN as usize;
            if fits {
                self.mmio
                    .read_buf(map::DATAPATH + dp_reg::RX_BUF, &mut buf[..len]);
            } else {
                self.rx_oversize = self.rx_oversize.wrapping_add(1);
            }
            self.mmio.write(map::DATAPATH + dp_reg::RX_POP, 1);
            if fits {
                return Some(len);
            }
        }
    }
}

/// The soft core's platform: host window, DMA engine and datapath over MMIO, time from
/// the board clock ([`crate::clock`]).
#[derive(Debug)]
pub struct MmioHal {
    window: Mmio,
    /// `EVENT_STATUS` as the runtime last read it: its write back sets only the bits
    /// it added (the register is write-one-to-set on this side).
    event_read: u32,
    dma: MmioDma,
    datapath: MmioDatapath,
}

impl MmioHal {
    /// The HAL for the NIC block at `base`.
    ///
    /// # Safety
    ///
    /// `[base, base + map::LEN)` must be the NIC's MMIO block as [`map`] describes it
    /// (device registers, not memory any Rust object lives in), `base` 4-byte aligned,
    /// and no other code may access the block while this HAL is in use (one instance;
    /// a panic handler that never returns may make a second one to report). `const`, for
    /// a NIC built at compile time.
    pub const unsafe fn new(base: usize) -> Self {
        Self {
            window: Mmio { base },
            event_read: 0,
            dma: MmioDma {
                mmio: Mmio { base },
                timeout_polls: 1 << 20,
            },
            datapath: MmioDatapath {
                mmio: Mmio { base },
                rx_oversize: 0,
                fp: MmioFastPath {
                    mmio: Mmio { base },
                    cqs_held: 0,
                    exceptions: 0,
                    sq_held: 0,
                    sq_used: false,
                    sq_taken: [0; 2],
                    sq_gbn: [0; 4],
                    sq_news_seen: 0,
                },
                fp_state: FpState::Unknown,
            },
        }
    }

    /// The port's MAC address and GID, from the datapath's registers.
    pub fn port_address(&self) -> ([u8; 6], [u8; 16]) {
        self.datapath.port_address()
    }

    /// Publishes the main loop's statistics ([`stat_reg`]).
    pub fn write_stats(&self, s: &LoopStats) {
        let w = |off: u32, v: u32| self.window.write(map::HOST_WINDOW + off, v);
        w(stat_reg::BUSY_POLLS, s.busy_polls);
        w(stat_reg::FRAMES_TX, s.frames_tx);
        w(stat_reg::FRAMES_RX, s.frames_rx);
        w(stat_reg::BUSY_CYCLES, s.busy_cycles as u32);
        w(stat_reg::BUSY_CYCLES + 4, (s.busy_cycles >> 32) as u32);
        w(stat_reg::BUSY_INSTRET, s.busy_instret as u32);
        w(stat_reg::BUSY_INSTRET + 4, (s.busy_instret >> 32) as u32);
        w(stat_reg::NEXT_TIMEOUT, s.next_timeout as u32);
        w(stat_reg::NEXT_TIMEOUT + 4, (s.next_timeout >> 32) as u32);
    }

    /// Publishes the largest busy poll since the last command: its instructions and
    /// cycles and what it handled ([`stat_reg::MAX_POLL_INSTRET`] and after).
    pub fn write_largest_poll(&self, instret: u32, cycles: u32, work: &PollWork) {
        let w = |off: u32, v: u32| self.window.write(map::HOST_WINDOW + off, v);
        let [lo, hi] = work.words();
        w(stat_reg::MAX_POLL_INSTRET, instret);
        w(stat_reg::MAX_POLL_CYCLES, cycles);
        w(stat_reg::MAX_POLL_WORK, lo);
        w(stat_reg::MAX_POLL_WORK + 4, hi);
    }

    /// Publishes the count of idle polls ([`stat_reg::IDLE_POLLS`]).
    pub fn write_idle_polls(&self, polls: u32) {
        self.window
            .write(map::HOST_WINDOW + stat_reg::IDLE_POLLS, polls);
    }

    /// Publishes the stack used so far ([`stat_reg::STACK_USED`]).
    pub fn write_stack_used(&self, bytes: u32) {
        self.window
            .write(map::HOST_WINDOW + stat_reg::STACK_USED, bytes);
    }

    /// Publishes the cycles the boot took ([`stat_reg::BOOT_CYCLES`]).
    pub fn write_boot_cycles(&self, cycles: u32) {
        self.window
            .write(map::HOST_WINDOW + stat_reg::BOOT_CYCLES, cycles);
    }

    /// Sets `STATUS.fatal` in the host window: what the panic handler does before it
    /// stops, so the host sees the firmware is gone.
    pub fn set_fatal(&self) {
        let mut status = DeviceStatus(self.window.read(map::HOST_WINDOW + reg::STATUS));
        status.set_fatal(true);
        self.window.write(map::HOST_WINDOW + reg::STATUS, status.0);
    }
}

impl Hal for MmioHal {
    // (`MmioFastPath` has no pacing entry: RP QPs stay with the firmware.)
    const FASTPATH_PACES: bool = false;
    type Dma = MmioDma;
    type Datapath = MmioDatapath;

    fn reg_read(&mut self, offset: u32) -> u32 {
        if offset >= reg::WINDOW {
            return 0;
        }
        let value = self.window.read(map::HOST_WINDOW + offset);
        if offset == reg::EVENT_STATUS {
            self.event_read = value;
        }
        value
    }

    fn reg_write(&mut self, offset: u32, value: u32) {
        if offset >= reg::WINDOW {
            return;
        }
        let value = if offset == reg::EVENT_STATUS {
            value & !self.event_read
        } else {
            value
        };
        self.window.write(map::HOST_WINDOW + offset, value);
    }

    fn dma(&mut self) -> &mut MmioDma {
        &mut self.dma
    }

    fn datapath(&mut self) -> &mut MmioDatapath {
        &mut self.datapath
    }

    fn split(&mut self) -> (&mut MmioDma, &mut MmioDatapath) {
        (&mut self.dma, &mut self.datapath)
    }

    fn now(&mut self) -> u64 {
        crate::clock::now_ns()
    }

    fn take_doorbells(&mut self) -> bool {
        self.datapath.reg(dp_reg::DOORBELL) & 1 != 0
    }

    /// Empties the register file's queue of `QP_DB` doorbells into `rung`. False (every
    /// QP counts as rung) when the queue lost an index, or when the host keeps it full
    /// for twice its depth in reads.
    fn take_rung_qps(&mut self, rung: &mut QpMap) -> bool {
        let mut kept = true;
        for _ in 0..2 * qpdb_reg::DEPTH {
            let v = self.window.read(map::HOST_WINDOW + qpdb_reg::POP);
            kept &= v & qpdb_reg::OVERFLOW == 0;
            if v & qpdb_reg::VALID == 0 {
                return kept;
            }
            rung.set(v & qpdb_reg::INDEX);
        }
        false
    }
}
