// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_rx_check: the fast path's receive rules (docs/fastpath.md §3.4), one
// packet at a time: for each metadata record of rx_parser it reads the QP's
// receive context and the MR of the key, makes the checks every packet gets
// (the QP's fast path on, the frame this port's and from the QP's peer with
// its P_Key, no exception pending; a response no CE mark) and the placement
// rule's (PSN,
// opcode sequence, lengths, key, PD, access, bounds), and decides: place
// (with the new context written back, an ACK descriptor when one is due and
// a MSG_DONE event at the end of a SEND; a SEND's packets, its first too, go
// into the receive buffer the firmware loaded, recv_loaded, which a WRITE's
// RETH unloads: it shares RESID and LENGTH) or hand the frame to the firmware
// (EXCEPTION event with the reason; the context changes only in `held`);
// frames the parser rejected are dropped. A CE-marked request is judged as an
// unmarked one; when taken (placed, answered, a READ taken, RNR NAKed) its event
// says so (EV_F_CE on its MSG_DONE, READ or RNR, else an event EVK_CE of its own): the
// notification point, a CNP at most once per interval, is the firmware's
// engine's, which would have run it for a packet it took itself.
//
// A request of the QP's out of sequence (PSN after the expected one) or a
// duplicate SEND/WRITE (PSN before it) is answered here, as the engine's
// responder answers it (rc_request): the frame is dropped and counted
// (oos, dups); an out-of-sequence request sends one NAK "PSN sequence
// error" for the expected PSN per gap (the context's nak_sent, cleared when
// the expected packet is placed), a duplicate SEND/WRITE an ACK of the PSN
// before the expected one with the current MSN (it was executed: not
// again). A duplicate READ or atomic needs the responder's resources: the
// firmware's (reason 2, as before).
//
// A SEND's first packet (no message under way) that finds no receive buffer
// loaded, every other check passed, is the firmware's (reason 9) unless the
// context has `rq_empty` (flags bit 4: the firmware found the QP's receive
// queue empty; its min_rnr_timer in byte 32, RECV_ADDR's first, which holds
// no address while nothing is loaded): then it is answered here as the
// engine's responder answers it (receiver_not_ready; the model's not_ready,
// docs/fastpath.md §3.4 "Receiver not ready"): an RNR NAK for its PSN with
// the current MSN, queued as an ACK is (it merges behind a READ as one), the
// expected PSN and MSN left, `nak_sent` set (the rest of the message in flight
// is dropped without a NAK), and an RNR event (EVK_RNR) for the engine's
// count.
//
// The receive-context table is a direct-mapped cache (docs/scale.md): QP qpn
// lives in entry qpn mod NQP, tagged by the context's own `qpn` field (§3.2,
// byte 45). A frame whose entry holds another QP's context (or none) is a
// miss: an EXCEPTION with reason 14 that writes no context (the entry is not
// its QP's); the firmware handles the frame and may fill the entry. The send
// context and the in-flight row of that entry are the same QP's as its
// receive context (the firmware fills and evicts all three together), so the
// tag decides for responses too: a response that misses writes no una_psn,
// retires nothing and makes no ACKED event.
//
// Responses meet the response rule (§3.6) against the QP's send context
// (its valid bit, next_psn and una_psn, from fp_tx's copy of those words)
// and its in-flight list (fp_inflight, the whole row read at once): an
// ACKNOWLEDGE of a PSN this QP sent, with an ACK syndrome, past no READ or
// atomic, is taken: the messages it acknowledges are retired, una_psn moves
// to PSN + 1 (written through fp_tx, which wakes the QP's slots as a
// firmware write does) and an ACKED event goes to the firmware. An RDMA
// READ response at una_psn whose READ is the QP's oldest live message, of
// the length its place in the READ says, is placed: its payload goes at
// message offset k * MTU across the READ's SGEs (fp_inflight's second
// table, read in C3 for that entry), one DMA write per SGE piece, and it is
// taken as an ACK of that PSN (the READ retires with its last response).
// An ATOMIC ACKNOWLEDGE at una_psn whose atomic is the QP's oldest live
// message is taken so too (k_atk, through R1..R3): its original value rides
// in the verdict to fp_rx_move, which writes it into the atomic's SGE (8
// bytes, little-endian), and the atomic retires. Every response also
// drops the entries that end before una_psn (the firmware's una_psn writes
// retire lazily, fp_inflight).
//
// The rules and the order of the checks are roce_core::fastpath::dispatch's;
// tests/fastpath.rs holds the two together. Six cycles per request packet
// (C0 context read, C1 MR read, C2 and C3 checks, C4 decision, then the
// write-back); the next packet's context read follows the write-back, so
// back-to-back packets of one QP see each other's updates. A response is
// decided in its own stage after C4 (RD: one cycle more than a request), a
// READ response three cycles later still (R1..R3: where its payload goes
// in the READ's SGEs, one adder deep per cycle), so that no cycle holds more
// than a compare or an add after its registers (125 MHz on the ECP5). A
// response taken adds the cycle(s) of its una_psn write (UNA: the
// send-context table's port may be busy with the planner's write-back).
// A rewind (NAK sequence error) or RNR NAK writes none: its una_psn lands with
// fp_sqf's FLUSH, and until then the QP's responses are checked against the
// NAK's PSN, held per entry (lr_rec), so that rewinds of several QPs close
// together each keep theirs.
//
// An RDMA READ request of a context with `reads` (flags bit 3) is taken
// here when it is the expected PSN, no message is under way, it has no
// payload, a RETH length of 1..2^31 and the MR path the WRITE uses with
// REMOTE_READ covers [va, va + length) (docs/fastpath.md §3.4, "READ
// requests"; roce_core::fastpath::check_read and take_read): the context
// moves past its response PSNs (msn + 1, epsn + ceil(length / MTU),
// nak_sent clear), a READ event goes to the firmware and a READ response
// descriptor (fp_pkg's RD_*) into the ACK queue (fp_resp_q), whose planner
// sends the responses. The check goes on taking packets meanwhile, as the
// model's FastPathPort::run_rx: a later READ's descriptor and an ACK or NAK
// queue behind (the queue merges an ACK or NAK behind a READ with the QP's
// one before it), but a packet that raises an EXCEPTION is held while a
// READ's responses wait (queued, held by the planner, or on their way to the
// queue: rd_inflight), nothing written or counted (S_HOLD), and checked
// again from its context read once none waits: what the firmware sends for
// it must not overtake them. A duplicate READ of a context with `reads` (the
// firmware's, reason 2) first drops the QP's queued READ descriptors whose
// next PSN is after its own (drop_en, once every READ descriptor sent is in
// the queue; S_DROP), as the model's drop_reads_after. A failed check keeps
// the reasons of every request: a duplicate READ is the firmware's (2).
//
// An atomic request (CMP_SWAP, FETCH_ADD) of a context with `reads` is
// executed here when it is the expected PSN, no message is under way, it has
// an AtomicETH and no payload, and the QP and the MR of its R_Key have
// REMOTE_ATOMIC, in the QP's PD, covering [va, va + 8) with va 8-byte aligned
// (docs/fastpath.md §3.4, "Atomic requests"; roce_core::fastpath::check_atomic
// and take_atomic): the check waits until the verdicts before it are carried
// out and their DMA writes gone (S_AW: a WRITE before it to its bytes has
// landed), reads the 8 bytes through the shared DMA read port (S_AR; no packet
// is checked meanwhile), compares and swaps or adds in 64 bits and hands the
// mover the new value to write as an ATOMIC ACKNOWLEDGE's value is written
// (S_AX: the verdict's `atomic`), so the next packet's writes come after it.
// The context moves past it (msn + 1, epsn + 1, nak_sent clear), an ATOMIC
// event carries the original value to the firmware (its engine's replay
// ring), and the ATOMIC ACKNOWLEDGE goes into the response queue ordered as a
// READ's responses (AD_F_READ | AD_F_ATOMIC). A read that fails changes
// nothing: the frame is the firmware's (7).
//
// A READ or atomic request of a context with `reads` at the expected PSN, no
// message under way, with the QP's right to it, that finds `rd_max` (byte 3 bits
// 4..6, the QP's max_dest_rd_atomic) of its QP's READ response descriptors and
// ATOMIC ACKNOWLEDGEs queued or held by the planner (fp_resp_q's rd_count) is
// dropped as the engine's check_op drops it (docs/fastpath.md §3.4, "The
// responder's resources"; the model's no_resource): no answer, `nak_sent`
// cleared, `epsn` and `msn` kept, an RD_DROP event for the engine's count. It
// waits in C4 until every descriptor it sent is in the count (rd_inflight, and
// rd_in_q: the register lags a cycle).
//
// The CQE writer (fp_cqw, docs/fastpath.md §3.7): every response taken hands
// it a group (the QP and how many of the messages it retires asked for a
// CQE), then, in a stage of its own (CQ, one cycle per such message and one
// more), the records of those messages, read from fp_inflight's CQE table
// before the retirement frees their entries (an append may reuse an entry
// the cycle after). A response that retires no such message adds no cycle.

`resetall
`default_nettype none

module fp_rx_check
  import roce_rx_pkg::*;
  import fp_pkg::*;
#(
    parameter int NQP = 256,
    parameter int NMR = 256,
    parameter int QPN_W = $clog2(NQP),
    parameter int MR_W = $clog2(NMR)
) (
    input  wire logic                      clk,
    input  wire logic                      rst,

    // the port's addresses, as little-endian records of the wire bytes
    input  wire logic [47:0]               port_mac,
    input  wire logic [127:0]              port_gid,
    // per entry: a receive doorbell the firmware has not read (roce_fp_top)
    input  wire logic [NQP-1:0]            rq_posted,

    input  rx_meta_t                       s_meta,
    input  wire logic                      s_meta_valid,
    output logic                           s_meta_ready,

    // receive context table
    output logic                           rctx_rd_en,
    output logic [QPN_W-1:0]               rctx_rd_addr,
    input  wire logic [RCTX_BYTES*8-1:0]   rctx_rd_data,
    output logic                           rctx_wr_en,
    output logic [QPN_W-1:0]               rctx_wr_addr,
    output logic [RCTX_BYTES*8-1:0]        rctx_wr_data,
    // a firmware write of the table waits (the check reads no context then), and
    // whether the check holds no context it read (between its read and its write-back
    // a firmware word would be overwritten by the word it read)
    input  wire logic                      fw_wr_wait,
    output logic                           rctx_free,

    // MR table
    output logic                           mr_rd_en,
    output logic [MR_W-1:0]                mr_rd_addr,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire logic [MR_BYTES*8-1:0]     mr_rd_data,   // bytes 26..31 reserved
    /* verilator lint_on UNUSEDSIGNAL */

    output fp_rx_verdict_t                 m_verdict,
    output logic                           m_verdict_valid,
    input  wire logic                      verdict_room,

    output logic [15:0]                    frame_slot,   // slot of the next exception frame

    // send context words 0, 3, 4 (fp_tx), one cycle after sctx_rd_en
    output logic                           sctx_rd_en,
    output logic [QPN_W-1:0]               sctx_rd_addr,
    input  wire logic [95:0]               sctx_rd_data,
    output logic                           una_valid,
    input  wire logic                      una_ready,
    output logic [QPN_W-1:0]               una_addr,
    output logic [23:0]                    una_psn,

    // the in-flight list (fp_inflight): the row read with sctx_rd_en, and
    // the entries retired from its head
    input  wire logic [IF_ENTRIES*IF_BITS-1:0] if_row,
    input  wire logic [$clog2(IF_ENTRIES)-1:0] if_head,
    input  wire logic [$clog2(IF_ENTRIES):0]   if_count,
    output logic                           if_ret_en,
    output logic [QPN_W-1:0]               if_ret_addr,
    output logic [$clog2(IF_ENTRIES):0]    if_ret_n,
    // a READ's SGEs: the record of the row's entry `sg_rd_lane` (C3, data in C4)
    output logic                           sg_rd_en,
    output logic [QPN_W-1:0]               sg_rd_addr,
    output logic [$clog2(IF_ENTRIES)-1:0]  sg_rd_lane,
    input  wire logic [SG_BITS-1:0]        sg_rd_data,
    // the CQE writer: a group per response taken (its QP, the CQEs it owes),
    // then the record of each such message (fp_inflight's CQE table, read
    // here; it arrives with rec_valid) and its length
    output logic                           grp_valid,
    output logic [23:0]                    grp_qpn,
    output logic [$clog2(IF_ENTRIES):0]    grp_n,
    input  wire logic                      grp_room,     // a group can be taken
    output logic                           cq_rd_en,
    output logic [QPN_W-1:0]               cq_rd_addr,
    output logic [$clog2(IF_ENTRIES)-1:0]  cq_rd_lane,
    output logic                           rec_valid,
    output logic [31:0]                    rec_len,
    input  wire logic                      rec_room,     // two records can be taken

    // the context cache: frames whose QP's context was in its entry (tag matched, on),
    // and frames whose entry held another QP's context (or none)
    output logic [31:0]                    ctx_hits,
    output logic [31:0]                    ctx_misses,
    // requests answered without the firmware: out of sequence (dropped, the
    // gap's one NAK), duplicate SEND/WRITE (dropped, re-ACKed)
    output logic [31:0]                    oos,
    output logic [31:0]                    dups,
    // the entry of each frame that hits (as ctx_hits counts it), for its
    // accessed bit (roce_fp_top): the firmware's cache sees the QPs the fast
    // path serves without it
    output logic                           acc_valid,
    output logic [QPN_W-1:0]               acc_row,
    // Go-Back-N at a NAK sequence error (docs/fastpath.md §3.8, "in RTL"): per
    // entry, the WQE fetch holds the queue and has a retry left (gbn_ok), or
    // a retry of it is under way without progress since (gbn_retrying); it
    // took the rewind event of entry gbn_taken_e (gbn_taken: this unit's own
    // record of the rewinds in flight, nak_inflight, may go)
    input  wire logic [NQP-1:0]            gbn_ok,
    input  wire logic [NQP-1:0]            gbn_retrying,
    // an RNR NAK (§3.8, "An RNR NAK"): per entry, the WQE fetch holds the queue,
    // not stopped, with RNR budget left (rnr_ok), or it waits one out (rnr_wait:
    // a NAK sequence error then retries nothing, as the engine's on_nak)
    input  wire logic [NQP-1:0]            rnr_ok,
    input  wire logic [NQP-1:0]            rnr_wait,
    input  wire logic                      gbn_taken,
    input  wire logic [QPN_W-1:0]          gbn_taken_e,
    // the NAK sequence errors dropped (without progress while a retry is under
    // way): a running count, the WQE fetch's to report (they never reach it)
    output logic [31:0]                    gbn_drops,
    // the response queue (fp_resp_q): a READ response descriptor waits there
    // or in the planner; one came in (this cycle); a duplicate READ drops the
    // QP's ones whose next PSN is after drop_psn
    input  wire logic                      reads_wait,
    input  wire logic                      rd_in,
    // the READ response descriptors and ATOMIC ACKNOWLEDGEs of QP rd_cnt_qpn (the
    // packet's) queued or held by the planner, as of the cycle before (fp_resp_q)
    output logic [23:0]                    rd_cnt_qpn,
    input  wire logic [7:0]                rd_count,
    output logic                           drop_en,
    output logic [23:0]                    drop_qpn,
    output logic [23:0]                    drop_psn,
    // an atomic request executed here: the verdicts before it are carried out and
    // their DMA writes gone (moved), then its 8 bytes are read (at_rd_req_*: a
    // requester of the shared DMA read port; at_rd_t* its answer's beats only)
    input  wire logic                      moved,
    output logic [63:0]                    at_rd_req_addr,
    output logic                           at_rd_req_valid,
    input  wire logic                      at_rd_req_ready,
    input  wire logic [63:0]               at_rd_tdata,
    input  wire logic                      at_rd_tvalid,
    input  wire logic                      at_rd_tlast,
    input  wire logic                      at_rd_terr
);

  localparam int E = IF_ENTRIES;
  localparam int E_W = $clog2(IF_ENTRIES);

  initial begin
    if (NQP < 2 || (NQP & (NQP - 1)) != 0 || NQP > 65536) begin
      $error("fp_rx_check: NQP must be a power of two in 2..65536 (got %0d)", NQP);
      $finish;
    end
    if (NMR < 2 || (NMR & (NMR - 1)) != 0 || NMR > 16777216) begin
      $error("fp_rx_check: NMR must be a power of two in 2..2^24 (got %0d)", NMR);
      $finish;
    end
  end

  // the stages: C0..C4 every packet; then a response's R1..R3 (READ
  // responses), RD (its decision) and UNA (a taken response's una_psn write)
  // (S_HOLD: an exception held while READ responses wait; S_DROP: a
  // duplicate READ's drop goes into the queue; S_AW, S_AR, S_AX: an atomic
  // request waits for the verdicts before it, reads its 8 bytes, is decided)
  typedef enum logic [3:0] {
    S_C0, S_C1, S_C2, S_C3, S_C4, S_UNA, S_R1, S_R2, S_R3, S_RD, S_CQ, S_HOLD, S_DROP,
    S_AW, S_AR, S_AX
  } stage_t;
  stage_t st;
  // READ response descriptors sent (verdicts) and not yet in the queue
  logic [5:0] rd_inflight;
  // a READ response descriptor came into the queue in the cycle before (rd_count,
  // a register, does not have it yet)
  logic rd_in_q;
  // a READ's responses wait
  logic reads_pend;
  assign reads_pend = reads_wait || rd_inflight != '0;
  // the packet held in S_HOLD is checked again (its context read again)
  logic recheck;
  // not while the previous packet's write-back goes into the table (a read in that
  // cycle would see the old context)
  // nor while a firmware write of the context table waits: it goes first
  logic c0_free;
  assign c0_free = verdict_room && !rctx_wr_en && !if_ret_en && grp_room && !fw_wr_wait;
  assign s_meta_ready = st == S_C0 && c0_free;
  assign recheck = st == S_HOLD && c0_free && !reads_pend;
  // (a held packet holds no context: it reads its own again)
  assign rctx_free = st == S_C0 || st == S_HOLD;
  // this packet's drop went out (a duplicate READ: once), its counters counted
  // (a response held in RD was counted in C4)
  logic dropped, counted;

  // ---------------------------------------------------- the packet (C0)
  /* verilator lint_off UNUSEDSIGNAL */
  rx_meta_t m;      // synthesis keeps only the fields used below
  /* verilator lint_on UNUSEDSIGNAL */
  // the queue counts the packet's QP (from C1 on: its C4 reads the register)
  assign rd_cnt_qpn = m.bth_destqp;

  // ------------------------------------------------ its context (C1)
  logic        c_hit;      // the entry holds this QP's context (its tag is the QPN)
  logic        c_on, c_loaded, c_held, c_nak, c_reads;
  logic        c_cqe;      // recv_cqe: the loaded buffer came with its wr_id (§3.7)
  logic [2:0]  c_rd_max;   // the QP's max_dest_rd_atomic (RC_MTU_LOG2's bits 4..6)
  logic        c_rq_empty; // the QP's receive queue is empty (its RNR timer: c_recv_addr[4:0])
  logic [3:0]  c_mtu_log2;
  logic [7:0]  c_cur, c_access, c_ack_every, c_unacked;
  logic [23:0] c_epsn, c_msn;
  logic [15:0] c_pd;
  logic [31:0] c_recv_resid, c_length;
  logic [63:0] c_recv_addr;
  logic [RCTX_BYTES*8-1:0] c_raw;
  logic        k_ours;     // this port's frame, RC, from the QP's peer, P_Key matching

  // the access the packet asks for (C1)
  logic [63:0] x_va;
  logic [31:0] x_rkey, x_resid;

  // ----------------------------------------------------- the MR (C2)
  logic [31:0] r_key, r_pd;
  logic [7:0]  r_access, r_valid;

  // ----------------------------------------------------- checks (C2, C3)
  logic        k_write, k_send, k_starts, k_ends, k_response;
  logic        k_opcode_ok, k_psn_ok, k_seq_ok, k_ecn_ok, k_len_ok, k_fits, k_send_fits;
  // a request (any RC request opcode), a SEND or WRITE of any kind, and its PSN
  // after / before the expected one (responder.rs rc_request)
  logic        k_req, k_sw, k_after, k_before;
  logic [63:0] r_base;
  logic [64:0] r_end, x_end;   // where the MR and the access end (65 bits: no wrap)
  logic        k_key_ok, k_range_ok;
  // an RDMA READ request (C2): no payload and a RETH length of 1..2^31; its
  // key with REMOTE_READ and its response PSNs, ceil(length / MTU) (C3)
  logic        k_rreq, k_rlen_ok, k_rkey_ok;
  logic [23:0] k_npk;
  // an atomic request (C2): CMP_SWAP or FETCH_ADD, the first, no payload; its
  // key, access and alignment (C3); the 8 bytes read (S_AR: the value, the
  // DMA failed, the answer's first beat taken)
  logic        k_areq, k_cmp, k_anone, k_akey_ok;
  logic [63:0] at_orig;
  logic        at_err, at_got;
  // the request's decision inputs, a cycle ahead (C3)
  logic        k_due, k_resid_nz;
  logic [23:0] k_msn_n;

  logic [15:0] n;
  logic [31:0] mtu;
  assign n = m.payload_len;

  // ----------------------------------------------- the response rule (§3.6)
  // C1: the send context's words; C2: the list in order from its head; C3:
  // per entry: dead (ends before una_psn), holds-or-after the PSN, a kind
  // other than SEND/WRITE, a gap una_psn has not passed; C4: the decision
  logic        s_valid;
  logic [23:0] s_next, s_una;
  logic [3:0]  s_mtu_log2;
  logic [E-1:0]  o_live, o_gap;
  logic [1:0]    o_kind [E];
  logic [23:0]   o_first [E], o_last [E];
  logic [15:0]   o_wqe [E];
  logic [31:0]   o_len [E];
  logic [E-1:0]  o_cqe;
  logic [E-1:0]  v_dead, v_hit, v_notmsg, v_gapbad;
  // C2, per entry against the response's PSN: before the entry's first PSN,
  // at its last, and the byte offset of that PSN in the entry's message
  logic [E-1:0]  v_before, v_tdone;
  logic [31:0]   v_poff [E];
  logic [31:0]   smtu;
  // C3: the target T (the first entry holding the PSN) and what the rule
  // needs of it and of the entries before it, selected one-hot
  logic [E_W:0]  done_q, ret_q;
  logic          found_q, rkind_q, rgap_q, before_q, kbad_q, qteq_q;
  logic [15:0]   wqe_q;
  // the entries a taken response retires that asked for a CQE (C3), and
  // those whose records are still to be read (CQ)
  logic [E-1:0]  cqm_q, cq_left;
  /* verilator lint_off UNUSEDSIGNAL */
  logic [E_W:0]  cq_j;       // the next of cq_left (never E: S_CQ reads while one is left)
  /* verilator lint_on UNUSEDSIGNAL */
  // C4 (responses): the reason of every check but the READ's last two, the
  // READ's SGEs, what is left of the READ from this response's offset on,
  // and where its payload ends in the message
  logic [7:0]    rr_reason;
  logic [SG_BITS-1:0] sg_q;
  logic [32:0]   rem;
  logic [33:0]   pend;
  // R1: where each SGE starts and ends in the message; the length rule
  logic [33:0]   sg_s [SG_N], sg_e [SG_N];
  logic          rlen_ok;
  // R2: per SGE, whether the payload meets it, the piece's bounds (low 16
  // bits: a piece is at most the MTU) and its offset into the SGE
  logic [SG_N-1:0] nz;
  logic [15:0]   lo16 [SG_N], hi16 [SG_N];
  logic [33:0]   sg_off [SG_N];
  logic          covered;
  // R3: each piece's address, length and place among the pieces
  logic [63:0]   pc_addr [SG_N];
  logic [15:0]   pc_len [SG_N];
  logic [1:0]    pc_pos [SG_N];
  logic [2:0]    np_q;
  logic        k_ack, k_aeth_nak, k_rpsn_ok;
  // a NAK "PSN sequence error" of a queue the WQE fetch may rewind (C2), its
  // PSN past the una_psn it was checked against, a retry under way
  logic        k_gbn, k_progress, k_retrying;
  // an RNR NAK of a queue the WQE fetch may let wait (C2); the queue waits one out
  logic        k_rnr, k_rnrwait;
  // per entry: a rewind taken here whose event the WQE fetch has not taken
  // yet (until then the entry counts as retrying: a second NAK of the same
  // PSN is dropped, as the engine drops it)
  logic [NQP-1:0] nak_inflight;
  // per entry: the last rewind or RNR NAK taken (its PSN, and the QPN's bits above
  // the entry's, so that another QP the entry serves later is not held): its una_psn
  // lands with fp_sqf's FLUSH (S_RD), so until then that QP's responses are checked
  // against it, not the older una_psn the context still holds (a NAK of that PSN makes
  // no progress, an older ACK is before una_psn), as the model's, whose NAK moves
  // una_psn and drops the queue in one step; forgotten once the context's una_psn
  // reached it. Per entry, not one register: a second QP's rewind before the first's
  // FLUSH landed would lose the first's hold, and a duplicate of its NAK would then be
  // taken as progress (a second rewind, a retry spent), where the model drops it
  localparam int LR_TAG = 24 - QPN_W;
  logic [NQP-1:0]          lr_v;
  logic [LR_TAG+23:0]      lr_rec [NQP];
  logic [LR_TAG+23:0]      lr_q;
  assign lr_q = lr_rec[m.bth_destqp[QPN_W-1:0]];
  // a READ response (C2); its READ, the first live entry (C3): where the
  // payload goes in the message, the READ's length and last PSN
  logic        k_read, k_rends, k_runa;
  // an ATOMIC ACKNOWLEDGE (C2): as a READ response, its 8 bytes of original
  // value at message offset 0 of its atomic's SGE (`pn` bytes placed: the
  // payload's, or those 8)
  logic        k_atk;
  logic [15:0] pn;
  logic [E_W:0]  q_t;
  logic [31:0]   q_off, q_len;
  logic [23:0]   q_last;
  logic [E_W:0]  q_tn;
  assign q_tn = first_set(~v_dead);

  // the first set bit of v (E if none)
  function automatic logic [E_W:0] first_set(input logic [E-1:0] v);
    for (int i = 0; i < E; i++) if (v[i]) return (E_W + 1)'(i);
    return (E_W + 1)'(E);
  endfunction

  // the first set bit of v, one-hot (none if none)
  function automatic logic [E-1:0] first_hot(input logic [E-1:0] v);
    logic [E-1:0] r;
    logic seen;
    r = '0;
    seen = 1'b0;
    for (int i = 0; i < E; i++) begin
      r[i] = v[i] && !seen;
      seen = seen || v[i];
    end
    return r;
  endfunction

  // a GID from the parser's address field (IPv4: ::ffff:a.b.c.d), as the
  // little-endian record of its bytes
  function automatic logic [127:0] gid_of(input logic [1:0] kind, input logic [127:0] ip);
    logic [127:0] num;
    logic [127:0] rec;
    num = (kind == L3_IPV4) ? {80'd0, 16'hFFFF, ip[31:0]} : ip;
    for (int i = 0; i < 16; i++) rec[8*i +: 8] = num[127 - 8*i -: 8];
    return rec;
  endfunction

  function automatic logic [47:0] mac_rec(input logic [47:0] num);
    logic [47:0] rec;
    for (int i = 0; i < 6; i++) rec[8*i +: 8] = num[47 - 8*i -: 8];
    return rec;
  endfunction

  // engine::pkey_match: the low 15 bits equal and not 0, one of the two a full member
  function automatic logic pkey_match(input logic [15:0] a, input logic [15:0] b);
    return a[14:0] == b[14:0] && a[14:0] != '0 && (a[15] || b[15]);
  endfunction

  always_comb begin
    rctx_rd_en = (s_meta_valid && s_meta_ready) || recheck;
    rctx_rd_addr = recheck ? m.bth_destqp[QPN_W-1:0] : s_meta.bth_destqp[QPN_W-1:0];
    // the MR of the packet's key (RETH) or the message's, read as the context arrives
    sctx_rd_en = rctx_rd_en;
    sctx_rd_addr = rctx_rd_addr;
    mr_rd_en = st == S_C1;
    // the READ's SGEs, for the entry a READ response would be for
    sg_rd_en = st == S_C3;
    sg_rd_addr = m.bth_destqp[QPN_W-1:0];
    sg_rd_lane = if_head + q_tn[E_W-1:0];
    mr_rd_addr = m.ext_mask[EXT_RETH] ? m.reth_rkey[8 +: MR_W]
        : m.ext_mask[EXT_ATOMICETH] ? m.atomic_rkey[8 +: MR_W]
        : rctx_rd_data[8*RC_RKEY + 8 +: MR_W];
    // CQ: the next record, while the writer has room for it and the one before
    cq_rd_en = st == S_CQ && cq_left != '0 && rec_room;
    cq_rd_addr = m.bth_destqp[QPN_W-1:0];
    cq_j = first_set(cq_left);
    cq_rd_lane = if_head + cq_j[E_W-1:0];
  end

  function automatic logic [E_W:0] count_set(input logic [E-1:0] v);
    logic [E_W:0] c;
    c = '0;
    for (int i = 0; i < E; i++) c = c + (E_W + 1)'(v[i]);
    return c;
  endfunction

  // the verdict of a frame the firmware gets (EXCEPTION event with the reason)
  /* verilator lint_off UNUSEDSIGNAL */
  function automatic fp_rx_verdict_t exception(input rx_meta_t f, input logic [7:0] why,
                                               input logic [15:0] slot);
    fp_rx_verdict_t v;
    v = '0;
    v.action = ACT_EXC;
    v.ev_valid = 1'b1;
    v.ev[8*EV_KIND +: 8] = EVK_EXCEPTION;
    v.ev[8*EV_REASON +: 8] = why;
    v.ev[8*EV_SLOT +: 16] = slot;
    v.ev[8*EV_OPCODE +: 8] = f.bth_opcode;
    v.ev[8*EV_FLAGS +: 8] = {1'b0, f.bth_padcnt, 5'd0};
    v.ev[8*EV_PAY_OFF +: 16] = f.payload_offset[15:0];
    v.ev[8*EV_PAY_LEN +: 16] = f.payload_len;
    v.ev[8*EV_EXT_OFF +: 16] = f.payload_offset[15:0] - {10'd0, f.hdr_len} + 16'd12;
    v.ev[8*EV_FRAME_LEN +: 16] = f.frame_len[15:0];
    v.ev[8*EV_NET +: 8] = {5'd0, f.vlan_present, f.l3_kind - 2'd1};
    return v;
  endfunction

  // what every verdict says of its frame: its payload, its QP and PSN
  function automatic fp_rx_verdict_t of_frame(input fp_rx_verdict_t v, input rx_meta_t f);
    fp_rx_verdict_t r;
    r = v;
    r.has_stream = f.stream_len != '0;
    r.pay_len = f.payload_len;
    r.ev[8*EV_QPN +: 24] = f.bth_destqp;
    r.ev[8*EV_PSN +: 24] = f.bth_psn;
    return r;
  endfunction
  /* verilator lint_on UNUSEDSIGNAL */

  always_ff @(posedge clk) begin
    rctx_wr_en <= 1'b0;
    m_verdict_valid <= 1'b0;
    acc_valid <= 1'b0;
    if_ret_en <= 1'b0;
    grp_valid <= 1'b0;
    rec_valid <= 1'b0;
    // the WQE fetch took a rewind's event: its own flags say the rest (before
    // the states, so that a rewind taken in the same cycle keeps its bit)
    if (gbn_taken) nak_inflight[gbn_taken_e] <= 1'b0;
    drop_en <= 1'b0;
    // a READ response descriptor arrived in the queue (a verdict may send one
    // in the same cycle: C4 below adds it)
    if (rd_in) rd_inflight <= rd_inflight - 6'd1;
    rd_in_q <= rd_in;
    case (st)
      S_C0: if (s_meta_valid && s_meta_ready) begin
        m <= s_meta;
        dropped <= 1'b0;
        counted <= 1'b0;
        st <= S_C1;
      end

      S_HOLD: if (recheck) st <= S_C1;

      // the drop is in the queue (and the planner) from the next cycle: the
      // duplicate is decided again in C4, its values still held
      S_DROP: st <= S_C4;

      S_C1: begin
        logic [RCTX_BYTES*8-1:0] r;
        r = rctx_rd_data;
        c_raw <= r;
        c_hit <= m.bth_destqp == r[8*RC_QPN +: 24];
        c_on <= r[8*RC_STATE +: 8] == 8'd1;
        c_nak <= r[8*RC_FLAGS + 0];
        c_loaded <= r[8*RC_FLAGS + 1];
        c_cqe <= r[8*RC_FLAGS + 5];
        c_held <= r[8*RC_FLAGS + 2];
        c_reads <= r[8*RC_FLAGS + 3];
        c_rd_max <= r[8*RC_MTU_LOG2 + 4 +: 3];
        // (stale while the host posted a WQE the firmware has not seen)
        c_rq_empty <= r[8*RC_FLAGS + 4] && !rq_posted[m.bth_destqp[QPN_W-1:0]];
        c_mtu_log2 <= r[8*RC_MTU_LOG2 +: 4];
        c_cur <= r[8*RC_CUR +: 8];
        c_access <= r[8*RC_ACCESS +: 8];
        c_epsn <= r[8*RC_EPSN +: 24];
        c_ack_every <= r[8*RC_ACK_EVERY +: 8];
        c_msn <= r[8*RC_MSN +: 24];
        c_unacked <= r[8*RC_UNACKED +: 8];
        c_pd <= r[8*RC_PD +: 16];
        c_recv_resid <= r[8*RC_RECV_RESID +: 32];
        c_recv_addr <= r[8*RC_RECV_ADDR +: 64];
        c_length <= r[8*RC_LENGTH +: 32];
        // (bits 4..6 are rd_max)
        mtu <= (r[8*RC_MTU_LOG2 +: 4] >= 4'd8 && r[8*RC_MTU_LOG2 +: 4] <= 4'd12)
            ? 32'd1 << r[8*RC_MTU_LOG2 +: 4] : 32'd0;
        k_ours <= mac_rec(m.eth_dst) == port_mac
            && gid_of(m.l3_kind, m.ip_dst) == port_gid
            && m.bth_opcode[7:5] == 3'd0
            && pkey_match(m.bth_pkey, r[8*RC_PKEY +: 16])
            && gid_of(m.l3_kind, m.ip_src) == r[8*RC_PEER_GID +: 128];
        s_valid <= sctx_rd_data[8*SC_FLAGS + 2];
        s_next <= sctx_rd_data[32 +: 24];
        // (a rewind's una_psn not landed yet: its PSN)
        if (lr_v[m.bth_destqp[QPN_W-1:0]] && lr_q[24 +: LR_TAG] == m.bth_destqp[23:QPN_W]
            && psn_diff(lr_q[23:0], sctx_rd_data[64 +: 24]) > 0)
          s_una <= lr_q[23:0];
        else begin
          s_una <= sctx_rd_data[64 +: 24];
          if (lr_q[24 +: LR_TAG] == m.bth_destqp[23:QPN_W])
            lr_v[m.bth_destqp[QPN_W-1:0]] <= 1'b0;
        end
        s_mtu_log2 <= sctx_rd_data[8*SC_FLAGS + 4 +: 4];
        for (int j = 0; j < E; j++) begin
          logic [IF_BITS-1:0] e;
          logic [E_W-1:0] lane;
          lane = E_W'(j) + if_head;   // the ring, from its head
          e = if_row[IF_BITS*lane +: IF_BITS];
          o_live[j] <= (E_W + 1)'(j) < if_count;
          o_gap[j] <= e[IF_GAP];
          o_kind[j] <= e[IF_KIND +: 2];
          o_first[j] <= e[IF_FIRST +: 24];
          o_last[j] <= e[IF_LAST +: 24];
          o_wqe[j] <= e[IF_WQE +: 16];
          o_len[j] <= e[IF_LEN +: 32];
          o_cqe[j] <= e[IF_CQE];
        end
        if (m.ext_mask[EXT_RETH]) begin
          x_va <= m.reth_va;
          x_rkey <= m.reth_rkey;
          x_resid <= m.reth_dmalen;
        end else if (m.ext_mask[EXT_ATOMICETH]) begin
          // an atomic's 8 bytes
          x_va <= m.atomic_va;
          x_rkey <= m.atomic_rkey;
          x_resid <= 32'd8;
        end else begin
          x_va <= r[8*RC_VA +: 64];
          x_rkey <= r[8*RC_RKEY +: 32];
          x_resid <= r[8*RC_RESID +: 32];
        end
        st <= S_C2;
      end

      S_C2: begin
        logic [7:0] op;
        logic [15:0] pad_want;
        op = m.bth_opcode;
        r_key <= mr_rd_data[8*MR_KEY +: 32];
        r_pd <= mr_rd_data[8*MR_PD +: 32];
        r_access <= mr_rd_data[8*MR_ACCESS +: 8];
        r_valid <= mr_rd_data[8*MR_VALID +: 8];
        r_base <= mr_rd_data[8*MR_BASE +: 64];
        r_end <= {1'b0, mr_rd_data[8*MR_BASE +: 64]} + {1'b0, mr_rd_data[8*MR_LENGTH +: 64]};
        x_end <= {1'b0, x_va} + {33'd0, x_resid};
        k_write <= op == RC_WRITE_FIRST || op == RC_WRITE_MIDDLE || op == RC_WRITE_LAST
            || op == RC_WRITE_ONLY;
        // a SEND's first packet too, into the buffer the firmware loaded ahead
        k_send <= op == RC_SEND_FIRST || op == RC_SEND_MIDDLE || op == RC_SEND_LAST
            || op == RC_SEND_ONLY;
        k_starts <= op == RC_WRITE_FIRST || op == RC_WRITE_ONLY || op == RC_SEND_FIRST
            || op == RC_SEND_ONLY;
        k_ends <= op == RC_WRITE_LAST || op == RC_WRITE_ONLY || op == RC_SEND_LAST
            || op == RC_SEND_ONLY;
        k_opcode_ok <= op == RC_WRITE_FIRST || op == RC_WRITE_MIDDLE || op == RC_WRITE_LAST
            || op == RC_WRITE_ONLY || op == RC_SEND_FIRST || op == RC_SEND_MIDDLE
            || op == RC_SEND_LAST || op == RC_SEND_ONLY;
        // ACKNOWLEDGE, READ responses, ATOMIC ACKNOWLEDGE
        k_response <= (op >= 8'h0D && op <= 8'h12);
        k_psn_ok <= m.bth_psn == c_epsn;
        k_req <= op <= RC_READ_REQ || op == RC_CMP_SWAP || op == RC_FETCH_ADD
            || op == RC_SEND_LAST_INV || op == RC_SEND_ONLY_INV;
        k_sw <= op <= RC_WRITE_ONLY_IMM || op == RC_SEND_LAST_INV || op == RC_SEND_ONLY_INV;
        k_after <= psn_diff(m.bth_psn, c_epsn) > 0;
        k_before <= psn_diff(m.bth_psn, c_epsn) < 0;
        // the response's PSN: sent (before next_psn) and not acknowledged
        k_ack <= op == RC_ACK;
        k_read <= op >= RC_READ_RESP_FIRST && op <= RC_READ_RESP_ONLY;
        k_rends <= op == RC_READ_RESP_LAST || op == RC_READ_RESP_ONLY;
        k_atk <= op == RC_ATOMIC_ACK;
        k_runa <= m.bth_psn == s_una;
        k_aeth_nak <= m.ext_mask[EXT_AETH] && m.aeth_syndrome[7:5] != 3'd0;
        k_gbn <= m.ext_mask[EXT_AETH] && m.aeth_syndrome == 8'h60
            && gbn_ok[m.bth_destqp[QPN_W-1:0]];
        k_progress <= m.bth_psn != s_una;
        k_retrying <= gbn_retrying[m.bth_destqp[QPN_W-1:0]]
            || nak_inflight[m.bth_destqp[QPN_W-1:0]] || rnr_wait[m.bth_destqp[QPN_W-1:0]];
        k_rnr <= m.ext_mask[EXT_AETH] && m.aeth_syndrome[7:5] == 3'b001
            && rnr_ok[m.bth_destqp[QPN_W-1:0]];
        k_rnrwait <= rnr_wait[m.bth_destqp[QPN_W-1:0]];
        k_rpsn_ok <= psn_diff(m.bth_psn, s_una) >= 0 && psn_diff(m.bth_psn, s_next) < 0;
        smtu <= 32'd1 << s_mtu_log2;
        for (int j = 0; j < E; j++) begin
          v_dead[j] <= o_live[j] && psn_diff(o_last[j], s_una) < 0;
          v_hit[j] <= o_live[j] && psn_diff(o_last[j], s_una) >= 0
              && psn_diff(m.bth_psn, o_last[j]) <= 0;
          v_notmsg[j] <= o_live[j] && o_kind[j] != IFK_MSG;
          v_gapbad[j] <= o_live[j] && o_gap[j] && psn_diff(o_first[j], s_una) > 0;
          v_before[j] <= psn_diff(m.bth_psn, o_first[j]) < 0;
          v_tdone[j] <= o_last[j] == m.bth_psn;
          v_poff[j] <= {8'd0, m.bth_psn - o_first[j]} << s_mtu_log2;
        end
        k_ecn_ok <= m.ip_ecn != 2'd3;
        k_rreq <= op == RC_READ_REQ;
        k_areq <= op == RC_CMP_SWAP || op == RC_FETCH_ADD;
        k_cmp <= op == RC_CMP_SWAP;
        k_anone <= n == 16'd0;
        k_rlen_ok <= n == 16'd0 && m.ext_mask[EXT_RETH] && x_resid != 32'd0
            && x_resid <= 32'h8000_0000;
        // payload length by position: FIRST/MIDDLE exactly the MTU, LAST 1..MTU, ONLY 0..MTU
        // (a SEND_ONLY 1..MTU: an empty SEND is the firmware's, as an empty WRITE)
        if (op == RC_WRITE_FIRST || op == RC_WRITE_MIDDLE || op == RC_SEND_FIRST
            || op == RC_SEND_MIDDLE)
          k_len_ok <= {16'd0, n} == mtu;
        else if (op == RC_WRITE_ONLY)
          k_len_ok <= {16'd0, n} <= mtu;
        else
          k_len_ok <= n != 0 && {16'd0, n} <= mtu;
        k_send_fits <= {16'd0, n} <= c_recv_resid;
        // WRITE: the packet fits what is left of the message
        pad_want = 16'(-x_resid) & 16'd3;
        if (x_resid > mtu)
          k_fits <= {16'd0, n} == mtu && m.bth_padcnt == 2'd0
              && !(op == RC_WRITE_LAST || op == RC_WRITE_ONLY);
        else
          k_fits <= {16'd0, n} == x_resid && {14'd0, m.bth_padcnt} == pad_want
              && (op == RC_WRITE_LAST || op == RC_WRITE_ONLY);
        st <= S_C3;
      end

      S_C3: begin
        // the response rule's entries: D (the first not dead) is a READ
        // response's READ (its PSN is una_psn, so everything before is dead);
        // T the first that holds the PSN; `upto` the entries before T (all
        // when there is none)
        logic [E-1:0] dh, th, upto, kind_not;
        logic [15:0]  w_t, w_b;
        logic [31:0]  d_off, d_len;
        logic [23:0]  d_last;
        logic [E_W:0] t;
        logic         seen, tdone;
        dh = first_hot(~v_dead);
        th = first_hot(v_hit);
        t = first_set(v_hit);
        seen = 1'b0;
        for (int j = 0; j < E; j++) begin
          seen = seen || v_hit[j];
          upto[j] = !seen;
          kind_not[j] = o_kind[j] != (k_read ? IFK_READ : k_atk ? IFK_ATOMIC : IFK_MSG);
        end
        w_t = '0;
        w_b = '0;
        d_off = '0;
        d_len = '0;
        d_last = '0;
        for (int j = 0; j < E; j++) begin
          w_t = w_t | ({16{th[j]}} & o_wqe[j]);
          d_off = d_off | ({32{dh[j]}} & v_poff[j]);
          d_len = d_len | ({32{dh[j]}} & o_len[j]);
          d_last = d_last | ({24{dh[j]}} & o_last[j]);
        end
        for (int j = 1; j < E; j++) w_b = w_b | ({16{th[j]}} & o_wqe[j - 1]);
        q_t <= q_tn;
        q_off <= d_off;
        q_len <= d_len;
        q_last <= d_last;
        found_q <= v_hit != '0;
        rkind_q <= (v_notmsg & ~v_dead & upto) != '0;
        rgap_q <= (v_gapbad & (upto | th)) != '0;
        before_q <= (th & v_before) != '0;
        kbad_q <= (th & kind_not) != '0;
        qteq_q <= q_tn == t;
        // what a taken response retires: the dead entries, then T's
        // predecessors and T itself when the PSN is T's last; the last
        // retired (T or the one before it) names its WQE in the event
        // A NAK taken as a rewind retires as an ACK of PSN - 1: T never (its
        // PSN is the responder's expected one, not one it acknowledges)
        // (an RNR NAK too: the model's sq_nak)
        tdone = (th & v_tdone) != '0 && !k_gbn && !k_rnr;
        done_q <= t - q_tn + (E_W + 1)'(tdone);
        ret_q <= t + (E_W + 1)'(tdone);
        wqe_q <= tdone ? w_t : w_b;
        for (int j = 0; j < E; j++)
          cqm_q[j] <= o_cqe[j] && o_live[j] && (E_W + 1)'(j) >= q_tn
              && (E_W + 1)'(j) < t + (E_W + 1)'(tdone);
        case (c_cur)
          CUR_NONE:  k_seq_ok <= k_starts;
          CUR_WRITE: k_seq_ok <= k_write && !k_starts;
          CUR_SEND:  k_seq_ok <= k_send && !k_starts;
          default:   k_seq_ok <= 1'b0;
        endcase
        k_key_ok <= (c_access & ACC_REMOTE_WRITE) != 0 && r_valid != 0 && r_key != 0
            && r_key == x_rkey && r_pd == {16'd0, c_pd} && (r_access & ACC_REMOTE_WRITE) != 0;
        // memory::range_within(base, len, va, resid): va >= base and, without
        // wrapping, va + resid <= base + len
        k_range_ok <= x_va >= r_base && x_end <= r_end;
        k_rkey_ok <= (c_access & ACC_REMOTE_READ) != 0 && r_valid != 0 && r_key != 0
            && r_key == x_rkey && r_pd == {16'd0, c_pd} && (r_access & ACC_REMOTE_READ) != 0;
        // the engine's exec_atomic: the key with REMOTE_ATOMIC, the VA 8-byte aligned
        k_akey_ok <= (c_access & ACC_REMOTE_ATOMIC) != 0 && r_valid != 0 && r_key != 0
            && r_key == x_rkey && r_pd == {16'd0, c_pd} && (r_access & ACC_REMOTE_ATOMIC) != 0
            && x_va[2:0] == 3'd0;
        // (the length is at most 2^31 and the MTU at least 256: 24 bits hold it)
        k_npk <= 24'(x_resid >> c_mtu_log2)
            + {23'd0, (x_resid & ~({32{1'b1}} << c_mtu_log2)) != 32'd0};
        k_msn_n <= k_ends ? c_msn + 24'd1 : c_msn;
        k_due <= m.bth_ackreq
            || (c_ack_every != 0 && {1'b0, c_unacked} + 9'd1 >= {1'b0, c_ack_every});
        k_resid_nz <= x_resid != 0;
        st <= S_C4;
      end

      S_C4: begin
        // C4: the first failing check, in the model's order
        fp_rx_verdict_t v;
        logic [7:0] reason, r_reason;
        logic ok, pre, oos_q, dup_q, rd_q, rd_ok, rnr_q, dup_rd, drop_now, hold, at_q, at_ok;
        logic rda_acc, rda_full, rda_wait, rda_drop;
        logic [RCTX_BYTES*8-1:0] w;
        // a READ request of a context with `reads` (before the cascade uses it)
        rd_q = c_reads && k_rreq;
        // an atomic request of a context with `reads` (the model's check_atomic)
        at_q = c_reads && k_areq;
        // either, in sequence, between messages, with the QP's right to it: what the
        // engine's check_op counts against max_dest_rd_atomic (the model's
        // no_resource); the queue's count is exact once every descriptor sent is in
        // it and in the count register (rda_wait: wait here for that, a few cycles);
        // the QP's resources all taken (rd_max 0: never written so, the firmware's)
        rda_acc = (rd_q || at_q) && k_psn_ok && c_cur == CUR_NONE
            && (c_access & (rd_q ? ACC_REMOTE_READ : ACC_REMOTE_ATOMIC)) != 0;
        rda_full = rda_acc && rd_count >= {5'd0, c_rd_max};
        // a response's reason, but for the READ's length and SGEs (RD)
        if (!s_valid) r_reason = EXC_OFF;
        else if (!k_ack && !k_read && !k_atk) r_reason = EXC_OPCODE;
        // an RNR NAK is the WQE fetch's when it retires nothing (then it owes no
        // CQE the writer could refuse); a NAK sequence error with progress in an
        // RNR wait is the firmware's (the engine retries at none then)
        else if (k_aeth_nak && !(k_gbn && !(k_rnrwait && k_progress))
                 && !(k_rnr && done_q == '0)) r_reason = EXC_NAK_IN;
        else if (!k_rpsn_ok || ((k_read || k_atk) && !k_runa)) r_reason = EXC_PSN;
        else if (rkind_q) r_reason = EXC_ORDER;
        else if (!found_q) r_reason = EXC_PSN;
        else if (before_q) r_reason = EXC_PSN;
        else if (kbad_q || rgap_q) r_reason = EXC_ORDER;
        else r_reason = 8'd0;
        if (m.error != ERR_NONE) reason = 8'd0;
        else if (!c_hit) reason = EXC_MISS;
        else if (!c_on) reason = EXC_OFF;
        else if (!k_ours) reason = EXC_ADDRESS;
        else if (c_held) reason = EXC_HELD;
        else if (k_response && !k_ecn_ok) reason = EXC_ECN;
        else if (k_response) reason = r_reason;
        else if (rd_q || at_q) begin
          // fastpath::check_read's and check_atomic's order: a duplicate (the PSN
          // rule took those after epsn) is the firmware's (its answer is in the
          // engine's READ and atomic resources); then the message under way, the
          // extended header (RETH, AtomicETH), the length (a READ's RETH length, an
          // atomic's empty payload), the key, access and bounds
          if (!k_psn_ok) reason = EXC_OPCODE;
          else if (c_cur != CUR_NONE) reason = EXC_SEQUENCE;
          else if (rda_acc && c_rd_max == 3'd0) reason = EXC_OPCODE;
          else if (!m.ext_mask[rd_q ? EXT_RETH : EXT_ATOMICETH]) reason = EXC_OPCODE;
          else if (!(rd_q ? k_rlen_ok : k_anone)) reason = EXC_LENGTH;
          else if (!(rd_q ? k_rkey_ok : k_akey_ok) || !k_range_ok) reason = EXC_KEY;
          else reason = 8'd0;
        end
        else if (!k_opcode_ok) reason = EXC_OPCODE;
        else if (!k_psn_ok) reason = EXC_PSN;
        else if (!k_seq_ok) reason = EXC_SEQUENCE;
        else if (!k_len_ok) reason = EXC_LENGTH;
        else if (k_send && !c_loaded) reason = EXC_NO_RECV;
        else if (k_send && !k_send_fits) reason = EXC_LENGTH;
        else if (k_send) reason = 8'd0;
        else if (!k_resid_nz || !k_fits) reason = EXC_LENGTH;
        else if (!k_key_ok || !k_range_ok) reason = EXC_KEY;
        else reason = 8'd0;
        // a request placed: every check passed (the cascade's reason 0, as
        // one AND rather than through the cascade)
        // a request of the QP that gets past the checks of every packet: its PSN
        // decides first (the engine's rc_request), whatever the opcode
        pre = m.error == ERR_NONE && c_hit && c_on && k_ours && !c_held
            && !k_response && k_req;
        oos_q = pre && k_after;
        dup_q = pre && k_before && k_sw;
        rda_wait = pre && rda_acc && (rd_inflight != '0 || rd_in_q);
        rda_drop = pre && rda_full && c_rd_max != 3'd0;
        // a READ request taken
        rd_ok = pre && rd_q && k_psn_ok && c_cur == CUR_NONE && k_rlen_ok && k_rkey_ok
            && k_range_ok && !rda_full;
        // an atomic request taken: executed in S_AW..S_AX
        at_ok = pre && at_q && k_psn_ok && c_cur == CUR_NONE && m.ext_mask[EXT_ATOMICETH]
            && k_anone && k_akey_ok && k_range_ok && !rda_full;
        ok = pre && k_opcode_ok && k_psn_ok && k_seq_ok && k_len_ok
            && (k_send ? c_loaded && k_send_fits
                       : k_resid_nz && k_fits && k_key_ok && k_range_ok);
        // a SEND's first packet (no message under way) that finds nothing loaded, every
        // other check passed, in a context whose receive queue the firmware found empty:
        // answered with an RNR NAK (the model's not_ready, the engine's
        // receiver_not_ready), not reason 9
        rnr_q = pre && k_opcode_ok && k_psn_ok && k_seq_ok && k_len_ok && k_send
            && !c_loaded && c_cur == CUR_NONE && c_rq_empty;

        // the request's verdict
        v = '0;
        if (m.error != ERR_NONE) begin
          v.action = ACT_DROP;
        end else if (oos_q || dup_q) begin
          // taken: the frame goes, no event; the gap's first packet NAKs the
          // expected PSN, a duplicate ACKs the one before it (the current MSN)
          v.action = ACT_TAKE;
          v.ack_valid = dup_q || !c_nak;
          v.ackd[8*AD_QPN +: 24] = m.bth_destqp;
          v.ackd[8*AD_SYNDROME +: 8] = dup_q ? 8'h1F : 8'h60;
          v.ackd[8*AD_PSN +: 24] = dup_q ? c_epsn - 24'd1 : c_epsn;
          v.ackd[8*AD_MSN +: 24] = c_msn;
          v.ackd[8*AD_FLAGS + AD_F_MERGE] = 1'b1;
        end else if (rda_drop) begin
          // dropped, as the engine's check_op drops it: the frame goes, no answer;
          // the firmware's engine counts it (resp_dropped)
          v.action = ACT_TAKE;
          v.ev_valid = 1'b1;
          v.ev[8*EV_KIND +: 8] = EVK_RD_DROP;
        end else if (rd_ok) begin
          // taken: nothing moves now; the firmware records the READ (its
          // event), the planner sends its responses (the descriptor)
          v.action = ACT_TAKE;
          v.ev_valid = 1'b1;
          v.ev[8*EV_KIND +: 8] = EVK_READ;
          v.ev[8*EV_RKEY +: 32] = x_rkey;
          v.ev[8*EV_VA +: 64] = x_va;
          v.ev[8*EV_LEN +: 32] = x_resid;
          v.ack_valid = 1'b1;
          v.ackd[8*AD_QPN +: 24] = m.bth_destqp;
          v.ackd[8*AD_SYNDROME +: 8] = 8'h1F;
          v.ackd[8*AD_PSN +: 24] = m.bth_psn;
          v.ackd[8*AD_FLAGS + AD_F_READ] = 1'b1;
          v.ackd[8*AD_FLAGS + AD_F_FIRST] = 1'b1;
          v.ackd[8*AD_MSN +: 24] = c_msn + 24'd1;
          v.ackd[8*RD_RKEY +: 32] = x_rkey;
          v.ackd[8*RD_VA +: 64] = x_va;
          v.ackd[8*RD_RESID +: 32] = x_resid;
          v.ackd[8*RD_PD +: 16] = c_pd;
        end else if (rnr_q) begin
          // taken: the frame goes; the RNR NAK (its PSN, the current MSN, the QP's
          // min_rnr_timer) queues as an ACK does; the firmware's engine counts it
          v.action = ACT_TAKE;
          v.ev_valid = 1'b1;
          v.ev[8*EV_KIND +: 8] = EVK_RNR;
          v.ack_valid = 1'b1;
          v.ackd[8*AD_QPN +: 24] = m.bth_destqp;
          v.ackd[8*AD_SYNDROME +: 8] = {3'b001, c_recv_addr[4:0]};
          v.ackd[8*AD_PSN +: 24] = m.bth_psn;
          v.ackd[8*AD_MSN +: 24] = c_msn;
          v.ackd[8*AD_FLAGS + AD_F_MERGE] = 1'b1;
        end else if (at_ok) begin
          // decided in S_AX, once its 8 bytes are read (nothing goes out now)
          v.action = ACT_PLACE;
        end else if (!ok) begin
          v = exception(m, reason, frame_slot);
        end else begin
          v.action = ACT_PLACE;
          v.np = 3'd1;
          v.p_addr[0] = k_send ? c_recv_addr : x_va;
          v.p_len[0] = n;
          if (k_send && k_ends) begin
            v.ev_valid = 1'b1;
            v.ev[8*EV_KIND +: 8] = EVK_MSG_DONE;
            v.ev[8*EV_FLAGS + 1] = m.bth_se;   // the SEND was solicited
            v.ev[8*EV_FLAGS + EV_F_CQE] = c_cqe;  // fp_cqw writes its CQE
            v.ev[8*EV_MSN +: 24] = k_msn_n;
            v.ev[8*EV_BYTE_LEN +: 32] = (k_starts ? 32'd0 : c_length) + {16'd0, n};
          end
          if (k_due) begin
            v.ack_valid = 1'b1;
            v.ackd[8*AD_QPN +: 24] = m.bth_destqp;
            v.ackd[8*AD_SYNDROME +: 8] = 8'h1F;
            v.ackd[8*AD_PSN +: 24] = m.bth_psn;
            v.ackd[8*AD_MSN +: 24] = k_msn_n;
            v.ackd[8*AD_FLAGS + AD_F_MERGE] = 1'b1;
          end
        end
        // a CE-marked request taken (placed, answered, a READ taken): the
        // firmware's notification point hears of it on the packet's event, or
        // on one of its own (the model's noted_ce)
        if (pre && !k_ecn_ok && (v.action == ACT_PLACE || v.action == ACT_TAKE)) begin
          if (v.ev_valid) v.ev[8*EV_FLAGS + EV_F_CE] = 1'b1;
          else begin
            v.ev_valid = 1'b1;
            v.ev[8*EV_KIND +: 8] = EVK_CE;
          end
        end
        v = of_frame(v, m);
        // a duplicate READ of a context with `reads` (the firmware's) drops the
        // QP's queued READ descriptors after its PSN first (the model's
        // drop_reads_after), once those it sent are all in the queue
        dup_rd = pre && k_rreq && k_before && c_reads && !dropped;
        drop_now = dup_rd && rd_inflight == '0;
        // an exception while a READ's responses wait: held, nothing written
        hold = !dup_rd && !k_response && v.action == ACT_EXC && reads_pend;

        // the context after the packet; after an exception only `held` changes
        w = c_raw;
        if (oos_q) begin
          w[8*RC_FLAGS + 0] = 1'b1;   // the gap's NAK is out
        end else if (dup_q) begin
          // nothing changes
        end else if (rda_drop) begin
          // the expected PSN came: the gap's NAK is forgotten (rc_request clears
          // nak_sent before check_op); the expected PSN and the MSN stay
          w[8*RC_FLAGS + 0] = 1'b0;
        end else if (rd_ok) begin
          // the MSN counts the READ on arrival; the expected PSN moves past
          // every response PSN (fastpath::take_read); `unacked` stays
          w[8*RC_FLAGS + 0] = 1'b0;
          w[8*RC_MSN +: 24] = c_msn + 24'd1;
          w[8*RC_EPSN +: 24] = c_epsn + k_npk;
        end else if (rnr_q) begin
          // the expected PSN and the MSN stay; the packets of the message already in
          // flight behind it are dropped without a NAK (the PSN rule)
          w[8*RC_FLAGS + 0] = 1'b1;
        end else if (at_ok) begin
          // written in S_AX
        end else if (!ok) begin
          w[8*RC_FLAGS + 2] = 1'b1;
        end else if (k_send) begin
          w[8*RC_RECV_ADDR +: 64] = c_recv_addr + {48'd0, n};
          w[8*RC_RECV_RESID +: 32] = c_recv_resid - {16'd0, n};
          // the first packet starts the count (LENGTH may hold a WRITE's)
          w[8*RC_LENGTH +: 32] = (k_starts ? 32'd0 : c_length) + {16'd0, n};
          w[8*RC_CUR +: 8] = k_ends ? CUR_NONE : CUR_SEND;
          if (k_ends) begin
            w[8*RC_FLAGS + 1] = 1'b0;
            w[8*RC_FLAGS + 5] = 1'b0;
          end
        end else begin
          w[8*RC_VA +: 64] = x_va + {48'd0, n};
          w[8*RC_RKEY +: 32] = x_rkey;
          w[8*RC_RESID +: 32] = x_resid - {16'd0, n};
          if (m.ext_mask[EXT_RETH]) w[8*RC_LENGTH +: 32] = m.reth_dmalen;
          w[8*RC_CUR +: 8] = k_ends ? CUR_NONE : CUR_WRITE;
          // (a receive buffer loaded ahead stays: RECV_ADDR and RECV_RESID are apart)
        end
        if (ok) begin
          w[8*RC_FLAGS + 0] = 1'b0;   // the expected packet: the gap is closed
          w[8*RC_MSN +: 24] = k_msn_n;
          w[8*RC_EPSN +: 24] = c_epsn + 24'd1;
          w[8*RC_UNACKED +: 8] = k_due ? 8'd0
              : (c_unacked == 8'hFF ? 8'hFF : c_unacked + 8'd1);
        end

        if (!dup_rd && !hold && !rda_wait && !counted) begin
          if (m.error == ERR_NONE && c_hit && c_on) ctx_hits <= ctx_hits + 32'd1;
          acc_valid <= m.error == ERR_NONE && c_hit && c_on;
          if (m.error == ERR_NONE && !c_hit) ctx_misses <= ctx_misses + 32'd1;
          if (oos_q) oos <= oos + 32'd1;
          if (dup_q) dups <= dups + 32'd1;
          counted <= 1'b1;
        end
        acc_row <= m.bth_destqp[QPN_W-1:0];
        if (rda_wait) begin
          // (a READ or atomic request waits for the queue's count)
        end else if (dup_rd) begin
          // (waits here while a READ descriptor it sent is on its way)
          if (drop_now) begin
            drop_en <= 1'b1;
            drop_qpn <= m.bth_destqp;
            drop_psn <= m.bth_psn;
            dropped <= 1'b1;
            st <= S_DROP;
          end
        end else if (hold) begin
          st <= S_HOLD;
        end else if (at_ok) begin
          at_rd_req_addr <= x_va;
          st <= S_AW;
        end else if (k_response) begin
          // decided in RD; a READ response's or an ATOMIC ACKNOWLEDGE's pieces
          // first (R1..R3; the atomic's 8 bytes at offset 0: its one PSN is
          // una_psn, so its entry is the first live one and q_off is 0)
          rr_reason <= reason;
          sg_q <= sg_rd_data;
          rem <= {1'b0, q_len} - {1'b0, q_off};
          pn <= k_atk ? 16'd8 : n;
          pend <= {2'd0, q_off} + (k_atk ? 34'd8 : {18'd0, n});
          st <= k_read || k_atk ? S_R1 : S_RD;
        end else begin
          // a parser drop, a miss (the entry is another QP's) and a QP whose fast
          // path is off change nothing
          rctx_wr_en <= m.error == ERR_NONE && c_hit && c_on;
          rctx_wr_addr <= m.bth_destqp[QPN_W-1:0];
          rctx_wr_data <= w;
          m_verdict <= v;
          m_verdict_valid <= 1'b1;
          if (v.action == ACT_EXC) frame_slot <= frame_slot + 16'd1;
          rd_inflight <= rd_inflight + 6'(rd_ok) - 6'(rd_in);
          st <= S_C0;
        end
      end

      // a READ response: its length by its place in the READ, and its
      // payload (bytes q_off .. q_off + n of the message) across the SGEs,
      // one piece per SGE it meets, in order (fastpath::scatter)
      S_R1: begin
        logic [33:0] l [SG_N];
        for (int i = 0; i < SG_N; i++) l[i] = {2'd0, sg_q[96*i + 64 +: 32]};
        // SG_N = 4 (fp_pkg): no sum longer than two adds
        sg_s[0] <= '0;
        sg_s[1] <= l[0];
        sg_s[2] <= l[0] + l[1];
        sg_s[3] <= l[0] + l[1] + l[2];
        sg_e[0] <= l[0];
        sg_e[1] <= l[0] + l[1];
        sg_e[2] <= l[0] + l[1] + l[2];
        sg_e[3] <= (l[0] + l[1]) + (l[2] + l[3]);
        // (an ATOMIC ACKNOWLEDGE has no payload to check)
        rlen_ok <= qteq_q && !rem[32] && (k_atk || (k_rends
            ? {17'd0, n} == rem && {16'd0, n} <= smtu && m.bth_psn == q_last
            : {16'd0, n} == smtu && rem[31:0] > smtu));
        st <= S_R2;
      end

      S_R2: begin
        for (int i = 0; i < SG_N; i++) begin
          logic starts_in;
          starts_in = {2'd0, q_off} > sg_s[i];
          // [q_off, pend) meets [start, end): both non-empty and overlapping
          nz[i] <= pn != 0 && sg_e[i] != sg_s[i] && {2'd0, q_off} < sg_e[i] && sg_s[i] < pend;
          lo16[i] <= starts_in ? q_off[15:0] : sg_s[i][15:0];
          hi16[i] <= (pend < sg_e[i]) ? pend[15:0] : sg_e[i][15:0];
          sg_off[i] <= starts_in ? {2'd0, q_off} - sg_s[i] : '0;
        end
        // the SGEs tile the message from 0: the pieces cover the payload
        // exactly when it ends within them
        covered <= pn == 0 || pend <= sg_e[SG_N-1];
        st <= S_R3;
      end

      S_R3: begin
        logic [2:0] c;
        c = '0;
        for (int i = 0; i < SG_N; i++) begin
          pc_addr[i] <= sg_q[96*i +: 64] + {30'd0, sg_off[i]};
          pc_len[i] <= hi16[i] - lo16[i];
          pc_pos[i] <= c[1:0];
          c = c + {2'd0, nz[i]};
        end
        np_q <= c;
        st <= S_RD;
      end

      S_RD: begin
        // a response's decision
        fp_rx_verdict_t v;
        logic [7:0] reason;
        logic take, drop, rewind, rnr;
        logic [RCTX_BYTES*8-1:0] w;
        logic [SG_N-1:0][63:0] pa;
        logic [SG_N-1:0][15:0] pl;
        reason = rr_reason;
        if (rr_reason == 8'd0 && (k_read || k_atk) && !rlen_ok) reason = EXC_LENGTH;
        else if (rr_reason == 8'd0 && (k_read || k_atk) && !covered) reason = EXC_KEY;
        take = m.error == ERR_NONE && reason == 8'd0;
        // a NAK sequence error the WQE fetch rewinds (§3.8): without progress
        // while a retry is under way it is dropped (the engine's on_nak), else
        // it retires what ends before its PSN and the event asks for the rewind
        drop = take && k_gbn && !k_progress && k_retrying;
        rewind = take && k_gbn && !drop;
        // an RNR NAK taken (it retired nothing, C4): its wait is the WQE fetch's
        rnr = take && k_rnr;
        pa = '0;
        pl = '0;
        for (int i = 0; i < SG_N; i++) if (nz[i]) begin
          pa[pc_pos[i]] = pc_addr[i];
          pl[pc_pos[i]] = pc_len[i];
        end
        v = '0;
        if (m.error != ERR_NONE) begin
          v.action = ACT_DROP;
        end else if (!take) begin
          v = exception(m, reason, frame_slot);
        end else if (drop) begin
          v.action = ACT_TAKE;
        end else begin
          // an ACK taken: the frame goes, the firmware hears of it; a READ
          // response's payload (an ATOMIC ACKNOWLEDGE's original value) goes
          // to its pieces first
          v.action = k_read || k_atk ? ACT_PLACE : ACT_TAKE;
          v.np = np_q;
          v.p_addr = pa;
          v.p_len = pl;
          v.atomic = k_atk;
          v.orig = m.atomicack_orig;
          v.ev[8*EV_RFLAGS +: 8] = {1'b0, k_atk, 4'd0, k_rends && k_read, k_read};
          v.ev_valid = 1'b1;
          v.ev[8*EV_KIND +: 8] = EVK_ACKED;
          v.ev[8*EV_DONE +: 8] = 8'(done_q);
          if (done_q != '0) v.ev[8*EV_WQE +: 16] = wqe_q;
          v.ev[8*EV_UNA +: 24] = rewind || rnr ? m.bth_psn : m.bth_psn + 24'd1;
          // (an RNR NAK's bit 3 too: should its event reach the firmware, the queue
          // taken back before fp_sqf took it, the engine takes it as a NAK, going
          // back at once where it would have waited, never as an ACK of its PSN)
          v.ev[8*EV_RFLAGS + 3] = rewind || rnr;
          v.ev[8*EV_RFLAGS + 4] = rewind && k_progress;
          v.ev[8*EV_RFLAGS + 5] = rnr;
          v.ev[8*EV_RNR +: 8] = rnr ? {3'd0, m.aeth_syndrome[4:0]} : 8'd0;
        end
        v = of_frame(v, m);
        if (rewind || rnr) nak_inflight[m.bth_destqp[QPN_W-1:0]] <= 1'b1;
        if (rewind || rnr) begin
          lr_v[m.bth_destqp[QPN_W-1:0]] <= 1'b1;
          lr_rec[m.bth_destqp[QPN_W-1:0]] <= {m.bth_destqp[23:QPN_W], m.bth_psn};
        end
        if (drop) gbn_drops <= gbn_drops + 32'd1;
        // the receive side's state is not the response's: only `held` changes
        w = c_raw;
        if (!take) w[8*RC_FLAGS + 2] = 1'b1;
        rctx_wr_en <= m.error == ERR_NONE && c_hit && c_on;
        rctx_wr_addr <= m.bth_destqp[QPN_W-1:0];
        rctx_wr_data <= w;
        m_verdict <= v;
        m_verdict_valid <= 1'b1;
        if (v.action == ACT_EXC) frame_slot <= frame_slot + 16'd1;
        // the list: a response drops the dead entries, and a taken ACK what it
        // acknowledged; its una_psn goes into the send context (UNA). The CQE
        // writer gets its group; when messages retired owe CQEs, their records
        // are read first (CQ) and the retirement waits for them
        if_ret_en <= m.error == ERR_NONE && c_hit && !(take && cqm_q != '0);
        if_ret_addr <= m.bth_destqp[QPN_W-1:0];
        if_ret_n <= take && !drop ? ret_q : q_t;
        // (a rewind's or RNR NAK's una_psn lands with fp_sqf's FLUSH, which drops the
        // QP's queued descriptors in the same step, as the model's go_back: written
        // here, it opened the window some cycles before the drop, and a packet the
        // window had held went out first)
        una_valid <= take && !drop && !rewind && !rnr;
        una_addr <= m.bth_destqp[QPN_W-1:0];
        una_psn <= rewind || rnr ? m.bth_psn : m.bth_psn + 24'd1;
        grp_valid <= take && !drop;
        grp_qpn <= m.bth_destqp;
        grp_n <= count_set(cqm_q);
        cq_left <= cqm_q;
        st <= !take || drop ? S_C0 : (cqm_q != '0) ? S_CQ : (rewind || rnr) ? S_C0 : S_UNA;
        if (v.action == ACT_EXC && reads_pend) begin
          // an exception while a READ's responses wait: held, nothing of the
          // above happens (its dead entries go when it is checked again; an
          // exception sets no rewind, drop, una_psn or group)
          rctx_wr_en <= 1'b0;
          m_verdict_valid <= 1'b0;
          frame_slot <= frame_slot;
          if_ret_en <= 1'b0;
          st <= S_HOLD;
        end
      end

      // an atomic request (docs/fastpath.md §3.4 "Atomic requests"; the model's
      // take_atomic): once the verdicts before it are carried out and their DMA
      // writes gone (so a WRITE before it to its bytes has landed), its 8 bytes
      // are read; no packet is checked meanwhile, so the next one's writes come
      // after its own (the mover carries its verdict out in order)
      S_AW: if (moved) begin
        at_rd_req_valid <= 1'b1;
        at_err <= 1'b0;
        at_got <= 1'b0;
        st <= S_AR;
      end

      S_AR: begin
        if (at_rd_req_ready) at_rd_req_valid <= 1'b0;
        if (at_rd_tvalid) begin
          if (!at_got) at_orig <= at_rd_tdata;   // little-endian: byte 0 at [7:0]
          at_got <= 1'b1;
          if (at_rd_terr) at_err <= 1'b1;
          if (at_rd_tlast) st <= S_AX;
        end
      end

      // the engine's exec_atomic: compare and swap, or add (wrapping), in 64 bits;
      // the new value goes to the VA as an ATOMIC ACKNOWLEDGE's goes to its SGE (the
      // verdict's `atomic`, fp_rx_move); the MSN counts it, the expected PSN moves
      // past it, `nak_sent` clears, `unacked` stays; an ATOMIC event (the original
      // value, for the engine's replay ring) and the ATOMIC ACKNOWLEDGE, queued as a
      // READ's responses are (AD_F_READ: exceptions wait for it, ACKs behind it do
      // not merge into it). A read that failed leaves everything as it was: the
      // firmware's (7), held as any exception while a READ's responses wait.
      S_AX: begin
        fp_rx_verdict_t v;
        logic [RCTX_BYTES*8-1:0] w;
        logic [63:0] nv;
        nv = k_cmp ? (at_orig == m.atomic_compare ? m.atomic_swap_add : at_orig)
            : at_orig + m.atomic_swap_add;
        w = c_raw;
        v = '0;
        if (at_err) begin
          v = exception(m, EXC_KEY, frame_slot);
          w[8*RC_FLAGS + 2] = 1'b1;
        end else begin
          v.action = ACT_PLACE;
          v.np = 3'd1;
          v.p_addr[0] = x_va;
          v.p_len[0] = 16'd8;
          v.atomic = 1'b1;
          v.orig = nv;
          v.ev_valid = 1'b1;
          v.ev[8*EV_KIND +: 8] = EVK_ATOMIC;
          v.ev[8*EV_FLAGS + EV_F_CE] = !k_ecn_ok;
          v.ev[8*EV_ORIG +: 64] = at_orig;
          v.ack_valid = 1'b1;
          v.ackd[8*AD_QPN +: 24] = m.bth_destqp;
          v.ackd[8*AD_SYNDROME +: 8] = 8'h1F;
          v.ackd[8*AD_PSN +: 24] = m.bth_psn;
          v.ackd[8*AD_MSN +: 24] = c_msn + 24'd1;
          v.ackd[8*AD_FLAGS + AD_F_READ] = 1'b1;
          v.ackd[8*AD_FLAGS + AD_F_ATOMIC] = 1'b1;
          v.ackd[8*RD_ORIG +: 64] = at_orig;
          w[8*RC_FLAGS + 0] = 1'b0;
          w[8*RC_MSN +: 24] = c_msn + 24'd1;
          w[8*RC_EPSN +: 24] = c_epsn + 24'd1;
        end
        v = of_frame(v, m);
        if (at_err && reads_pend) begin
          st <= S_HOLD;
        end else begin
          rctx_wr_en <= 1'b1;
          rctx_wr_addr <= m.bth_destqp[QPN_W-1:0];
          rctx_wr_data <= w;
          m_verdict <= v;
          m_verdict_valid <= 1'b1;
          if (at_err) frame_slot <= frame_slot + 16'd1;
          rd_inflight <= rd_inflight + 6'(!at_err) - 6'(rd_in);
          st <= S_C0;
        end
      end

      S_CQ: begin
        // a record read in the cycle before goes to the writer now
        rec_valid <= 1'b0;
        if (cq_rd_en) begin
          cq_left <= cq_left & ~first_hot(cq_left);
          rec_len <= o_len[cq_j[E_W-1:0]];
        end
        rec_valid <= cq_rd_en;
        if (cq_left == '0 && !rec_valid) begin
          // every record read and handed on: now the entries may go
          if_ret_en <= 1'b1;
          st <= (una_valid && !una_ready) ? S_UNA : S_C0;
        end
      end

      default: ;   // UNA (below)
    endcase
    // UNA: the taken ACK's una_psn, once the send-context table takes it
    if (una_valid && una_ready) begin
      una_valid <= 1'b0;
      if (st == S_UNA) st <= S_C0;
    end
    if (rst) begin
      st <= S_C0;
      nak_inflight <= '0;
      lr_v <= '0;
      gbn_drops <= '0;
      rd_inflight <= '0;
      rd_in_q <= 1'b0;
      drop_en <= 1'b0;
      at_rd_req_valid <= 1'b0;
      rctx_wr_en <= 1'b0;
      m_verdict_valid <= 1'b0;
      frame_slot <= '0;
      ctx_hits <= '0;
      ctx_misses <= '0;
      oos <= '0;
      dups <= '0;
      acc_valid <= 1'b0;
      if_ret_en <= 1'b0;
      una_valid <= 1'b0;
      grp_valid <= 1'b0;
      rec_valid <= 1'b0;
    end
  end

endmodule

`resetall
