// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_pkg: types and record layouts of the RC fast path (docs/fastpath.md,
// interface v0.2).
//
// The firmware-facing records (send context, TX message descriptor, ACK
// descriptor, receive context, MR entry, event) are little-endian byte
// records: byte i of a record is bits [8i+7:8i] of the vector that carries
// it, so a little-endian field of w bits at byte offset o is simply
// rec[8*o +: w]. The offsets below are the tables of docs/fastpath.md; the
// Rust encoders (roce_core::fastpath::layout, the contract) write them, and
// the differential tests feed their bytes to the RTL.

`resetall
`default_nettype none

package fp_pkg;

  // ------------------------------------------------------------ sizes
  localparam int SCTX_BYTES = 96;
  localparam int TXD_BYTES = 96;
  localparam int ACKD_BYTES = 16;
  localparam int RCTX_BYTES = 68;
  localparam int MR_BYTES = 32;
  localparam int EV_BYTES = 64;
  localparam int TMPL_BYTES = 66;   // wire::HeaderTemplate::MAX_LEN
  localparam int HV_BYTES = 128;    // header vector: template + BTH + extensions (<= 66 + 40)
  localparam int TH_BYTES = 40;     // transport headers: BTH (12) + at most 28 bytes of extensions

  // ------------------------------------------- send context (§2.1), bytes
  localparam int SC_HDR_LEN = 0;
  localparam int SC_L3_OFF = 1;
  localparam int SC_FLAGS = 2;      // [1:0] l3_kind, [2] valid, [3] sr, [7:4] mtu_log2
  localparam int SC_IP_SUM = 4;
  localparam int SC_PKEY = 6;
  localparam int SC_DEST_QPN = 8;
  localparam int SC_NEXT_PSN = 12;  // word 3: next_psn (24) + reserved; the hardware writes it back
  localparam int SC_UNA_PSN = 16;   // word 4: una_psn (24) + reserved
  localparam int SC_WINDOW = 20;
  localparam int SC_MAX_PKTS = 24;  // word 6: max_pkts_per_ack (16) + noack (16)
  localparam int SC_NOACK = 26;
  localparam int SC_TEMPLATE = 30;
  localparam int SC_WORD_PSN = 3;
  localparam int SC_WORD_UNA = 4;
  localparam int SC_WORD_NOACK = 6;

  // ------------------------------------ TX message descriptor (§2.2), bytes
  localparam int TD_QPN = 0;
  localparam int TD_OP = 3;
  localparam int TD_FLAGS = 4;      // [0] SE, [1] REPLAY
  localparam int TD_NUM_SGE = 5;
  localparam int TD_WQE = 6;        // wqe_index, for the in-flight list
  localparam int TD_LENGTH = 8;
  localparam int TD_IMM = 12;
  localparam int TD_RADDR = 16;
  localparam int TD_RKEY = 24;
  localparam int TD_FIRST_PSN = 28;
  localparam int TD_SGE = 32;       // 4 x {addr 64, length 32}
  localparam int TD_COMPARE = 56;   // CMP_SWAP (in place of sge[2])
  localparam int TD_SWAP_ADD = 64;  // CMP_SWAP, FETCH_ADD
  localparam int TD_START_PKT = 80;
  localparam int TD_END_PKT = 84;
  localparam int TD_WR_ID = 88;     // the WQE's wr_id when flags bit 2 (CQE) asks for one
  localparam int TD_F_CQE = 2;      // flags bit: the response path writes the CQE (§3.7)

  // op 0 = SEND (the planner's default case)
  localparam logic [7:0] OP_SEND_IMM = 8'd1;
  localparam logic [7:0] OP_SEND_INV = 8'd2;
  localparam logic [7:0] OP_WRITE = 8'd3;
  localparam logic [7:0] OP_WRITE_IMM = 8'd4;
  localparam logic [7:0] OP_READ = 8'd5;
  localparam logic [7:0] OP_CMP_SWAP = 8'd6;
  localparam logic [7:0] OP_FETCH_ADD = 8'd7;
  localparam logic [7:0] OP_FLUSH = 8'd15;

  // -------------------------------------------- ACK descriptor (§2.3), bytes
  localparam int AD_QPN = 0;
  localparam int AD_SYNDROME = 3;
  localparam int AD_PSN = 4;
  localparam int AD_FLAGS = 7;      // [0] SACK (BTH resv7 bit 0)
  localparam int AD_MSN = 8;

  // ------------------- response descriptor (internal: fp_rx -> fp_tx_plan)
  // The queue between the receive path and the planner carries ACK
  // descriptors (§2.3, bytes 0..15; the firmware's too) and READ response
  // descriptors (§2.4), in the order the receive path took their requests.
  // A READ response descriptor has AD_F_READ in byte AD_FLAGS, the PSN of
  // its next response at AD_PSN, the AETH's MSN at AD_MSN and the rest here.
  localparam int RESPD_BYTES = 32;
  localparam int AD_F_READ = 1;     // byte AD_FLAGS bit 1: a READ response descriptor
  localparam int AD_F_FIRST = 2;    // its next response is the READ's first
  // byte AD_FLAGS bit 3: an ACK or NAK of the receive path, which merges behind a
  // READ (fp_resp_q); the firmware's ACK descriptors never do
  localparam int AD_F_MERGE = 3;
  // byte AD_FLAGS bit 4 (with AD_F_READ): an ATOMIC ACKNOWLEDGE the receive path
  // queued for an atomic it executed, ordered as a READ's responses (fp_resp_q) and
  // sent as an ACK (fp_tx_plan) with its AtomicAckETH (the original value at RD_ORIG)
  localparam int AD_F_ATOMIC = 4;
  localparam int RD_ORIG = 16;
  localparam int RD_RKEY = 12;      // the request's R_Key
  localparam int RD_VA = 16;        // where the next response's payload is read
  localparam int RD_RESID = 24;     // bytes not sent (never 0)
  localparam int RD_PD = 28;        // the QP's PD (16 bits)

  // ------------------------------------------- receive context (§3.2), bytes
  localparam int RC_STATE = 0;      // 1 = on
  localparam int RC_CUR = 1;
  localparam int RC_ACCESS = 2;
  localparam int RC_MTU_LOG2 = 3;   // [3:0] log2(path MTU), [6:4] rd_max (the QP's
                                    // max_dest_rd_atomic, written by the firmware only)
  localparam int RC_EPSN = 4;
  localparam int RC_ACK_EVERY = 7;
  localparam int RC_MSN = 8;
  localparam int RC_UNACKED = 11;
  localparam int RC_PD = 12;        // 16 bits
  localparam int RC_PKEY = 14;
  localparam int RC_VA = 16;
  localparam int RC_RKEY = 24;
  localparam int RC_RESID = 28;
  localparam int RC_RECV_ADDR = 32;
  localparam int RC_LENGTH = 40;
  localparam int RC_FLAGS = 44;     // [0] nak_sent, [1] recv_loaded, [2] held, [3] reads,
                                    // [4] rq_empty (its RNR timer: RC_RECV_ADDR's low 5 bits),
                                    // [5] recv_cqe (the loaded buffer came with its wr_id)
  localparam int RC_QPN = 45;
  localparam int RC_PEER_GID = 48;  // 16 bytes, GID byte 0 first
  localparam int RC_RECV_RESID = 64; // the loaded receive buffer's bytes left (apart
                                     // from a WRITE's RESID and LENGTH)
  // table 1's words of the receive load (fp_rx): staged address low, high, length;
  // the command
  localparam int RL_W_ADDR = 20;
  localparam int RL_W_LEN = 22;
  localparam int RL_W_CMD = 23;

  localparam logic [7:0] CUR_NONE = 8'd0;
  localparam logic [7:0] CUR_SEND = 8'd1;
  localparam logic [7:0] CUR_WRITE = 8'd2;

  // ---------------------------------------------- MR table entry (§3.3), bytes
  localparam int MR_KEY = 0;
  localparam int MR_PD = 4;
  localparam int MR_BASE = 8;
  localparam int MR_LENGTH = 16;
  localparam int MR_ACCESS = 24;
  localparam int MR_VALID = 25;

  localparam logic [7:0] ACC_LOCAL_WRITE = 8'h01;
  localparam logic [7:0] ACC_REMOTE_WRITE = 8'h02;
  localparam logic [7:0] ACC_REMOTE_READ = 8'h04;
  localparam logic [7:0] ACC_REMOTE_ATOMIC = 8'h08;

  // ------------------------------------------------ event entry (§3.5), bytes
  localparam int EV_KIND = 0;
  localparam int EV_REASON = 1;
  localparam int EV_SLOT = 2;
  localparam int EV_QPN = 4;
  localparam int EV_OPCODE = 7;
  localparam int EV_PSN = 8;
  localparam int EV_FLAGS = 11;     // [6:5] PadCnt
  localparam int EV_PAY_OFF = 12;
  localparam int EV_PAY_LEN = 14;
  localparam int EV_EXT_OFF = 16;
  localparam int EV_FRAME_LEN = 18;
  localparam int EV_MSN = 20;
  localparam int EV_NET = 23;       // [1:0] 0 IPv4, 1 IPv6, 2 GRH; [2] 802.1Q tag
  localparam int EV_BYTE_LEN = 24;

  localparam logic [7:0] EVK_EXCEPTION = 8'd1;
  localparam logic [7:0] EVK_MSG_DONE = 8'd2;
  localparam logic [7:0] EVK_ACKED = 8'd3;
  localparam logic [7:0] EVK_READ = 8'd4;   // a READ request taken (§3.4)
  localparam logic [7:0] EVK_CE = 8'd5;     // a CE-marked request taken, no other event
  localparam logic [7:0] EVK_ATOMIC = 8'd6; // an atomic request executed (§3.4)
  localparam logic [7:0] EVK_RNR = 8'd7;    // a SEND to an empty receive queue RNR NAKed (§3.4)
  localparam logic [7:0] EVK_RD_DROP = 8'd10; // a READ or atomic request dropped: no resource (§3.4)
  localparam int EV_F_CE = 7;               // EV_FLAGS bit: MSG_DONE / READ / RNR of a CE-marked request
  // EV_FLAGS bit of a MSG_DONE: from fp_rx_check, the buffer came with its wr_id
  // (the context's recv_cqe); from fp_cqw, its CQE was written (§3.7)
  localparam int EV_F_CQE = 2;
  localparam int EV_RKEY = 12;      // READ: the RETH's R_Key, VA and length
  localparam int EV_VA = 16;
  localparam int EV_LEN = 24;
  localparam int EV_ORIG = 16;      // ATOMIC: the original value (little-endian)
  // ACKED's fields
  localparam int EV_DONE = 1;       // in-flight messages retired
  localparam int EV_WQE = 2;        // wqe_index of the last one retired
  localparam int EV_UNA = 28;
  localparam int EV_RFLAGS = 31;    // [0] a READ response (placed), [1] the READ's last,
                                    // [2] the CQE writer wrote the retired messages' CQEs
                                    // ([3] a NAK sequence error's rewind, [4] its
                                    // progress, [5] an RNR NAK's wait: §3.8), [6] an
                                    // ATOMIC ACKNOWLEDGE (its value written)
  localparam int EV_RNR = 32;       // with [5]: the RNR NAK's timer code [4:0]

  // exception reasons (§3.5), as roce_core::fastpath::Exception
  localparam logic [7:0] EXC_OFF = 8'd1;
  localparam logic [7:0] EXC_OPCODE = 8'd2;
  localparam logic [7:0] EXC_PSN = 8'd3;
  localparam logic [7:0] EXC_SEQUENCE = 8'd4;
  localparam logic [7:0] EXC_ECN = 8'd5;   // a CE-marked response (requests: EVK_CE)
  localparam logic [7:0] EXC_LENGTH = 8'd6;
  localparam logic [7:0] EXC_KEY = 8'd7;
  // 8 (a NAK outstanding) is not raised any more: the expected packet is placed
  // and closes the gap (nak_sent cleared), as the engine's responder does
  localparam logic [7:0] EXC_NO_RECV = 8'd9;
  localparam logic [7:0] EXC_HELD = 8'd10;
  localparam logic [7:0] EXC_NAK_IN = 8'd11;   // a NAK or RNR NAK came in
  localparam logic [7:0] EXC_ORDER = 8'd12;
  localparam logic [7:0] EXC_ADDRESS = 8'd13;
  // the QP's context is not in its entry (qpn mod entries holds another QP's, or none)
  localparam logic [7:0] EXC_MISS = 8'd14;

  // ------------------------------------------------------ RC opcodes (IBTA)
  localparam logic [7:0] RC_SEND_FIRST = 8'h00;
  localparam logic [7:0] RC_SEND_MIDDLE = 8'h01;
  localparam logic [7:0] RC_SEND_LAST = 8'h02;
  localparam logic [7:0] RC_SEND_LAST_IMM = 8'h03;
  localparam logic [7:0] RC_SEND_ONLY = 8'h04;
  localparam logic [7:0] RC_SEND_ONLY_IMM = 8'h05;
  localparam logic [7:0] RC_WRITE_FIRST = 8'h06;
  localparam logic [7:0] RC_WRITE_MIDDLE = 8'h07;
  localparam logic [7:0] RC_WRITE_LAST = 8'h08;
  localparam logic [7:0] RC_WRITE_LAST_IMM = 8'h09;
  localparam logic [7:0] RC_WRITE_ONLY = 8'h0A;
  localparam logic [7:0] RC_WRITE_ONLY_IMM = 8'h0B;
  localparam logic [7:0] RC_READ_REQ = 8'h0C;
  localparam logic [7:0] RC_READ_RESP_FIRST = 8'h0D;
  localparam logic [7:0] RC_READ_RESP_MIDDLE = 8'h0E;
  localparam logic [7:0] RC_READ_RESP_LAST = 8'h0F;
  localparam logic [7:0] RC_READ_RESP_ONLY = 8'h10;
  localparam logic [7:0] RC_ACK = 8'h11;
  localparam logic [7:0] RC_ATOMIC_ACK = 8'h12;
  localparam logic [7:0] RC_CMP_SWAP = 8'h13;
  localparam logic [7:0] RC_FETCH_ADD = 8'h14;
  localparam logic [7:0] RC_SEND_LAST_INV = 8'h16;
  localparam logic [7:0] RC_SEND_ONLY_INV = 8'h17;

  // ------------------------------- in-flight list entry (fp_inflight), bits
  localparam int IF_ENTRIES = 8;    // per QP
  localparam int IF_GAP = 0;        // an append was dropped (row full) before this one
  localparam int IF_KIND = 1;       // 2 bits: IFK_*
  localparam int IF_FIRST = 3;      // first PSN
  localparam int IF_LAST = 27;      // last PSN
  localparam int IF_WQE = 51;       // wqe_index
  localparam int IF_LEN = 67;       // message length (READ: checks its responses)
  localparam int IF_CQE = 99;       // the descriptor asked for a CQE (§3.7)
  localparam int IF_BITS = 100;
  // a READ's SGEs (fp_inflight's second table, by entry): 4 x {addr 64, length 32},
  // the lengths of SGEs past num_sge zero
  localparam int SG_N = 4;
  localparam int SG_BITS = SG_N * 96;
  localparam logic [1:0] IFK_MSG = 2'd0;      // SEND or WRITE
  localparam logic [1:0] IFK_READ = 2'd1;
  localparam logic [1:0] IFK_ATOMIC = 2'd2;

  // ---------------------------------------------- the CQE writer (§3.7)
  // What an entry that asked for a CQE keeps for it (fp_inflight's third
  // table, by entry): wr_id, the immediate, the CQE's opcode (ibv_wc_opcode:
  // 0 SEND, 1 RDMA_WRITE, 2 RDMA_READ) and whether it carries the immediate.
  localparam int CQ_WRID = 0;       // 64
  localparam int CQ_IMM = 64;       // 32
  localparam int CQ_OPC = 96;       // 3: the CQE's opcode (IBV_WC_SEND .. IBV_WC_FETCH_ADD)
  localparam int CQ_WIMM = 99;      // 1
  localparam int CQ_INFO_BITS = 128;   // 4 words
  // one CQE to write: the entry's record and the message's length
  localparam int CQ_REC_BITS = CQ_INFO_BITS + 32;
  // CQs the writer holds (the firmware's CqWriter: CQ numbers 0..63)
  localparam int CQ_N = 64;
  // table 3 (roce_fp_top's port table) words of the writer: index = CQ number
  // for the ring (address low/high, {valid [8], log2 depth [4:0]}, producer
  // index, the host's consumer index as last seen), index = context entry
  // for the QP's send CQ ({valid [8], CQ [5:0]})
  // (words 16 ring low, 17 ring high, 18 {valid, log2}, 19 pi, 20 ci)
  localparam logic [4:0] CQW_RING_LO = 5'd16;
  localparam logic [4:0] CQW_CI = 5'd20;
  localparam logic [4:0] CQW_SEND_CQ = 5'd24;
  // receive CQEs (§3.7): word 24 with bit 31 set writes the entry's receive CQ
  // ({1, valid [8], CQ [5:0]}); words 23 and 31 (index = context entry) the
  // wr_id (low, high) of the receive WQE the firmware loads next
  localparam logic [4:0] CQW_RECV_WRID_LO = 5'd23;
  localparam logic [4:0] CQW_RECV_WRID_HI = 5'd31;
  localparam logic [7:0] WC_RECV = 8'd128;   // IBV_WC_RECV
  // the firmware's CQE port (a soft core beside a running writer, the SoC;
  // docs/fastpath.md §3.7): each write of word 29 (any index) stages the
  // next of words 0..6 of a CQE, in order; a write of word 30 (index = CQ)
  // posts it with this word as its word 7 (status, opcode, flags, owner: the
  // writer sets the owner bit) and starts the next CQE's staging at word 0.
  // The writer writes it at the ring's producer index in turn with its own,
  // or refuses it when the ring has no room by its consumer index (word 20,
  // which the firmware writes first). Reads of word 25 (bit 0: the last post
  // was written) and 26 (the CQ's producer index after it) wait for the post.
  // (The WQE fetch has words 9..15, 21..23 and 25..28 of its own: the port's
  // words are those left.)
  localparam logic [4:0] CQW_FW_STAGE = 5'd29;
  localparam logic [4:0] CQW_FW_POST = 5'd30;
  localparam logic [4:0] CQW_FW_DONE = 5'd25;
  localparam logic [4:0] CQW_FW_PI = 5'd26;
  // whether a write (read) of word w of table 3 is the writer's
  function automatic logic cqw_wr_word(input logic [4:0] w);
    return (w >= CQW_RING_LO && w <= CQW_CI) || w == CQW_SEND_CQ
        || w == CQW_FW_STAGE || w == CQW_FW_POST || w == CQW_RECV_WRID_LO
        || w == CQW_RECV_WRID_HI;
  endfunction
  function automatic logic cqw_rd_word(input logic [4:0] w);
    return (w >= CQW_RING_LO && w <= CQW_CI) || w == CQW_SEND_CQ
        || w == CQW_FW_DONE || w == CQW_FW_PI;
  endfunction

  // The WQE fetch's words of table 3 (fp_sqf, docs/fastpath.md §3.8). Writes:
  // a hand-over staged in RING_LO..RTO_HI (any index), then CMD (index = the
  // QPN: 1 hand over, 2 take back); DB (index = the QPN) the host's producer
  // index; NOW_LO/HI the time in ns. Reads (index = the QPN): CI, DONE, BASE,
  // UNA, DL_LO/HI (the local ACK deadline), FLAGS {retries spent, deadline
  // valid, stopped, active}; global: TAKEN, SENDS (running counts), NEWS {a
  // queue is stopped, busy, CQEs written since the last read of it}, NAKS,
  // RETRIES, TIMEOUTS (Go-Back-N's running counts).
  localparam logic [4:0] SQ_W_RING_LO = 5'd9;
  localparam logic [4:0] SQ_W_RING_HI = 5'd10;
  // SQ_W_CFG: [4:0] log2 depth, [8] sig_all, [9] rto valid, [15:12] mtu_log2,
  // [18:16] retry_cnt (the Go-Back-N budget, §3.8), [22:20] rnr_retry (the RNR
  // NAKs' budget, 7 for ever; 0: the fetch takes no RNR NAK), [31:24] max_rd_atomic
  // (the READs and atomics the fetch may hold, SqIdle::max_rd_atomic); SQ_R_FLAGS [5:3]:
  // retries spent, [8:6] RNR NAKs waited out, [9] an RNR wait (the deadline is its end)
  localparam logic [4:0] SQ_W_CFG = 5'd11;
  localparam logic [4:0] SQ_W_CI = 5'd12;
  localparam logic [4:0] SQ_W_PSN = 5'd13;
  localparam logic [4:0] SQ_W_PD = 5'd14;
  localparam logic [4:0] SQ_W_DEPTH = 5'd15;
  localparam logic [4:0] SQ_W_RTO_LO = 5'd21;
  localparam logic [4:0] SQ_W_RTO_HI = 5'd22;
  localparam logic [4:0] SQ_W_CMD = 5'd25;
  localparam logic [4:0] SQ_W_DB = 5'd26;
  localparam logic [4:0] SQ_W_NOW_LO = 5'd27;
  localparam logic [4:0] SQ_W_NOW_HI = 5'd28;
  localparam logic [4:0] SQ_R_CI = 5'd9;
  localparam logic [4:0] SQ_R_DONE = 5'd10;
  localparam logic [4:0] SQ_R_BASE = 5'd11;
  localparam logic [4:0] SQ_R_UNA = 5'd12;
  localparam logic [4:0] SQ_R_DL_LO = 5'd13;
  localparam logic [4:0] SQ_R_DL_HI = 5'd14;
  localparam logic [4:0] SQ_R_FLAGS = 5'd15;
  localparam logic [4:0] SQ_R_TAKEN = 5'd21;
  localparam logic [4:0] SQ_R_SENDS = 5'd22;
  localparam logic [4:0] SQ_R_NEWS = 5'd23;
  // Go-Back-N's running counts (§3.8): NAK sequence errors taken (dropped ones
  // too), retries started, of them at the local ACK timeout
  localparam logic [4:0] SQ_R_NAKS = 5'd27;
  localparam logic [4:0] SQ_R_RETRIES = 5'd28;
  localparam logic [4:0] SQ_R_TIMEOUTS = 5'd29;
  // RNR NAKs taken (running count, §3.8)
  localparam logic [4:0] SQ_R_RNRS = 5'd30;
  // whether a write (read) of word w of table 3 is the fetch's
  function automatic logic sq_wr_word(input logic [4:0] w);
    return (w >= SQ_W_RING_LO && w <= SQ_W_DEPTH) || w == SQ_W_RTO_LO
        || w == SQ_W_RTO_HI || (w >= SQ_W_CMD && w <= SQ_W_NOW_HI);
  endfunction
  function automatic logic sq_rd_word(input logic [4:0] w);
    return (w >= SQ_R_CI && w <= SQ_R_FLAGS) || (w >= SQ_R_TAKEN && w <= SQ_R_NEWS)
        || (w >= SQ_R_NAKS && w <= SQ_R_RNRS);
  endfunction

  // --------------------------------------------------- TX internal records
  // One packet for the header builder: everything its headers need.
  typedef struct packed {
    logic [TMPL_BYTES*8-1:0] tmpl;      // template bytes, wire order (byte 0 at [7:0])
    logic [7:0]   hdr_len;              // template bytes in use (offset of the BTH)
    logic [7:0]   l3_off;
    logic         ipv6;
    logic [15:0]  ip_sum;
    logic [15:0]  pkey;
    logic [23:0]  dest_qpn;
    logic [7:0]   opcode;
    logic         se;
    logic         ackreq;
    logic [1:0]   pad;
    logic [6:0]   resv7;
    logic [23:0]  psn;
    logic         has_reth;
    logic [63:0]  reth_va;              // also the AtomicETH's VA and R_Key
    logic [31:0]  reth_rkey;
    logic [31:0]  reth_len;
    logic         has_atomic;           // AtomicETH: reth_va, reth_rkey, swap_add, compare
    logic [63:0]  swap_add;             // also an ATOMIC ACKNOWLEDGE's original value
    logic [63:0]  compare;
    logic         has_imm;              // ImmDt or IETH (same place, after any RETH)
    logic [31:0]  imm;
    logic         has_aeth;
    logic [31:0]  aeth;                 // syndrome << 24 | msn
    logic         has_atack;            // AtomicAckETH after the AETH: swap_add
    logic [15:0]  plen;                 // payload bytes (from DMA), without pad
  } fp_tx_job_t;

  // One frame for the emitter: the headers as bytes and the lengths.
  typedef struct packed {
    logic [HV_BYTES*8-1:0] hv;          // headers, byte 0 at [7:0], zero past hlen
    logic [7:0]   hlen;                 // header bytes
    logic [15:0]  flen;                 // frame bytes without the ICRC
    logic [15:0]  plen;                 // payload bytes that come by DMA
  } fp_tx_frame_t;

  // --------------------------------------------------- RX internal records
  localparam logic [1:0] ACT_DROP = 2'd0;   // parser error: the frame is dropped
  localparam logic [1:0] ACT_PLACE = 2'd1;  // payload to the DMA, frame dropped
  localparam logic [1:0] ACT_EXC = 2'd2;    // frame to the firmware, payload dropped
  localparam logic [1:0] ACT_TAKE = 2'd3;   // a response taken: frame dropped, event raised

  // What the placement check decided for one frame, for the mover.
  typedef struct packed {
    logic [1:0]   action;
    logic         has_stream;           // the parser sent a payload packet for it
    logic [15:0]  pay_len;
    // ACT_PLACE: the payload in order as np DMA writes (a READ response: one per
    // SGE piece; else one), each {address, bytes}, none empty
    logic [2:0]   np;
    logic [SG_N-1:0][63:0] p_addr;
    logic [SG_N-1:0][15:0] p_len;
    // an ATOMIC ACKNOWLEDGE: the pieces carry these 8 bytes (the original value,
    // little-endian as the engine's completer writes it), not the payload
    logic         atomic;
    logic [63:0]  orig;
    logic         ev_valid;
    logic [EV_BYTES*8-1:0] ev;
    logic         ack_valid;
    logic [RESPD_BYTES*8-1:0] ackd;     // an ACK or READ response descriptor
  } fp_rx_verdict_t;

  // 24-bit serial number arithmetic (IBTA PSNs): a - b as a signed distance
  function automatic logic signed [23:0] psn_diff(input logic [23:0] a, input logic [23:0] b);
    return signed'(a - b);
  endfunction

endpackage

`resetall
