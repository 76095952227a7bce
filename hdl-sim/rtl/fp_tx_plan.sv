// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_tx_plan: the fast path's TX planner (docs/fastpath.md §2). Takes one
// message descriptor at a time (and ACK descriptors, which go first between
// packets), reads the QP's send context, and for each packet of the message
// decides everything the wire needs: opcode, PSN, AckReq, PadCnt, RETH,
// ImmDt/IETH. It hands each packet to the header builder as a job and asks
// the DMA for the packet's payload, one request per SGE piece; it writes the
// context's next_psn and noack back after every packet. FLUSH sets noack to 0.
//
// A packet whose PSN the window does not allow waits until the firmware
// writes a una_psn that opens it (ACK descriptors are still served); a
// replayed packet whose PSN is before una_psn is skipped. The message in
// progress is dropped at the next packet boundary when the firmware clears
// its context's `valid` or a FLUSH of its QP waits at the descriptor input
// (the firmware rewound the requester, §2.2): a stalled message never
// blocks the descriptors behind it for good. `idle` says the planner holds
// no message (a descriptor offered now is taken at once).
//
// READ and atomic descriptors send one request packet (a READ occupies the
// PSNs of all its responses). Not yet in RTL (v0.2): the per-QP descriptor
// queues served round robin (descriptors are taken in order, one message at
// a time), and the in-flight list the response path reads.
//
// The packet rule is roce_core::fastpath::segment's; tests/fastpath.rs
// checks the frames byte for byte against it. Per packet the planner takes 2
// cycles plus one per SGE piece (at least 3); a message adds 4 (descriptor,
// context, sizes and SGE sums, range) plus one per SGE skipped on a REPLAY.

`resetall
`default_nettype none

module fp_tx_plan
  import fp_pkg::*;
#(
    // send contexts (QPN index range)
    parameter int NQP = 256,
    parameter int QPN_W = $clog2(NQP)
) (
    input  wire logic                       clk,
    input  wire logic                       rst,

    // message descriptors
    input  wire logic [TXD_BYTES*8-1:0]     s_txd_data,
    input  wire logic                       s_txd_valid,
    output logic                            s_txd_ready,

    // ACK descriptors
    input  wire logic [ACKD_BYTES*8-1:0]    s_ackd_data,
    input  wire logic                       s_ackd_valid,
    output logic                            s_ackd_ready,

    // send context table: read port (data one cycle after rd_en)
    output logic                            ctx_rd_en,
    output logic [QPN_W-1:0]                ctx_rd_addr,
    input  wire logic [SCTX_BYTES*8-1:0]    ctx_rd_data,

    // write-back of words 3 (next_psn) and 6 (max_pkts_per_ack, noack); has
    // priority on the table
    output logic                            ctx_wb_en,
    output logic [QPN_W-1:0]                ctx_wb_addr,
    output logic [31:0]                     ctx_wb_psn,
    output logic [31:0]                     ctx_wb_noack,

    // firmware writes of una_psn (word 4), seen as they go into the table
    input  wire logic                       una_wr_en,
    input  wire logic [QPN_W-1:0]           una_wr_addr,
    input  wire logic [23:0]                una_wr_psn,

    // firmware writes of word 0 that clear `valid`
    input  wire logic                       inval_wr_en,
    input  wire logic [QPN_W-1:0]           inval_wr_addr,

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

    // no message in progress
    output logic                            idle
);

  initial begin
    if (NQP < 2 || (NQP & (NQP - 1)) != 0 || NQP > 65536) begin
      $error("fp_tx_plan: NQP must be a power of two in 2..65536 (got %0d)", NQP);
      $finish;
    end
  end

  typedef enum logic [3:0] {
    S_IDLE, S_ACK, S_LOAD, S_SIZE, S_CHECK, S_SEEK, S_PKT_A, S_PKT_B, S_GATHER, S_STALL, S_DONE
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
  logic         d_ok;         // S_SIZE's verdict: the context and descriptor can be served
  logic [23:0]  psn;
  logic [31:0]  p_plen;
  logic         p_first, p_last;
  logic [23:0]  p_outst;

  // -------------------------------------------------------- SGE cursor
  logic [2:0]   g_i;
  logic [31:0]  g_o, g_skip;
  logic [15:0]  g_rem;
  logic         g_dry;        // skipping a packet: move the cursor, read nothing

  // ------------------------------------------------ the ACK being served
  logic [ACKD_BYTES*8-1:0] a_desc;

  // una_psn writes of the previous cycle (a read in that cycle saw the old word)
  logic               una_q_en;
  logic [QPN_W-1:0]   una_q_addr;
  logic [23:0]        una_q_psn;

  // ----------------------------------------------------- combinational
  logic serve_ack;
  assign serve_ack = s_ackd_valid && job_room
      && (state == S_IDLE || state == S_PKT_A || state == S_STALL);

  assign s_ackd_ready = serve_ack;
  assign idle = state == S_IDLE;

  // the message in progress is to be dropped: its context was switched off,
  // or a FLUSH of its QP is offered
  logic d_abort, abort;
  assign abort = d_abort || (s_txd_valid && s_txd_data[8*TD_OP +: 8] == OP_FLUSH
                             && s_txd_data[8*TD_QPN +: QPN_W] == d_qpn);
  assign s_txd_ready = state == S_IDLE && !s_ackd_valid && s_txd_valid;

  always_comb begin
    ctx_rd_en = 1'b0;
    ctx_rd_addr = s_txd_data[8*TD_QPN +: QPN_W];
    if (serve_ack) begin
      ctx_rd_en = 1'b1;
      ctx_rd_addr = s_ackd_data[8*AD_QPN +: QPN_W];
    end else if (s_txd_ready) begin
      ctx_rd_en = 1'b1;
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
    if (state == S_ACK) begin
      m_job.tmpl = ctx_rd_data[8*SC_TEMPLATE +: TMPL_BYTES*8];
      m_job.hdr_len = ctx_rd_data[8*SC_HDR_LEN +: 8];
      m_job.l3_off = ctx_rd_data[8*SC_L3_OFF +: 8];
      m_job.ipv6 = ctx_rd_data[8*SC_FLAGS +: 2] == 2'd1;
      m_job.ip_sum = ctx_rd_data[8*SC_IP_SUM +: 16];
      m_job.pkey = ctx_rd_data[8*SC_PKEY +: 16];
      m_job.dest_qpn = ctx_rd_data[8*SC_DEST_QPN +: 24];
      m_job.opcode = RC_ACK;
      m_job.resv7 = {6'd0, a_desc[8*AD_FLAGS]};
      m_job.psn = a_desc[8*AD_PSN +: 24];
      m_job.has_aeth = 1'b1;
      m_job.aeth = {a_desc[8*AD_SYNDROME +: 8], a_desc[8*AD_MSN +: 24]};
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
  assign m_job_valid = state == S_ACK || (state == S_PKT_B && job_room);

  // DMA request of S_GATHER
  logic [31:0] g_avail;
  logic [31:0] g_n;
  logic [63:0] g_addr;
  always_comb begin
    g_avail = d_sge_len[g_i[1:0]] - g_o;
    g_n = (g_avail < {16'd0, g_rem}) ? g_avail : {16'd0, g_rem};
    g_addr = d_sge_addr[g_i[1:0]] + {32'd0, g_o};
  end
  assign m_rd_addr = g_addr;
  assign m_rd_len = g_n[15:0];
  assign m_rd_last = g_n[15:0] == g_rem;
  assign m_rd_valid = state == S_GATHER && g_avail != 0 && !g_dry;

  // sum of the SGE lengths (S_SIZE), 33 bits
  logic [33:0] sge_sum;
  always_comb begin
    sge_sum = '0;
    for (int i = 0; i < 4; i++) if (3'(i) < d_nsge) sge_sum = sge_sum + {2'd0, d_sge_len[i]};
  end

  // ------------------------------------------------------------ the FSM
  always_ff @(posedge clk) begin
    logic [23:0] una_now;
    logic signed [23:0] outst;
    ctx_wb_en <= 1'b0;
    una_q_en <= una_wr_en;
    una_q_addr <= una_wr_addr;
    una_q_psn <= una_wr_psn;
    // the firmware moved the window of the message's QP
    if (una_wr_en && una_wr_addr == d_qpn) c_una <= una_wr_psn;
    if (inval_wr_en && inval_wr_addr == d_qpn) d_abort <= 1'b1;

    if (serve_ack) begin
      a_desc <= s_ackd_data;
      ret <= (state == S_IDLE) ? S_IDLE : S_PKT_A;
      state <= S_ACK;
    end else begin
      case (state)
        S_IDLE: if (s_txd_valid) begin
          d_qpn <= s_txd_data[8*TD_QPN +: QPN_W];
          d_op <= s_txd_data[8*TD_OP +: 8];
          d_se <= s_txd_data[8*TD_FLAGS + 0];
          d_replay <= s_txd_data[8*TD_FLAGS + 1];
          d_nsge <= (s_txd_data[8*TD_NUM_SGE +: 8] > 8'd4) ? 3'd4 : s_txd_data[8*TD_NUM_SGE +: 3];
          d_len <= s_txd_data[8*TD_LENGTH +: 32];
          d_imm <= s_txd_data[8*TD_IMM +: 32];
          d_raddr <= s_txd_data[8*TD_RADDR +: 64];
          d_cmp <= s_txd_data[8*TD_COMPARE +: 64];
          d_swap <= s_txd_data[8*TD_SWAP_ADD +: 64];
          d_rkey <= s_txd_data[8*TD_RKEY +: 32];
          d_first_psn <= s_txd_data[8*TD_FIRST_PSN +: 24];
          for (int i = 0; i < 4; i++) begin
            d_sge_addr[i] <= s_txd_data[8*(TD_SGE + 12*i) +: 64];
            d_sge_len[i] <= s_txd_data[8*(TD_SGE + 12*i + 8) +: 32];
          end
          d_start <= s_txd_data[8*TD_START_PKT +: 32];
          d_end <= s_txd_data[8*TD_END_PKT +: 32];
          d_abort <= 1'b0;
          state <= S_LOAD;
        end

        S_ACK: state <= ret;   // the job left this cycle (job_room was checked)

        S_LOAD: begin
          // the context word read last cycle, with any una_psn written since
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
          npk <= (d_len == 0 || is_atomic) ? 32'd1 : ((d_len - 32'd1) >> c_mtu_log2) + 32'd1;
          d_ok <= c_valid && c_kind <= 2'd1 && c_mtu_log2 >= 4'd8 && c_mtu_log2 <= 4'd12
              && (d_op <= OP_FETCH_ADD || d_op == OP_FLUSH)
              && (is_ra || sge_sum >= {2'd0, d_len});
          state <= S_CHECK;
        end

        S_CHECK: begin
          // the packets to send: start_pkt up to end_pkt, READ and atomics one
          // (TxMsg::range)
          logic [31:0] n;
          logic [31:0] ks, ke;
          n = npk;
          ks = (d_start < n) ? d_start : n;
          if (is_ra) ke = (ks + 32'd1 < n) ? ks + 32'd1 : n;
          else ke = (d_end != 0 && d_end < n) ? d_end : n;
          k <= ks;
          kend <= ke;
          off <= ks << c_mtu_log2;
          g_skip <= ks << c_mtu_log2;
          psn <= d_first_psn + ks[23:0];
          g_i <= '0;
          g_o <= '0;
          if (!d_ok) begin
            bad_desc <= bad_desc + 32'd1;
            state <= S_IDLE;
          end else if (d_op == OP_FLUSH) begin
            // the firmware rewound the requester: the AckReq count starts again
            c_noack <= '0;
            ctx_wb_en <= 1'b1;
            ctx_wb_addr <= d_qpn;
            ctx_wb_psn <= {8'd0, c_next_psn};
            ctx_wb_noack <= {16'd0, c_max_pkts};
            // through S_DONE: the write-back lands before the next descriptor's
            // context read (the table reads the old word in a cycle it is written)
            state <= S_DONE;
          end else if (ks >= ke || ks >= n) begin
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
            state <= S_PKT_A;
          end
        end

        S_PKT_A: begin
          logic [31:0] rem;
          rem = is_ra ? 32'd0 : d_len - off;
          p_plen <= (rem < mtu) ? rem : mtu;
          p_first <= k == 0;
          p_last <= k + 32'd1 == npk || is_ra;
          outst = psn_diff(psn, c_una);
          p_outst <= outst;
          g_dry <= 1'b0;
          if (abort) begin
            state <= S_DONE;
          end else if (outst < 0 && d_replay) begin
            // acknowledged while it waited: skip it
            k <= k + 32'd1;
            off <= off + mtu;
            psn <= psn_next;
            g_rem <= 16'((rem < mtu) ? rem : mtu);
            g_dry <= 1'b1;
            if (rem != 0) state <= S_GATHER;
            else if (k + 32'd1 >= kend) state <= S_DONE;
          end else if (outst < 0 || outst >= signed'(c_window)) begin
            state <= S_STALL;
          end else begin
            state <= S_PKT_B;
          end
        end

        S_STALL: begin
          outst = psn_diff(psn, c_una);
          if (abort) state <= S_DONE;
          else if (outst >= 0 && outst < signed'(c_window) || (outst < 0 && d_replay)) state <= S_PKT_A;
        end

        S_PKT_B: if (job_room) begin
          logic [15:0] noack_n;
          logic [23:0] next_n, after;
          noack_n = ackreq ? 16'd0 : noack_inc[15:0];
          // the PSN after the packet's: a READ request covers all its responses
          after = is_read ? psn + 24'(npk - k) : psn_next;
          next_n = (psn_diff(after, c_next_psn) > 0) ? after : c_next_psn;
          c_noack <= noack_n;
          c_next_psn <= next_n;
          ctx_wb_en <= 1'b1;
          ctx_wb_addr <= d_qpn;
          ctx_wb_psn <= {8'd0, next_n};
          ctx_wb_noack <= {noack_n, c_max_pkts};
          k <= k + 32'd1;
          off <= off + mtu;
          psn <= psn_next;
          g_rem <= 16'(p_plen);
          if (p_plen != 0) state <= S_GATHER;
          else if (k + 32'd1 >= kend) state <= S_DONE;
          else state <= S_PKT_A;
        end

        S_GATHER: begin
          if (g_avail == 0) begin
            // an empty (or used up) SGE: next one
            g_i <= g_i + 3'd1;
            g_o <= '0;
          end else if (m_rd_ready || g_dry) begin
            g_rem <= g_rem - g_n[15:0];
            if (g_n == g_avail) begin
              g_i <= g_i + 3'd1;
              g_o <= '0;
            end else begin
              g_o <= g_o + g_n;
            end
            if (g_n[15:0] == g_rem) state <= (k >= kend) ? S_DONE : S_PKT_A;
          end
        end

        S_DONE: state <= S_IDLE;

        default: state <= S_IDLE;
      endcase
    end
    if (rst) begin
      state <= S_IDLE;
      ctx_wb_en <= 1'b0;
      una_q_en <= 1'b0;
      bad_desc <= '0;
      d_qpn <= '0;
      d_abort <= 1'b0;
    end
  end

endmodule

`resetall
