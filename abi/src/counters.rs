//! The counter sets QUERY_COUNTERS reads (ABI 1.1): the port's (the engine's protocol
//! counters under Linux rxe's names, mlx5's for congestion control, then the runtime's)
//! and each QP's. A set is an array of little-endian `u64`, indexed as the lists here
//! say. **Lists only grow at the end**: an index, once given, keeps its counter, so a
//! host reads the counters it knows from any later NIC.

use crate::DecodeError;
use roce_core::cc::QpCcInfo;
use roce_core::transport::Counters;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Counters of the firmware runtime itself (the engine keeps the protocol's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeCounters {
    /// Commands executed.
    pub commands: u64,
    /// Commands that failed.
    pub command_errors: u64,
    /// Send WQEs fetched and posted.
    pub send_wqes: u64,
    /// Receive WQEs fetched and posted.
    pub recv_wqes: u64,
    /// WQEs the engine refused (completed in error or skipped).
    pub bad_wqes: u64,
    /// Doorbells (send, receive, command queue) whose producer index claimed more
    /// entries than the ring holds; each fails its QP (or skips the commands). Also
    /// receive doorbells of a QP on an SRQ, which are ignored.
    pub bad_doorbells: u64,
    /// Frames handed to the engine.
    pub frames_rx: u64,
    /// Frames the engine sent.
    pub frames_tx: u64,
    /// CQEs written to the host.
    pub cqes: u64,
    /// CQs that overflowed.
    pub cq_overflows: u64,
    /// DMA reads or writes that faulted.
    pub dma_errors: u64,
    /// The fast path's own counts (zero without one).
    pub fastpath: FastPathCounters,
    /// Message descriptors posted to the fast path, and its events handled.
    pub fp_descriptors: u64,
    pub fp_events: u64,
    /// QP context cache (`docs/scale.md`): lookups of a QP found resident / brought in
    /// from the ICM, resident QPs written back to make room, packets dropped because
    /// every resident QP had work in flight, and bytes of context DMA (both ways).
    pub qp_cache_hits: u64,
    pub qp_cache_misses: u64,
    pub qp_cache_evictions: u64,
    pub qp_cache_drops: u64,
    pub qp_ctx_dma_bytes: u64,
    /// The fast path's context cache (`docs/scale.md`): frames whose QP's context was
    /// in its entry (and on), frames whose entry held another QP's (exceptions with
    /// reason 14), both counted by the hardware and read when the host asks; and
    /// entries the firmware emptied (a QP taken off the fast path to give its entry to
    /// another, or to leave for the ICM).
    pub fp_ctx_cache_hits: u64,
    pub fp_ctx_cache_misses: u64,
    pub fp_ctx_cache_evictions: u64,
    /// Responses (ACKNOWLEDGE, READ response, ATOMIC ACKNOWLEDGE) for a QP stored in the
    /// ICM, dropped without bringing it in: duplicates, since a QP is written back only
    /// with every request it sent acknowledged (`docs/scale.md`, "Responses for stored
    /// QPs").
    pub qp_cache_stale_responses: u64,
    /// Requests the fast path's receive path answered itself (docs/fastpath.md §3.4,
    /// the PSN rule), counted by the hardware and read when the host asks: out of
    /// sequence (dropped; one NAK "PSN sequence error" per gap) and duplicate
    /// SEND/WRITEs (ACKed again). The port's `out_of_seq_request` and
    /// `duplicate_request` are these plus the engine's own.
    pub fp_rx_out_of_seq: u64,
    pub fp_rx_duplicates: u64,
}

/// What the RC fast path counted (`docs/fastpath.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastPathCounters {
    /// Frames the segmenter and the ACK path sent.
    pub tx_frames: u64,
    /// Requests placed and responses taken without the firmware.
    pub rx_handled: u64,
    /// Frames handed to the firmware as exceptions.
    pub rx_exceptions: u64,
    /// Frames the parser dropped.
    pub rx_dropped: u64,
    /// Packets the segmenter aborted because the host could not read their payload
    /// (docs/fastpath.md §6; the firmware's retransmission repairs them).
    pub tx_dma_errors: u64,
    /// Request packets the segmenter sent again: a PSN before its send context's
    /// `next_psn` (one past the highest it had sent). The port's `retransmitted_pkts`
    /// is these plus the firmware's own resends (the engine hands the fast path whole
    /// messages and cannot know which of their packets reached the wire before a
    /// FLUSH; docs/fastpath.md §2.2).
    pub tx_resent: u64,
}

impl RuntimeCounters {
    /// All zero (a `const`, for the firmware's `Nic::idle`).
    pub const ZERO: Self = Self {
        commands: 0,
        command_errors: 0,
        send_wqes: 0,
        recv_wqes: 0,
        bad_wqes: 0,
        bad_doorbells: 0,
        frames_rx: 0,
        frames_tx: 0,
        cqes: 0,
        cq_overflows: 0,
        dma_errors: 0,
        fastpath: FastPathCounters::ZERO,
        fp_descriptors: 0,
        fp_events: 0,
        qp_cache_hits: 0,
        qp_cache_misses: 0,
        qp_cache_evictions: 0,
        qp_cache_drops: 0,
        qp_ctx_dma_bytes: 0,
        fp_ctx_cache_hits: 0,
        fp_ctx_cache_misses: 0,
        fp_ctx_cache_evictions: 0,
        qp_cache_stale_responses: 0,
        fp_rx_out_of_seq: 0,
        fp_rx_duplicates: 0,
    };
}

impl Default for RuntimeCounters {
    fn default() -> Self {
        Self::ZERO
    }
}

impl FastPathCounters {
    /// All zero (a `const`, for [`RuntimeCounters::ZERO`]).
    pub const ZERO: Self = Self {
        tx_frames: 0,
        rx_handled: 0,
        rx_exceptions: 0,
        rx_dropped: 0,
        tx_dma_errors: 0,
        tx_resent: 0,
    };
}

impl Default for FastPathCounters {
    fn default() -> Self {
        Self::ZERO
    }
}

/// One list of `name: source.field` in index order makes the names, the encoder and the
/// decoder of a set, so the three cannot disagree.
macro_rules! counter_set {
    (
        $(#[$doc:meta])* $names:ident, $encode:ident, $decode:ident,
        ($($src:ident: $ty:ty),+) { $($name:literal: $from:ident $(. $field:ident)+),+ $(,)? }
    ) => {
        $(#[$doc])*
        pub const $names: &[&str] = &[$($name),+];

        /// The set's values, in index order.
        pub fn $encode($($src: &$ty),+) -> [u64; $names.len()] {
            [$($from $(. $field)+),+]
        }

        /// The counters from values in index order (missing ones read as zero).
        pub fn $decode(values: &[u64]) -> ($($ty),+) {
            $(let mut $src = <$ty>::default();)+
            let mut v = values.iter().copied();
            $($from $(. $field)+ = v.next().unwrap_or(0);)+
            ($($src),+)
        }
    };
}

counter_set! {
    /// The port's counter set ([`CounterScope::Port`]).
    PORT_COUNTERS, port_counter_values, port_counters_from,
    (engine: Counters, runtime: RuntimeCounters) {
        "sent_pkts": engine.sent_pkts,
        "rcvd_pkts": engine.rcvd_pkts,
        "duplicate_request": engine.duplicate_request,
        "out_of_seq_request": engine.out_of_seq_request,
        "rcvd_rnr_err": engine.rcvd_rnr_err,
        "send_rnr_err": engine.send_rnr_err,
        "rcvd_seq_err": engine.rcvd_seq_err,
        "retry_exceeded_err": engine.retry_exceeded_err,
        "retry_rnr_exceeded_err": engine.retry_rnr_exceeded_err,
        "completer_retry_err": engine.completer_retry_err,
        "retransmitted_pkts": engine.retransmitted_pkts,
        "rdma_sends": engine.rdma_sends,
        "rdma_recvs": engine.rdma_recvs,
        "rcvd_parse_err": engine.rcvd_parse_err,
        "rcvd_not_for_us": engine.rcvd_not_for_us,
        "rcvd_wrong_state": engine.rcvd_wrong_state,
        "rcvd_pkey_err": engine.rcvd_pkey_err,
        "rcvd_qkey_err": engine.rcvd_qkey_err,
        "rcvd_addr_err": engine.rcvd_addr_err,
        "rcvd_bad_resp": engine.rcvd_bad_resp,
        "resp_dropped": engine.resp_dropped,
        "rp_cnp_handled": engine.rp_cnp_handled,
        "rp_cnp_ignored": engine.rp_cnp_ignored,
        "np_ecn_marked_roce_packets": engine.np_ecn_marked_roce_packets,
        "np_cnp_sent": engine.np_cnp_sent,
        "tx_dma_err": engine.tx_dma_err,
        "sent_sack": engine.sent_sack,
        "rcvd_sack": engine.rcvd_sack,
        "commands": runtime.commands,
        "command_errors": runtime.command_errors,
        "send_wqes": runtime.send_wqes,
        "recv_wqes": runtime.recv_wqes,
        "bad_wqes": runtime.bad_wqes,
        "frames_rx": runtime.frames_rx,
        "frames_tx": runtime.frames_tx,
        "cqes": runtime.cqes,
        "cq_overflows": runtime.cq_overflows,
        "dma_errors": runtime.dma_errors,
        "bad_doorbells": runtime.bad_doorbells,
        "fp_tx_frames": runtime.fastpath.tx_frames,
        "fp_rx_handled": runtime.fastpath.rx_handled,
        "fp_rx_exceptions": runtime.fastpath.rx_exceptions,
        "fp_rx_dropped": runtime.fastpath.rx_dropped,
        "fp_descriptors": runtime.fp_descriptors,
        "fp_events": runtime.fp_events,
        "local_ack_timeout_err": engine.local_ack_timeout_err,
        "qp_cache_hits": runtime.qp_cache_hits,
        "qp_cache_misses": runtime.qp_cache_misses,
        "qp_cache_evictions": runtime.qp_cache_evictions,
        "qp_cache_drops": runtime.qp_cache_drops,
        "qp_ctx_dma_bytes": runtime.qp_ctx_dma_bytes,
        "fp_tx_dma_errors": runtime.fastpath.tx_dma_errors,
        "fp_ctx_cache_hits": runtime.fp_ctx_cache_hits,
        "fp_ctx_cache_misses": runtime.fp_ctx_cache_misses,
        "fp_ctx_cache_evictions": runtime.fp_ctx_cache_evictions,
        "fp_tx_resent": runtime.fastpath.tx_resent,
        "qp_cache_stale_responses": runtime.qp_cache_stale_responses,
        "fp_rx_out_of_seq": runtime.fp_rx_out_of_seq,
        "fp_rx_duplicates": runtime.fp_rx_duplicates,
    }
}

/// The QP counter set ([`CounterScope::Qp`]): mlx5's congestion counters, per QP.
pub const QP_COUNTERS: &[&str] = &[
    "np_cnp_sent",
    "rp_cnp_handled",
    "np_ecn_marked_roce_packets",
];

/// The QP set's values, in index order.
pub fn qp_counter_values(i: &QpCcInfo) -> [u64; QP_COUNTERS.len()] {
    [
        i.np_cnp_sent,
        i.rp_cnp_handled,
        i.np_ecn_marked_roce_packets,
    ]
}

/// Which counter set QUERY_COUNTERS reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CounterScope {
    /// The port's ([`PORT_COUNTERS`]).
    Port = 0,
    /// One QP's ([`QP_COUNTERS`]); `handle` is its QPN.
    Qp = 1,
}

impl CounterScope {
    /// From the wire value.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Port),
            1 => Some(Self::Qp),
            _ => None,
        }
    }
}

/// QUERY_COUNTERS parameters: the NIC writes counters `first..first + count` of the set
/// (those it has) as little-endian `u64` into host memory at `addr`, and answers in
/// `out` with the number of counters the set holds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct QueryCountersArg {
    /// [`CounterScope`].
    pub scope: u8,
    pub reserved: [u8; 3],
    /// The QPN for [`CounterScope::Qp`].
    pub handle: U32,
    /// First counter index.
    pub first: U16,
    /// Counters wanted.
    pub count: U16,
    pub reserved1: U32,
    /// Host buffer of `8 * count` bytes.
    pub addr: U64,
}

impl QueryCountersArg {
    /// The scope, checked.
    pub fn counter_scope(&self) -> Result<CounterScope, DecodeError> {
        CounterScope::from_u8(self.scope).ok_or(DecodeError("unknown counter scope"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    #[test]
    fn every_counter_of_the_engine_and_the_runtime_has_an_index() {
        // The structs are all u64 fields: the list must hold exactly as many.
        let fields = (size_of::<Counters>() + size_of::<RuntimeCounters>()) / 8;
        assert_eq!(PORT_COUNTERS.len(), fields);
        assert_eq!(size_of::<QueryCountersArg>(), 24);
        use core::mem::offset_of;
        assert_eq!(
            [
                offset_of!(QueryCountersArg, handle),
                offset_of!(QueryCountersArg, first),
                offset_of!(QueryCountersArg, count),
                offset_of!(QueryCountersArg, addr),
            ],
            [4, 8, 10, 16]
        );
        // The indices docs/abi.md gives: a counter added later takes the next index and
        // never moves the ones before it (hosts read them by position).
        let at = |name| PORT_COUNTERS.iter().position(|n| *n == name);
        assert_eq!(
            [
                at("sent_pkts"),
                at("rcvd_parse_err"),
                at("rp_cnp_handled"),
                at("commands"),
                at("fp_tx_frames"),
                at("local_ack_timeout_err"),
                at("qp_cache_hits"),
                at("fp_tx_dma_errors"),
                at("fp_ctx_cache_hits"),
                at("fp_tx_resent"),
                at("qp_cache_stale_responses"),
                at("fp_rx_out_of_seq"),
                at("fp_rx_duplicates"),
            ],
            [
                Some(0),
                Some(13),
                Some(21),
                Some(28),
                Some(39),
                Some(45),
                Some(46),
                Some(51),
                Some(52),
                Some(55),
                Some(56),
                Some(57),
                Some(58)
            ]
        );
    }

    #[test]
    fn counters_cross_by_name_and_index() {
        let e = Counters {
            sent_pkts: 1,
            retransmitted_pkts: 11,
            np_cnp_sent: 25,
            rcvd_sack: 28,
            ..Counters::default()
        };
        let r = RuntimeCounters {
            commands: 29,
            dma_errors: 38,
            ..RuntimeCounters::default()
        };
        let v = port_counter_values(&e, &r);
        let at = |name| v[PORT_COUNTERS.iter().position(|n| *n == name).unwrap()];
        assert_eq!(
            (at("sent_pkts"), at("retransmitted_pkts"), at("np_cnp_sent")),
            (1, 11, 25)
        );
        assert_eq!((at("commands"), at("dma_errors")), (29, 38));
        assert_eq!(port_counters_from(&v), (e, r));
        // A shorter answer (an older NIC) leaves the rest zero.
        let (e2, r2) = port_counters_from(&v[..2]);
        assert_eq!((e2.sent_pkts, e2.rcvd_sack, r2.commands), (1, 0, 0));
        // Names are unique.
        for (i, n) in PORT_COUNTERS.iter().enumerate() {
            assert!(!PORT_COUNTERS[i + 1..].contains(n), "{n} twice");
        }
    }
}
