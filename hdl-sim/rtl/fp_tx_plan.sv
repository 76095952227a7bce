// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_tx_plan: the fast path's TX planner (docs/fastpath.md §2). Takes
// message descriptors into a store of NSLOT slots (per-QP queues: a slot is
// eligible only when no older slot of its QP is waiting), serves the
// eligible slots round robin one packet each (ACK descriptors go first
// between packets), reads the QP's send context, and for each packet decides
// everything the wire needs: opcode, PSN, AckReq, PadCnt, RETH, ImmDt/IETH.
// It hands each packet to the header builder as a job and asks the DMA for
// the packet's payload, one request per SGE piece; it writes the context's
// next_psn and noack back after every packet. FLUSH sets noack to 0, drops
// the QP's slots and moves una_psn forward to the one it carries, in one
// write-back (docs/fastpath.md §3.2).
//
// A slot whose next packet the window does not allow sleeps (its cursor
// saved) until the firmware writes its QP's una_psn; the other QPs go on
// meanwhile. A replayed packet whose PSN is before una_psn is skipped. The
// message in progress is dropped at the next packet boundary when the
// firmware clears its context's `valid` (the QP's slots go at once) or a
// FLUSH of its QP arrives (§2.2). `idle` says the planner holds no message.
//
// The slot store: the descriptors in a RAM (the cursor, packet k, is saved
// over the descriptor's start_pkt when the planner leaves a message
// unfinished: it resumes as a REPLAY from k would); per slot in registers its
// QP, `sleep`, and one row of an NSLOT x NSLOT matrix `before` (slot j
// holds an older descriptor of the same QP). The choice of the next slot is
// two register stages behind (eligible set, then the round robin's pick,
// which carries the slot's QP) and is dropped when the slot was freed, put to
// sleep or switched off since (a per-slot flag, `kill`). The planner
// stays with its message while no other slot is eligible (one QP: no cycle
// lost per packet); switching costs the message's reload (about 7 cycles).
// The in-flight list the response path reads is fp_inflight's (fed at the
// intake by roce_fp_top); slots_used is the ring's consumer count.
//
// The packet rule is roce_core::fastpath::segment's; tests/fastpath.rs
// checks the frames byte for byte against it. Per packet the planner takes 3
// cycles plus one per SGE piece beyond the first (at least 3); a message
// adds 6 (slot and context reads, sizes and SGE sums, range, its decision,
// SGE seek) plus one per SGE skipped on a REPLAY or a resumed message.
//
// READ responses (docs/fastpath.md §2.4; roce_core::fastpath::read_response):
// a READ response descriptor from the ACK queue is held here (rd_*) and
// served before the queue's next entry, one response per visit at the
// places ACKs are served (so an ACK queued behind a READ goes after its last
// response, as the model's queue orders them): S_RA reads the MR of its
// R_Key (the copy in fp_tx) with the send context, S_RB checks the
// response's bytes [va, va + n), n = min(resid, MTU), against it
// (REMOTE_READ, the descriptor's PD; a miss drops the rest of the READ, as
// the model's recheck) and reads the context again for S_RC, which hands the
// job (opcode by place, AETH with the READ's MSN on FIRST/LAST/ONLY, PadCnt)
// and moves the descriptor on; S_RD asks the DMA for the n bytes at va.
// rd_busy says one is held (its responses not all planned, the rest not
// dropped); a duplicate READ of its QP before its next PSN (drop_en, from
// fp_rx_check through fp_resp_q) drops its rest at its next response, as the
// model's drop_reads_after. Five cycles a response.

`resetall
`default_nettype none

module fp_tx_plan
  import fp_pkg::*;
#(
    // send contexts (QPN index range)
    parameter int NQP = 256,
    // MR table entries
    parameter int NMR = 256,
    parameter int QPN_W = $clog2(NQP),
    parameter int MR_W = $clog2(NMR),
    // descriptor slots (all QPs; the firmware's TX ring, docs/fastpath.md §5)
    parameter int NSLOT = 32,
    parameter int SLOT_W = $clog2(NSLOT)
) (
    input  wire logic                       clk,
    input  wire logic                       rst,

    // message descriptors
    input  wire logic [TXD_BYTES*8-1:0]     s_txd_data,
    input  wire logic                       s_txd_valid,
    output logic                            s_txd_ready,

    // ACK and READ response descriptors (fp_pkg's RESPD_*)
    input  wire logic [RESPD_BYTES*8-1:0]   s_ackd_data,
    input  wire logic                       s_ackd_valid,
    output logic                            s_ackd_ready,

    // send context table: read port (data one cycle after rd_en)
    output logic                            ctx_rd_en,
    output logic [QPN_W-1:0]                ctx_rd_addr,
    input  wire logic [SCTX_BYTES*8-1:0]    ctx_rd_data,

    // write-back of words 3 (next_psn) and 6 (max_pkts_per_ack, noack), and
    // with ctx_wb_una_en (a FLUSH's) of word 4 (una_psn); has priority on the
    // table
    output logic                            ctx_wb_en,
    output logic [QPN_W-1:0]                ctx_wb_addr,
    output logic [31:0]                     ctx_wb_psn,
    output logic [31:0]                     ctx_wb_noack,
    output logic                            ctx_wb_una_en,
    output logic [23:0]                     ctx_wb_una,

    // writes of una_psn (word 4): the firmware's, the response path's and a
    // FLUSH's write-back, seen as they go into the table
    input  wire logic                       una_wr_en,
    input  wire logic [QPN_W-1:0]           una_wr_addr,
    input  wire logic [23:0]                una_wr_psn,

    // firmware writes of word 0 that clear `valid`
    input  wire logic                       inval_wr_en,
    input  wire logic [QPN_W-1:0]           inval_wr_addr,

    // the MR table (fp_tx's copy; data one cycle after mr_rd_en), for READ responses
    output logic                            mr_rd_en,
    output logic [MR_W-1:0]                 mr_rd_addr,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire logic [MR_BYTES*8-1:0]      mr_rd_data,   // bytes 26..31 reserved
    /* verilator lint_on UNUSEDSIGNAL */
    // a READ response descriptor is held with responses to plan (fp_resp_q's
    // rd_busy); a duplicate READ drops it when its next PSN is after drop_psn
    output logic                            rd_busy,
    output logic [23:0]                     rd_busy_qpn,  // its QP
    input  wire logic                       drop_en,
    input  wire logic [23:0]                drop_qpn,
    input  wire logic [23:0]                drop_psn,

    // packets for the header builder (no back-pressure: job_room says there is space)
    output fp_tx_job_t                      m_job,
    output logic                            m_job_valid,
    input  wire logic                       job_room,

    // DMA read requests: one per SGE piece; `last` ends a packet's payload
    output logic [63:0]                     m_rd_addr,
    output logic [15:0]                     m_rd_len,
    output logic                            m_rd_last,
    output logic                            m_rd_valid,
    input  wire logic                       m_rd_ready,

    // descriptors dropped: context not valid, an op this RTL does not send, or
    // SGEs shorter than the length
    output logic [31:0]                     bad_desc,
    // request packets sent again: a PSN before the context's next_psn (the
    // firmware rewound and replays); counted as the packet is planned, so an
    // aborted one (dma_errors) counts too, as in the model
    output logic [31:0]                     resent,

    // no message in progress
    output logic                            idle,
    // slots holding a descriptor (a register: the count of the cycle before):
    // the device's descriptor ring frees an entry when its slot is freed, so
    // the firmware's room is NSLOT minus this (docs/fastpath.md §6)
    output logic [SLOT_W:0]                 slots_used
);

  initial begin
    if (NQP < 2 || (NQP & (NQP - 1)) != 0 || NQP > 65536) begin
      $error("fp_tx_plan: NQP must be a power of two in 2..65536 (got %0d)", NQP);
      $finish;
    end
    if (NMR < 2 || (NMR & (NMR - 1)) != 0 || NMR > 16777216) begin
      $error("fp_tx_plan: NMR must be a power of two in 2..2^24 (got %0d)", NMR);
      $finish;
    end
    if (NSLOT < 2 || (NSLOT & (NSLOT - 1)) != 0 || NSLOT > 64) begin
      $error("fp_tx_plan: NSLOT must be a power of two in 2..64 (got %0d)", NSLOT);
      $finish;
    end
  end

  typedef enum logic [3:0] {
    S_IDLE, S_ACK, S_LOAD, S_SIZE, S_CHECK, S_SEEK, S_PKT_A, S_PKT_B, S_GATHER, S_NEXT, S_DONE,
    S_RANGE, S_RA, S_RB, S_RC, S_RD
  } state_e;

  state_e state, ret;

  // ---------------------------------------------------------- the message
  logic [QPN_W-1:0] d_qpn;  // the context's index (the firmware posts only QPNs it has)
  logic [7:0]   d_op;
  logic         d_se, d_replay;
  logic [2:0]   d_nsge;
  logic [31:0]  d_len, d_imm, d_rkey, d_start, d_end;
  logic [63:0]  d_raddr, d_cmp, d_swap;
  logic [23:0]  d_first_psn;
  logic [63:0]  d_sge_addr [4];
  logic [31:0]  d_sge_len [4];

  // --------------------------------------------------- its send context
  logic [TMPL_BYTES*8-1:0] c_tmpl;
  logic [7:0]   c_hdr_len, c_l3_off;
  logic [15:0]  c_max_pkts, c_noack;
  logic [1:0]   c_kind;
  logic         c_valid, c_sr;
  logic [3:0]   c_mtu_log2;
  logic [15:0]  c_ip_sum, c_pkey;
  logic [23:0]  c_dest_qpn, c_next_psn, c_una, c_window;

  // ----------------------------------------------------- packet cursor
  logic [31:0]  k, kend, npk, off, mtu;
  logic [32:0]  sge01, sge23;  // SGE lengths 0+1 and 2+3 (S_LOAD; 0 for SGEs beyond num_sge)
  logic [23:0]  read_end;      // a READ's PSN after its last response: first_psn + npk
  logic         d_ok;         // S_SIZE's verdict: the context and descriptor can be served
  logic [23:0]  psn;
  logic [31:0]  p_plen;
  logic         p_first, p_last;
  logic         p_more;       // packets of the message remain after this one
  logic [23:0]  p_outst;

  // -------------------------------------------------------- SGE cursor
  logic [2:0]   g_i;
  logic [31:0]  g_o, g_skip;
  logic [31:0]  g_av;         // bytes left in the SGE: d_sge_len[g_i] - g_o, kept in a register
  logic [15:0]  g_rem;
  logic         g_dry;        // skipping a packet: move the cursor, read nothing

  // ------------------------------------------------ the ACK being served
  logic [ACKD_BYTES*8-1:0] a_desc;
  logic [63:0]             a_orig;   // an ATOMIC ACKNOWLEDGE's original value

  // ----------------------------------- the READ response descriptor held
  logic               rd_active;    // held: its responses are not all planned
  logic [QPN_W-1:0]   rd_qpn;
  logic [23:0]        rd_psn, rd_msn;
  logic [63:0]        rd_va;
  logic [31:0]        rd_resid, rd_rkey;
  logic [15:0]        rd_pd;
  logic               rd_first;
  // the READ's QPN (all 24 bits, for a duplicate's drop), and the drop of its
  // rest, taken at its next response
  logic [23:0]        rd_qpn24;
  logic               rd_kill;
  // the response under way: its bytes (S_RA), the MR's verdict on its key and
  // where the MR and the response end (S_RA, 65 bits: no wrap), its last
  // place, the address its DMA request reads (S_RC)
  logic [15:0]        rr_n;
  logic               rr_last, rr_ids;
  logic [63:0]        rr_base, rr_addr;
  logic [64:0]        rr_mend, rr_vend;
  // S_RB: the response's bytes lie in the MR of its key, with REMOTE_READ
  // (memory::range_within, as fp_rx_check's WRITE check)
  logic rr_ok;
  assign rr_ok = rr_ids && rd_va >= rr_base && rr_vend <= rr_mend;


  // una_psn writes of the previous cycle (a read in that cycle saw the old word)
  logic               una_q_en;
  logic [QPN_W-1:0]   una_q_addr;
  logic [23:0]        una_q_psn;

  // ------------------------------------------------------- slot store
  localparam int TD_WORDS = TXD_BYTES / 4;
  logic [NSLOT-1:0]   s_valid, s_sleep;
  logic [QPN_W-1:0]   s_qpn [NSLOT];
  // kill_q[i]: slot i was freed or put to sleep at the last clock edge (its
  // valid bit cleared or its sleep bit set); what the pick checks instead of
  // comparing the slot's live state (docs: the pick stage below)
  logic [NSLOT-1:0]   kill_q;
  // older[i][j]: slot j holds an older descriptor of slot i's QP
  logic [NSLOT-1:0]   older [NSLOT];
  logic [SLOT_W-1:0]  cur;          // the slot of the message loaded
  logic               d_flush;      // the message loaded is a FLUSH (no slot)

  logic [TXD_BYTES*8-1:0] slot_rd;
  logic [TD_WORDS-1:0]    slot_we;
  logic [SLOT_W-1:0]      slot_wa;
  logic [TXD_BYTES*8-1:0] slot_wd;
  logic                   slot_re;
  logic [SLOT_W-1:0]      slot_ra;

  // The round robin's pick within one half of the slots (one-hot): its lowest
  // eligible slot at or after rr, else its lowest eligible slot; the lowest
  // set bit of {eligible, eligible at or after rr} (x & ~(x - 1), a carry
  // chain), its two halves folded into one. Two halves of NSLOT/2 (NSLOT is
  // even) halve the chain and the OR of the slots' QPNs behind it: over all
  // 32 slots at once they held the planner at 117.3 MHz.
  localparam int HALF = NSLOT / 2;
  function automatic logic [HALF-1:0] half_pick(input logic [HALF-1:0] e, input logic [HALF-1:0] m);
    logic [2*HALF-1:0] both, first;
    both = {e, e & m};
    first = both & ~(both - (2 * HALF)'(1));
    return first[HALF-1:0] | first[2*HALF-1:HALF];
  endfunction

  // the planner saves its cursor over start_pkt, in S_PKT_A and S_NEXT only
  logic               save_en;
  logic [31:0]        save_k;

  // intake: the first free slot, a register (the encoder stays off the paths
  // of the slot store's write address): from this cycle's free slots but the
  // one filled now; slots freed now count from the next cycle. Both
  // candidates (with and without the slot filled now) are encoded from
  // registers; take_txd only picks one, so the descriptor input's path ends
  // in a 2:1 mux.
  // The encoders are roce_first_set: a tree of log2(NSLOT) 2:1 selections (a
  // loop of "first found" would be a chain of NSLOT).
  logic               has_free;
  logic [SLOT_W-1:0]  free_slot;
  logic txd_flush, take_txd, take_flush, intake_open;
  logic               first_v, first_x_v;
  logic [SLOT_W-1:0]  first_i, first_x_i;
  roce_first_set #(
      .N(NSLOT),
      .W(SLOT_W)
  ) free_inst (
      .v(~s_valid),
      .found(first_v),
      .index(first_i)
  );
  roce_first_set #(
      .N(NSLOT),
      .W(SLOT_W)
  ) free_x_inst (
      .v(~s_valid & ~(NSLOT'(1) << free_slot)),
      .found(first_x_v),
      .index(first_x_i)
  );
  always_ff @(posedge clk) begin
    has_free <= take_txd ? first_x_v : first_v;
    free_slot <= take_txd ? first_x_i : first_i;
    if (rst) has_free <= 1'b0;
  end

  // No intake in the two states that may save a cursor: the slot RAM's one
  // write port is then the cursor's without a decision between them, and
  // take_txd does not wait for S_PKT_A's window test (the path that held
  // the planner at 80.7 MHz). It costs the intake at most two cycles a packet.
  assign intake_open = state != S_PKT_A && state != S_NEXT;
  assign txd_flush = s_txd_valid && s_txd_data[8*TD_OP +: 8] == OP_FLUSH;
  assign take_txd = s_txd_valid && !txd_flush && has_free && intake_open;

  always_comb begin
    slot_we = '0;
    slot_wa = free_slot;
    slot_wd = s_txd_data;
    // address and data chosen by the state (a register), the enables alone
    // by take_txd / save_en
    if (intake_open) begin
      if (take_txd) slot_we = '1;
    end else begin
      slot_we[TD_START_PKT / 4] = save_en;
      slot_wa = cur;
      slot_wd[8*TD_START_PKT +: 32] = save_k;
    end
  end

  roce_ram #(
    .WORDS(TD_WORDS),
    .DEPTH(NSLOT)
  ) slot_ram_inst (
    .clk(clk),
    .wr_addr(slot_wa),
    .wr_en(slot_we),
    .wr_data(slot_wd),
    .rd_addr(slot_ra),
    .rd_en(slot_re),
    .rd_data(slot_rd)
  );

  always_ff @(posedge clk) begin
    logic [SLOT_W:0] c;
    c = '0;
    for (int i = 0; i < NSLOT; i++) c = c + (SLOT_W + 1)'(s_valid[i]);
    slots_used <= c;
    if (rst) slots_used <= '0;
  end

  // the round robin, two register stages: the eligible slots (awake, the
  // oldest of their QP), then the first of them at or after `rr`.
  //
  // The pick is made from the eligible set of two cycles ago, so the slot may
  // have changed since: it is used only if the slot was neither freed nor put
  // to sleep at either of the two clock edges since that set was sampled
  // (kill_q one cycle ago, carried through the pick as pick_dead_q; kill_q
  // now) nor is switched off in this cycle. A slot is refilled only after it
  // was freed, and its QP changes only when it is refilled, so the QP carried
  // with the pick is the slot's. Comparing the slot's live state instead
  // (32:1 muxes of its QP, valid, sleep and a generation count, then the
  // QP against the invalidation) held the planner at 92.0 MHz.
  logic [NSLOT-1:0]   elig_q;
  logic [SLOT_W-1:0]  rr;
  logic [NSLOT-1:0]   rr_mask;      // slots at or after rr: bit i = i >= rr
  logic [NSLOT-1:0]   pick_oh_q;    // the pick, one-hot
  logic [SLOT_W-1:0]  pick_q;
  logic [QPN_W-1:0]   pick_qpn_q;
  logic               pick_dead_q;
  logic [SLOT_W-1:0]  pick_rr_q;
  logic               pick_ok_q, others_q;
  always_ff @(posedge clk) begin
    logic [HALF-1:0]   e_lo, e_hi, m_lo, m_hi, oh_lo, oh_hi, kill_lo, kill_hi;
    logic [QPN_W-1:0]  qpn_lo, qpn_hi;
    logic [SLOT_W-2:0] ix_lo, ix_hi;
    logic              lo;
    for (int i = 0; i < NSLOT; i++) begin
      elig_q[i] <= s_valid[i] && !s_sleep[i] && (older[i] & s_valid) == '0;
    end
    // the first eligible slot at or after rr, else the first one, as two
    // halves that each pick their own (half_pick) and a 2:1 choice between
    // them: the low half's pick is the pick when it has an eligible slot at
    // or after rr, or when neither half has one there and it has any
    {e_hi, e_lo} = elig_q;
    {m_hi, m_lo} = rr_mask;
    {kill_hi, kill_lo} = kill_q;
    oh_lo = half_pick(e_lo, m_lo);
    oh_hi = half_pick(e_hi, m_hi);
    qpn_lo = '0;
    qpn_hi = '0;
    ix_lo = '0;
    ix_hi = '0;
    for (int i = 0; i < HALF; i++) begin
      if (oh_lo[i]) begin
        qpn_lo = qpn_lo | s_qpn[i];
        ix_lo = ix_lo | (SLOT_W - 1)'(i);
      end
      if (oh_hi[i]) begin
        qpn_hi = qpn_hi | s_qpn[HALF + i];
        ix_hi = ix_hi | (SLOT_W - 1)'(i);
      end
    end
    lo = (e_lo & m_lo) != '0 || ((e_hi & m_hi) == '0 && e_lo != '0);
    pick_oh_q <= lo ? {HALF'(0), oh_lo} : {oh_hi, HALF'(0)};
    pick_q <= lo ? {1'b0, ix_lo} : {1'b1, ix_hi};
    pick_qpn_q <= lo ? qpn_lo : qpn_hi;
    pick_dead_q <= lo ? (oh_lo & kill_lo) != '0 : (oh_hi & kill_hi) != '0;
    pick_ok_q <= elig_q != '0;
    pick_rr_q <= rr;
    others_q <= (elig_q & ~(NSLOT'(1) << cur)) != '0;
    if (rst) pick_ok_q <= 1'b0;
  end

  logic pick_live;
  assign pick_live = pick_ok_q && pick_rr_q == rr && !pick_dead_q && (pick_oh_q & kill_q) == '0
      && !(inval_wr_en && inval_wr_addr == pick_qpn_q);

  // ----------------------------------------------------- combinational
  // between packets: a READ held goes first, then the ACK queue (whose next
  // entry may be a READ response descriptor: taken and served at once)
  logic serve_ack, serve_rd, serve_any, ackd_read;
  assign serve_rd = rd_active && job_room && (state == S_IDLE || state == S_PKT_A);
  assign serve_ack = s_ackd_valid && !rd_active && job_room
      && (state == S_IDLE || state == S_PKT_A);
  assign serve_any = serve_ack || serve_rd;
  // (an ATOMIC ACKNOWLEDGE, ordered as a READ in the queue, is one ACK frame)
  assign ackd_read = s_ackd_data[8*AD_FLAGS + AD_F_READ]
      && !s_ackd_data[8*AD_FLAGS + AD_F_ATOMIC];

  assign s_ackd_ready = serve_ack;
  assign idle = state == S_IDLE && s_valid == '0 && !rd_active;
  assign rd_busy = rd_active;
  assign rd_busy_qpn = rd_qpn24;

  // the message in progress is to be dropped: its context was switched off
  logic d_abort;
  // a FLUSH is taken when no message is loaded: the QP's slots go with it
  assign take_flush = txd_flush && state == S_IDLE && !s_ackd_valid && !rd_active;
  assign s_txd_ready = take_txd || take_flush;

  logic load_slot;
  assign load_slot = state == S_IDLE && !serve_any && !txd_flush && pick_live;

  always_comb begin
    ctx_rd_en = 1'b0;
    ctx_rd_addr = s_txd_data[8*TD_QPN +: QPN_W];
    slot_re = load_slot;
    slot_ra = pick_q;
    // the MR of a READ's R_Key, read with its context
    mr_rd_en = serve_any;
    mr_rd_addr = serve_rd ? rd_rkey[8 +: MR_W] : s_ackd_data[8*RD_RKEY + 8 +: MR_W];
    if (serve_rd) begin
      ctx_rd_en = 1'b1;
      ctx_rd_addr = rd_qpn;
    end else if (serve_ack) begin
      ctx_rd_en = 1'b1;
      ctx_rd_addr = s_ackd_data[8*AD_QPN +: QPN_W];
    end else if (state == S_RB && rr_ok && job_room) begin
      // again, for the job of S_RC (a firmware read may have used the port since)
      ctx_rd_en = 1'b1;
      ctx_rd_addr = rd_qpn;
    end else if (take_flush) begin
      ctx_rd_en = 1'b1;
    end else if (load_slot) begin
      ctx_rd_en = 1'b1;
      ctx_rd_addr = pick_qpn_q;
    end
  end

  // packet fields of S_PKT_B
  logic        is_write, is_read, is_atomic, is_ra;
  logic [7:0]  opcode;
  logic        ackreq;
  logic [16:0] noack_inc;
  logic [23:0] psn_next;
  assign is_write = d_op == OP_WRITE || d_op == OP_WRITE_IMM;
  assign is_read = d_op == OP_READ;
  assign is_atomic = d_op == OP_CMP_SWAP || d_op == OP_FETCH_ADD;
  assign is_ra = is_read || is_atomic;
  assign noack_inc = {1'b0, c_noack} + 17'd1;
  assign psn_next = psn + 24'd1;

  always_comb begin
    if (is_read) opcode = RC_READ_REQ;
    else if (d_op == OP_CMP_SWAP) opcode = RC_CMP_SWAP;
    else if (d_op == OP_FETCH_ADD) opcode = RC_FETCH_ADD;
    else if (c_sr && d_op == OP_WRITE) opcode = RC_WRITE_ONLY;
    else if (is_write) begin
      if (p_first && p_last) opcode = d_op == OP_WRITE_IMM ? RC_WRITE_ONLY_IMM : RC_WRITE_ONLY;
      else if (p_first) opcode = RC_WRITE_FIRST;
      else if (p_last) opcode = d_op == OP_WRITE_IMM ? RC_WRITE_LAST_IMM : RC_WRITE_LAST;
      else opcode = RC_WRITE_MIDDLE;
    end else begin
      if (p_first && p_last) begin
        case (d_op)
          OP_SEND_IMM: opcode = RC_SEND_ONLY_IMM;
          OP_SEND_INV: opcode = RC_SEND_ONLY_INV;
          default:     opcode = RC_SEND_ONLY;
        endcase
      end else if (p_first) opcode = RC_SEND_FIRST;
      else if (p_last) begin
        case (d_op)
          OP_SEND_IMM: opcode = RC_SEND_LAST_IMM;
          OP_SEND_INV: opcode = RC_SEND_LAST_INV;
          default:     opcode = RC_SEND_LAST;
        endcase
      end else opcode = RC_SEND_MIDDLE;
    end
    ackreq = p_last || noack_inc >= {1'b0, c_max_pkts} || p_outst + 24'd1 >= c_window;
  end

  // the packet's job
  always_comb begin
    m_job = '0;
    if (state == S_ACK || state == S_RC) begin
      // a response's headers: the template as the context read holds it
      m_job.tmpl = ctx_rd_data[8*SC_TEMPLATE +: TMPL_BYTES*8];
      m_job.hdr_len = ctx_rd_data[8*SC_HDR_LEN +: 8];
      m_job.l3_off = ctx_rd_data[8*SC_L3_OFF +: 8];
      m_job.ipv6 = ctx_rd_data[8*SC_FLAGS +: 2] == 2'd1;
      m_job.ip_sum = ctx_rd_data[8*SC_IP_SUM +: 16];
      m_job.pkey = ctx_rd_data[8*SC_PKEY +: 16];
      m_job.dest_qpn = ctx_rd_data[8*SC_DEST_QPN +: 24];
    end
    if (state == S_ACK) begin
      m_job.opcode = a_desc[8*AD_FLAGS + AD_F_ATOMIC] ? RC_ATOMIC_ACK : RC_ACK;
      m_job.resv7 = {6'd0, a_desc[8*AD_FLAGS]};
      m_job.psn = a_desc[8*AD_PSN +: 24];
      m_job.has_aeth = 1'b1;
      m_job.aeth = {a_desc[8*AD_SYNDROME +: 8], a_desc[8*AD_MSN +: 24]};
      // an ATOMIC ACKNOWLEDGE (fastpath::atomic_ack_frame): the AtomicAckETH too
      m_job.has_atack = a_desc[8*AD_FLAGS + AD_F_ATOMIC];
      m_job.swap_add = a_orig;
    end else if (state == S_RC) begin
      // a READ response (fastpath::read_response): no AckReq, no SE
      if (rd_first && rr_last) m_job.opcode = RC_READ_RESP_ONLY;
      else if (rd_first) m_job.opcode = RC_READ_RESP_FIRST;
      else if (rr_last) m_job.opcode = RC_READ_RESP_LAST;
      else m_job.opcode = RC_READ_RESP_MIDDLE;
      m_job.pad = 2'(-rr_n);
      m_job.psn = rd_psn;
      m_job.has_aeth = rd_first || rr_last;
      m_job.aeth = {8'h1F, rd_msn};
      m_job.plen = rr_n;
    end else begin
      m_job.tmpl = c_tmpl;
      m_job.hdr_len = c_hdr_len;
      m_job.l3_off = c_l3_off;
      m_job.ipv6 = c_kind == 2'd1;
      m_job.ip_sum = c_ip_sum;
      m_job.pkey = c_pkey;
      m_job.dest_qpn = c_dest_qpn;
      m_job.opcode = opcode;
      m_job.se = p_last && d_se && !is_ra;
      m_job.ackreq = ackreq;
      m_job.pad = 2'(-p_plen);
      m_job.psn = psn;
      m_job.has_reth = is_read || (is_write && (p_first || (c_sr && d_op == OP_WRITE)));
      m_job.reth_va = ((c_sr && d_op == OP_WRITE) || is_read) ? d_raddr + {32'd0, off} : d_raddr;
      m_job.reth_rkey = d_rkey;
      if (is_read) m_job.reth_len = (d_len > off) ? d_len - off : 32'd0;
      else m_job.reth_len = (c_sr && d_op == OP_WRITE) ? p_plen : d_len;
      m_job.has_atomic = is_atomic;
      m_job.swap_add = d_swap;
      m_job.compare = (d_op == OP_CMP_SWAP) ? d_cmp : 64'd0;
      m_job.has_imm = p_last
          && (d_op == OP_SEND_IMM || d_op == OP_SEND_INV || d_op == OP_WRITE_IMM);
      m_job.imm = d_imm;
      m_job.plen = 16'(p_plen);
    end
  end
  assign m_job_valid = state == S_ACK || ((state == S_PKT_B || state == S_RC) && job_room);

  // DMA request of S_GATHER: the piece is what is left of the SGE (g_av) or
  // of the packet (g_rem), whichever is less; one compare decides it all
  logic        g_short;      // the SGE ends before the packet: g_av < g_rem
  logic        g_ends_sge;   // the piece uses the SGE up: g_av <= g_rem
  logic [15:0] g_n;
  logic [31:0] g_len_next;   // the next SGE's length
  logic [63:0] g_addr;
  always_comb begin
    g_short = g_av < {16'd0, g_rem};
    g_ends_sge = g_av <= {16'd0, g_rem};
    g_n = g_short ? g_av[15:0] : g_rem;
    g_len_next = d_sge_len[g_i[1:0] + 2'd1];
    g_addr = d_sge_addr[g_i[1:0]] + {32'd0, g_o};
  end
  // (S_RD: a READ response's payload, one request)
  assign m_rd_addr = state == S_RD ? rr_addr : g_addr;
  assign m_rd_len = state == S_RD ? rr_n : g_n;
  assign m_rd_last = state == S_RD || !g_short;
  assign m_rd_valid = (state == S_GATHER && g_av != 0 && !g_dry) || state == S_RD;

  // sum of the SGE lengths (S_SIZE), 34 bits: the two pairs' sums registered in
  // S_LOAD, so S_SIZE has one adder before its compare (three adders in a row
  // there held the planner at 93.2 MHz)
  logic [33:0] sge_sum;
  assign sge_sum = {1'b0, sge01} + {1'b0, sge23};

  // -------------------------------------------- leaving a message unfinished
  // S_PKT_A: the window refuses the packet (the slot sleeps); S_NEXT: another
  // slot is eligible or a FLUSH waits (the round robin moves on)
  logic signed [23:0] a_outst;
  logic               a_refused, n_leave;
  assign a_outst = psn_diff(psn, c_una);
  assign a_refused = !d_abort && !(a_outst < 0 && d_replay)
      && (a_outst < 0 || a_outst >= signed'(c_window));
  assign n_leave = !d_abort && p_more && (txd_flush || others_q);
  // at the end of a packet: straight on to the message's next one
  logic go_on;
  assign go_on = !d_abort && !txd_flush && !others_q;
  assign save_en = !serve_any
      && ((state == S_PKT_A && a_refused) || (state == S_NEXT && n_leave));
  assign save_k = k;

  // ------------------------------------------------------------ the FSM
  always_ff @(posedge clk) begin
    logic [23:0] una_now;
    logic signed [23:0] outst;
    ctx_wb_en <= 1'b0;
    ctx_wb_una_en <= 1'b0;
    // a duplicate READ of the QP before this one's next PSN: its rest goes
    // (the model's drop_reads_after), at its next response (S_RB)
    if (drop_en && rd_active && rd_qpn24 == drop_qpn && psn_diff(rd_psn, drop_psn) > 0)
      rd_kill <= 1'b1;
    una_q_en <= una_wr_en;
    una_q_addr <= una_wr_addr;
    una_q_psn <= una_wr_psn;
    // the firmware moved the window of the message's QP
    if (una_wr_en && una_wr_addr == d_qpn) c_una <= una_wr_psn;
    if (inval_wr_en && inval_wr_addr == d_qpn) d_abort <= 1'b1;

    // the slot store: a descriptor in, a slot to sleep, freed or woken (each
    // free or sleep also sets the slot's kill_q)
    kill_q <= '0;
    if (take_txd) begin
      s_valid[free_slot] <= 1'b1;
      s_sleep[free_slot] <= 1'b0;
      s_qpn[free_slot] <= s_txd_data[8*TD_QPN +: QPN_W];
      for (int j = 0; j < NSLOT; j++) begin
        older[free_slot][j] <= s_valid[j] && s_qpn[j] == s_txd_data[8*TD_QPN +: QPN_W];
        older[j][free_slot] <= 1'b0;
      end
    end
    if (save_en && state == S_PKT_A) begin
      s_sleep[cur] <= 1'b1;
      kill_q[cur] <= 1'b1;
    end
    if (state == S_DONE && !d_abort && !d_flush) begin
      s_valid[cur] <= 1'b0;
      kill_q[cur] <= 1'b1;
    end
    for (int i = 0; i < NSLOT; i++) begin
      // (a slot filled in this cycle was free before it: not matched)
      if (s_valid[i] && take_flush && s_qpn[i] == s_txd_data[8*TD_QPN +: QPN_W]) begin
        s_valid[i] <= 1'b0;
        kill_q[i] <= 1'b1;
      end
      if (s_valid[i] && inval_wr_en && s_qpn[i] == inval_wr_addr) begin
        s_valid[i] <= 1'b0;
        kill_q[i] <= 1'b1;
      end
      if (una_wr_en && s_qpn[i] == una_wr_addr) s_sleep[i] <= 1'b0;
    end

    if (serve_any) begin
      a_desc <= s_ackd_data[ACKD_BYTES*8-1:0];
      a_orig <= s_ackd_data[8*RD_ORIG +: 64];
      ret <= (state == S_IDLE) ? S_IDLE : S_PKT_A;
      state <= S_ACK;
      if (serve_ack && ackd_read) begin
        // a READ response descriptor: held from now on, its first response now
        rd_active <= 1'b1;
        rd_qpn <= s_ackd_data[8*AD_QPN +: QPN_W];
        rd_qpn24 <= s_ackd_data[8*AD_QPN +: 24];
        rd_kill <= 1'b0;
        rd_psn <= s_ackd_data[8*AD_PSN +: 24];
        rd_msn <= s_ackd_data[8*AD_MSN +: 24];
        rd_first <= s_ackd_data[8*AD_FLAGS + AD_F_FIRST];
        rd_rkey <= s_ackd_data[8*RD_RKEY +: 32];
        rd_va <= s_ackd_data[8*RD_VA +: 64];
        rd_resid <= s_ackd_data[8*RD_RESID +: 32];
        rd_pd <= s_ackd_data[8*RD_PD +: 16];
        state <= S_RA;
      end
      if (serve_rd) state <= S_RA;
    end else begin
      case (state)
        S_IDLE: if (take_flush) begin
          // the firmware rewound the requester: its queued messages go (above),
          // the context's noack is written back through S_CHECK
          d_qpn <= s_txd_data[8*TD_QPN +: QPN_W];
          d_op <= OP_FLUSH;
          d_imm <= s_txd_data[8*TD_IMM +: 32];   // its una_psn
          d_len <= '0;
          d_nsge <= '0;
          d_start <= '0;
          d_end <= '0;
          sge01 <= '0;
          sge23 <= '0;
          d_flush <= 1'b1;
          d_abort <= 1'b0;
          state <= S_LOAD;
        end else if (load_slot) begin
          d_qpn <= pick_qpn_q;
          cur <= pick_q;
          d_flush <= 1'b0;
          d_abort <= 1'b0;
          state <= S_LOAD;
        end

        S_ACK: state <= ret;   // the job left this cycle (job_room was checked)

        S_RA: begin
          // the context and the MR read last cycle: the response's size, the key
          logic [3:0] ml;
          logic [31:0] mtu_r;
          logic [15:0] nr;
          ml = ctx_rd_data[8*SC_FLAGS + 4 +: 4];
          mtu_r = 32'd1 << ml;
          nr = (rd_resid < mtu_r) ? rd_resid[15:0] : mtu_r[15:0];
          rr_n <= nr;
          rr_last <= rd_resid <= mtu_r;
          rr_ids <= mr_rd_data[8*MR_KEY +: 32] != 32'd0
              && mr_rd_data[8*MR_KEY +: 32] == rd_rkey
              && mr_rd_data[8*MR_PD +: 32] == {16'd0, rd_pd}
              && mr_rd_data[8*MR_VALID +: 8] != 8'd0
              && (mr_rd_data[8*MR_ACCESS +: 8] & ACC_REMOTE_READ) != 8'd0;
          rr_base <= mr_rd_data[8*MR_BASE +: 64];
          rr_mend <= {1'b0, mr_rd_data[8*MR_BASE +: 64]}
              + {1'b0, mr_rd_data[8*MR_LENGTH +: 64]};
          rr_vend <= {1'b0, rd_va} + {49'd0, nr};
          state <= S_RB;
        end

        S_RB: begin
          if (!rr_ok || rd_kill) begin
            // the region lost its rights since the request: nothing more of
            // the READ goes (the requester's retry is the firmware's); or a
            // duplicate READ dropped its rest
            rd_active <= 1'b0;
            rd_kill <= 1'b0;
            state <= ret;
          end else if (job_room) begin
            state <= S_RC;   // (the context is read again now)
          end
        end

        S_RC: if (job_room) begin
          // the job left this cycle; the descriptor moves past the response
          rr_addr <= rd_va;
          rd_psn <= rd_psn + 24'd1;
          rd_va <= rd_va + {48'd0, rr_n};
          rd_resid <= rd_resid - {16'd0, rr_n};
          rd_first <= 1'b0;
          state <= S_RD;
        end else begin
          state <= S_RB;   // read the context again when there is room
        end

        S_RD: if (m_rd_ready) begin
          if (rd_resid == 32'd0) begin
            rd_active <= 1'b0;
            rd_kill <= 1'b0;
          end
          state <= ret;
        end

        S_LOAD: begin
          // the slot's descriptor and the context word read last cycle, with any
          // una_psn written since
          if (!d_flush) begin
            logic [2:0] nsge;
            logic [31:0] len [4];
            nsge = (slot_rd[8*TD_NUM_SGE +: 8] > 8'd4) ? 3'd4 : slot_rd[8*TD_NUM_SGE +: 3];
            for (int i = 0; i < 4; i++) begin
              len[i] = (3'(i) < nsge) ? slot_rd[8*(TD_SGE + 12*i + 8) +: 32] : 32'd0;
            end
            sge01 <= {1'b0, len[0]} + {1'b0, len[1]};
            sge23 <= {1'b0, len[2]} + {1'b0, len[3]};
            d_op <= slot_rd[8*TD_OP +: 8];
            d_se <= slot_rd[8*TD_FLAGS + 0];
            d_replay <= slot_rd[8*TD_FLAGS + 1];
            d_nsge <= nsge;
            d_len <= slot_rd[8*TD_LENGTH +: 32];
            d_imm <= slot_rd[8*TD_IMM +: 32];
            d_raddr <= slot_rd[8*TD_RADDR +: 64];
            d_cmp <= slot_rd[8*TD_COMPARE +: 64];
            d_swap <= slot_rd[8*TD_SWAP_ADD +: 64];
            d_rkey <= slot_rd[8*TD_RKEY +: 32];
            d_first_psn <= slot_rd[8*TD_FIRST_PSN +: 24];
            for (int i = 0; i < 4; i++) begin
              d_sge_addr[i] <= slot_rd[8*(TD_SGE + 12*i) +: 64];
              d_sge_len[i] <= slot_rd[8*(TD_SGE + 12*i + 8) +: 32];
            end
            d_start <= slot_rd[8*TD_START_PKT +: 32];
            d_end <= slot_rd[8*TD_END_PKT +: 32];
          end
          una_now = ctx_rd_data[8*SC_UNA_PSN +: 24];
          if (una_q_en && una_q_addr == d_qpn) una_now = una_q_psn;
          if (una_wr_en && una_wr_addr == d_qpn) una_now = una_wr_psn;
          c_tmpl <= ctx_rd_data[8*SC_TEMPLATE +: TMPL_BYTES*8];
          c_hdr_len <= ctx_rd_data[8*SC_HDR_LEN +: 8];
          c_l3_off <= ctx_rd_data[8*SC_L3_OFF +: 8];
          c_kind <= ctx_rd_data[8*SC_FLAGS +: 2];
          c_valid <= ctx_rd_data[8*SC_FLAGS + 2];
          c_sr <= ctx_rd_data[8*SC_FLAGS + 3];
          c_mtu_log2 <= ctx_rd_data[8*SC_FLAGS + 4 +: 4];
          mtu <= 32'd1 << ctx_rd_data[8*SC_FLAGS + 4 +: 4];
          c_ip_sum <= ctx_rd_data[8*SC_IP_SUM +: 16];
          c_pkey <= ctx_rd_data[8*SC_PKEY +: 16];
          c_dest_qpn <= ctx_rd_data[8*SC_DEST_QPN +: 24];
          c_max_pkts <= ctx_rd_data[8*SC_MAX_PKTS +: 16];
          c_next_psn <= ctx_rd_data[8*SC_NEXT_PSN +: 24];
          c_noack <= ctx_rd_data[8*SC_NOACK +: 16];
          c_una <= una_now;
          c_window <= ctx_rd_data[8*SC_WINDOW +: 24];
          state <= S_SIZE;
        end

        S_SIZE: begin
          // packets: max(1, ceil(len / mtu)) (PSNs: a READ one per response packet, an
          // atomic one: TxMsg::psns), and whether the message can be sent at all; a
          // cycle of its own, off the path of S_CHECK's decisions
          // (ceil(len / mtu) as the quotient plus one for a remainder: no
          // subtraction before the shift)
          npk <= (d_len == 0 || is_atomic) ? 32'd1
              : (d_len >> c_mtu_log2)
                + {31'd0, (d_len & ~({32{1'b1}} << c_mtu_log2)) != 32'd0};
          d_ok <= c_valid && c_kind <= 2'd1 && c_mtu_log2 >= 4'd8 && c_mtu_log2 <= 4'd12
              && (d_op <= OP_FETCH_ADD || d_op == OP_FLUSH)
              && (is_ra || sge_sum >= {2'd0, d_len});
          state <= S_CHECK;
        end

        S_CHECK: begin
          // the packets to send: start_pkt up to end_pkt, READ and atomics one
          // (TxMsg::range); a resumed message's start_pkt is its saved cursor
          logic [31:0] n;
          logic [31:0] ks, ke;
          n = npk;
          ks = (d_start < n) ? d_start : n;
          // (from d_start, not ks, so it does not wait for ks: equal whenever
          // d_start < n, and n otherwise)
          if (is_ra) ke = ({1'b0, d_start} + 33'd1 < {1'b0, n}) ? d_start + 32'd1 : n;
          else ke = (d_end != 0 && d_end < n) ? d_end : n;
          k <= ks;
          kend <= ke;
          off <= ks << c_mtu_log2;
          g_skip <= ks << c_mtu_log2;
          psn <= d_first_psn + ks[23:0];
          read_end <= d_first_psn + npk[23:0];
          g_i <= '0;
          g_o <= '0;
          g_av <= d_sge_len[0];
          state <= S_RANGE;
        end

        S_RANGE: begin
          // S_CHECK's range, registered: the decision has a cycle of its own
          if (!d_ok) begin
            bad_desc <= bad_desc + 32'd1;
            state <= S_DONE;
          end else if (d_op == OP_FLUSH) begin
            // the firmware rewound the requester: the AckReq count starts again,
            // and una_psn moves forward to the FLUSH's (never back: a response
            // taken since, this cycle's write included, may be past it). In the
            // same step as the drop, so the window the new una_psn opens admits
            // none of the dropped packets.
            una_now = (una_wr_en && una_wr_addr == d_qpn) ? una_wr_psn : c_una;
            c_noack <= '0;
            ctx_wb_en <= 1'b1;
            ctx_wb_addr <= d_qpn;
            ctx_wb_psn <= {8'd0, c_next_psn};
            ctx_wb_noack <= {16'd0, c_max_pkts};
            ctx_wb_una_en <= 1'b1;
            ctx_wb_una <= (psn_diff(d_imm[23:0], una_now) > 0) ? d_imm[23:0] : una_now;
            // through S_DONE: the write-back lands before the next descriptor's
            // context read (the table reads the old word in a cycle it is written)
            state <= S_DONE;
          end else if (k >= kend || k >= npk) begin
            state <= S_DONE;
          end else begin
            state <= S_SEEK;
          end
        end

        S_SEEK: begin
          // to the SGE holding byte `off` (skipping whole SGEs, as the model's gather)
          if (g_i < d_nsge && g_skip >= d_sge_len[g_i[1:0]]) begin
            g_skip <= g_skip - d_sge_len[g_i[1:0]];
            g_i <= g_i + 3'd1;
          end else begin
            g_o <= g_skip;
            g_av <= d_sge_len[g_i[1:0]] - g_skip;
            state <= S_PKT_A;
          end
        end

        S_PKT_A: begin
          logic [31:0] rem;
          rem = is_ra ? 32'd0 : d_len - off;
          p_plen <= (rem < mtu) ? rem : mtu;
          p_first <= k == 0;
          p_last <= k + 32'd1 == npk || is_ra;
          p_more <= k + 32'd1 < kend;
          outst = a_outst;
          p_outst <= outst;
          g_dry <= 1'b0;
          if (d_abort) begin
            state <= S_IDLE;
          end else if (outst < 0 && d_replay) begin
            // acknowledged while it waited: skip it
            k <= k + 32'd1;
            off <= off + mtu;
            psn <= psn_next;
            g_rem <= 16'((rem < mtu) ? rem : mtu);
            g_dry <= 1'b1;
            state <= (rem != 0) ? S_GATHER : S_NEXT;
          end else if (a_refused) begin
            // the slot sleeps until its QP's una_psn is written (cursor saved)
            state <= S_IDLE;
          end else begin
            state <= S_PKT_B;
          end
        end

        S_PKT_B: if (job_room) begin
          logic [15:0] noack_n;
          logic [23:0] next_n, after;
          noack_n = ackreq ? 16'd0 : noack_inc[15:0];
          // the PSN after the packet's: a READ request covers all its responses
          // (psn - k is first_psn throughout the message, so psn + npk - k is
          // read_end)
          after = is_read ? read_end : psn_next;
          next_n = (psn_diff(after, c_next_psn) > 0) ? after : c_next_psn;
          c_noack <= noack_n;
          c_next_psn <= next_n;
          // only the segmenter knows a resend: the firmware posts whole messages,
          // and a FLUSH drops the packets of them not sent yet
          if (psn_diff(psn, c_next_psn) < 0) resent <= resent + 32'd1;
          ctx_wb_en <= 1'b1;
          ctx_wb_addr <= d_qpn;
          ctx_wb_psn <= {8'd0, next_n};
          ctx_wb_noack <= {noack_n, c_max_pkts};
          k <= k + 32'd1;
          off <= off + mtu;
          psn <= psn_next;
          g_rem <= 16'(p_plen);
          if (p_plen != 0) state <= S_GATHER;
          else state <= (go_on && p_more) ? S_PKT_A : S_NEXT;
        end

        S_GATHER: begin
          if (g_av == 0) begin
            // an empty (or used up) SGE: next one
            g_i <= g_i + 3'd1;
            g_o <= '0;
            g_av <= g_len_next;
          end else if (m_rd_ready || g_dry) begin
            // (g_short: the piece is g_av, else g_rem)
            g_rem <= g_short ? g_rem - g_av[15:0] : 16'd0;
            if (g_ends_sge) begin
              g_i <= g_i + 3'd1;
              g_o <= '0;
              g_av <= g_len_next;
            end else begin
              g_o <= g_o + {16'd0, g_rem};
              g_av <= g_av - {16'd0, g_rem};
            end
            if (!g_short) state <= (go_on && p_more) ? S_PKT_A : S_NEXT;
          end
        end

        S_NEXT: begin
          // a packet boundary where the message does not simply go on: it ends,
          // yields to the round robin (its cursor saved), or is dropped
          if (d_abort) state <= S_IDLE;
          else if (!p_more) state <= S_DONE;
          else if (n_leave) begin
            rr <= cur + SLOT_W'(1);
            rr_mask <= {NSLOT{1'b1}} << (cur + SLOT_W'(1));
            state <= S_IDLE;
          end else state <= S_PKT_A;
        end

        S_DONE: begin
          rr <= cur + SLOT_W'(1);
          rr_mask <= {NSLOT{1'b1}} << (cur + SLOT_W'(1));
          state <= S_IDLE;
        end

        default: state <= S_IDLE;
      endcase
    end
    if (rst) begin
      state <= S_IDLE;
      ctx_wb_en <= 1'b0;
      ctx_wb_una_en <= 1'b0;
      rd_active <= 1'b0;
      rd_kill <= 1'b0;
      una_q_en <= 1'b0;
      bad_desc <= '0;
      resent <= '0;
      d_qpn <= '0;
      d_abort <= 1'b0;
      d_flush <= 1'b0;
      cur <= '0;
      rr <= '0;
      rr_mask <= '1;
      s_valid <= '0;
      s_sleep <= '0;
    end
  end

endmodule

`resetall
