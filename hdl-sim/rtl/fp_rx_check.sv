// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_rx_check: the fast path's receive placement rule (docs/fastpath.md
// §3.4), one packet at a time: for each metadata record of rx_parser it
// reads the QP's receive context and the MR of the key, checks PSN, opcode
// sequence, ECN, lengths, key, PD, access and bounds, and decides: place
// (with the new context written back, an ACK descriptor when one is due and
// a MSG_DONE event at the end of a SEND) or hand the frame to the firmware
// (EXCEPTION event with the reason, context unchanged); frames the parser
// rejected are dropped.
//
// The rule and the order of its checks are roce_core::fastpath::receive's;
// tests/fastpath.rs holds the two together. Six cycles per packet (C0
// context read, C1 MR read, C2 and C3 checks, C4 decision, then the
// write-back); the next packet's context read follows the write-back, so
// back-to-back packets of one QP see each other's updates.

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

    // MR table
    output logic                           mr_rd_en,
    output logic [MR_W-1:0]                mr_rd_addr,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire logic [MR_BYTES*8-1:0]     mr_rd_data,   // bytes 26..31 reserved
    /* verilator lint_on UNUSEDSIGNAL */

    output fp_rx_verdict_t                 m_verdict,
    output logic                           m_verdict_valid,
    input  wire logic                      verdict_room,

    output logic [15:0]                    frame_slot    // slot of the next exception frame
);

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

  logic [2:0] st;   // stage: C0..C4
  // not while the previous packet's write-back goes into the table (a read in that
  // cycle would see the old context)
  assign s_meta_ready = st == 3'd0 && verdict_room && !rctx_wr_en;

  // ---------------------------------------------------- the packet (C0)
  /* verilator lint_off UNUSEDSIGNAL */
  rx_meta_t m;      // synthesis keeps only the fields used below
  /* verilator lint_on UNUSEDSIGNAL */
  logic     qp_in_range;

  // ------------------------------------------------ its context (C1)
  logic        c_on, c_loaded;
  logic [7:0]  c_cur, c_access, c_ack_every, c_unacked, c_nak;
  logic [23:0] c_epsn, c_msn;
  logic [31:0] c_pd, c_resid, c_length;
  logic [63:0] c_recv_addr;
  logic [RCTX_BYTES*8-1:0] c_raw;

  // the access the packet asks for (C1)
  logic [63:0] x_va;
  logic [31:0] x_rkey, x_resid;

  // ----------------------------------------------------- the MR (C2)
  logic [31:0] r_key, r_pd;
  logic [63:0] r_len;
  logic [7:0]  r_access, r_valid;

  // ----------------------------------------------------- checks (C2, C3)
  logic        k_write, k_send, k_starts, k_ends;
  logic        k_opcode_ok, k_psn_ok, k_seq_ok, k_ecn_ok, k_len_ok, k_fits, k_send_fits;
  logic        k_ge;
  logic [63:0] k_off;
  logic        k_key_ok, k_range_ok;

  logic [15:0] n;
  logic [31:0] mtu;
  assign n = m.payload_len;

  always_comb begin
    rctx_rd_en = s_meta_valid && s_meta_ready;
    rctx_rd_addr = s_meta.bth_destqp[QPN_W-1:0];
    // the MR of the packet's key (RETH) or the message's, read as the context arrives
    mr_rd_en = st == 3'd1;
    mr_rd_addr = m.ext_mask[EXT_RETH] ? m.reth_rkey[8 +: MR_W] : rctx_rd_data[8*RC_RKEY + 8 +: MR_W];
  end

  always_ff @(posedge clk) begin
    rctx_wr_en <= 1'b0;
    m_verdict_valid <= 1'b0;
    case (st)
      3'd0: if (s_meta_valid && s_meta_ready) begin
        m <= s_meta;
        qp_in_range <= s_meta.bth_destqp < 24'(NQP);
        st <= 3'd1;
      end

      3'd1: begin
        logic [RCTX_BYTES*8-1:0] r;
        r = rctx_rd_data;
        c_raw <= r;
        c_on <= r[8*RC_STATE + 0];
        c_loaded <= r[8*RC_STATE + 1];
        c_cur <= r[8*RC_CUR +: 8];
        c_access <= r[8*RC_ACCESS +: 8];
        c_epsn <= r[8*RC_EPSN +: 24];
        c_ack_every <= r[8*RC_ACK_EVERY +: 8];
        c_msn <= r[8*RC_MSN +: 24];
        c_unacked <= r[8*RC_UNACKED +: 8];
        c_pd <= r[8*RC_PD +: 32];
        c_resid <= r[8*RC_RESID +: 32];
        c_recv_addr <= r[8*RC_RECV_ADDR +: 64];
        c_length <= r[8*RC_LENGTH +: 32];
        c_nak <= r[8*RC_NAK_SENT +: 8];
        mtu <= (r[8*RC_MTU_LOG2 +: 8] >= 8'd8 && r[8*RC_MTU_LOG2 +: 8] <= 8'd12)
            ? 32'd1 << r[8*RC_MTU_LOG2 +: 4] : 32'd0;
        if (m.ext_mask[EXT_RETH]) begin
          x_va <= m.reth_va;
          x_rkey <= m.reth_rkey;
          x_resid <= m.reth_dmalen;
        end else begin
          x_va <= r[8*RC_VA +: 64];
          x_rkey <= r[8*RC_RKEY +: 32];
          x_resid <= r[8*RC_RESID +: 32];
        end
        st <= 3'd2;
      end

      3'd2: begin
        logic [7:0] op;
        logic [15:0] pad_want;
        op = m.bth_opcode;
        r_key <= mr_rd_data[8*MR_KEY +: 32];
        r_pd <= mr_rd_data[8*MR_PD +: 32];
        r_len <= mr_rd_data[8*MR_LENGTH +: 64];
        r_access <= mr_rd_data[8*MR_ACCESS +: 8];
        r_valid <= mr_rd_data[8*MR_VALID +: 8];
        k_write <= op == RC_WRITE_FIRST || op == RC_WRITE_MIDDLE || op == RC_WRITE_LAST
            || op == RC_WRITE_ONLY;
        k_send <= op == RC_SEND_MIDDLE || op == RC_SEND_LAST;
        k_starts <= op == RC_WRITE_FIRST || op == RC_WRITE_ONLY;
        k_ends <= op == RC_WRITE_LAST || op == RC_WRITE_ONLY || op == RC_SEND_LAST;
        k_opcode_ok <= op == RC_WRITE_FIRST || op == RC_WRITE_MIDDLE || op == RC_WRITE_LAST
            || op == RC_WRITE_ONLY || op == RC_SEND_MIDDLE || op == RC_SEND_LAST;
        k_psn_ok <= m.bth_psn == c_epsn;
        k_ecn_ok <= m.ip_ecn != 2'd3;
        // payload length by position: FIRST/MIDDLE exactly the MTU, LAST 1..MTU, ONLY 0..MTU
        if (op == RC_WRITE_FIRST || op == RC_WRITE_MIDDLE || op == RC_SEND_MIDDLE)
          k_len_ok <= {16'd0, n} == mtu;
        else if (op == RC_WRITE_ONLY)
          k_len_ok <= {16'd0, n} <= mtu;
        else
          k_len_ok <= n != 0 && {16'd0, n} <= mtu;
        k_send_fits <= {16'd0, n} <= c_resid;
        // WRITE: the packet fits what is left of the message
        pad_want = 16'(-x_resid) & 16'd3;
        if (x_resid > mtu)
          k_fits <= {16'd0, n} == mtu && m.bth_padcnt == 2'd0
              && !(op == RC_WRITE_LAST || op == RC_WRITE_ONLY);
        else
          k_fits <= {16'd0, n} == x_resid && {14'd0, m.bth_padcnt} == pad_want
              && (op == RC_WRITE_LAST || op == RC_WRITE_ONLY);
        k_ge <= x_va >= mr_rd_data[8*MR_BASE +: 64];
        k_off <= x_va - mr_rd_data[8*MR_BASE +: 64];
        st <= 3'd3;
      end

      3'd3: begin
        case (c_cur)
          CUR_NONE:  k_seq_ok <= k_starts;
          CUR_WRITE: k_seq_ok <= k_write && !k_starts;
          CUR_SEND:  k_seq_ok <= k_send;
          default:   k_seq_ok <= 1'b0;
        endcase
        k_key_ok <= (c_access & ACC_REMOTE_WRITE) != 0 && r_valid != 0 && r_key == x_rkey
            && r_pd == c_pd && (r_access & ACC_REMOTE_WRITE) != 0;
        // memory::range_within(base, len, va, resid)
        k_range_ok <= k_ge && k_off <= r_len && {32'd0, x_resid} <= r_len - k_off;
        st <= 3'd4;
      end

      default: begin
        // C4: the first failing check, in the model's order
        fp_rx_verdict_t v;
        logic [7:0] reason;
        logic ok;
        logic due;
        logic [23:0] msn_n;
        logic [RCTX_BYTES*8-1:0] w;
        if (m.error != ERR_NONE) reason = 8'd0;
        else if (!qp_in_range || !c_on) reason = EXC_OFF;
        else if (!k_opcode_ok) reason = EXC_OPCODE;
        else if (c_nak != 0) reason = EXC_NAK;
        else if (!k_psn_ok) reason = EXC_PSN;
        else if (!k_seq_ok) reason = EXC_SEQUENCE;
        else if (!k_ecn_ok) reason = EXC_ECN;
        else if (!k_len_ok) reason = EXC_LENGTH;
        else if (k_send && !c_loaded) reason = EXC_NO_RECV;
        else if (k_send && !k_send_fits) reason = EXC_LENGTH;
        else if (k_send) reason = 8'd0;
        else if (x_resid == 0 || !k_fits) reason = EXC_LENGTH;
        else if (!k_key_ok || !k_range_ok) reason = EXC_KEY;
        else reason = 8'd0;
        ok = m.error == ERR_NONE && reason == 8'd0;

        msn_n = k_ends ? c_msn + 24'd1 : c_msn;
        due = m.bth_ackreq || (c_ack_every != 0 && {1'b0, c_unacked} + 9'd1 >= {1'b0, c_ack_every});

        v = '0;
        v.has_stream = m.stream_len != '0;
        v.pay_len = n;
        if (m.error != ERR_NONE) begin
          v.action = ACT_DROP;
        end else if (!ok) begin
          v.action = ACT_EXC;
          v.ev_valid = 1'b1;
          v.ev[8*EV_KIND +: 8] = EVK_EXCEPTION;
          v.ev[8*EV_REASON +: 8] = reason;
          v.ev[8*EV_SLOT +: 16] = frame_slot;
          v.ev[8*EV_OPCODE +: 8] = m.bth_opcode;
          v.ev[8*EV_FLAGS +: 8] = {1'b0, m.bth_padcnt, m.ip_ecn, m.bth_becn, m.bth_se, m.bth_ackreq};
          v.ev[8*EV_PAY_OFF +: 16] = m.payload_offset[15:0];
          v.ev[8*EV_PAY_LEN +: 16] = m.payload_len;
          v.ev[8*EV_EXT_OFF +: 16] = m.payload_offset[15:0] - {10'd0, m.hdr_len} + 16'd12;
          v.ev[8*EV_FRAME_LEN +: 16] = m.frame_len[15:0];
          if (m.ext_mask[EXT_RETH]) begin
            v.ev[8*EV_RETH +: 64] = m.reth_va;
            v.ev[8*(EV_RETH+8) +: 32] = m.reth_rkey;
            v.ev[8*(EV_RETH+12) +: 32] = m.reth_dmalen;
          end
          if (m.ext_mask[EXT_AETH]) v.ev[8*EV_AETH +: 32] = {m.aeth_syndrome, m.aeth_msn};
          if (m.ext_mask[EXT_IMMDT]) v.ev[8*EV_IMM +: 32] = m.immdt;
          if (m.ext_mask[EXT_IETH]) v.ev[8*EV_IMM +: 32] = m.ieth_rkey;
        end else begin
          v.action = ACT_PLACE;
          v.dma_addr = k_send ? c_recv_addr : x_va;
          if (k_send && k_ends) begin
            v.ev_valid = 1'b1;
            v.ev[8*EV_KIND +: 8] = EVK_MSG_DONE;
            v.ev[8*EV_OPCODE +: 8] = m.bth_opcode;
            v.ev[8*EV_MSN +: 24] = msn_n;
            v.ev[8*EV_BYTE_LEN +: 32] = c_length + {16'd0, n};
          end
          if (due) begin
            v.ack_valid = 1'b1;
            v.ackd[8*AD_QPN +: 24] = m.bth_destqp;
            v.ackd[8*AD_SYNDROME +: 8] = 8'h1F;
            v.ackd[8*AD_PSN +: 24] = m.bth_psn;
            v.ackd[8*AD_MSN +: 24] = msn_n;
          end
        end
        v.ev[8*EV_QPN +: 24] = m.bth_destqp;
        v.ev[8*EV_PSN +: 24] = m.bth_psn;

        // the context after the packet
        w = c_raw;
        if (k_send) begin
          w[8*RC_RECV_ADDR +: 64] = c_recv_addr + {48'd0, n};
          w[8*RC_RESID +: 32] = c_resid - {16'd0, n};
          w[8*RC_LENGTH +: 32] = c_length + {16'd0, n};
          w[8*RC_CUR +: 8] = k_ends ? CUR_NONE : CUR_SEND;
          if (k_ends) w[8*RC_STATE + 1] = 1'b0;
        end else begin
          w[8*RC_VA +: 64] = x_va + {48'd0, n};
          w[8*RC_RKEY +: 32] = x_rkey;
          w[8*RC_RESID +: 32] = x_resid - {16'd0, n};
          if (m.ext_mask[EXT_RETH]) w[8*RC_LENGTH +: 32] = m.reth_dmalen;
          w[8*RC_CUR +: 8] = k_ends ? CUR_NONE : CUR_WRITE;
        end
        w[8*RC_MSN +: 24] = msn_n;
        w[8*RC_EPSN +: 24] = c_epsn + 24'd1;
        w[8*RC_UNACKED +: 8] = due ? 8'd0 : (c_unacked == 8'hFF ? 8'hFF : c_unacked + 8'd1);

        rctx_wr_en <= ok;
        rctx_wr_addr <= m.bth_destqp[QPN_W-1:0];
        rctx_wr_data <= w;
        m_verdict <= v;
        m_verdict_valid <= 1'b1;
        if (v.action == ACT_EXC) frame_slot <= frame_slot + 16'd1;
        st <= 3'd0;
      end
    endcase
    if (rst) begin
      st <= 3'd0;
      rctx_wr_en <= 1'b0;
      m_verdict_valid <= 1'b0;
      frame_slot <= '0;
    end
  end

endmodule

`resetall
