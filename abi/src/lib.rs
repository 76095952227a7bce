#![no_std]
#![forbid(unsafe_code)]
//! roce-abi: the host/NIC ABI, the one source of truth for what the host driver
//! (`roce-host`) and the firmware (`roce-firmware`, which re-exports it as
//! `roce_firmware::abi`) exchange (`docs/abi.md` explains it in prose). A crate of its own
//! so that the driver depends on the ABI and never on the runtime behind it.
//!
//! * A register file (MMIO, 32-bit little-endian registers) with the device identity, the
//!   command-queue ring, event status, a clock, and one doorbell per queue.
//! * Rings in host memory, written and read by DMA: the command queue, and per QP a send
//!   queue and a receive queue, per CQ a completion queue. Every entry is little-endian and
//!   described below as a `zerocopy` struct, so both sides read and write the same bytes.
//! * Doorbells carry free-running 32-bit producer (or, for CQs, consumer) indices; the
//!   slot of index `i` in a ring of depth `2^n` is `i mod 2^n`.

pub mod counters;
pub mod port;

pub use counters::{CounterScope, QueryCountersArg, RuntimeCounters, PORT_COUNTERS, QP_COUNTERS};
pub use port::{CcArg, DcbArg, EtsArg, GidArg, PortArg, QpCcArg};

use bitfield::bitfield;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// `DEVICE_ID` register value: "ROCE" in ASCII.
pub const DEVICE_ID: u32 = 0x524F_4345;
/// ABI version this crate speaks; a host refuses a device with another major.
pub const ABI_MAJOR: u16 = 1;
/// Minor version: additions that old hosts can ignore. 1.6 added QUERY_ETS/MODIFY_ETS
/// (opcodes 30 and 31, `EtsArg`: 802.1Qaz's priority assignment table, several
/// priorities per traffic class) and QUERY_DCB's `rx_buffer` became the NIC's own
/// buffer (the SoC's 16 KiB), against which MODIFY_DCB checks XOFF. 1.5 added the PFC thresholds
/// (XOFF, XON, pause quanta, the receive buffer's size) and the priority-to-PCP egress
/// map to MODIFY_DCB/QUERY_DCB (`DcbArg` 88 -> 112 bytes). 1.4 accepts RoCEv1 GID
/// entries (`GidArg::roce_version` 1, `IBV_GID_TYPE_ROCE_V1`). 1.3 added memory windows and
/// fast-registration MRs (opcodes 27 to 29, the BIND_MW and REG_MR send WQEs), a VLAN
/// per GID entry, and the DCB priority maps and ETS to MODIFY_DCB/QUERY_DCB (`DcbArg`).
/// 1.2 added inline sends
/// (`IBV_SEND_INLINE` in a send WQE, `CreateQpArg::max_inline_data`) and shared receive
/// queues (opcodes 23 to 26, `SRQ_DB`, the SRQ-limit event, `CreateQpArg::srqn`); 1.1
/// is the port commands' (`docs/abi.md`).
pub const ABI_MINOR: u16 = 6;

/// The first QPN; a QP's doorbells are indexed by `QPN - QPN_BASE` (the GSI QP's by
/// `reg::GSI_QP_INDEX`).
pub const QPN_BASE: u32 = roce_core::engine::QPN_BASE;

/// CREATE_QP's `qp_type` for the GSI QP (QP1; the kernel's `IB_QPT_GSI`, which
/// libibverbs does not number): a UD QP with QPN 1, one per port (ABI 1.2).
pub const QPT_GSI: u8 = 1;

/// Register offsets in the MMIO window.
pub mod reg {
    /// Read-only: [`super::DEVICE_ID`].
    pub const DEVICE_ID: u32 = 0x000;
    /// Read-only: [`super::Version`].
    pub const VERSION: u32 = 0x004;
    /// Read-only: [`super::DeviceStatus`].
    pub const STATUS: u32 = 0x008;
    /// Command-queue ring base in host memory, low and high words.
    pub const CMDQ_BASE_LO: u32 = 0x010;
    /// High word of the command-queue base.
    pub const CMDQ_BASE_HI: u32 = 0x014;
    /// log2 of the command-queue depth; writing it (after the base) enables the queue.
    pub const CMDQ_LOG_DEPTH: u32 = 0x018;
    /// Doorbell: the host's producer index of the command queue.
    pub const CMDQ_PI: u32 = 0x01C;
    /// The NIC's consumer index of the command queue (read-only for the host).
    pub const CMDQ_CI: u32 = 0x020;
    /// [`super::EventStatus`]: sticky event bits; the host writes ones to clear them.
    pub const EVENT_STATUS: u32 = 0x030;
    /// The CQ of the last `CQ_ERROR` event.
    pub const EVENT_CQN: u32 = 0x034;
    /// The QP of the last `QP_FATAL` event.
    pub const EVENT_QPN: u32 = 0x038;
    /// The SRQ of the last `SRQ_LIMIT` event (ABI 1.2).
    pub const EVENT_SRQN: u32 = 0x03C;
    /// Free-running NIC clock in nanoseconds, low word (reading it latches the high word).
    pub const CLOCK_LO: u32 = 0x040;
    /// High word of the clock, as latched by the last read of `CLOCK_LO`.
    pub const CLOCK_HI: u32 = 0x044;
    /// Doorbell of a QP with a doorbell record (`CreateQpArg::db_record`, required with
    /// an ICM): the host writes the QP's index (`QPN - QPN_BASE`) after updating the
    /// record; the NIC latches a pending bit per QP and reads the record (mlx5's
    /// doorbell record and UAR doorbell, in one register for every QP).
    pub const QP_DB: u32 = 0x050;
    /// SRQ doorbells (ABI 1.2): SRQN `s`'s producer index is at `SRQ_DB + 4 s` (SRQNs
    /// start at 1, so the first word is unused).
    pub const SRQ_DB: u32 = 0x0800;
    /// Most SRQNs the doorbell page can address (including the unused 0).
    pub const MAX_SRQ_DOORBELLS: u32 = (SQ_DB - SRQ_DB) / 4;
    /// First send-queue doorbell; QP `q`'s is at `SQ_DB + 8 q`.
    pub const SQ_DB: u32 = 0x1000;
    /// First receive-queue doorbell; QP `q`'s is at `RQ_DB + 8 q`.
    pub const RQ_DB: u32 = 0x1004;
    /// First CQ doorbell (the host's consumer index); CQ `c`'s is at `CQ_DB + 4 c`.
    pub const CQ_DB: u32 = 0x3000;
    /// Size of the register window.
    pub const WINDOW: u32 = 0x4000;
    /// Most QPs the doorbell page can address.
    pub const MAX_QP_DOORBELLS: u32 = (CQ_DB - SQ_DB) / 8;
    /// The GSI QP's (QP1's) doorbell index (ABI 1.2): its QPN is below `QPN_BASE`, so it
    /// takes the page's last pair, `sq_db(GSI_QP_INDEX)` and `rq_db(GSI_QP_INDEX)`.
    pub const GSI_QP_INDEX: u32 = MAX_QP_DOORBELLS - 1;
    /// Most CQs the doorbell page can address.
    pub const MAX_CQ_DOORBELLS: u32 = (WINDOW - CQ_DB) / 4;

    /// Send-queue doorbell of QP index `q`.
    pub const fn sq_db(q: u32) -> u32 {
        SQ_DB + 8 * q
    }
    /// Receive-queue doorbell of QP index `q`.
    pub const fn rq_db(q: u32) -> u32 {
        RQ_DB + 8 * q
    }
    /// Doorbell of CQ `c`.
    pub const fn cq_db(c: u32) -> u32 {
        CQ_DB + 4 * c
    }
    /// Doorbell of SRQN `s` (1-based).
    pub const fn srq_db(s: u32) -> u32 {
        SRQ_DB + 4 * s
    }
    /// A write here announces WQEs for the NIC to fetch (an SRQ, send- or
    /// receive-queue doorbell, or `QP_DB`), so a platform wakes its firmware for it.
    pub const fn is_queue_doorbell(offset: u32) -> bool {
        (offset >= SRQ_DB && offset < CQ_DB) || offset == QP_DB
    }
}

bitfield! {
    /// The `VERSION` register.
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub struct Version(pub u32);
    impl Debug;
    pub u16, major, set_major: 31, 16;
    pub u16, minor, set_minor: 15, 0;
}

bitfield! {
    /// The `STATUS` register.
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub struct DeviceStatus(pub u32);
    impl Debug;
    /// The firmware has started and accepts commands.
    pub ready, set_ready: 0;
    /// The command queue is configured.
    pub cmdq_enabled, set_cmdq_enabled: 1;
    /// The firmware stopped on an internal error.
    pub fatal, set_fatal: 31;
}

bitfield! {
    /// The `EVENT_STATUS` register: sticky bits, cleared by writing ones.
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub struct EventStatus(pub u32);
    impl Debug;
    /// A command finished (its entry holds the status).
    pub cmd_done, set_cmd_done: 0;
    /// A completion was written to some CQ.
    pub completion, set_completion: 1;
    /// A CQ overflowed (`EVENT_CQN`): it is in error, like `IBV_EVENT_CQ_ERR`.
    pub cq_error, set_cq_error: 2;
    /// A QP went to the error state on its own (`EVENT_QPN`), like
    /// `IBV_EVENT_QP_FATAL`.
    pub qp_fatal, set_qp_fatal: 3;
    /// An SRQ's WQEs fell below its armed limit (`EVENT_SRQN`), like
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`; the limit is disarmed (ABI 1.2).
    pub srq_limit, set_srq_limit: 4;
}

/// Scatter/gather element in a WQE (`struct ibv_sge`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct WqeSge {
    pub addr: U64,
    pub length: U32,
    pub lkey: U32,
}

/// SGEs per WQE (the engine's limit).
pub const WQE_SGES: usize = roce_core::transport::MAX_SGE;

/// Address vector inline in a UD send WQE and in MODIFY_QP (`ibv_ah_attr` for RoCE).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct WireAv {
    /// Destination GID (IPv6, or IPv4-mapped `::ffff:a.b.c.d`).
    pub dgid: [u8; 16],
    pub dmac: [u8; 6],
    /// 802.1Q VID, or 0xFFFF for untagged.
    pub vlan_id: U16,
    pub flow_label: U32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub sl: u8,
    pub sgid_index: u8,
}

/// A send work queue entry (160 bytes).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct SendWqe {
    pub wr_id: U64,
    /// `enum ibv_wr_opcode`.
    pub opcode: u8,
    /// `IBV_SEND_FENCE` 1, `SIGNALED` 2, `SOLICITED` 4, `INLINE` 8 (ABI 1.2: the payload
    /// is the first `inline_len` bytes of the SGE area, and `num_sge` is 0).
    pub send_flags: u8,
    pub num_sge: u8,
    pub reserved0: u8,
    /// Immediate data (host order value), or the R_Key to invalidate.
    pub imm_or_inv: U32,
    pub remote_addr: U64,
    pub rkey: U32,
    /// UD: destination QP.
    pub remote_qpn: U32,
    /// CMP_SWAP: compare value.
    pub compare: U64,
    /// CMP_SWAP: swap value; FETCH_ADD: the addend.
    pub swap_add: U64,
    /// UD: destination Q_Key.
    pub remote_qkey: U32,
    /// `INLINE`: payload bytes at [`SEND_WQE_INLINE`] (at most [`MAX_INLINE_DATA`]).
    pub inline_len: U16,
    pub reserved1: [u8; 10],
    /// UD: destination address (at offset 64).
    pub av: WireAv,
    pub sge: [WqeSge; WQE_SGES],
}

/// Where an inline send's payload starts in its WQE: the SGE area.
pub const SEND_WQE_INLINE: usize = core::mem::offset_of!(SendWqe, sge);

/// Largest inline payload: the SGE area's bytes (the engine's limit is the same).
pub const MAX_INLINE_DATA: u32 = roce_core::transport::MAX_INLINE_DATA;
const _: () = assert!(core::mem::size_of::<[WqeSge; WQE_SGES]>() == MAX_INLINE_DATA as usize);

/// A receive work queue entry (80 bytes).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RecvWqe {
    pub wr_id: U64,
    pub num_sge: u8,
    pub reserved: [u8; 7],
    pub sge: [WqeSge; WQE_SGES],
}

/// A completion queue entry (32 bytes). `owner` flips on every pass over the ring: the
/// entry at consumer index `ci` is valid when `owner == ((ci >> log_depth) & 1) ^ 1`, so
/// a zeroed ring reads as empty.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct Cqe {
    pub wr_id: U64,
    pub byte_len: U32,
    pub imm_data: U32,
    pub qp_num: U32,
    pub src_qp: U32,
    pub invalidated_rkey: U32,
    /// `enum ibv_wc_status`.
    pub status: u8,
    /// `enum ibv_wc_opcode`.
    pub opcode: u8,
    /// `ibv_wc_flags`.
    pub wc_flags: u8,
    /// Bit 0: owner (see above). Bit 1: solicited.
    pub owner: u8,
}

/// Whether the CQE at consumer index `ci` of a ring of depth `2^log_depth` has been
/// written on the current pass.
pub const fn cqe_valid(owner: u8, ci: u32, log_depth: u8) -> bool {
    (owner & 1) as u32 == ((ci >> log_depth) & 1) ^ 1
}

/// The owner bit the NIC writes for producer index `pi`.
pub const fn cqe_owner(pi: u32, log_depth: u8) -> u8 {
    (((pi >> log_depth) & 1) ^ 1) as u8
}

/// Command opcodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum CmdOp {
    QueryDevice = 1,
    AllocPd = 2,
    DeallocPd = 3,
    RegMr = 4,
    DeregMr = 5,
    CreateCq = 6,
    DestroyCq = 7,
    CreateQp = 8,
    ModifyQp = 9,
    QueryQp = 10,
    DestroyQp = 11,
    QueryPort = 12,
    ModifyPort = 13,
    QueryGid = 14,
    ModifyGid = 15,
    QueryDcb = 16,
    ModifyDcb = 17,
    QueryCc = 18,
    ModifyCc = 19,
    QueryQpCc = 20,
    ModifyQpCc = 21,
    QueryCounters = 22,
    CreateSrq = 23,
    ModifySrq = 24,
    QuerySrq = 25,
    DestroySrq = 26,
    /// ABI 1.3: `ibv_alloc_mw` (`AllocMwArg`; `out` = the window's R_Key).
    AllocMw = 27,
    /// ABI 1.3: `ibv_dealloc_mw` (`HandleArg`: the R_Key).
    DeallocMw = 28,
    /// ABI 1.3: a fast-registration MR (`RegMrArg` with `length` its largest
    /// registration, `addr` and `access` 0; `out` = L_Key), registered by REG_MR WQEs.
    AllocMr = 29,
    /// ABI 1.6: the port's ETS with its priority assignment table (`EtsArg`).
    QueryEts = 30,
    /// ABI 1.6: sets the port's whole ETS (`EtsArg`).
    ModifyEts = 31,
    /// Hands the NIC host memory for QP contexts (`IcmArg`; `docs/scale.md`).
    SetIcm = 64,
}

impl CmdOp {
    /// From the wire value.
    pub const fn from_u16(v: u16) -> Option<Self> {
        Some(match v {
            1 => Self::QueryDevice,
            2 => Self::AllocPd,
            3 => Self::DeallocPd,
            4 => Self::RegMr,
            5 => Self::DeregMr,
            6 => Self::CreateCq,
            7 => Self::DestroyCq,
            8 => Self::CreateQp,
            9 => Self::ModifyQp,
            10 => Self::QueryQp,
            11 => Self::DestroyQp,
            12 => Self::QueryPort,
            13 => Self::ModifyPort,
            14 => Self::QueryGid,
            15 => Self::ModifyGid,
            16 => Self::QueryDcb,
            17 => Self::ModifyDcb,
            18 => Self::QueryCc,
            19 => Self::ModifyCc,
            20 => Self::QueryQpCc,
            21 => Self::ModifyQpCc,
            22 => Self::QueryCounters,
            23 => Self::CreateSrq,
            24 => Self::ModifySrq,
            25 => Self::QuerySrq,
            26 => Self::DestroySrq,
            27 => Self::AllocMw,
            28 => Self::DeallocMw,
            29 => Self::AllocMr,
            30 => Self::QueryEts,
            31 => Self::ModifyEts,
            64 => Self::SetIcm,
            _ => return None,
        })
    }
}

/// Command completion status, written back into the entry. A command that fails changes
/// nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum CmdStatus {
    /// Not yet executed (what the host writes).
    Pending = 0,
    Ok = 1,
    /// Unknown opcode.
    BadOpcode = 2,
    /// No such PD, MR, CQ or QP.
    BadHandle = 3,
    /// A parameter is out of range (depth, access flags, MTU, QP type, ...).
    BadParam = 4,
    /// The QP state transition or its attributes are illegal.
    IllegalTransition = 5,
    /// A table or ring is full.
    NoResources = 6,
    /// The object is still in use (a PD with MRs or QPs, a CQ with QPs).
    Busy = 7,
}

impl CmdStatus {
    /// From the wire value.
    pub const fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Pending,
            1 => Self::Ok,
            2 => Self::BadOpcode,
            3 => Self::BadHandle,
            4 => Self::BadParam,
            5 => Self::IllegalTransition,
            6 => Self::NoResources,
            7 => Self::Busy,
            _ => return None,
        })
    }
}

/// Bytes of a command's parameter area.
pub const CMD_PAYLOAD: usize = 112;

/// A command-queue entry (128 bytes). The host fills `opcode`, `token` and the payload
/// and sets `status` to `Pending`; the NIC executes it, writes results into `out` and
/// the payload, then `status`, and advances `CMDQ_CI`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct CmdEntry {
    pub opcode: U16,
    pub reserved: U16,
    /// Host cookie, returned unchanged.
    pub token: U32,
    /// [`CmdStatus`].
    pub status: U32,
    /// The handle a command creates (PD number, L_Key, CQN, QPN).
    pub out: U32,
    pub payload: [u8; CMD_PAYLOAD],
}

impl Default for CmdEntry {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

/// QUERY_DEVICE result (in the payload).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct DeviceAttr {
    pub max_qp: U32,
    pub max_cq: U32,
    pub max_mr: U32,
    pub max_pd: U32,
    /// log2 of the largest SQ / RQ / CQ ring.
    pub max_log_depth: u8,
    pub max_sge: u8,
    pub max_qp_rd_atom: u8,
    pub reserved: u8,
    pub max_msg_sz: U32,
    /// The port's MAC and its GID (IPv4-mapped or IPv6).
    pub mac: [u8; 6],
    pub reserved1: [u8; 2],
    pub gid: [u8; 16],
    /// Active path MTU (`enum ibv_mtu`).
    pub active_mtu: u8,
    pub reserved2: [u8; 3],
    /// Entries in the port's GID table (ABI 1.1; 0 from a 1.0 NIC means 1).
    pub gid_tbl_len: U16,
    pub reserved3: [u8; 2],
}

/// DEALLOC_PD / DEREG_MR / DESTROY_CQ / DESTROY_QP / QUERY_QP: the handle.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct HandleArg {
    pub handle: U32,
}

/// REG_MR parameters; `out` is the L_Key and the payload's `rkey` is written back.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct RegMrArg {
    pub pd: U32,
    /// `IBV_ACCESS_*`.
    pub access: U32,
    pub addr: U64,
    pub length: U64,
    /// Output.
    pub lkey: U32,
    /// Output.
    pub rkey: U32,
}

/// ALLOC_MW parameters (ABI 1.3); `out` and `rkey` are the window's R_Key.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct AllocMwArg {
    pub pd: U32,
    /// `enum ibv_mw_type`: 1 or 2.
    pub mw_type: u8,
    pub reserved: [u8; 3],
    /// Output.
    pub rkey: U32,
}

/// CREATE_CQ parameters; `out` is the CQN.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct CreateCqArg {
    pub ring: U64,
    pub log_depth: u8,
    pub reserved: [u8; 7],
}

/// CREATE_QP parameters; `out` is the QPN.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct CreateQpArg {
    pub pd: U32,
    pub send_cq: U32,
    pub recv_cq: U32,
    /// `enum ibv_qp_type`.
    pub qp_type: u8,
    pub sq_log_depth: u8,
    pub rq_log_depth: u8,
    /// Every send WR completes, signaled or not (`sq_sig_all`).
    pub sq_sig_all: u8,
    pub sq_ring: U64,
    pub rq_ring: U64,
    /// ABI 1.2: largest inline send asked for (`ibv_qp_cap.max_inline_data`); the NIC
    /// writes back what it granted (0, or [`MAX_INLINE_DATA`] for any request up to
    /// it, as rxe rounds up to the WQE's room). More is refused (bad parameter).
    pub max_inline_data: U32,
    /// ABI 1.2: the SRQ its receives come from (`ibv_qp_init_attr.srq`), 0 for none;
    /// the QP's own receive ring is then unused.
    pub srqn: U32,
    /// Host address (8-byte aligned) of the QP's doorbell record: the send queue's
    /// producer index (u32) then the receive queue's; 0 = none (the per-QP doorbell
    /// registers instead; not allowed once an ICM is set).
    pub db_record: U64,
}

/// Bytes of one QP's entry in the ICM: the engine's context
/// (`roce_core::engine::QP_CTX_LEN`), then the NIC's ring state for the QP.
pub const ICM_ENTRY_LEN: usize = 1024;

/// Most QPs an ICM may hold.
pub const MAX_ICM_QPS: u32 = 65_536;

/// SET_ICM parameters: `entries` QP contexts of [`ICM_ENTRY_LEN`] bytes at `addr`
/// (4 KiB aligned), zeroed by the host. Only before the first QP is created; the NIC
/// then numbers QPs `QPN_BASE + i` for `i < entries` and reports `max_qp` = `entries`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct IcmArg {
    pub addr: U64,
    pub entries: U32,
    pub reserved: U32,
}

/// CREATE_SRQ parameters (ABI 1.2); `out` is the SRQN (from 1). The ring holds
/// 80-byte `RecvWqe`s; its doorbell is `reg::srq_db(srqn)`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct CreateSrqArg {
    pub pd: U32,
    /// log2 of the ring depth: `max_wr` = 2^log_depth.
    pub log_depth: u8,
    pub reserved: [u8; 3],
    /// The limit armed at creation (`ibv_srq_attr.srq_limit`, 0: none).
    pub srq_limit: U32,
    pub reserved1: [u8; 4],
    pub ring: U64,
}

/// `ibv_srq_attr_mask`.
pub mod srq_attr {
    /// `IBV_SRQ_MAX_WR`: resizing, which this NIC does not do (bad parameter).
    pub const MAX_WR: u32 = 1;
    /// `IBV_SRQ_LIMIT`: arm the limit event.
    pub const LIMIT: u32 = 2;
}

/// MODIFY_SRQ parameters and QUERY_SRQ results (ABI 1.2): `attr_mask` names what
/// MODIFY changes (`srq_attr`); QUERY fills every field.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct SrqAttrArg {
    pub srqn: U32,
    pub attr_mask: U32,
    pub max_wr: U32,
    pub srq_limit: U32,
}

/// MODIFY_QP parameters and QUERY_QP results: `attr_mask` (`enum ibv_qp_attr_mask`)
/// says which fields are given.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct QpAttrArg {
    pub qpn: U32,
    pub attr_mask: U32,
    pub qp_state: u8,
    pub cur_qp_state: u8,
    pub path_mtu: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub pkey_index: U16,
    pub access_flags: U32,
    pub qkey: U32,
    pub rq_psn: U32,
    pub sq_psn: U32,
    pub dest_qp_num: U32,
    pub av: WireAv,
    /// Selective repeat (`SrAttr`, mask bit `SELECTIVE_REPEAT`): bit 0 = enabled.
    pub sr_flags: u8,
    /// IRN's RTO_low as an ACK-timeout code (0 = none).
    pub sr_rto_low: u8,
    /// Most PSNs in flight (0 = the port's window).
    pub sr_max_inflight: U16,
}

/// Reads a `T` from the start of a command payload.
pub fn payload<T: FromBytes>(entry: &CmdEntry) -> T {
    // Every payload type is at most CMD_PAYLOAD bytes (checked by `layout_sizes`), so
    // this cannot fail; a zeroed value is the harmless fallback.
    T::read_from_prefix(&entry.payload)
        .map(|(v, _)| v)
        .unwrap_or_else(|_| T::new_zeroed())
}

/// Writes a `T` at the start of a command payload.
pub fn set_payload<T: IntoBytes + Immutable>(entry: &mut CmdEntry, v: &T) {
    let bytes = v.as_bytes();
    if let Some(dst) = entry.payload.get_mut(..bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    #[test]
    fn layout_sizes() {
        assert_eq!(size_of::<WqeSge>(), 16);
        assert_eq!(size_of::<WireAv>(), 32);
        assert_eq!(size_of::<SendWqe>(), 160);
        assert_eq!(size_of::<RecvWqe>(), 80);
        assert_eq!(size_of::<Cqe>(), 32);
        assert_eq!(size_of::<CmdEntry>(), 128);
        assert_eq!(size_of::<DeviceAttr>(), 56);
        assert_eq!(core::mem::offset_of!(DeviceAttr, gid_tbl_len), 52);
        for n in [
            size_of::<DeviceAttr>(),
            size_of::<PortArg>(),
            size_of::<GidArg>(),
            size_of::<DcbArg>(),
            size_of::<EtsArg>(),
            size_of::<CcArg>(),
            size_of::<QpCcArg>(),
            size_of::<QueryCountersArg>(),
            size_of::<RegMrArg>(),
            size_of::<AllocMwArg>(),
            size_of::<CreateCqArg>(),
            size_of::<CreateQpArg>(),
            size_of::<IcmArg>(),
            size_of::<QpAttrArg>(),
            size_of::<CreateSrqArg>(),
            size_of::<SrqAttrArg>(),
        ] {
            assert!(n <= CMD_PAYLOAD, "{n}");
        }
    }

    #[test]
    fn little_endian_on_every_host() {
        let mut cqe = Cqe::new_zeroed();
        cqe.wr_id = U64::new(0x0102_0304_0506_0708);
        cqe.status = 5;
        let b = cqe.as_bytes();
        assert_eq!(b[..8], [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(b[28], 5);
    }

    #[test]
    fn owner_bit_flips_each_pass() {
        // Depth 4: first pass owner 1, second pass 0; a zeroed ring reads empty.
        assert_eq!(cqe_owner(0, 2), 1);
        assert_eq!(cqe_owner(4, 2), 0);
        assert!(!cqe_valid(0, 0, 2));
        assert!(cqe_valid(1, 3, 2));
        assert!(cqe_valid(0, 5, 2));
        assert!(!cqe_valid(1, 5, 2));
    }

    #[test]
    fn doorbells_do_not_overlap() {
        assert_eq!(reg::sq_db(0), 0x1000);
        assert_eq!(reg::rq_db(0), 0x1004);
        assert!(reg::rq_db(reg::MAX_QP_DOORBELLS - 1) < reg::CQ_DB);
        assert!(reg::cq_db(reg::MAX_CQ_DOORBELLS - 1) < reg::WINDOW);
        assert!(reg::srq_db(reg::MAX_SRQ_DOORBELLS - 1) < reg::SQ_DB);
        let mut v = Version(0);
        v.set_major(ABI_MAJOR);
        v.set_minor(ABI_MINOR);
        assert_eq!(v.0, 0x0001_0006);
    }

    #[test]
    fn command_payload_round_trip() {
        let mut e = CmdEntry::default();
        let arg = RegMrArg {
            pd: U32::new(3),
            access: U32::new(7),
            addr: U64::new(0x1000),
            length: U64::new(64),
            ..Default::default()
        };
        set_payload(&mut e, &arg);
        assert_eq!(payload::<RegMrArg>(&e), arg);
        assert_eq!(CmdOp::from_u16(9), Some(CmdOp::ModifyQp));
        assert_eq!(CmdStatus::from_u32(5), Some(CmdStatus::IllegalTransition));
    }

    #[test]
    fn bind_mw_and_reg_mr_wqes_round_trip_at_the_documented_offsets() {
        use roce_core::memory::{AccessFlags, FastReg, MwBind};
        use roce_core::num::{Lkey, Rkey};
        use roce_core::transport::{SendFlags, SendWr, WrOp};
        let bind = MwBind {
            mw: Rkey(0x8000_0107),
            rkey: Rkey(0x8000_0108),
            mr: Lkey(0x0000_0203),
            addr: 0x1122_3344_5566_7788,
            length: 0x1000,
            access: AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
        };
        let wr = SendWr::new(9, WrOp::BindMw(bind)).flags(SendFlags::SIGNALED);
        let w = SendWqe::from_wr(&wr);
        let b = w.as_bytes();
        assert_eq!(b[8], 8, "IBV_WR_BIND_MW");
        assert_eq!(
            b[12..16],
            0x8000_0107u32.to_le_bytes(),
            "imm_or_inv: the MW"
        );
        assert_eq!(
            b[16..24],
            0x1122_3344_5566_7788u64.to_le_bytes(),
            "remote_addr"
        );
        assert_eq!(b[24..28], 0x8000_0108u32.to_le_bytes(), "rkey: the new key");
        assert_eq!(b[32..40], 0x1000u64.to_le_bytes(), "compare: the length");
        assert_eq!(b[40..48], 0x203u64.to_le_bytes(), "swap_add: the MR");
        assert_eq!(b[48..52], 6u32.to_le_bytes(), "remote_qkey: the access");
        assert_eq!(w.to_wr(false, 0), Ok(wr));
        let reg = FastReg {
            mr: Lkey(0x0000_0305),
            key: 0x0000_0306,
            addr: 0x4000,
            length: 512,
            access: AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
        };
        let wr = SendWr::new(10, WrOp::RegMr(reg));
        let w = SendWqe::from_wr(&wr);
        assert_eq!(w.opcode, 0x20, "IB_WR_REG_MR");
        assert_eq!(w.to_wr(false, 0), Ok(wr));
        let mut bad = w;
        bad.remote_qkey = U32::new(0x40);
        assert!(bad.to_wr(false, 0).is_err(), "unknown access bit");
    }

    #[test]
    fn inline_payload_lives_in_the_sge_area() {
        use roce_core::memory::WQE_LKEY;
        use roce_core::transport::{SendFlags, SendWr, WrOp};
        let wr = SendWr::new(5, WrOp::Send).flags(SendFlags::SIGNALED);
        let mut w = SendWqe::from_wr(&wr);
        w.set_inline(b"hello").unwrap();
        assert_eq!(SEND_WQE_INLINE, 96);
        assert_eq!(&w.as_bytes()[96..101], b"hello");
        assert_eq!((w.send_flags, w.num_sge, w.inline_len.get()), (2 | 8, 0, 5));
        // Decoded at its address, the payload is one SGE there under the firmware's key.
        let d = w.to_wr(false, 0x1000).unwrap();
        assert_eq!(
            d.sg_list.as_slice(),
            [roce_core::transport::Sge {
                addr: 0x1000 + 96,
                length: 5,
                lkey: WQE_LKEY
            }]
        );
        assert!(w.set_inline(&[0; 65]).is_err());
        let mut bad = w;
        bad.inline_len = U16::new(65);
        assert!(bad.to_wr(false, 0).is_err());
        // A host cannot name the firmware's key in an SGE of its own.
        let forged = SendWr::new(6, WrOp::Send).sge(0, 8, WQE_LKEY);
        assert!(SendWqe::from_wr(&forged).to_wr(false, 0).is_err());
    }

    #[test]
    fn selective_repeat_attribute_crosses_the_abi() {
        use roce_core::transport::{AttrMask, QpAttr, QpState, SrAttr};
        let mut a = QpAttr::to_state(QpState::Rtr);
        a.selective_repeat = Some(SrAttr {
            enabled: true,
            max_inflight: 300,
            rto_low: roce_core::transport::AckTimeout::new(4).unwrap(),
        });
        let arg = QpAttrArg::from_attr(Qpn::new(17), &a);
        assert_eq!(
            arg.attr_mask.get(),
            (AttrMask::STATE | AttrMask::SELECTIVE_REPEAT).bits()
        );
        assert_eq!(
            (arg.sr_flags, arg.sr_rto_low, arg.sr_max_inflight.get()),
            (1, 4, 300)
        );
        assert_eq!(arg.to_attr(), Ok(a));
        let mut bad = arg;
        bad.sr_flags = 2;
        assert!(bad.to_attr().is_err());
    }
}

// ---------------------------------------------------------------------------------------
// Conversions between the ABI's bytes and the engine's verbs types. Both sides use these:
// the driver to encode, the firmware to decode, so an encoding cannot drift.

use roce_core::memory::{AccessFlags, FastReg, MwBind, WQE_LKEY};
use roce_core::num::{Lkey, Psn, Qkey, Qpn, Rkey};
use roce_core::transport::{
    AckTimeout, AddressVector, Mtu, QpAttr, QpState, RecvWr, RetryCount, RnrTimer, SendFlags,
    SendWr, Sge, SrAttr, UdDest, WcFlags, WcOpcode, WcStatus, WorkCompletion, WrOp, WrOpcode,
};

/// Why a WQE or command from the host cannot be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

const NO_VLAN: u16 = 0xFFFF;

impl WireAv {
    /// Encodes an address vector.
    pub fn from_av(av: &AddressVector) -> Self {
        Self {
            dgid: av.dgid,
            dmac: av.dmac,
            vlan_id: U16::new(av.vlan_id.unwrap_or(NO_VLAN)),
            flow_label: U32::new(av.flow_label),
            hop_limit: av.hop_limit,
            traffic_class: av.traffic_class,
            sl: av.sl,
            sgid_index: av.sgid_index,
        }
    }

    /// Decodes an address vector.
    pub fn to_av(&self) -> AddressVector {
        let vlan = self.vlan_id.get();
        AddressVector {
            dmac: self.dmac,
            dgid: self.dgid,
            sgid_index: self.sgid_index,
            hop_limit: self.hop_limit,
            traffic_class: self.traffic_class,
            flow_label: self.flow_label.get() & 0xF_FFFF,
            sl: self.sl,
            vlan_id: (vlan != NO_VLAN).then_some(vlan & 0x0FFF),
        }
    }
}

fn encode_sges(sgl: &[Sge]) -> [WqeSge; WQE_SGES] {
    let mut out = [WqeSge::default(); WQE_SGES];
    for (o, s) in out.iter_mut().zip(sgl) {
        *o = WqeSge {
            addr: U64::new(s.addr),
            length: U32::new(s.length),
            lkey: U32::new(s.lkey.0),
        };
    }
    out
}

fn decode_sges(
    sge: &[WqeSge; WQE_SGES],
    n: u8,
    push: &mut impl FnMut(Sge) -> Result<(), Sge>,
) -> Result<(), DecodeError> {
    let list = sge
        .get(..usize::from(n))
        .ok_or(DecodeError("num_sge above the SGE limit"))?;
    for s in list {
        if s.lkey.get() == WQE_LKEY.0 {
            return Err(DecodeError("the firmware's reserved L_Key in a host SGE"));
        }
        let sge = Sge {
            addr: s.addr.get(),
            length: s.length.get(),
            lkey: Lkey(s.lkey.get()),
        };
        push(sge).map_err(|_| DecodeError("too many SGEs"))?;
    }
    Ok(())
}

impl SendWqe {
    /// Encodes a send work request.
    pub fn from_wr(wr: &SendWr) -> Self {
        let mut w = Self {
            wr_id: U64::new(wr.wr_id),
            opcode: wr.op.opcode() as u8,
            send_flags: wr.send_flags.bits() as u8,
            num_sge: wr.sg_list.len() as u8,
            sge: encode_sges(&wr.sg_list),
            ..Self::default()
        };
        match wr.op {
            WrOp::Send => {}
            WrOp::SendWithImm { imm } => w.imm_or_inv = U32::new(imm),
            WrOp::SendWithInv { rkey } | WrOp::LocalInv { rkey } => w.imm_or_inv = U32::new(rkey.0),
            WrOp::RdmaWrite { remote_addr, rkey } | WrOp::RdmaRead { remote_addr, rkey } => {
                w.remote_addr = U64::new(remote_addr);
                w.rkey = U32::new(rkey.0);
            }
            WrOp::RdmaWriteWithImm {
                remote_addr,
                rkey,
                imm,
            } => {
                w.remote_addr = U64::new(remote_addr);
                w.rkey = U32::new(rkey.0);
                w.imm_or_inv = U32::new(imm);
            }
            WrOp::AtomicCmpAndSwp {
                remote_addr,
                rkey,
                compare,
                swap,
            } => {
                w.remote_addr = U64::new(remote_addr);
                w.rkey = U32::new(rkey.0);
                w.compare = U64::new(compare);
                w.swap_add = U64::new(swap);
            }
            WrOp::AtomicFetchAndAdd {
                remote_addr,
                rkey,
                add,
            } => {
                w.remote_addr = U64::new(remote_addr);
                w.rkey = U32::new(rkey.0);
                w.swap_add = U64::new(add);
            }
            WrOp::BindMw(b) => {
                w.imm_or_inv = U32::new(b.mw.0);
                w.rkey = U32::new(b.rkey.0);
                w.remote_addr = U64::new(b.addr);
                w.compare = U64::new(b.length);
                w.swap_add = U64::new(u64::from(b.mr.0));
                w.remote_qkey = U32::new(b.access.bits());
            }
            WrOp::RegMr(r) => {
                w.imm_or_inv = U32::new(r.mr.0);
                w.rkey = U32::new(r.key);
                w.remote_addr = U64::new(r.addr);
                w.compare = U64::new(r.length);
                w.remote_qkey = U32::new(r.access.bits());
            }
        }
        if let Some(ud) = &wr.ud {
            w.remote_qpn = U32::new(ud.remote_qpn.value());
            w.remote_qkey = U32::new(ud.remote_qkey.0);
            w.av = WireAv::from_av(&ud.av);
        }
        w
    }

    /// Makes this WQE carry `data` inline (`IBV_SEND_INLINE`): the bytes go into the SGE
    /// area, which the NIC reads from the send queue when it sends them.
    pub fn set_inline(&mut self, data: &[u8]) -> Result<(), DecodeError> {
        let (dst, rest) = self
            .sge
            .as_mut_bytes()
            .split_at_mut_checked(data.len())
            .ok_or(DecodeError("inline data longer than MAX_INLINE_DATA"))?;
        dst.copy_from_slice(data);
        rest.fill(0);
        self.num_sge = 0;
        self.inline_len = U16::new(data.len() as u16);
        self.send_flags |= SendFlags::INLINE.bits() as u8;
        Ok(())
    }

    /// Decodes a send work request; `ud` says whether the QP is UD (then the
    /// destination fields are read), `at` is the WQE's own address in host memory: an
    /// inline payload becomes one SGE there under the firmware's [`WQE_LKEY`].
    #[inline(always)]
    pub fn to_wr(&self, ud: bool, at: u64) -> Result<SendWr, DecodeError> {
        let mut wr = SendWr::new(0, WrOp::Send);
        self.decode_wr(ud, at, &mut wr)?;
        Ok(wr)
    }

    /// [`to_wr`](Self::to_wr) into `wr`, every field of it written (on success; on an
    /// error `wr` is left half written). For a decoder with a place of its own (the
    /// firmware's WQE fetch): the ~160-byte `SendWr` is then not moved out of the
    /// `Result` `to_wr` returns (a 156-byte `memcpy` per WQE on the soft core).
    #[inline(always)]
    pub fn decode_wr(&self, ud: bool, at: u64, wr: &mut SendWr) -> Result<(), DecodeError> {
        let remote_addr = self.remote_addr.get();
        let rkey = Rkey(self.rkey.get());
        let imm = self.imm_or_inv.get();
        let op = match self.opcode {
            x if x == WrOpcode::Send as u8 => WrOp::Send,
            x if x == WrOpcode::SendWithImm as u8 => WrOp::SendWithImm { imm },
            x if x == WrOpcode::SendWithInv as u8 => WrOp::SendWithInv { rkey: Rkey(imm) },
            x if x == WrOpcode::LocalInv as u8 => WrOp::LocalInv { rkey: Rkey(imm) },
            x if x == WrOpcode::RdmaWrite as u8 => WrOp::RdmaWrite { remote_addr, rkey },
            x if x == WrOpcode::RdmaWriteWithImm as u8 => WrOp::RdmaWriteWithImm {
                remote_addr,
                rkey,
                imm,
            },
            x if x == WrOpcode::RdmaRead as u8 => WrOp::RdmaRead { remote_addr, rkey },
            x if x == WrOpcode::AtomicCmpAndSwp as u8 => WrOp::AtomicCmpAndSwp {
                remote_addr,
                rkey,
                compare: self.compare.get(),
                swap: self.swap_add.get(),
            },
            x if x == WrOpcode::AtomicFetchAndAdd as u8 => WrOp::AtomicFetchAndAdd {
                remote_addr,
                rkey,
                add: self.swap_add.get(),
            },
            x if x == WrOpcode::BindMw as u8 => WrOp::BindMw(MwBind {
                mw: Rkey(imm),
                rkey,
                mr: Lkey(
                    u32::try_from(self.swap_add.get())
                        .map_err(|_| DecodeError("BIND_MW: L_Key above 32 bits"))?,
                ),
                addr: remote_addr,
                length: self.compare.get(),
                access: AccessFlags::from_bits(self.remote_qkey.get())
                    .ok_or(DecodeError("BIND_MW: unknown access flags"))?,
            }),
            x if x == WrOpcode::RegMr as u8 => WrOp::RegMr(FastReg {
                mr: Lkey(imm),
                key: rkey.0,
                addr: remote_addr,
                length: self.compare.get(),
                access: AccessFlags::from_bits(self.remote_qkey.get())
                    .ok_or(DecodeError("REG_MR: unknown access flags"))?,
            }),
            _ => return Err(DecodeError("unknown send opcode")),
        };
        let flags = SendFlags::from_bits_truncate(u32::from(self.send_flags));
        // Every field named: a field added to `SendWr` cannot be left unwritten.
        let SendWr {
            wr_id,
            sg_list,
            op: wr_op,
            send_flags,
            ud: dest,
        } = wr;
        *wr_id = self.wr_id.get();
        sg_list.clear();
        *wr_op = op;
        *send_flags = flags;
        *dest = None;
        if flags.contains(SendFlags::INLINE) {
            let len = self.inline_len.get();
            if self.num_sge != 0 || u32::from(len) > MAX_INLINE_DATA {
                return Err(DecodeError("inline WQE with SGEs or too long"));
            }
            if len != 0 {
                let sge = Sge {
                    addr: at.wrapping_add(SEND_WQE_INLINE as u64),
                    length: u32::from(len),
                    lkey: WQE_LKEY,
                };
                wr.try_sge(sge).map_err(|_| DecodeError("too many SGEs"))?;
            }
        } else {
            decode_sges(&self.sge, self.num_sge, &mut |s| wr.try_sge(s))?;
        }
        if ud {
            wr.ud = Some(UdDest {
                av: self.av.to_av(),
                remote_qpn: Qpn::new(self.remote_qpn.get()),
                remote_qkey: Qkey(self.remote_qkey.get()),
            });
        }
        Ok(())
    }
}

impl RecvWqe {
    /// Encodes a receive work request.
    pub fn from_wr(wr: &RecvWr) -> Self {
        Self {
            wr_id: U64::new(wr.wr_id),
            num_sge: wr.sg_list.len() as u8,
            reserved: [0; 7],
            sge: encode_sges(&wr.sg_list),
        }
    }

    /// Decodes a receive work request.
    pub fn to_wr(&self) -> Result<RecvWr, DecodeError> {
        let mut wr = RecvWr::new(self.wr_id.get());
        decode_sges(&self.sge, self.num_sge, &mut |s| wr.sg_list.push(s))?;
        Ok(wr)
    }
}

impl Cqe {
    /// Encodes a completion for producer index `pi` of a ring of depth `2^log_depth`.
    pub fn from_wc(wc: &WorkCompletion, pi: u32, log_depth: u8) -> Self {
        Self {
            wr_id: U64::new(wc.wr_id),
            byte_len: U32::new(wc.byte_len),
            imm_data: U32::new(wc.imm_data),
            qp_num: U32::new(wc.qp_num.value()),
            src_qp: U32::new(wc.src_qp.value()),
            invalidated_rkey: U32::new(wc.invalidated_rkey.0),
            status: wc.status as u8,
            opcode: wc.opcode as u8,
            wc_flags: wc.wc_flags.bits() as u8,
            owner: cqe_owner(pi, log_depth) | (u8::from(wc.solicited) << 1),
        }
    }

    /// Decodes a completion.
    pub fn to_wc(&self) -> Result<WorkCompletion, DecodeError> {
        let status = WcStatus::from_u8(self.status).ok_or(DecodeError("unknown ibv_wc_status"))?;
        let opcode = WcOpcode::from_u8(self.opcode).ok_or(DecodeError("unknown ibv_wc_opcode"))?;
        let mut wc = WorkCompletion::new(
            self.wr_id.get(),
            Qpn::new(self.qp_num.get()),
            opcode,
            status,
        );
        wc.byte_len = self.byte_len.get();
        wc.imm_data = self.imm_data.get();
        wc.src_qp = Qpn::new(self.src_qp.get());
        wc.invalidated_rkey = Rkey(self.invalidated_rkey.get());
        wc.wc_flags = WcFlags::from_bits_truncate(u32::from(self.wc_flags));
        wc.solicited = self.owner & 2 != 0;
        Ok(wc)
    }
}

impl QpAttrArg {
    /// Encodes the attributes `attr` gives (its mask says which).
    pub fn from_attr(qpn: Qpn, attr: &QpAttr) -> Self {
        Self {
            qpn: U32::new(qpn.value()),
            attr_mask: U32::new(attr.mask().bits()),
            qp_state: attr.qp_state.map_or(0, |s| s as u8),
            cur_qp_state: attr.cur_qp_state.map_or(0, |s| s as u8),
            path_mtu: attr.path_mtu.map_or(0, |m| m as u8),
            timeout: attr.timeout.map_or(0, AckTimeout::code),
            retry_cnt: attr.retry_cnt.map_or(0, RetryCount::get),
            rnr_retry: attr.rnr_retry.map_or(0, RetryCount::get),
            max_rd_atomic: attr.max_rd_atomic.unwrap_or(0),
            max_dest_rd_atomic: attr.max_dest_rd_atomic.unwrap_or(0),
            min_rnr_timer: attr.min_rnr_timer.map_or(0, RnrTimer::code),
            port_num: attr.port_num.unwrap_or(0),
            pkey_index: U16::new(attr.pkey_index.unwrap_or(0)),
            access_flags: U32::new(attr.qp_access_flags.map_or(0, AccessFlags::bits)),
            qkey: U32::new(attr.qkey.map_or(0, |q| q.0)),
            rq_psn: U32::new(attr.rq_psn.map_or(0, Psn::value)),
            sq_psn: U32::new(attr.sq_psn.map_or(0, Psn::value)),
            dest_qp_num: U32::new(attr.dest_qp_num.map_or(0, Qpn::value)),
            av: attr
                .ah_attr
                .as_ref()
                .map(WireAv::from_av)
                .unwrap_or_default(),
            sr_flags: attr.selective_repeat.map_or(0, |s| u8::from(s.enabled)),
            sr_rto_low: attr.selective_repeat.map_or(0, |s| s.rto_low.code()),
            sr_max_inflight: U16::new(attr.selective_repeat.map_or(0, |s| s.max_inflight)),
        }
    }

    /// Decodes the attributes the mask names; a value out of range is an error.
    pub fn to_attr(&self) -> Result<QpAttr, DecodeError> {
        use roce_core::transport::AttrMask as M;
        let mask = self.attr_mask.get();
        let has = |m: M| mask & m.bits() != 0;
        let state = |v: u8| QpState::from_u8(v).ok_or(DecodeError("bad QP state"));
        let retry = |v: u8| RetryCount::new(v).ok_or(DecodeError("retry count above 7"));
        let mut a = QpAttr::default();
        if has(M::STATE) {
            a.qp_state = Some(state(self.qp_state)?);
        }
        if has(M::CUR_STATE) {
            a.cur_qp_state = Some(state(self.cur_qp_state)?);
        }
        if has(M::EN_SQD_ASYNC_NOTIFY) {
            a.en_sqd_async_notify = Some(false);
        }
        if has(M::ACCESS_FLAGS) {
            a.qp_access_flags = Some(
                AccessFlags::from_bits(self.access_flags.get())
                    .ok_or(DecodeError("unknown access flags"))?,
            );
        }
        if has(M::PKEY_INDEX) {
            a.pkey_index = Some(self.pkey_index.get());
        }
        if has(M::PORT) {
            a.port_num = Some(self.port_num);
        }
        if has(M::QKEY) {
            a.qkey = Some(Qkey(self.qkey.get()));
        }
        if has(M::AV) {
            a.ah_attr = Some(self.av.to_av());
        }
        if has(M::PATH_MTU) {
            a.path_mtu = Some(Mtu::from_u8(self.path_mtu).ok_or(DecodeError("bad path MTU"))?);
        }
        if has(M::TIMEOUT) {
            a.timeout = Some(AckTimeout::new(self.timeout).ok_or(DecodeError("timeout above 31"))?);
        }
        if has(M::RETRY_CNT) {
            a.retry_cnt = Some(retry(self.retry_cnt)?);
        }
        if has(M::RNR_RETRY) {
            a.rnr_retry = Some(retry(self.rnr_retry)?);
        }
        if has(M::RQ_PSN) {
            a.rq_psn = Some(Psn::new(self.rq_psn.get()));
        }
        if has(M::MAX_QP_RD_ATOMIC) {
            a.max_rd_atomic = Some(self.max_rd_atomic);
        }
        if has(M::MIN_RNR_TIMER) {
            a.min_rnr_timer =
                Some(RnrTimer::new(self.min_rnr_timer).ok_or(DecodeError("RNR timer above 31"))?);
        }
        if has(M::SQ_PSN) {
            a.sq_psn = Some(Psn::new(self.sq_psn.get()));
        }
        if has(M::MAX_DEST_RD_ATOMIC) {
            a.max_dest_rd_atomic = Some(self.max_dest_rd_atomic);
        }
        if has(M::DEST_QPN) {
            a.dest_qp_num = Some(Qpn::new(self.dest_qp_num.get()));
        }
        if has(M::SELECTIVE_REPEAT) {
            if self.sr_flags & !1 != 0 {
                return Err(DecodeError("unknown selective-repeat flags"));
            }
            a.selective_repeat = Some(SrAttr {
                enabled: self.sr_flags & 1 != 0,
                max_inflight: self.sr_max_inflight.get(),
                rto_low: AckTimeout::new(self.sr_rto_low).ok_or(DecodeError("RTO_low above 31"))?,
            });
        }
        if a.mask().bits() != mask {
            return Err(DecodeError(
                "attribute mask names attributes this NIC does not support",
            ));
        }
        Ok(a)
    }
}
