//! The host/NIC ABI: the one source of truth for what the host driver and the firmware
//! exchange (`docs/abi.md` explains it in prose).
//!
//! * A register file (MMIO, 32-bit little-endian registers) with the device identity, the
//!   command-queue ring, event status, a clock, and one doorbell per queue.
//! * Rings in host memory, written and read by DMA: the command queue, and per QP a send
//!   queue and a receive queue, per CQ a completion queue. Every entry is little-endian and
//!   described below as a `zerocopy` struct, so both sides read and write the same bytes.
//! * Doorbells carry free-running 32-bit producer (or, for CQs, consumer) indices; the
//!   slot of index `i` in a ring of depth `2^n` is `i mod 2^n`.

use bitfield::bitfield;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// `DEVICE_ID` register value: "ROCE" in ASCII.
pub const DEVICE_ID: u32 = 0x524F_4345;
/// ABI version this crate speaks; a host refuses a device with another major.
pub const ABI_MAJOR: u16 = 1;
/// Minor version: additions that old hosts can ignore.
pub const ABI_MINOR: u16 = 0;

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
    /// Free-running NIC clock in nanoseconds, low word (reading it latches the high word).
    pub const CLOCK_LO: u32 = 0x040;
    /// High word of the clock, as latched by the last read of `CLOCK_LO`.
    pub const CLOCK_HI: u32 = 0x044;
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
}

bitfield! {
    /// The `VERSION` register.
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub struct Version(u32);
    impl Debug;
    pub u16, major, set_major: 31, 16;
    pub u16, minor, set_minor: 15, 0;
}

bitfield! {
    /// The `STATUS` register.
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub struct DeviceStatus(u32);
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
    pub struct EventStatus(u32);
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
    /// `IBV_SEND_FENCE` 1, `SIGNALED` 2, `SOLICITED` 4.
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
    pub reserved1: [u8; 12],
    /// UD: destination address (at offset 64).
    pub av: WireAv,
    pub sge: [WqeSge; WQE_SGES],
}

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
        for n in [
            size_of::<DeviceAttr>(),
            size_of::<RegMrArg>(),
            size_of::<CreateCqArg>(),
            size_of::<CreateQpArg>(),
            size_of::<QpAttrArg>(),
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
        let mut v = Version(0);
        v.set_major(ABI_MAJOR);
        v.set_minor(ABI_MINOR);
        assert_eq!(v.0, 0x0001_0000);
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
}
