// SPDX-License-Identifier: MIT OR Apache-2.0
//
// roce_fp_top's ports around a script (the bench of ./tb.sv): DMA reads and writes
// driven and checked; everything else idle.
`default_nettype none
module roce_fp_top
  import fp_pkg::*;
#(
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    parameter int NQP = 256,
    parameter int NMR = 256,
    parameter bit HW_NOW = 1'b0
) (
    input  wire logic                    clk,
    input  wire logic                    rst,

    // the wire
    input  wire logic [DATA_WIDTH-1:0]   rx_s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0]   rx_s_axis_tkeep,
    input  wire logic                    rx_s_axis_tvalid,
    output logic                         rx_s_axis_tready,
    input  wire logic                    rx_s_axis_tlast,

    output logic [DATA_WIDTH-1:0]        tx_m_axis_tdata,
    output logic [KEEP_WIDTH-1:0]        tx_m_axis_tkeep,
    output logic                         tx_m_axis_tvalid,
    input  wire logic                    tx_m_axis_tready,
    output logic                         tx_m_axis_tlast,
    output logic                         tx_m_axis_tuser,   // abort the frame (last beat)

    // firmware: descriptors
    input  wire logic [TXD_BYTES*8-1:0]  txd_data,
    input  wire logic                    txd_valid,
    output logic                         txd_ready,
    input  wire logic [ACKD_BYTES*8-1:0] ackd_data,
    input  wire logic                    ackd_valid,
    output logic                         ackd_ready,

    // firmware: tables
    input  wire logic                    cfg_wr_valid,
    output logic                         cfg_wr_ready,
    input  wire logic [1:0]              cfg_wr_table,
    input  wire logic [23:0]             cfg_wr_index,
    input  wire logic [4:0]              cfg_wr_word,
    input  wire logic [31:0]             cfg_wr_data,
    input  wire logic                    cfg_rd_valid,
    output logic                         cfg_rd_ready,
    input  wire logic [1:0]              cfg_rd_table,
    input  wire logic [23:0]             cfg_rd_index,
    input  wire logic [4:0]              cfg_rd_word,
    output logic [31:0]                  cfg_rdata,
    output logic                         cfg_rdata_valid,

    // firmware: events and exception frames
    output logic [EV_BYTES*8-1:0]        ev_data,
    output logic                         ev_valid,
    input  wire logic                    ev_ready,

    output logic [DATA_WIDTH-1:0]        exc_tdata,
    output logic [KEEP_WIDTH-1:0]        exc_tkeep,
    output logic                         exc_tvalid,
    input  wire logic                    exc_tready,
    output logic                         exc_tlast,

    // host memory: DMA reads (TX payload) and writes (RX placement)
    output logic [63:0]                  dma_rd_req_addr,
    output logic [15:0]                  dma_rd_req_len,
    output logic                         dma_rd_req_last,
    output logic                         dma_rd_req_valid,
    input  wire logic                    dma_rd_req_ready,

    input  wire logic [DATA_WIDTH-1:0]   dma_rd_tdata,
    input  wire logic [KEEP_WIDTH-1:0]   dma_rd_tkeep,
    input  wire logic                    dma_rd_tvalid,
    output logic                         dma_rd_tready,
    input  wire logic                    dma_rd_tlast,
    input  wire logic                    dma_rd_terr,       // the host could not read it

    output logic [63:0]                  dma_wr_desc_addr,
    output logic [15:0]                  dma_wr_desc_len,
    output logic                         dma_wr_desc_valid,
    input  wire logic                    dma_wr_desc_ready,

    output logic [DATA_WIDTH-1:0]        dma_wr_tdata,
    output logic [KEEP_WIDTH-1:0]        dma_wr_tkeep,
    output logic                         dma_wr_tvalid,
    input  wire logic                    dma_wr_tready,
    output logic                         dma_wr_tlast,

    // counters
    output logic [31:0]                  tx_bad_desc,
    output logic [31:0]                  tx_resent,
    output logic [31:0]                  tx_dma_errors,
    output logic [31:0]                  rx_drops,
    // the receive-context cache: frames whose QP's context was in its entry
    // (qpn mod NQP, tagged with the QPN) and on; frames whose entry held another
    // QP's (an EXCEPTION with reason 14: the firmware fills the entry)
    output logic [31:0]                  rx_ctx_hits,
    output logic [31:0]                  rx_ctx_misses,
    output logic [31:0]                  rx_oos,
    output logic [31:0]                  rx_dups,
    // the segmenter holds no message: a descriptor offered now is taken at once
    output logic                         tx_idle,
    // descriptors the segmenter holds (its 32 slots): the descriptor ring's
    // entries still in use, a consumer index the firmware reads
    output logic [5:0]                   tx_slots_used,
    // the receive side holds no frame: every frame taken in was placed, handed
    // to the firmware or dropped
    output logic                         rx_idle,
    input  wire logic [63:0]             now_ns,
    input  wire logic                    sq_db_valid,
    output logic                         sq_db_ready,
    input  wire logic [$clog2(NQP)-1:0]  sq_db_qpn,
    input  wire logic [31:0]             sq_db_pi,
    output logic [NQP-1:0]               sq_active,
    input  wire logic [NQP-1:0]          rq_posted,
    output logic [3:0]                   sq_news,
    output logic [31:0]                  sq_taken,
    output logic [31:0]                  sq_sends,
    input  wire logic                    sq_news_rd
);

  // ---- a stub: drives the DMA ports with a script and checks what comes back
  assign rx_s_axis_tready = 1'b1;
  assign tx_m_axis_tdata = '0; assign tx_m_axis_tkeep = '0; assign tx_m_axis_tvalid = 1'b0;
  assign tx_m_axis_tlast = 1'b0; assign tx_m_axis_tuser = 1'b0;
  assign txd_ready = 1'b1; assign ackd_ready = 1'b1;
  assign cfg_wr_ready = 1'b1; assign cfg_rd_ready = 1'b1; assign cfg_rdata = '0; assign cfg_rdata_valid = 1'b0;
  assign ev_data = '0; assign ev_valid = 1'b0;
  assign exc_tdata = '0; assign exc_tkeep = '0; assign exc_tvalid = 1'b0; assign exc_tlast = 1'b0;
  assign tx_bad_desc = '0; assign tx_resent = '0; assign tx_dma_errors = '0; assign rx_drops = '0;
  assign rx_ctx_hits = '0; assign rx_ctx_misses = '0; assign rx_oos = '0; assign rx_dups = '0; assign tx_idle = 1'b1; assign tx_slots_used = '0; assign rx_idle = 1'b1; assign sq_db_ready = 1'b1; assign sq_active = '0;
  assign sq_news = '0; assign sq_taken = '0; assign sq_sends = '0;

  function automatic logic [7:0] mem_byte(input logic [63:0] a);
    mem_byte = a[7:0] ^ a[15:8] ^ 8'h5A;
  endfunction

  // read script: packets of pieces
  localparam int NP = 12;
  logic [63:0] p_addr [NP];
  logic [15:0] p_len [NP];
  logic        p_last [NP];
  initial begin
    // packet 0: one piece of 4096 at an odd address
    p_addr[0] = 64'h1003; p_len[0] = 16'd4096; p_last[0] = 1;
    // packet 1: three pieces 5, 7, 13 bytes
    p_addr[1] = 64'h2001; p_len[1] = 16'd5; p_last[1] = 0;
    p_addr[2] = 64'h2100; p_len[2] = 16'd7; p_last[2] = 0;
    p_addr[3] = 64'h2202; p_len[3] = 16'd13; p_last[3] = 1;
    // packet 2: exactly 8 bytes
    p_addr[4] = 64'h3000; p_len[4] = 16'd8; p_last[4] = 1;
    // packet 3: 0 bytes (last)
    p_addr[5] = 64'h0; p_len[5] = 16'd0; p_last[5] = 1;
    // packet 4: 1 byte
    p_addr[6] = 64'h3333; p_len[6] = 16'd1; p_last[6] = 1;
    // packet 5: pieces 3 and 6 (total 9: two beats, the last with 1)
    p_addr[7] = 64'h4001; p_len[7] = 16'd3; p_last[7] = 0;
    p_addr[8] = 64'h4101; p_len[8] = 16'd6; p_last[8] = 1;
    // packet 6: 12 bytes from an unreadable address (errors)
    p_addr[9] = 64'hF000_0000; p_len[9] = 16'd12; p_last[9] = 1;
    // packet 7: 16 bytes, 4 and 12
    p_addr[10] = 64'h5000; p_len[10] = 16'd4; p_last[10] = 0;
    p_addr[11] = 64'h5010; p_len[11] = 16'd12; p_last[11] = 1;
  end
  int ri;
  logic [31:0] lfsr;
  always_ff @(posedge clk) begin
    if (rst) lfsr <= 32'h1234_5678;
    else lfsr <= {lfsr[30:0], lfsr[31] ^ lfsr[21] ^ lfsr[1] ^ lfsr[0]};
  end
  assign dma_rd_req_valid = !rst && ri < NP;
  assign dma_rd_req_addr = p_addr[ri < NP ? ri : 0];
  assign dma_rd_req_len = p_len[ri < NP ? ri : 0];
  assign dma_rd_req_last = p_last[ri < NP ? ri : 0];
  always_ff @(posedge clk) begin
    if (rst) ri <= 0;
    else if (dma_rd_req_valid && dma_rd_req_ready) ri <= ri + 1;
  end
  assign dma_rd_tready = lfsr[3] | lfsr[7];
  // expected stream: walk the pieces
  int ci;           // piece
  int co;           // offset in piece
  int pkts;
  always_ff @(posedge clk) begin
    if (rst) begin ci <= 0; co <= 0; pkts <= 0; end
    else if (dma_rd_tvalid && dma_rd_tready) begin
      automatic int c = ci, o = co;
      automatic int nb = 0;
      automatic logic want_err = 1'b0;
      automatic logic ends = 1'b0;
      for (int b = 0; b < 8; b++) begin
        while (c < NP && o >= p_len[c] && !p_last[c]) begin c++; o = 0; end
        if (c < NP && o < p_len[c]) begin
          if (!dma_rd_tkeep[b]) $error("read: byte %0d of the beat missing (piece %0d off %0d)", b, c, o);
          else if (p_addr[c] >= 64'hF000_0000) want_err = 1'b1;
          else if (dma_rd_tdata[8*b +: 8] != mem_byte(p_addr[c] + 64'(o)))
            $error("read: piece %0d off %0d: %h want %h", c, o, dma_rd_tdata[8*b +: 8], mem_byte(p_addr[c] + 64'(o)));
          o++; nb++;
        end else if (dma_rd_tkeep[b]) $error("read: extra byte %0d (piece %0d)", b, c);
      end
      if (c < NP && o >= p_len[c] && p_last[c]) ends = 1'b1;
      if (ends != dma_rd_tlast) $error("read: tlast %0d want %0d (piece %0d off %0d)", dma_rd_tlast, ends, c, o);
      if (want_err != dma_rd_terr) $error("read: terr %0d want %0d (piece %0d)", dma_rd_terr, want_err, c);
      if (ends) begin c++; o = 0; pkts <= pkts + 1; end
      ci <= c; co <= o;
    end
  end

  // write script: descriptors (addr, len) then beats from byte 0
  localparam int NW = 5;
  logic [63:0] w_addr [NW];
  logic [15:0] w_len [NW];
  initial begin
    w_addr[0] = 64'h8003; w_len[0] = 16'd4096;
    w_addr[1] = 64'hA001; w_len[1] = 16'd1;
    w_addr[2] = 64'hA101; w_len[2] = 16'd4;
    w_addr[3] = 64'hA201; w_len[3] = 16'd5;
    w_addr[4] = 64'hA301; w_len[4] = 16'd8;
  end
  int wi, wd, wo;   // next descriptor, write whose data goes, its offset
  assign dma_wr_desc_valid = !rst && wi < NW && lfsr[5];
  assign dma_wr_desc_addr = w_addr[wi < NW ? wi : 0];
  assign dma_wr_desc_len = w_len[wi < NW ? wi : 0];
  always_comb begin
    dma_wr_tvalid = !rst && wd < wi && lfsr[9];
    dma_wr_tkeep = '0;
    dma_wr_tdata = '0;
    for (int b = 0; b < 8; b++) begin
      if (wd < NW && wo + b < int'(w_len[wd < NW ? wd : 0])) begin
        dma_wr_tkeep[b] = 1'b1;
        dma_wr_tdata[8*b +: 8] = 8'(wd * 37 + wo + b);
      end
    end
    dma_wr_tlast = wd < NW && wo + 8 >= int'(w_len[wd < NW ? wd : 0]);
  end
  always_ff @(posedge clk) begin
    if (rst) begin wi <= 0; wd <= 0; wo <= 0; end
    else begin
      if (dma_wr_desc_valid && dma_wr_desc_ready) wi <= wi + 1;
      if (dma_wr_tvalid && dma_wr_tready) begin
        if (dma_wr_tlast) begin wd <= wd + 1; wo <= 0; end
        else wo <= wo + 8;
      end
    end
  end
  // done
  logic done;
  assign done = pkts == 8 && wd == NW;
  /* verilator lint_off UNUSEDSIGNAL */
  logic unused_ins;
  assign unused_ins = ^{rx_s_axis_tdata, rx_s_axis_tkeep, rx_s_axis_tvalid, rx_s_axis_tlast, tx_m_axis_tready,
    txd_data, txd_valid, ackd_data, ackd_valid, cfg_wr_valid, cfg_wr_table, cfg_wr_index, cfg_wr_word, cfg_wr_data,
    cfg_rd_valid, cfg_rd_table, cfg_rd_index, cfg_rd_word, ev_ready, exc_tready, rq_posted, sq_news_rd};
  /* verilator lint_on UNUSEDSIGNAL */
endmodule
