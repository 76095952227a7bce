//! The communication manager's messages (IBTA vol. 1 §12.6, MgmtClass 0x07): REQ, MRA,
//! REJ, REP, RTU, DREQ, DREP, SIDR_REQ and SIDR_REP, each the 232 bytes of class data
//! of a [`super::mad`] MAD; and the IP addressing header that RDMA CM puts at the start
//! of a REQ's or SIDR_REQ's private data (IBTA Annex A11, Linux `struct cma_hdr`).
//!
//! Offsets below are bytes into the class data (the MAD's byte 24 on), from Linux's
//! `include/rdma/ibta_vol1_c12.h`, whose `CM_FIELD*_LOC(msg, byte, bits)` name a field
//! `bits` wide that starts at the most significant bit of `byte` (and
//! `CM_FIELD_BLOC(msg, byte, skip, bits)` one that starts `skip` bits below it). They are
//! checked field by field against Wireshark's CM dissector (`infiniband.cm.*`) in
//! `tests/tests/cm_tshark.rs`. Reserved bits are sent as 0 and ignored on receipt.
//!
//! Every message is a plain-data `Repr` ([`CmMsg`] is the set of them): `parse` reads a
//! whole MAD (and checks its header is a CM `Send` of a known attribute), `emit` writes
//! one. Neither panics on any input.

use super::field::{get_u16, get_u24, get_u32, get_u64, set_u16, set_u24, set_u32, set_u64};
use super::mad::{self, MadRepr, DATA_LEN, HEADER_LEN, MAD_LEN};
use super::Truncated;
use crate::num::{Psn, Qkey, Qpn};
use core::fmt;

/// The attribute IDs of the CM messages (IBTA vol. 1 table 104; Linux `CM_*_ATTR_ID`).
pub mod attr {
    pub const REQ: u16 = 0x0010;
    pub const MRA: u16 = 0x0011;
    pub const REJ: u16 = 0x0012;
    pub const REP: u16 = 0x0013;
    pub const RTU: u16 = 0x0014;
    pub const DREQ: u16 = 0x0015;
    pub const DREP: u16 = 0x0016;
    pub const SIDR_REQ: u16 = 0x0017;
    pub const SIDR_REP: u16 = 0x0018;
}

/// Bytes of private data each message carries (IBTA vol. 1 §12.6; Linux
/// `IB_CM_*_PRIVATE_DATA_SIZE`).
pub mod private_len {
    pub const REQ: usize = 92;
    pub const MRA: usize = 222;
    pub const REJ: usize = 148;
    pub const REP: usize = 196;
    pub const RTU: usize = 224;
    pub const DREQ: usize = 220;
    pub const DREP: usize = 224;
    pub const SIDR_REQ: usize = 216;
    pub const SIDR_REP: usize = 136;
}

/// Bytes of a REJ's or SIDR_REP's additional (reject) information.
pub const ARI_LEN: usize = 72;

/// Why a MAD is not a CM message this layer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmError {
    /// Shorter than a MAD.
    Truncated,
    /// BaseVersion is not 1.
    BadBaseVersion(u8),
    /// Not the CM's management class.
    NotCm { mgmt_class: u8 },
    /// A CM class version other than 2.
    BadClassVersion(u8),
    /// A method other than `Send`.
    BadMethod(u8),
    /// An attribute this CM does not implement (LAP, APR, ClassPortInfo, ...).
    UnknownAttribute(u16),
}

impl fmt::Display for CmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Truncated => write!(f, "shorter than a {MAD_LEN}-byte MAD"),
            Self::BadBaseVersion(v) => write!(f, "MAD base version {v}, not 1"),
            Self::NotCm { mgmt_class } => {
                write!(f, "management class {mgmt_class:#04x}, not the CM's (0x07)")
            }
            Self::BadClassVersion(v) => write!(f, "CM class version {v}, not 2"),
            Self::BadMethod(m) => write!(f, "method {m:#04x}, not Send (0x03)"),
            Self::UnknownAttribute(a) => write!(f, "CM attribute {a:#06x} is not implemented"),
        }
    }
}

impl From<Truncated> for CmError {
    fn from(_: Truncated) -> Self {
        Self::Truncated
    }
}

/// Private data: the consumer's bytes at the end of a message, always sent whole
/// (a shorter consumer payload is zero-padded, as Linux's CM does).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PrivateData<const N: usize>(pub [u8; N]);

impl<const N: usize> Default for PrivateData<N> {
    fn default() -> Self {
        Self([0; N])
    }
}

impl<const N: usize> PrivateData<N> {
    /// `data` followed by zeros; `None` when it does not fit.
    pub fn from_slice(data: &[u8]) -> Option<Self> {
        let mut p = Self::default();
        p.0.get_mut(..data.len())?.copy_from_slice(data);
        Some(p)
    }
    /// Reads `N` bytes at `at` of `b` (the caller checked the length).
    fn read(b: &[u8], at: usize) -> Self {
        let mut p = Self::default();
        p.0.copy_from_slice(&b[at..at + N]);
        p
    }
    fn write(&self, b: &mut [u8], at: usize) {
        b[at..at + N].copy_from_slice(&self.0);
    }
}

impl<const N: usize> fmt::Debug for PrivateData<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The trailing zeros are padding: show the bytes up to the last non-zero one.
        let used = self.0.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        write!(f, "PrivateData<{N}>(")?;
        for b in &self.0[..used] {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

/// `bits` bits of byte `at`, starting `skip` bits below its most significant bit (the
/// `CM_FIELD_BLOC` convention).
fn bits(b: &[u8], at: usize, skip: u32, bits: u32) -> u8 {
    let shift = 8 - skip - bits;
    (b[at] >> shift) & ((1u16 << bits) - 1) as u8
}

fn set_bits(b: &mut [u8], at: usize, skip: u32, bits: u32, v: u8) {
    let shift = 8 - skip - bits;
    let mask = (((1u16 << bits) - 1) as u8) << shift;
    b[at] = (b[at] & !mask) | ((v << shift) & mask);
}

fn gid(b: &[u8], at: usize) -> [u8; 16] {
    let mut g = [0; 16];
    g.copy_from_slice(&b[at..at + 16]);
    g
}

/// The transport a REQ asks for (its Transport Service Type, with the Extended Transport
/// Type for XRC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum CmTransport {
    #[default]
    Rc = 0,
    Uc = 1,
    Rd = 2,
    Reserved = 3,
}

impl CmTransport {
    const fn from_bits(v: u8) -> Self {
        match v & 3 {
            0 => Self::Rc,
            1 => Self::Uc,
            2 => Self::Rd,
            _ => Self::Reserved,
        }
    }
}

/// A path in a REQ (primary at byte 52, alternate at byte 96; 44 bytes each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CmPath {
    /// LIDs: RoCE has none; Linux sends the permissive LID 0xFFFF on a routed path.
    pub local_lid: u16,
    pub remote_lid: u16,
    /// The active side's GID (the source of its packets) and the passive side's.
    pub local_gid: [u8; 16],
    pub remote_gid: [u8; 16],
    /// 20 bits.
    pub flow_label: u32,
    /// 6 bits (`enum ib_rate`).
    pub packet_rate: u8,
    pub traffic_class: u8,
    pub hop_limit: u8,
    /// 4 bits.
    pub sl: u8,
    pub subnet_local: bool,
    /// 5 bits: 4.096 us * 2^n.
    pub local_ack_timeout: u8,
}

impl CmPath {
    /// Bytes of a path.
    pub const LEN: usize = 44;

    fn read(b: &[u8], at: usize) -> Self {
        Self {
            local_lid: get_u16(b, at),
            remote_lid: get_u16(b, at + 2),
            local_gid: gid(b, at + 4),
            remote_gid: gid(b, at + 20),
            flow_label: get_u32(b, at + 36) >> 12,
            packet_rate: bits(b, at + 39, 2, 6),
            traffic_class: b[at + 40],
            hop_limit: b[at + 41],
            sl: bits(b, at + 42, 0, 4),
            subnet_local: bits(b, at + 42, 4, 1) != 0,
            local_ack_timeout: bits(b, at + 43, 0, 5),
        }
    }

    fn write(&self, b: &mut [u8], at: usize) {
        set_u16(b, at, self.local_lid);
        set_u16(b, at + 2, self.remote_lid);
        b[at + 4..at + 20].copy_from_slice(&self.local_gid);
        b[at + 20..at + 36].copy_from_slice(&self.remote_gid);
        // Flow label in the top 20 bits; the packet rate in the low 6 of the last byte.
        set_u32(b, at + 36, (self.flow_label & 0xF_FFFF) << 12);
        set_bits(b, at + 39, 2, 6, self.packet_rate);
        b[at + 40] = self.traffic_class;
        b[at + 41] = self.hop_limit;
        set_bits(b, at + 42, 0, 4, self.sl);
        set_bits(b, at + 42, 4, 1, u8::from(self.subnet_local));
        set_bits(b, at + 43, 0, 5, self.local_ack_timeout);
    }
}

/// REQ (IBTA table 106): the active side asks for a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReqRepr {
    pub local_comm_id: u32,
    /// Whom the REQ is for (RDMA CM: port space and port, see [`rdma_cm_service_id`]).
    pub service_id: u64,
    pub local_ca_guid: u64,
    pub local_qkey: Qkey,
    pub local_qpn: Qpn,
    /// RDMA READ/atomic the active side accepts (its `max_dest_rd_atomic`).
    pub responder_resources: u8,
    pub local_eecn: u32,
    /// RDMA READ/atomic the active side issues at once (its `max_rd_atomic`).
    pub initiator_depth: u8,
    pub remote_eecn: u32,
    /// 5 bits: how long the passive side may take to answer, 4.096 us * 2^n.
    pub remote_cm_response_timeout: u8,
    pub transport: CmTransport,
    pub end_to_end_flow_control: bool,
    pub starting_psn: Psn,
    /// 5 bits: how long the active side may take to answer a REP.
    pub local_cm_response_timeout: u8,
    /// 3 bits.
    pub retry_count: u8,
    pub pkey: u16,
    /// 4 bits (`enum ibv_mtu`).
    pub path_mtu: u8,
    pub rdc_exists: bool,
    /// 3 bits.
    pub rnr_retry_count: u8,
    /// 4 bits.
    pub max_cm_retries: u8,
    pub srq: bool,
    /// 3 bits (1 = XRC).
    pub extended_transport: u8,
    pub primary: CmPath,
    /// All zeros when there is none.
    pub alternate: CmPath,
    pub private_data: PrivateData<{ private_len::REQ }>,
}

impl ReqRepr {
    /// A REQ for an RC connection from `local_qpn` (first PSN `starting_psn`) between
    /// two RoCE GIDs, with the values librdmacm's `rdma_connect` uses over rxe: one
    /// READ/atomic each way, response timeouts 20 (4.3 s), 7 retries, infinite RNR
    /// retries, 15 CM retries, P_Key 0xFFFF, path MTU 1024, LIDs 0xFFFF (RoCE), hop
    /// limit 64, local ACK timeout 14. Callers change what differs.
    pub fn rc(
        service_id: u64,
        local_qpn: Qpn,
        starting_psn: Psn,
        local_gid: [u8; 16],
        remote_gid: [u8; 16],
    ) -> Self {
        Self {
            service_id,
            local_qpn,
            starting_psn,
            responder_resources: 1,
            initiator_depth: 1,
            remote_cm_response_timeout: 20,
            local_cm_response_timeout: 20,
            retry_count: 7,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            pkey: 0xFFFF,
            path_mtu: 3,
            primary: CmPath {
                local_lid: 0xFFFF,
                remote_lid: 0xFFFF,
                local_gid,
                remote_gid,
                hop_limit: 64,
                local_ack_timeout: 14,
                ..CmPath::default()
            },
            ..Self::default()
        }
    }

    fn read(b: &[u8]) -> Self {
        Self {
            local_comm_id: get_u32(b, 0),
            service_id: get_u64(b, 8),
            local_ca_guid: get_u64(b, 16),
            local_qkey: Qkey(get_u32(b, 28)),
            local_qpn: Qpn::new(get_u24(b, 32)),
            responder_resources: b[35],
            local_eecn: get_u24(b, 36),
            initiator_depth: b[39],
            remote_eecn: get_u24(b, 40),
            remote_cm_response_timeout: bits(b, 43, 0, 5),
            transport: CmTransport::from_bits(bits(b, 43, 5, 2)),
            end_to_end_flow_control: bits(b, 43, 7, 1) != 0,
            starting_psn: Psn::new(get_u24(b, 44)),
            local_cm_response_timeout: bits(b, 47, 0, 5),
            retry_count: bits(b, 47, 5, 3),
            pkey: get_u16(b, 48),
            path_mtu: bits(b, 50, 0, 4),
            rdc_exists: bits(b, 50, 4, 1) != 0,
            rnr_retry_count: bits(b, 50, 5, 3),
            max_cm_retries: bits(b, 51, 0, 4),
            srq: bits(b, 51, 4, 1) != 0,
            extended_transport: bits(b, 51, 5, 3),
            primary: CmPath::read(b, 52),
            alternate: CmPath::read(b, 96),
            private_data: PrivateData::read(b, 140),
        }
    }

    fn write(&self, b: &mut [u8]) {
        set_u32(b, 0, self.local_comm_id);
        set_u64(b, 8, self.service_id);
        set_u64(b, 16, self.local_ca_guid);
        set_u32(b, 28, self.local_qkey.0);
        set_u24(b, 32, self.local_qpn.value());
        b[35] = self.responder_resources;
        set_u24(b, 36, self.local_eecn);
        b[39] = self.initiator_depth;
        set_u24(b, 40, self.remote_eecn);
        set_bits(b, 43, 0, 5, self.remote_cm_response_timeout);
        set_bits(b, 43, 5, 2, self.transport as u8);
        set_bits(b, 43, 7, 1, u8::from(self.end_to_end_flow_control));
        set_u24(b, 44, self.starting_psn.value());
        set_bits(b, 47, 0, 5, self.local_cm_response_timeout);
        set_bits(b, 47, 5, 3, self.retry_count);
        set_u16(b, 48, self.pkey);
        set_bits(b, 50, 0, 4, self.path_mtu);
        set_bits(b, 50, 4, 1, u8::from(self.rdc_exists));
        set_bits(b, 50, 5, 3, self.rnr_retry_count);
        set_bits(b, 51, 0, 4, self.max_cm_retries);
        set_bits(b, 51, 4, 1, u8::from(self.srq));
        set_bits(b, 51, 5, 3, self.extended_transport);
        self.primary.write(b, 52);
        self.alternate.write(b, 96);
        self.private_data.write(b, 140);
    }
}

/// Which message an MRA or a REJ answers (2 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum CmMsgKind {
    #[default]
    Req = 0,
    Rep = 1,
    /// MRA: a LAP; REJ: another message.
    Other = 2,
    Reserved = 3,
}

impl CmMsgKind {
    const fn from_bits(v: u8) -> Self {
        match v & 3 {
            0 => Self::Req,
            1 => Self::Rep,
            2 => Self::Other,
            _ => Self::Reserved,
        }
    }
}

/// MRA (table 107): "message received, answer later", with a longer timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MraRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub message_mraed: CmMsgKind,
    /// 5 bits: 4.096 us * 2^n more to wait.
    pub service_timeout: u8,
    pub private_data: PrivateData<{ private_len::MRA }>,
}

impl MraRepr {
    fn read(b: &[u8]) -> Self {
        Self {
            local_comm_id: get_u32(b, 0),
            remote_comm_id: get_u32(b, 4),
            message_mraed: CmMsgKind::from_bits(bits(b, 8, 0, 2)),
            service_timeout: bits(b, 9, 0, 5),
            private_data: PrivateData::read(b, 10),
        }
    }

    fn write(&self, b: &mut [u8]) {
        set_u32(b, 0, self.local_comm_id);
        set_u32(b, 4, self.remote_comm_id);
        set_bits(b, 8, 0, 2, self.message_mraed as u8);
        set_bits(b, 9, 0, 5, self.service_timeout);
        self.private_data.write(b, 10);
    }
}

/// REJ reasons this CM sends or names (IBTA table 109; Linux `enum ib_cm_rej_reason`).
pub mod rej_reason {
    pub const NO_QP: u16 = 1;
    pub const NO_RESOURCES: u16 = 3;
    pub const TIMEOUT: u16 = 4;
    pub const UNSUPPORTED: u16 = 5;
    pub const INVALID_COMM_ID: u16 = 6;
    pub const INVALID_COMM_INSTANCE: u16 = 7;
    pub const INVALID_SERVICE_ID: u16 = 8;
    pub const INVALID_TRANSPORT_TYPE: u16 = 9;
    pub const STALE_CONN: u16 = 10;
    pub const INVALID_GID: u16 = 12;
    pub const INVALID_MTU: u16 = 26;
    pub const INSUFFICIENT_RESP_RESOURCES: u16 = 27;
    pub const CONSUMER_DEFINED: u16 = 28;
    pub const INVALID_RNR_RETRY: u16 = 29;
    pub const DUPLICATE_LOCAL_COMM_ID: u16 = 30;
    pub const INVALID_CLASS_VERSION: u16 = 31;
}

/// REJ (table 108): a connection attempt or its answer is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RejRepr {
    pub local_comm_id: u32,
    /// 0 when rejecting a REQ whose sender is unknown.
    pub remote_comm_id: u32,
    pub message_rejected: CmMsgKind,
    /// 7 bits: bytes of `ari` in use.
    pub reject_info_len: u8,
    pub reason: u16,
    pub ari: [u8; ARI_LEN],
    pub private_data: PrivateData<{ private_len::REJ }>,
}

impl Default for RejRepr {
    fn default() -> Self {
        Self {
            local_comm_id: 0,
            remote_comm_id: 0,
            message_rejected: CmMsgKind::Req,
            reject_info_len: 0,
            reason: 0,
            ari: [0; ARI_LEN],
            private_data: PrivateData::default(),
        }
    }
}

impl RejRepr {
    fn read(b: &[u8]) -> Self {
        let mut ari = [0; ARI_LEN];
        ari.copy_from_slice(&b[12..12 + ARI_LEN]);
        Self {
            local_comm_id: get_u32(b, 0),
            remote_comm_id: get_u32(b, 4),
            message_rejected: CmMsgKind::from_bits(bits(b, 8, 0, 2)),
            reject_info_len: bits(b, 9, 0, 7),
            reason: get_u16(b, 10),
            ari,
            private_data: PrivateData::read(b, 84),
        }
    }

    fn write(&self, b: &mut [u8]) {
        set_u32(b, 0, self.local_comm_id);
        set_u32(b, 4, self.remote_comm_id);
        set_bits(b, 8, 0, 2, self.message_rejected as u8);
        set_bits(b, 9, 0, 7, self.reject_info_len);
        set_u16(b, 10, self.reason);
        b[12..12 + ARI_LEN].copy_from_slice(&self.ari);
        self.private_data.write(b, 84);
    }
}

/// REP (table 110): the passive side accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RepRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub local_qkey: Qkey,
    pub local_qpn: Qpn,
    pub local_eecn: u32,
    pub starting_psn: Psn,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    /// 5 bits.
    pub target_ack_delay: u8,
    /// 2 bits: 0 accepted, 1 alternate path rejected, 2 not supported.
    pub failover_accepted: u8,
    pub end_to_end_flow_control: bool,
    /// 3 bits.
    pub rnr_retry_count: u8,
    pub srq: bool,
    pub local_ca_guid: u64,
    pub private_data: PrivateData<{ private_len::REP }>,
}

impl RepRepr {
    fn read(b: &[u8]) -> Self {
        Self {
            local_comm_id: get_u32(b, 0),
            remote_comm_id: get_u32(b, 4),
            local_qkey: Qkey(get_u32(b, 8)),
            local_qpn: Qpn::new(get_u24(b, 12)),
            local_eecn: get_u24(b, 16),
            starting_psn: Psn::new(get_u24(b, 20)),
            responder_resources: b[24],
            initiator_depth: b[25],
            target_ack_delay: bits(b, 26, 0, 5),
            failover_accepted: bits(b, 26, 5, 2),
            end_to_end_flow_control: bits(b, 26, 7, 1) != 0,
            rnr_retry_count: bits(b, 27, 0, 3),
            srq: bits(b, 27, 3, 1) != 0,
            local_ca_guid: get_u64(b, 28),
            private_data: PrivateData::read(b, 36),
        }
    }

    fn write(&self, b: &mut [u8]) {
        set_u32(b, 0, self.local_comm_id);
        set_u32(b, 4, self.remote_comm_id);
        set_u32(b, 8, self.local_qkey.0);
        set_u24(b, 12, self.local_qpn.value());
        set_u24(b, 16, self.local_eecn);
        set_u24(b, 20, self.starting_psn.value());
        b[24] = self.responder_resources;
        b[25] = self.initiator_depth;
        set_bits(b, 26, 0, 5, self.target_ack_delay);
        set_bits(b, 26, 5, 2, self.failover_accepted);
        set_bits(b, 26, 7, 1, u8::from(self.end_to_end_flow_control));
        set_bits(b, 27, 0, 3, self.rnr_retry_count);
        set_bits(b, 27, 3, 1, u8::from(self.srq));
        set_u64(b, 28, self.local_ca_guid);
        self.private_data.write(b, 36);
    }
}

/// RTU (table 111) and DREP (table 113): the two communication IDs and private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CommIdsRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub private_data: PrivateData<{ private_len::RTU }>,
}

impl CommIdsRepr {
    fn read(b: &[u8]) -> Self {
        Self {
            local_comm_id: get_u32(b, 0),
            remote_comm_id: get_u32(b, 4),
            private_data: PrivateData::read(b, 8),
        }
    }

    fn write(&self, b: &mut [u8]) {
        set_u32(b, 0, self.local_comm_id);
        set_u32(b, 4, self.remote_comm_id);
        self.private_data.write(b, 8);
    }
}

/// DREQ (table 112): either side asks to disconnect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DreqRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    /// The receiver's QP (the sender's remote QPN).
    pub remote_qpn: Qpn,
    pub private_data: PrivateData<{ private_len::DREQ }>,
}

impl DreqRepr {
    fn read(b: &[u8]) -> Self {
        Self {
            local_comm_id: get_u32(b, 0),
            remote_comm_id: get_u32(b, 4),
            remote_qpn: Qpn::new(get_u24(b, 8)),
            private_data: PrivateData::read(b, 12),
        }
    }

    fn write(&self, b: &mut [u8]) {
        set_u32(b, 0, self.local_comm_id);
        set_u32(b, 4, self.remote_comm_id);
        set_u24(b, 8, self.remote_qpn.value());
        self.private_data.write(b, 12);
    }
}

/// SIDR_REQ (table 119): a UD client asks which QP and Q_Key serve a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SidrReqRepr {
    pub request_id: u32,
    pub pkey: u16,
    pub service_id: u64,
    pub private_data: PrivateData<{ private_len::SIDR_REQ }>,
}

impl SidrReqRepr {
    fn read(b: &[u8]) -> Self {
        Self {
            request_id: get_u32(b, 0),
            pkey: get_u16(b, 4),
            service_id: get_u64(b, 8),
            private_data: PrivateData::read(b, 16),
        }
    }

    fn write(&self, b: &mut [u8]) {
        set_u32(b, 0, self.request_id);
        set_u16(b, 4, self.pkey);
        set_u64(b, 8, self.service_id);
        self.private_data.write(b, 16);
    }
}

/// SIDR_REP statuses (IBTA table 120; Linux `enum ib_cm_sidr_status`).
pub mod sidr_status {
    pub const SUCCESS: u8 = 0;
    pub const UNSUPPORTED: u8 = 1;
    pub const REJECT: u8 = 2;
    pub const NO_QP: u8 = 3;
    pub const REDIRECT: u8 = 4;
    pub const UNSUPPORTED_VERSION: u8 = 5;
}

/// SIDR_REP (table 120): the server's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SidrRepRepr {
    pub request_id: u32,
    pub status: u8,
    pub add_info_len: u8,
    pub qpn: Qpn,
    pub service_id: u64,
    pub qkey: Qkey,
    pub add_info: [u8; ARI_LEN],
    pub private_data: PrivateData<{ private_len::SIDR_REP }>,
}

impl Default for SidrRepRepr {
    fn default() -> Self {
        Self {
            request_id: 0,
            status: 0,
            add_info_len: 0,
            qpn: Qpn::default(),
            service_id: 0,
            qkey: Qkey(0),
            add_info: [0; ARI_LEN],
            private_data: PrivateData::default(),
        }
    }
}

impl SidrRepRepr {
    fn read(b: &[u8]) -> Self {
        let mut add_info = [0; ARI_LEN];
        add_info.copy_from_slice(&b[24..24 + ARI_LEN]);
        Self {
            request_id: get_u32(b, 0),
            status: b[4],
            add_info_len: b[5],
            qpn: Qpn::new(get_u24(b, 8)),
            service_id: get_u64(b, 12),
            qkey: Qkey(get_u32(b, 20)),
            add_info,
            private_data: PrivateData::read(b, 96),
        }
    }

    fn write(&self, b: &mut [u8]) {
        set_u32(b, 0, self.request_id);
        b[4] = self.status;
        b[5] = self.add_info_len;
        set_u24(b, 8, self.qpn.value());
        set_u64(b, 12, self.service_id);
        set_u32(b, 20, self.qkey.0);
        b[24..24 + ARI_LEN].copy_from_slice(&self.add_info);
        self.private_data.write(b, 96);
    }
}

/// A CM message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmMsg {
    Req(ReqRepr),
    Mra(MraRepr),
    Rej(RejRepr),
    Rep(RepRepr),
    Rtu(CommIdsRepr),
    Dreq(DreqRepr),
    Drep(CommIdsRepr),
    SidrReq(SidrReqRepr),
    SidrRep(SidrRepRepr),
}

impl CmMsg {
    /// The attribute ID the message travels under.
    pub const fn attr_id(&self) -> u16 {
        match self {
            Self::Req(_) => attr::REQ,
            Self::Mra(_) => attr::MRA,
            Self::Rej(_) => attr::REJ,
            Self::Rep(_) => attr::REP,
            Self::Rtu(_) => attr::RTU,
            Self::Dreq(_) => attr::DREQ,
            Self::Drep(_) => attr::DREP,
            Self::SidrReq(_) => attr::SIDR_REQ,
            Self::SidrRep(_) => attr::SIDR_REP,
        }
    }

    /// The message's name as IBTA spells it.
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Req(_) => "REQ",
            Self::Mra(_) => "MRA",
            Self::Rej(_) => "REJ",
            Self::Rep(_) => "REP",
            Self::Rtu(_) => "RTU",
            Self::Dreq(_) => "DREQ",
            Self::Drep(_) => "DREP",
            Self::SidrReq(_) => "SIDR_REQ",
            Self::SidrRep(_) => "SIDR_REP",
        }
    }

    /// Reads a whole MAD (at least 256 bytes; more are ignored): its transaction ID and
    /// the message. The header must be a CM `Send` (base version 1, class version 2).
    pub fn parse(mad: &[u8]) -> Result<(u64, Self), CmError> {
        let Some(mad) = mad.get(..MAD_LEN) else {
            return Err(CmError::Truncated);
        };
        let h = MadRepr::parse(&mad::Header::new_checked(mad)?);
        if h.base_version != mad::BASE_VERSION {
            return Err(CmError::BadBaseVersion(h.base_version));
        }
        if h.mgmt_class != mad::CLASS_CM {
            return Err(CmError::NotCm {
                mgmt_class: h.mgmt_class,
            });
        }
        if h.class_version != mad::CM_CLASS_VERSION {
            return Err(CmError::BadClassVersion(h.class_version));
        }
        if h.method != mad::METHOD_SEND {
            return Err(CmError::BadMethod(h.method));
        }
        let b = &mad[HEADER_LEN..];
        let msg = match h.attr_id {
            attr::REQ => Self::Req(ReqRepr::read(b)),
            attr::MRA => Self::Mra(MraRepr::read(b)),
            attr::REJ => Self::Rej(RejRepr::read(b)),
            attr::REP => Self::Rep(RepRepr::read(b)),
            attr::RTU => Self::Rtu(CommIdsRepr::read(b)),
            attr::DREQ => Self::Dreq(DreqRepr::read(b)),
            attr::DREP => Self::Drep(CommIdsRepr::read(b)),
            attr::SIDR_REQ => Self::SidrReq(SidrReqRepr::read(b)),
            attr::SIDR_REP => Self::SidrRep(SidrRepRepr::read(b)),
            other => return Err(CmError::UnknownAttribute(other)),
        };
        Ok((h.tid, msg))
    }

    /// Writes the whole 256-byte MAD (header with `tid`, the message, zeros in every
    /// reserved field) into the start of `buf`.
    pub fn emit(&self, tid: u64, buf: &mut [u8]) -> Result<usize, Truncated> {
        let mad = buf.get_mut(..MAD_LEN).ok_or(Truncated)?;
        mad.fill(0);
        MadRepr::cm(self.attr_id(), tid).emit(mad)?;
        let b = &mut mad[HEADER_LEN..];
        debug_assert_eq!(b.len(), DATA_LEN);
        match self {
            Self::Req(m) => m.write(b),
            Self::Mra(m) => m.write(b),
            Self::Rej(m) => m.write(b),
            Self::Rep(m) => m.write(b),
            Self::Rtu(m) | Self::Drep(m) => m.write(b),
            Self::Dreq(m) => m.write(b),
            Self::SidrReq(m) => m.write(b),
            Self::SidrRep(m) => m.write(b),
        }
        Ok(MAD_LEN)
    }
}

/// RDMA CM's port spaces (Linux `enum rdma_ucm_port_space`): the `ps` of
/// [`rdma_cm_service_id`].
pub mod port_space {
    /// `RDMA_PS_TCP`: RC connections.
    pub const TCP: u16 = 0x0106;
    /// `RDMA_PS_UDP`: UD, resolved by SIDR.
    pub const UDP: u16 = 0x0111;
    /// `RDMA_PS_IB`: any QP type.
    pub const IB: u16 = 0x013F;
}

/// The service ID RDMA CM uses for port `port` of port space `ps`
/// (`RDMA_IB_IP_PS_*`: `0x0000_0000_01pp_pppp`, Linux `cma_get_service_id`).
pub const fn rdma_cm_service_id(ps: u16, port: u16) -> u64 {
    ((ps as u64) << 16) | port as u64
}

/// The port space and port of an RDMA CM service ID, or `None` if it is not one.
pub const fn rdma_cm_port(service_id: u64) -> Option<(u16, u16)> {
    if service_id >> 32 != 0 || (service_id >> 24) & 0xFF != 0x01 {
        return None;
    }
    Some(((service_id >> 16) as u16, service_id as u16))
}

/// The IP addressing header at the start of a REQ's or SIDR_REQ's private data when
/// RDMA CM sends it (IBTA Annex A11 "IP CM Service"; Linux `struct cma_hdr`), 36 bytes:
///
/// | offset | width | field |
/// |---|---|---|
/// | 0 | 1 | MajV (bits 7..4) and MinV (bits 3..0), both 0 |
/// | 1 | 1 | IP version (bits 7..4: 4 or 6) |
/// | 2 | 2 | the active side's port |
/// | 4 | 16 | its address |
/// | 20 | 16 | the passive side's address |
///
/// An IPv4 address sits in the last 4 bytes of its 16, after 12 zero bytes.
/// The consumer's private data follows (at most 56 bytes in a REQ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct IpCmHdr {
    /// 4 or 6.
    pub ip_version: u8,
    pub src_port: u16,
    /// IPv6 addresses, or IPv4 ones in the last 4 bytes.
    pub src: [u8; 16],
    pub dst: [u8; 16],
}

impl IpCmHdr {
    /// Bytes of the header.
    pub const LEN: usize = 36;

    /// An IPv4 header.
    pub const fn ipv4(src: [u8; 4], src_port: u16, dst: [u8; 4]) -> Self {
        let s = [
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, src[0], src[1], src[2], src[3],
        ];
        let d = [
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, dst[0], dst[1], dst[2], dst[3],
        ];
        Self {
            ip_version: 4,
            src_port,
            src: s,
            dst: d,
        }
    }

    /// Reads the header from the start of private data; `None` when it is not one (a
    /// version other than 0.0, an IP version other than 4 or 6, or too short).
    pub fn parse(private: &[u8]) -> Option<Self> {
        let b = private.get(..Self::LEN)?;
        let ip_version = b[1] >> 4;
        if b[0] != 0 || !matches!(ip_version, 4 | 6) {
            return None;
        }
        Some(Self {
            ip_version,
            src_port: get_u16(b, 2),
            src: gid(b, 4),
            dst: gid(b, 20),
        })
    }

    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let b = buf.get_mut(..Self::LEN).ok_or(Truncated)?;
        b[0] = 0;
        b[1] = self.ip_version << 4;
        set_u16(b, 2, self.src_port);
        b[4..20].copy_from_slice(&self.src);
        b[20..36].copy_from_slice(&self.dst);
        Ok(Self::LEN)
    }

    /// The source and destination as IPv4 addresses, for an IPv4 header.
    pub fn ipv4_addrs(&self) -> Option<([u8; 4], [u8; 4])> {
        let last4 = |a: &[u8; 16]| [a[12], a[13], a[14], a[15]];
        (self.ip_version == 4).then(|| (last4(&self.src), last4(&self.dst)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(m: CmMsg) {
        let mut b = [0xA5u8; 300];
        assert_eq!(m.emit(0x42, &mut b), Ok(MAD_LEN));
        assert_eq!(b[MAD_LEN], 0xA5, "wrote past the MAD");
        assert_eq!(CmMsg::parse(&b), Ok((0x42, m)));
    }

    #[test]
    fn every_message_round_trips() {
        let path = CmPath {
            local_lid: 0xFFFF,
            remote_lid: 0xFFFF,
            local_gid: [1; 16],
            remote_gid: [2; 16],
            flow_label: 0xABCDE,
            packet_rate: 0x3F,
            traffic_class: 0x68,
            hop_limit: 64,
            sl: 0xF,
            subnet_local: true,
            local_ack_timeout: 0x1F,
        };
        round_trip(CmMsg::Req(ReqRepr {
            local_comm_id: 0x1122_3344,
            service_id: rdma_cm_service_id(port_space::TCP, 7174),
            local_ca_guid: 0x0200_00ff_fe00_0001,
            local_qkey: Qkey(0x8001_0000),
            local_qpn: Qpn::new(0x11),
            responder_resources: 16,
            local_eecn: 0xABCDEF,
            initiator_depth: 4,
            remote_eecn: 0x123456,
            remote_cm_response_timeout: 20,
            transport: CmTransport::Uc,
            end_to_end_flow_control: true,
            starting_psn: Psn::new(0xFEDCBA),
            local_cm_response_timeout: 21,
            retry_count: 7,
            pkey: 0xFFFF,
            path_mtu: 3,
            rdc_exists: true,
            rnr_retry_count: 6,
            max_cm_retries: 15,
            srq: true,
            extended_transport: 5,
            primary: path,
            alternate: CmPath::default(),
            private_data: PrivateData::from_slice(&[9; 92]).unwrap(),
        }));
        round_trip(CmMsg::Mra(MraRepr {
            local_comm_id: 1,
            remote_comm_id: 2,
            message_mraed: CmMsgKind::Rep,
            service_timeout: 0x1F,
            private_data: PrivateData::from_slice(b"later").unwrap(),
        }));
        round_trip(CmMsg::Rej(RejRepr {
            local_comm_id: 3,
            remote_comm_id: 4,
            message_rejected: CmMsgKind::Other,
            reject_info_len: 0x7F,
            reason: rej_reason::CONSUMER_DEFINED,
            ari: [7; ARI_LEN],
            private_data: PrivateData::from_slice(&[8; 148]).unwrap(),
        }));
        round_trip(CmMsg::Rep(RepRepr {
            local_comm_id: 5,
            remote_comm_id: 6,
            local_qkey: Qkey(1),
            local_qpn: Qpn::new(0xFFFFFF),
            local_eecn: 0,
            starting_psn: Psn::new(0x800000),
            responder_resources: 1,
            initiator_depth: 2,
            target_ack_delay: 15,
            failover_accepted: 2,
            end_to_end_flow_control: true,
            rnr_retry_count: 7,
            srq: true,
            local_ca_guid: u64::MAX,
            private_data: PrivateData::from_slice(&[1, 2, 3]).unwrap(),
        }));
        let ids = CommIdsRepr {
            local_comm_id: 7,
            remote_comm_id: 8,
            private_data: PrivateData::from_slice(&[0xEE; 224]).unwrap(),
        };
        round_trip(CmMsg::Rtu(ids));
        round_trip(CmMsg::Drep(ids));
        round_trip(CmMsg::Dreq(DreqRepr {
            local_comm_id: 9,
            remote_comm_id: 10,
            remote_qpn: Qpn::new(0x123),
            private_data: PrivateData::default(),
        }));
        round_trip(CmMsg::SidrReq(SidrReqRepr {
            request_id: 11,
            pkey: 0xFFFF,
            service_id: rdma_cm_service_id(port_space::UDP, 7174),
            private_data: PrivateData::from_slice(&[3; 216]).unwrap(),
        }));
        round_trip(CmMsg::SidrRep(SidrRepRepr {
            request_id: 12,
            status: sidr_status::NO_QP,
            add_info_len: 72,
            qpn: Qpn::new(0x42),
            service_id: 99,
            qkey: Qkey(0x1234_5678),
            add_info: [4; ARI_LEN],
            private_data: PrivateData::from_slice(&[5; 136]).unwrap(),
        }));
    }

    #[test]
    fn packed_bits_land_where_the_kernel_puts_them() {
        // ibta_vol1_c12.h: REQ byte 43 = remote CM response timeout (5) | transport (2) |
        // EE flow control (1); byte 47 = local CM response timeout (5) | retry count (3);
        // byte 50 = path MTU (4) | RDC exists (1) | RNR retry (3); byte 51 = max CM
        // retries (4) | SRQ (1) | extended transport (3); REP byte 27 = RNR retry (3) |
        // SRQ (1).
        let mut req = ReqRepr {
            remote_cm_response_timeout: 20,
            transport: CmTransport::Uc,
            end_to_end_flow_control: false,
            local_cm_response_timeout: 20,
            retry_count: 7,
            path_mtu: 3,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            srq: false,
            ..ReqRepr::default()
        };
        req.primary.flow_label = 0x12345;
        req.primary.packet_rate = 7;
        let mut b = [0u8; MAD_LEN];
        CmMsg::Req(req).emit(0, &mut b).unwrap();
        let d = &b[HEADER_LEN..];
        assert_eq!(d[43], (20 << 3) | (1 << 1));
        assert_eq!(d[47], (20 << 3) | 7);
        assert_eq!(d[50], (3 << 4) | 7);
        assert_eq!(d[51], 15 << 4);
        assert_eq!(&d[88..92], &[0x12, 0x34, 0x50, 7]);
        let rep = RepRepr {
            rnr_retry_count: 7,
            srq: true,
            target_ack_delay: 15,
            ..RepRepr::default()
        };
        CmMsg::Rep(rep).emit(0, &mut b).unwrap();
        let d = &b[HEADER_LEN..];
        assert_eq!(d[26], 15 << 3);
        assert_eq!(d[27], 0xF0);
    }

    #[test]
    fn refuses_what_is_not_a_cm_send() {
        let mut b = [0u8; MAD_LEN];
        CmMsg::Rtu(CommIdsRepr::default()).emit(1, &mut b).unwrap();
        assert_eq!(CmMsg::parse(&b[..255]), Err(CmError::Truncated));
        let mut bad = b;
        bad[1] = 0x81;
        assert_eq!(CmMsg::parse(&bad), Err(CmError::NotCm { mgmt_class: 0x81 }));
        let mut bad = b;
        bad[2] = 1;
        assert_eq!(CmMsg::parse(&bad), Err(CmError::BadClassVersion(1)));
        let mut bad = b;
        bad[3] = 0x81;
        assert_eq!(CmMsg::parse(&bad), Err(CmError::BadMethod(0x81)));
        let mut bad = b;
        bad[17] = 0x19; // LAP
        assert_eq!(CmMsg::parse(&bad), Err(CmError::UnknownAttribute(0x19)));
        let mut bad = b;
        bad[0] = 2;
        assert_eq!(CmMsg::parse(&bad), Err(CmError::BadBaseVersion(2)));
    }

    #[test]
    fn rdma_cm_service_ids_and_ip_header() {
        // RDMA_PS_TCP port 18515 (perftest's) = 0x0000000001064853.
        let sid = rdma_cm_service_id(port_space::TCP, 18515);
        assert_eq!(sid, 0x0000_0000_0106_4853);
        assert_eq!(rdma_cm_port(sid), Some((port_space::TCP, 18515)));
        assert_eq!(rdma_cm_port(0x1234_0000_0106_0001), None);
        let h = IpCmHdr::ipv4([10, 77, 0, 3], 0xC001, [10, 77, 0, 2]);
        let mut b = [0u8; 40];
        h.emit(&mut b).unwrap();
        assert_eq!(&b[..4], &[0, 0x40, 0xC0, 0x01]);
        assert_eq!(&b[16..20], &[10, 77, 0, 3]);
        assert_eq!(&b[32..36], &[10, 77, 0, 2]);
        assert_eq!(IpCmHdr::parse(&b), Some(h));
        assert_eq!(h.ipv4_addrs(), Some(([10, 77, 0, 3], [10, 77, 0, 2])));
        b[1] = 0x50;
        assert_eq!(IpCmHdr::parse(&b), None);
    }
}
