//! Verbs-level types, numbered as libibverbs numbers them (`<infiniband/verbs.h>`), so
//! an RDMA engineer recognises every value: QP types and states, path MTU, work requests,
//! work completions and their status codes, and the encoded timer units.

use core::fmt;
use core::time::Duration;

use crate::memory::{FastReg, MwBind};
use crate::num::{Lkey, Qkey, Qpn, Rkey};

/// Maximum scatter/gather elements in one work request (a firmware-wide limit).
pub const MAX_SGE: usize = 4;

/// Largest inline payload a QP can be created with (`max_inline_data`): the bytes of a
/// send WQE's scatter/gather area, where inline data travels (`MAX_SGE` elements of 16
/// bytes).
pub const MAX_INLINE_DATA: u32 = 16 * MAX_SGE as u32;

/// Largest message the engine accepts: 2^31 bytes, the RETH DMA length limit that rxe
/// enforces (roce-facts §4.1, §9).
pub const MAX_MSG_SIZE: u64 = 1 << 31;

// ---------------------------------------------------------------------------------------
// QP type and state

/// Transport service type (`enum ibv_qp_type`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[repr(u8)]
pub enum QpType {
    /// Reliable connected (`IBV_QPT_RC` = 2).
    Rc = 2,
    /// Unreliable connected (`IBV_QPT_UC` = 3).
    Uc = 3,
    /// Unreliable datagram (`IBV_QPT_UD` = 4).
    Ud = 4,
}

impl QpType {
    /// From the libibverbs number.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            2 => Some(Self::Rc),
            3 => Some(Self::Uc),
            4 => Some(Self::Ud),
            _ => None,
        }
    }
}

/// QP state (`enum ibv_qp_state`, roce-facts §6.5).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[repr(u8)]
pub enum QpState {
    /// `IBV_QPS_RESET` = 0: nothing is processed.
    Reset = 0,
    /// `IBV_QPS_INIT` = 1: receives may be posted.
    Init = 1,
    /// `IBV_QPS_RTR` = 2: ready to receive.
    Rtr = 2,
    /// `IBV_QPS_RTS` = 3: ready to send.
    Rts = 3,
    /// `IBV_QPS_SQD` = 4: send queue drained; new sends wait.
    Sqd = 4,
    /// `IBV_QPS_SQE` = 5: send queue error (UC/UD only).
    Sqe = 5,
    /// `IBV_QPS_ERR` = 6: every WQE is flushed with `WR_FLUSH_ERR`.
    Err = 6,
}

impl QpState {
    /// From the libibverbs number.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Reset),
            1 => Some(Self::Init),
            2 => Some(Self::Rtr),
            3 => Some(Self::Rts),
            4 => Some(Self::Sqd),
            5 => Some(Self::Sqe),
            6 => Some(Self::Err),
            _ => None,
        }
    }

    /// Receive WRs may be posted (INIT and later, not RESET; in ERR they are flushed).
    pub const fn can_post_recv(self) -> bool {
        !matches!(self, Self::Reset)
    }

    /// Send WRs may be posted (RTS, SQD; in ERR they are accepted and flushed).
    pub const fn can_post_send(self) -> bool {
        matches!(self, Self::Rts | Self::Sqd | Self::Err)
    }

    /// Incoming packets are processed (ipath `state_ops`: RTR, RTS, SQD, SQE).
    pub const fn processes_receive(self) -> bool {
        matches!(self, Self::Rtr | Self::Rts | Self::Sqd | Self::Sqe)
    }
}

impl fmt::Display for QpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Reset => "RESET",
            Self::Init => "INIT",
            Self::Rtr => "RTR",
            Self::Rts => "RTS",
            Self::Sqd => "SQD",
            Self::Sqe => "SQE",
            Self::Err => "ERR",
        })
    }
}

// ---------------------------------------------------------------------------------------
// Path MTU

/// Path MTU (`enum ibv_mtu`, roce-facts §9): the maximum payload per packet.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash)]
#[repr(u8)]
pub enum Mtu {
    /// `IBV_MTU_256` = 1.
    Mtu256 = 1,
    /// `IBV_MTU_512` = 2.
    Mtu512 = 2,
    /// `IBV_MTU_1024` = 3.
    Mtu1024 = 3,
    /// `IBV_MTU_2048` = 4.
    Mtu2048 = 4,
    /// `IBV_MTU_4096` = 5.
    Mtu4096 = 5,
}

impl Mtu {
    /// From the libibverbs enum value (1..=5).
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::Mtu256),
            2 => Some(Self::Mtu512),
            3 => Some(Self::Mtu1024),
            4 => Some(Self::Mtu2048),
            5 => Some(Self::Mtu4096),
            _ => None,
        }
    }

    /// The largest IB MTU whose payload fits a byte count (None below 256).
    pub const fn from_bytes_floor(bytes: u32) -> Option<Self> {
        if bytes >= 4096 {
            Some(Self::Mtu4096)
        } else if bytes >= 2048 {
            Some(Self::Mtu2048)
        } else if bytes >= 1024 {
            Some(Self::Mtu1024)
        } else if bytes >= 512 {
            Some(Self::Mtu512)
        } else if bytes >= 256 {
            Some(Self::Mtu256)
        } else {
            None
        }
    }

    /// Payload bytes per packet: 256 << (value - 1).
    pub const fn bytes(self) -> u32 {
        128u32 << (self as u8)
    }
}

// ---------------------------------------------------------------------------------------
// Encoded timer units

/// Local ACK timeout code (5 bits): `4.096 us * 2^code`; code 0 means "no timer"
/// (roce-facts §6.4).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Default)]
pub struct AckTimeout(u8);

impl AckTimeout {
    /// No local ACK timeout (wait forever).
    pub const INFINITE: Self = Self(0);

    /// From the 5-bit code; None above 31.
    pub const fn new(code: u8) -> Option<Self> {
        if code <= 31 {
            Some(Self(code))
        } else {
            None
        }
    }

    /// The code as carried in `ibv_qp_attr.timeout`.
    pub const fn code(self) -> u8 {
        self.0
    }

    /// The timeout, or None for code 0 (infinite).
    pub const fn duration(self) -> Option<Duration> {
        if self.0 == 0 {
            None
        } else {
            Some(Duration::from_nanos(4096u64 << self.0))
        }
    }

    /// [`AckTimeout::duration`] in nanoseconds: what the timers add to an [`Instant`](crate::transport::Instant)
    /// (a `Duration` costs a 64-bit division and a 128-bit product each way on a
    /// 32-bit core).
    pub const fn nanos(self) -> Option<u64> {
        if self.0 == 0 {
            None
        } else {
            // 4096 ns << 31 is 8.8e12 ns: no overflow in u64.
            Some(4096u64 << self.0)
        }
    }
}

/// RNR NAK timer code (5 bits; `enum ib_rnr_timeout`, roce-facts §4.2).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Default)]
pub struct RnrTimer(u8);

/// Microseconds per RNR timer code, from the IB enum names (roce-facts §4.2; rxe's
/// 61410 us typo for code 25 is not copied).
const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

impl RnrTimer {
    /// From the 5-bit code; None above 31.
    pub const fn new(code: u8) -> Option<Self> {
        if code <= 31 {
            Some(Self(code))
        } else {
            None
        }
    }

    /// From the low 5 bits of an AETH syndrome (packet-derived, so never fails).
    pub const fn from_syndrome(syndrome: u8) -> Self {
        Self(syndrome & 0x1F)
    }

    /// The code.
    pub const fn code(self) -> u8 {
        self.0
    }

    /// The wait the code stands for.
    pub fn duration(self) -> Duration {
        let us = RNR_TIMER_US
            .get(usize::from(self.0))
            .copied()
            .unwrap_or(655_360);
        Duration::from_micros(u64::from(us))
    }
}

/// A 3-bit retry count (`retry_cnt`, `rnr_retry`); for `rnr_retry`, 7 means infinite.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Default)]
pub struct RetryCount(u8);

impl RetryCount {
    /// Infinite (only meaningful for `rnr_retry`).
    pub const INFINITE: Self = Self(7);

    /// From 0..=7; None above.
    pub const fn new(v: u8) -> Option<Self> {
        if v <= 7 {
            Some(Self(v))
        } else {
            None
        }
    }

    /// The count.
    pub const fn get(self) -> u8 {
        self.0
    }
}

// ---------------------------------------------------------------------------------------
// Address vector

/// Where a QP's packets go (the RoCE address vector, `ibv_ah_attr` + GRH): the
/// destination GID becomes the IP address (roce-facts §6.5).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Default)]
pub struct AddressVector {
    /// Next-hop Ethernet address.
    pub dmac: [u8; 6],
    /// Destination GID: an IPv6 address, or an IPv4-mapped one (`::ffff:a.b.c.d`) for
    /// RoCEv2 over IPv4.
    pub dgid: [u8; 16],
    /// Index of the local source GID in the port's GID table.
    pub sgid_index: u8,
    /// IP TTL / hop limit.
    pub hop_limit: u8,
    /// IP traffic class (DSCP and ECN bits).
    pub traffic_class: u8,
    /// IPv6 flow label (20 bits); also the UDP source-port entropy (roce-facts §1.6).
    pub flow_label: u32,
    /// Service level = 802.1p priority when a VLAN is used.
    pub sl: u8,
    /// 802.1Q VLAN ID, if tagged.
    pub vlan_id: Option<u16>,
}

impl AddressVector {
    /// True when the destination GID is IPv4-mapped.
    pub fn is_ipv4(&self) -> bool {
        self.dgid[..10].iter().all(|&b| b == 0) && self.dgid[10] == 0xFF && self.dgid[11] == 0xFF
    }
}

/// An IPv4-mapped GID for `a.b.c.d`.
pub const fn ipv4_gid(ip: [u8; 4]) -> [u8; 16] {
    [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, ip[0], ip[1], ip[2], ip[3],
    ]
}

// ---------------------------------------------------------------------------------------
// Work requests

/// One scatter/gather element (`struct ibv_sge`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Default)]
pub struct Sge {
    /// Start address in local memory.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the memory region that covers `[addr, addr + length)`.
    pub lkey: Lkey,
}

/// A scatter/gather list of at most [`MAX_SGE`] elements.
pub type SgList = heapless::Vec<Sge, MAX_SGE>;

/// Total length of a scatter/gather list, or None above [`MAX_MSG_SIZE`].
pub fn sgl_len(sgl: &[Sge]) -> Option<u32> {
    let total = sgl.iter().map(|s| u64::from(s.length)).sum::<u64>();
    if total > MAX_MSG_SIZE {
        None
    } else {
        u32::try_from(total).ok()
    }
}

/// Send work request opcode (`enum ibv_wr_opcode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[repr(u8)]
pub enum WrOpcode {
    /// `IBV_WR_RDMA_WRITE` = 0.
    RdmaWrite = 0,
    /// `IBV_WR_RDMA_WRITE_WITH_IMM` = 1.
    RdmaWriteWithImm = 1,
    /// `IBV_WR_SEND` = 2.
    Send = 2,
    /// `IBV_WR_SEND_WITH_IMM` = 3.
    SendWithImm = 3,
    /// `IBV_WR_RDMA_READ` = 4.
    RdmaRead = 4,
    /// `IBV_WR_ATOMIC_CMP_AND_SWP` = 5.
    AtomicCmpAndSwp = 5,
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD` = 6.
    AtomicFetchAndAdd = 6,
    /// `IBV_WR_LOCAL_INV` = 7.
    LocalInv = 7,
    /// `IBV_WR_BIND_MW` = 8.
    BindMw = 8,
    /// `IBV_WR_SEND_WITH_INV` = 9.
    SendWithInv = 9,
    /// Kernel `IB_WR_REG_MR` = 0x20 (fast registration; no libibverbs number).
    RegMr = 0x20,
}

impl WrOpcode {
    /// From the libibverbs number.
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::RdmaWrite,
            1 => Self::RdmaWriteWithImm,
            2 => Self::Send,
            3 => Self::SendWithImm,
            4 => Self::RdmaRead,
            5 => Self::AtomicCmpAndSwp,
            6 => Self::AtomicFetchAndAdd,
            7 => Self::LocalInv,
            8 => Self::BindMw,
            9 => Self::SendWithInv,
            0x20 => Self::RegMr,
            _ => return None,
        })
    }

    /// The work-completion opcode a send-side completion of this WR carries.
    pub const fn wc_opcode(self) -> WcOpcode {
        match self {
            Self::RdmaWrite | Self::RdmaWriteWithImm => WcOpcode::RdmaWrite,
            Self::Send | Self::SendWithImm | Self::SendWithInv => WcOpcode::Send,
            Self::RdmaRead => WcOpcode::RdmaRead,
            Self::AtomicCmpAndSwp => WcOpcode::CompSwap,
            Self::AtomicFetchAndAdd => WcOpcode::FetchAdd,
            Self::LocalInv => WcOpcode::LocalInv,
            Self::BindMw => WcOpcode::BindMw,
            Self::RegMr => WcOpcode::RegMr,
        }
    }

    /// Whether a QP of `qp_type` can carry this operation (UC: SEND and WRITE; UD: SEND
    /// and SEND_WITH_IMM; roce-facts §3). LOCAL_INV is local and allowed everywhere;
    /// BIND_MW on RC and UC, REG_MR on RC only (rxe's `rxe_wr_opcode_info`).
    pub const fn allowed_on(self, qp_type: QpType) -> bool {
        match qp_type {
            QpType::Rc => true,
            QpType::Uc => matches!(
                self,
                Self::Send
                    | Self::SendWithImm
                    | Self::RdmaWrite
                    | Self::RdmaWriteWithImm
                    | Self::LocalInv
                    | Self::BindMw
            ),
            QpType::Ud => matches!(self, Self::Send | Self::SendWithImm | Self::LocalInv),
        }
    }

    /// Sends data from the local scatter list, so it may carry it inline (SEND, WRITE).
    pub const fn can_inline(self) -> bool {
        matches!(
            self,
            Self::Send
                | Self::SendWithImm
                | Self::SendWithInv
                | Self::RdmaWrite
                | Self::RdmaWriteWithImm
        )
    }

    /// Done by the NIC alone, no packet sent: LOCAL_INV, BIND_MW, REG_MR.
    pub const fn is_local(self) -> bool {
        matches!(self, Self::LocalInv | Self::BindMw | Self::RegMr)
    }

    /// READ or ATOMIC: uses an initiator depth credit (`max_rd_atomic`).
    pub const fn is_read_or_atomic(self) -> bool {
        matches!(
            self,
            Self::RdmaRead | Self::AtomicCmpAndSwp | Self::AtomicFetchAndAdd
        )
    }
}

/// Send flags (`enum ibv_send_flags`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Default)]
pub struct SendFlags(u8);

impl SendFlags {
    /// No flags.
    pub const NONE: Self = Self(0);
    /// `IBV_SEND_FENCE` = 1: wait for earlier WRs before starting this one.
    pub const FENCE: Self = Self(1);
    /// `IBV_SEND_SIGNALED` = 2: generate a completion on success.
    pub const SIGNALED: Self = Self(2);
    /// `IBV_SEND_SOLICITED` = 4: set the SE bit on the last packet.
    pub const SOLICITED: Self = Self(4);
    /// `IBV_SEND_INLINE` = 8: the payload travels in the WQE itself (at most the QP's
    /// `max_inline_data` bytes, SEND and WRITE only), copied when the WR is posted.
    pub const INLINE: Self = Self(8);

    /// From the libibverbs bits (unknown bits are dropped).
    pub const fn from_bits_truncate(bits: u32) -> Self {
        Self((bits & 0xF) as u8)
    }

    /// The bits.
    pub const fn bits(self) -> u32 {
        self.0 as u32
    }

    /// All bits of `other` are set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for SendFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// Destination of a UD send (`wr.ud`): the address handle is carried inline.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Default)]
pub struct UdDest {
    /// Where to send.
    pub av: AddressVector,
    /// Destination QP.
    pub remote_qpn: Qpn,
    /// Q_Key to put in the DETH.
    pub remote_qkey: Qkey,
}

/// What a send work request does, with the opcode-specific fields
/// (`ibv_send_wr.opcode` + `wr.rdma` / `wr.atomic` / `imm_data` / `invalidate_rkey`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum WrOp {
    /// SEND.
    Send,
    /// SEND with 32-bit immediate data.
    SendWithImm {
        /// Immediate data (the value whose big-endian bytes go on the wire).
        imm: u32,
    },
    /// SEND that invalidates `rkey` at the responder.
    SendWithInv {
        /// R_Key to invalidate.
        rkey: Rkey,
    },
    /// RDMA WRITE.
    RdmaWrite {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: Rkey,
    },
    /// RDMA WRITE with immediate (consumes a receive WQE at the responder).
    RdmaWriteWithImm {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: Rkey,
        /// Immediate data.
        imm: u32,
    },
    /// RDMA READ into the local scatter list.
    RdmaRead {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key.
        rkey: Rkey,
    },
    /// 64-bit compare and swap; the original value lands in the first 8 bytes of the
    /// local scatter list.
    AtomicCmpAndSwp {
        /// Remote address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: Rkey,
        /// Compare value.
        compare: u64,
        /// Swap value.
        swap: u64,
    },
    /// 64-bit fetch and add.
    AtomicFetchAndAdd {
        /// Remote address (8-byte aligned).
        remote_addr: u64,
        /// Remote key.
        rkey: Rkey,
        /// Value to add.
        add: u64,
    },
    /// Invalidate a local memory region key, or a type 2 memory window's.
    LocalInv {
        /// Key to invalidate (an L_Key or R_Key of the region, a window's R_Key).
        rkey: Rkey,
    },
    /// Bind a memory window (`IBV_WR_BIND_MW`; `ibv_bind_mw` for type 1).
    BindMw(MwBind),
    /// Fast-register an MR allocated with `alloc_mr` (kernel `IB_WR_REG_MR`).
    RegMr(FastReg),
}

impl WrOp {
    /// RDMA READ of the remote region at `remote_addr` under `rkey`.
    pub const fn rdma_read(remote_addr: u64, rkey: Rkey) -> Self {
        Self::RdmaRead { remote_addr, rkey }
    }

    /// RDMA WRITE to the remote region at `remote_addr` under `rkey`.
    pub const fn rdma_write(remote_addr: u64, rkey: Rkey) -> Self {
        Self::RdmaWrite { remote_addr, rkey }
    }

    /// The libibverbs opcode.
    pub const fn opcode(&self) -> WrOpcode {
        match self {
            Self::Send => WrOpcode::Send,
            Self::SendWithImm { .. } => WrOpcode::SendWithImm,
            Self::SendWithInv { .. } => WrOpcode::SendWithInv,
            Self::RdmaWrite { .. } => WrOpcode::RdmaWrite,
            Self::RdmaWriteWithImm { .. } => WrOpcode::RdmaWriteWithImm,
            Self::RdmaRead { .. } => WrOpcode::RdmaRead,
            Self::AtomicCmpAndSwp { .. } => WrOpcode::AtomicCmpAndSwp,
            Self::AtomicFetchAndAdd { .. } => WrOpcode::AtomicFetchAndAdd,
            Self::LocalInv { .. } => WrOpcode::LocalInv,
            Self::BindMw(_) => WrOpcode::BindMw,
            Self::RegMr(_) => WrOpcode::RegMr,
        }
    }

    /// The immediate data, if this operation carries one.
    pub const fn imm(&self) -> Option<u32> {
        match self {
            Self::SendWithImm { imm } | Self::RdmaWriteWithImm { imm, .. } => Some(*imm),
            _ => None,
        }
    }

    /// Remote address and key of an RDMA or atomic operation.
    pub const fn remote(&self) -> Option<(u64, Rkey)> {
        match *self {
            Self::RdmaWrite { remote_addr, rkey }
            | Self::RdmaWriteWithImm {
                remote_addr, rkey, ..
            }
            | Self::RdmaRead { remote_addr, rkey }
            | Self::AtomicCmpAndSwp {
                remote_addr, rkey, ..
            }
            | Self::AtomicFetchAndAdd {
                remote_addr, rkey, ..
            } => Some((remote_addr, rkey)),
            _ => None,
        }
    }
}

/// A send work request (`struct ibv_send_wr`, one element of the list).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SendWr {
    /// Caller's cookie, returned in the completion.
    pub wr_id: u64,
    /// Local data: source of SEND/WRITE, destination of READ/ATOMIC.
    pub sg_list: SgList,
    /// The operation.
    pub op: WrOp,
    /// FENCE / SIGNALED / SOLICITED.
    pub send_flags: SendFlags,
    /// UD only: destination.
    pub ud: Option<UdDest>,
}

impl SendWr {
    /// A work request with no scatter list and no flags.
    pub fn new(wr_id: u64, op: WrOp) -> Self {
        Self {
            wr_id,
            sg_list: SgList::new(),
            op,
            send_flags: SendFlags::NONE,
            ud: None,
        }
    }

    /// Adds a scatter/gather element (ignored beyond [`MAX_SGE`]; `post_send` would
    /// reject such a list anyway, so use [`SendWr::try_sge`] to see the error).
    #[must_use]
    pub fn sge(mut self, addr: u64, length: u32, lkey: Lkey) -> Self {
        let _ = self.sg_list.push(Sge { addr, length, lkey });
        self
    }

    /// Adds a scatter/gather element, failing when the list is full.
    pub fn try_sge(&mut self, sge: Sge) -> Result<(), Sge> {
        self.sg_list.push(sge)
    }

    /// Sets flags.
    #[must_use]
    pub fn flags(mut self, f: SendFlags) -> Self {
        self.send_flags = f;
        self
    }

    /// Sets the UD destination.
    #[must_use]
    pub fn ud(mut self, dest: UdDest) -> Self {
        self.ud = Some(dest);
        self
    }
}

/// A receive work request (`struct ibv_recv_wr`).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct RecvWr {
    /// Caller's cookie.
    pub wr_id: u64,
    /// Where incoming SEND data goes (for UD, the first 40 bytes receive the GRH).
    pub sg_list: SgList,
}

impl RecvWr {
    /// A receive request with no buffers (good for zero-length SENDs and
    /// WRITE_WITH_IMM).
    pub fn new(wr_id: u64) -> Self {
        Self {
            wr_id,
            sg_list: SgList::new(),
        }
    }

    /// Adds a scatter element (ignored beyond [`MAX_SGE`]).
    #[must_use]
    pub fn sge(mut self, addr: u64, length: u32, lkey: Lkey) -> Self {
        let _ = self.sg_list.push(Sge { addr, length, lkey });
        self
    }
}

// ---------------------------------------------------------------------------------------
// Work completions

/// Work completion opcode (`enum ibv_wc_opcode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[repr(u8)]
pub enum WcOpcode {
    /// `IBV_WC_SEND` = 0.
    Send = 0,
    /// `IBV_WC_RDMA_WRITE` = 1.
    RdmaWrite = 1,
    /// `IBV_WC_RDMA_READ` = 2.
    RdmaRead = 2,
    /// `IBV_WC_COMP_SWAP` = 3.
    CompSwap = 3,
    /// `IBV_WC_FETCH_ADD` = 4.
    FetchAdd = 4,
    /// `IBV_WC_BIND_MW` = 5.
    BindMw = 5,
    /// `IBV_WC_LOCAL_INV` = 6.
    LocalInv = 6,
    /// Kernel `IB_WC_REG_MR` = 10 (after `IB_WC_ATOMIC_WRITE` = 9).
    RegMr = 10,
    /// `IBV_WC_RECV` = 128.
    Recv = 128,
    /// `IBV_WC_RECV_RDMA_WITH_IMM` = 129.
    RecvRdmaWithImm = 129,
}

impl WcOpcode {
    /// From the libibverbs number.
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Send,
            1 => Self::RdmaWrite,
            2 => Self::RdmaRead,
            3 => Self::CompSwap,
            4 => Self::FetchAdd,
            5 => Self::BindMw,
            6 => Self::LocalInv,
            10 => Self::RegMr,
            128 => Self::Recv,
            129 => Self::RecvRdmaWithImm,
            _ => return None,
        })
    }
}

/// Work completion status (`enum ibv_wc_status`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[repr(u8)]
pub enum WcStatus {
    /// `IBV_WC_SUCCESS` = 0.
    Success = 0,
    /// `IBV_WC_LOC_LEN_ERR` = 1: local length error (receive buffer too small, UD
    /// message too long).
    LocLenErr = 1,
    /// `IBV_WC_LOC_QP_OP_ERR` = 2: local QP operation error.
    LocQpOpErr = 2,
    /// `IBV_WC_LOC_EEC_OP_ERR` = 3 (RD only; never produced).
    LocEecOpErr = 3,
    /// `IBV_WC_LOC_PROT_ERR` = 4: local protection error (bad lkey, bounds, access).
    LocProtErr = 4,
    /// `IBV_WC_WR_FLUSH_ERR` = 5: flushed because the QP is in ERR.
    WrFlushErr = 5,
    /// `IBV_WC_MW_BIND_ERR` = 6.
    MwBindErr = 6,
    /// `IBV_WC_BAD_RESP_ERR` = 7: unexpected response opcode.
    BadRespErr = 7,
    /// `IBV_WC_LOC_ACCESS_ERR` = 8.
    LocAccessErr = 8,
    /// `IBV_WC_REM_INV_REQ_ERR` = 9: the responder NAKed "invalid request" (0x61).
    RemInvReqErr = 9,
    /// `IBV_WC_REM_ACCESS_ERR` = 10: the responder NAKed "remote access error" (0x62).
    RemAccessErr = 10,
    /// `IBV_WC_REM_OP_ERR` = 11: the responder NAKed "remote operational error" (0x63).
    RemOpErr = 11,
    /// `IBV_WC_RETRY_EXC_ERR` = 12: transport retry counter exceeded.
    RetryExcErr = 12,
    /// `IBV_WC_RNR_RETRY_EXC_ERR` = 13: RNR retry counter exceeded.
    RnrRetryExcErr = 13,
    /// `IBV_WC_LOC_RDD_VIOL_ERR` = 14.
    LocRddViolErr = 14,
    /// `IBV_WC_REM_INV_RD_REQ_ERR` = 15.
    RemInvRdReqErr = 15,
    /// `IBV_WC_REM_ABORT_ERR` = 16.
    RemAbortErr = 16,
    /// `IBV_WC_INV_EECN_ERR` = 17.
    InvEecnErr = 17,
    /// `IBV_WC_INV_EEC_STATE_ERR` = 18.
    InvEecStateErr = 18,
    /// `IBV_WC_FATAL_ERR` = 19.
    FatalErr = 19,
    /// `IBV_WC_RESP_TIMEOUT_ERR` = 20.
    RespTimeoutErr = 20,
    /// `IBV_WC_GENERAL_ERR` = 21.
    GeneralErr = 21,
}

impl WcStatus {
    /// Every status, in numeric order (`ALL[n]` has the value `n`).
    pub const ALL: [Self; 22] = [
        Self::Success,
        Self::LocLenErr,
        Self::LocQpOpErr,
        Self::LocEecOpErr,
        Self::LocProtErr,
        Self::WrFlushErr,
        Self::MwBindErr,
        Self::BadRespErr,
        Self::LocAccessErr,
        Self::RemInvReqErr,
        Self::RemAccessErr,
        Self::RemOpErr,
        Self::RetryExcErr,
        Self::RnrRetryExcErr,
        Self::LocRddViolErr,
        Self::RemInvRdReqErr,
        Self::RemAbortErr,
        Self::InvEecnErr,
        Self::InvEecStateErr,
        Self::FatalErr,
        Self::RespTimeoutErr,
        Self::GeneralErr,
    ];

    /// From the libibverbs number.
    pub const fn from_u8(v: u8) -> Option<Self> {
        if (v as usize) < Self::ALL.len() {
            Some(Self::ALL[v as usize])
        } else {
            None
        }
    }

    /// The libibverbs name, as `ibv_wc_status_str` spells the enum.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Success => "IBV_WC_SUCCESS",
            Self::LocLenErr => "IBV_WC_LOC_LEN_ERR",
            Self::LocQpOpErr => "IBV_WC_LOC_QP_OP_ERR",
            Self::LocEecOpErr => "IBV_WC_LOC_EEC_OP_ERR",
            Self::LocProtErr => "IBV_WC_LOC_PROT_ERR",
            Self::WrFlushErr => "IBV_WC_WR_FLUSH_ERR",
            Self::MwBindErr => "IBV_WC_MW_BIND_ERR",
            Self::BadRespErr => "IBV_WC_BAD_RESP_ERR",
            Self::LocAccessErr => "IBV_WC_LOC_ACCESS_ERR",
            Self::RemInvReqErr => "IBV_WC_REM_INV_REQ_ERR",
            Self::RemAccessErr => "IBV_WC_REM_ACCESS_ERR",
            Self::RemOpErr => "IBV_WC_REM_OP_ERR",
            Self::RetryExcErr => "IBV_WC_RETRY_EXC_ERR",
            Self::RnrRetryExcErr => "IBV_WC_RNR_RETRY_EXC_ERR",
            Self::LocRddViolErr => "IBV_WC_LOC_RDD_VIOL_ERR",
            Self::RemInvRdReqErr => "IBV_WC_REM_INV_RD_REQ_ERR",
            Self::RemAbortErr => "IBV_WC_REM_ABORT_ERR",
            Self::InvEecnErr => "IBV_WC_INV_EECN_ERR",
            Self::InvEecStateErr => "IBV_WC_INV_EEC_STATE_ERR",
            Self::FatalErr => "IBV_WC_FATAL_ERR",
            Self::RespTimeoutErr => "IBV_WC_RESP_TIMEOUT_ERR",
            Self::GeneralErr => "IBV_WC_GENERAL_ERR",
        }
    }
}

/// Work completion flags (`enum ibv_wc_flags`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash, Default)]
pub struct WcFlags(u8);

impl WcFlags {
    /// From the `ibv_wc_flags` bits (unknown bits dropped).
    pub const fn from_bits_truncate(bits: u32) -> Self {
        Self((bits & 0xB) as u8)
    }

    /// No flags.
    pub const NONE: Self = Self(0);
    /// `IBV_WC_GRH` = 1: the first 40 bytes of a UD receive buffer hold a GRH.
    pub const GRH: Self = Self(1);
    /// `IBV_WC_WITH_IMM` = 2: `imm_data` is valid.
    pub const WITH_IMM: Self = Self(2);
    /// `IBV_WC_WITH_INV` = 8: `invalidated_rkey` is valid.
    pub const WITH_INV: Self = Self(8);

    /// The bits.
    pub const fn bits(self) -> u32 {
        self.0 as u32
    }

    /// All bits of `other` are set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for WcFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// A work completion (`struct ibv_wc`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct WorkCompletion {
    /// The WR's cookie.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// What completed. For error completions this is the WR's opcode as far as known
    /// (libibverbs leaves it undefined; we fill it anyway).
    pub opcode: WcOpcode,
    /// Bytes transferred: the message length for sends and reads, bytes received for
    /// receives (including the 40-byte GRH area on UD), the RETH length for
    /// WRITE_WITH_IMM.
    pub byte_len: u32,
    /// Immediate data, valid with [`WcFlags::WITH_IMM`].
    pub imm_data: u32,
    /// Invalidated key, valid with [`WcFlags::WITH_INV`].
    pub invalidated_rkey: Rkey,
    /// The local QP.
    pub qp_num: Qpn,
    /// UD receives: the sender's QPN (DETH).
    pub src_qp: Qpn,
    /// Flags.
    pub wc_flags: WcFlags,
    /// The request had the solicited-event bit.
    pub solicited: bool,
}

impl WorkCompletion {
    /// A completion with everything but the identity fields zero.
    pub fn new(wr_id: u64, qp_num: Qpn, opcode: WcOpcode, status: WcStatus) -> Self {
        Self {
            wr_id,
            status,
            opcode,
            byte_len: 0,
            imm_data: 0,
            invalidated_rkey: Rkey(0),
            qp_num,
            src_qp: Qpn::new(0),
            wc_flags: WcFlags::NONE,
            solicited: false,
        }
    }
}

/// A zeroed completion (a successful SEND of WR 0 on QP 0), as `ibv_wc` is zeroed: the
/// filler of the buffers `poll` writes into.
impl Default for WorkCompletion {
    fn default() -> Self {
        Self::new(0, Qpn::new(0), WcOpcode::Send, WcStatus::Success)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libibverbs_numbers() {
        assert_eq!(QpType::Rc as u8, 2);
        assert_eq!(QpType::Ud as u8, 4);
        assert_eq!(QpState::Err as u8, 6);
        assert_eq!(WrOpcode::SendWithInv as u8, 9);
        assert_eq!(WrOpcode::AtomicFetchAndAdd as u8, 6);
        assert_eq!(WcStatus::RnrRetryExcErr as u8, 13);
        assert_eq!(WcStatus::WrFlushErr as u8, 5);
        assert_eq!(WcOpcode::RecvRdmaWithImm as u8, 129);
        assert_eq!(SendFlags::SOLICITED.bits(), 4);
        assert_eq!(WcFlags::WITH_INV.bits(), 8);
    }

    #[test]
    fn mtu_bytes() {
        assert_eq!(Mtu::Mtu256.bytes(), 256);
        assert_eq!(Mtu::Mtu4096.bytes(), 4096);
        assert_eq!(Mtu::from_u8(3), Some(Mtu::Mtu1024));
        assert_eq!(Mtu::from_u8(6), None);
        // rxe: netdev 1500 - 80 -> 1024.
        assert_eq!(Mtu::from_bytes_floor(1500 - 80), Some(Mtu::Mtu1024));
        assert_eq!(Mtu::from_bytes_floor(9000 - 80), Some(Mtu::Mtu4096));
    }

    #[test]
    fn ack_timeout_units() {
        assert_eq!(AckTimeout::INFINITE.duration(), None);
        assert_eq!(
            AckTimeout::new(1).unwrap().duration(),
            Some(Duration::from_nanos(8192))
        );
        // roce-facts §6.4: 14 -> 67.1 ms, 18 -> 1.07 s.
        let t14 = AckTimeout::new(14).unwrap().duration().unwrap();
        assert_eq!(t14.as_micros(), 67_108);
        let t18 = AckTimeout::new(18).unwrap().duration().unwrap();
        assert_eq!(t18.as_millis(), 1_073);
        assert!(AckTimeout::new(31).unwrap().duration().is_some());
        assert_eq!(AckTimeout::new(32), None);
    }

    #[test]
    fn rnr_timer_table() {
        assert_eq!(RnrTimer::new(0).unwrap().duration().as_micros(), 655_360);
        assert_eq!(RnrTimer::new(1).unwrap().duration().as_micros(), 10);
        assert_eq!(RnrTimer::new(14).unwrap().duration().as_micros(), 1_280);
        assert_eq!(RnrTimer::new(25).unwrap().duration().as_micros(), 61_440);
        assert_eq!(RnrTimer::new(31).unwrap().duration().as_micros(), 491_520);
        assert_eq!(RnrTimer::from_syndrome(0x3F).code(), 31);
        assert_eq!(RnrTimer::new(32), None);
    }

    #[test]
    fn sgl_length_is_bounded() {
        let mut l = SgList::new();
        for _ in 0..2 {
            l.push(Sge {
                addr: 0,
                length: u32::MAX,
                lkey: Lkey(1),
            })
            .unwrap();
        }
        assert_eq!(sgl_len(&l), None);
        assert_eq!(sgl_len(&[]), Some(0));
    }

    #[test]
    fn ipv4_mapped_gid() {
        let av = AddressVector {
            dgid: ipv4_gid([10, 0, 0, 1]),
            ..Default::default()
        };
        assert!(av.is_ipv4());
        assert!(!AddressVector::default().is_ipv4());
    }

    #[test]
    fn opcode_per_transport() {
        assert!(WrOpcode::RdmaRead.allowed_on(QpType::Rc));
        assert!(!WrOpcode::RdmaRead.allowed_on(QpType::Uc));
        assert!(!WrOpcode::RdmaWrite.allowed_on(QpType::Ud));
        assert!(WrOpcode::SendWithImm.allowed_on(QpType::Ud));
    }
}
