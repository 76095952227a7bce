//! Hardware-style counters. Where Linux rxe has a counter for the same event, the field
//! has rxe's name (`rxe_hw_counters.c`), so `rdma statistic` users know them; rxe has no
//! congestion control, so those counters take mlx5's names (`hw_counters/np_cnp_sent`).

/// Engine-wide event counters.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Counters {
    /// Frames handed out by `poll_transmit` (rxe `sent_pkts`).
    pub sent_pkts: u64,
    /// Frames accepted for a QP (rxe `rcvd_pkts`).
    pub rcvd_pkts: u64,
    /// Duplicate requests seen by a responder (rxe `duplicate_request`).
    pub duplicate_request: u64,
    /// Out-of-sequence requests seen by a responder (rxe `out_of_seq_request`).
    pub out_of_seq_request: u64,
    /// RNR NAKs received by a requester (rxe `rcvd_rnr_err`).
    pub rcvd_rnr_err: u64,
    /// RNR NAKs sent by a responder (rxe `send_rnr_err`).
    pub send_rnr_err: u64,
    /// PSN sequence error NAKs received (rxe `rcvd_seq_err`).
    pub rcvd_seq_err: u64,
    /// Transport retries exhausted (rxe `retry_exceeded_err`).
    pub retry_exceeded_err: u64,
    /// RNR retries exhausted (rxe `retry_rnr_exceeded_err`).
    pub retry_rnr_exceeded_err: u64,
    /// Go-Back-N retries started (rxe `completer_retry_err`).
    pub completer_retry_err: u64,
    /// Of those, the ones the local ACK timer started (mlx5 `local_ack_timeout_err`; rxe
    /// has no such counter).
    pub local_ack_timeout_err: u64,
    /// Request packets sent again: after a Go-Back-N rewind (a PSN below the highest
    /// already sent), or resent selectively; rxe has no such counter. Only the frames
    /// the engine builds: a fast path's segmenter counts its own resends (the port's
    /// counter adds them, `docs/fastpath.md` §2.2).
    pub retransmitted_pkts: u64,
    /// SEND messages sent (rxe `rdma_sends`).
    pub rdma_sends: u64,
    /// SEND / WRITE_WITH_IMM messages received into a receive WQE (rxe `rdma_recvs`).
    pub rdma_recvs: u64,
    /// Frames `wire::parse` rejected (no rxe name).
    pub rcvd_parse_err: u64,
    /// Frames not addressed to this port (MAC or IP), or RoCE frames for a QP number
    /// that does not exist.
    pub rcvd_not_for_us: u64,
    /// Frames for a QP in a state that does not receive, or of the wrong transport.
    pub rcvd_wrong_state: u64,
    /// P_Key mismatches (dropped).
    pub rcvd_pkey_err: u64,
    /// UD Q_Key mismatches (dropped).
    pub rcvd_qkey_err: u64,
    /// RC/UC frames whose source address is not the QP's peer (dropped).
    pub rcvd_addr_err: u64,
    /// Responses that match no outstanding request, or are malformed (dropped).
    pub rcvd_bad_resp: u64,
    /// Requests dropped by a responder without a NAK (UC/UD errors, duplicate READ or
    /// ATOMIC with no saved resource, responder resources exhausted).
    pub resp_dropped: u64,
    /// CNPs a QP with its reaction point on reacted to (mlx5 `rp_cnp_handled`).
    pub rp_cnp_handled: u64,
    /// CNPs ignored: reaction point off, no such QP, or not from the QP's peer (mlx5
    /// `rp_cnp_ignored`).
    pub rp_cnp_ignored: u64,
    /// CE-marked RoCE packets accepted for a QP (mlx5 `np_ecn_marked_roce_packets`).
    pub np_ecn_marked_roce_packets: u64,
    /// CNPs sent by the notification point (mlx5 `np_cnp_sent`).
    pub np_cnp_sent: u64,
    /// Frames abandoned because a DMA read faulted while building them.
    pub tx_dma_err: u64,
    /// Selective-repeat SACKs sent by a responder (no rxe name).
    pub sent_sack: u64,
    /// Selective-repeat SACKs acted on by a requester (also counted in `rcvd_seq_err`).
    pub rcvd_sack: u64,
}

impl Counters {
    /// All zero (a `const` for NICs built at compile time, see `Engine::new`).
    pub const ZERO: Self = Self {
        sent_pkts: 0,
        rcvd_pkts: 0,
        duplicate_request: 0,
        out_of_seq_request: 0,
        rcvd_rnr_err: 0,
        send_rnr_err: 0,
        rcvd_seq_err: 0,
        retry_exceeded_err: 0,
        retry_rnr_exceeded_err: 0,
        completer_retry_err: 0,
        local_ack_timeout_err: 0,
        retransmitted_pkts: 0,
        rdma_sends: 0,
        rdma_recvs: 0,
        rcvd_parse_err: 0,
        rcvd_not_for_us: 0,
        rcvd_wrong_state: 0,
        rcvd_pkey_err: 0,
        rcvd_qkey_err: 0,
        rcvd_addr_err: 0,
        rcvd_bad_resp: 0,
        resp_dropped: 0,
        rp_cnp_handled: 0,
        rp_cnp_ignored: 0,
        np_ecn_marked_roce_packets: 0,
        np_cnp_sent: 0,
        tx_dma_err: 0,
        sent_sack: 0,
        rcvd_sack: 0,
    };
}

impl Default for Counters {
    fn default() -> Self {
        Self::ZERO
    }
}
