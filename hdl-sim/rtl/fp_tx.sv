// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_tx: the fast path's transmit side (docs/fastpath.md §2): the send
// context table, the planner, the header builder, the emitter and the ICRC
// inserter, joined by handshakes only.
//
//   s_txd (message descriptors) ─┐
//   s_ackd (ACK descriptors) ────┴─ fp_tx_plan ── jobs ── fp_tx_hdr ── frame FIFO ─┐
//                                     │  └── m_dma_rd_req (one per SGE piece)       │
//   s_dma_rd (payload, packed) ──────────────────────────────────── fp_tx_emit ─────┘
//                                                                       │
//                                                    tx_icrc_insert ── m_axis (frames)
//
// The firmware writes the send contexts through the cfg port, one 32-bit
// word of a 96-byte record at a time (word 4 = una_psn moves the window of a
// message in progress); reads return the word one cycle later on cfg_rdata.
// The planner's write-back of next_psn (word 3) and noack (word 6, with
// max_pkts_per_ack as it read it) has priority: a firmware write waits a
// cycle then (cfg_wr_ready low).
//
// DMA read interface: m_dma_rd_req_* asks for len bytes at addr (host
// memory); the answers come back on s_dma_rd_* in request order, the pieces
// of one packet (`last` marks the packet's final request) packed into one
// stream from byte 0: full beats except the packet's last, tlast on it.
// s_dma_rd_terr marks a beat the host could not read (AXI RRESP SLVERR or
// DECERR, a PCIe completion with UR or CA status; its bytes are garbage):
// the packet's frame then leaves with m_axis_tuser set on its last beat,
// which the MAC turns into an aborted frame (a bad FCS), so it is dropped as
// roce_core::fastpath::segment drops it (TxError::Dma) and the firmware's
// retransmission repairs it; dma_errors counts such frames.
//
// READ responses (docs/fastpath.md §2.4): s_ackd also brings the receive
// path's READ response descriptors (fp_pkg's RESPD_*); the planner sends
// their responses, each checked first against a copy of the MR table
// (written with the table port's MR writes, as fp_sqf's copy). The
// descriptors wait in fp_resp_q, which merges an ACK queued behind a READ
// with the one before it, drops a duplicate READ's later READs (drop_*, with
// the planner) and says whether a READ's responses wait (reads_wait, rd_in:
// fp_rx_check holds an exception frame meanwhile).

`resetall
`default_nettype none

module fp_tx
  import fp_pkg::*;
#(
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    parameter int NQP = 256,
    parameter int NMR = 256,
    parameter int QPN_W = $clog2(NQP),
    parameter int MR_W = $clog2(NMR)
) (
    input  wire logic                    clk,
    input  wire logic                    rst,

    input  wire logic [TXD_BYTES*8-1:0]  s_txd_data,
    input  wire logic                    s_txd_valid,
    output logic                         s_txd_ready,

    input  wire logic [RESPD_BYTES*8-1:0] s_ackd_data,
    input  wire logic                    s_ackd_valid,
    output logic                         s_ackd_ready,

    // send context table, firmware side
    input  wire logic                    cfg_wr_valid,
    output logic                         cfg_wr_ready,
    input  wire logic [QPN_W-1:0]        cfg_wr_index,
    input  wire logic [4:0]              cfg_wr_word,
    input  wire logic [31:0]             cfg_wr_data,
    input  wire logic                    cfg_rd_valid,
    output logic                         cfg_rd_ready,
    input  wire logic [QPN_W-1:0]        cfg_rd_index,
    input  wire logic [4:0]              cfg_rd_word,
    output logic [31:0]                  cfg_rdata,
    output logic                         cfg_rdata_valid,

    // the response path (fp_rx_check): words 0 (flags), 3 (next_psn) and 4
    // (una_psn) of a send context, one cycle after resp_rd_en, from a copy of
    // those words (a read port of its own); and its una_psn writes (word 4),
    // which move the window as the firmware's do
    input  wire logic                    resp_rd_en,
    input  wire logic [QPN_W-1:0]        resp_rd_addr,
    output logic [95:0]                  resp_rd_data,
    input  wire logic                    resp_una_valid,
    output logic                         resp_una_ready,
    input  wire logic [QPN_W-1:0]        resp_una_addr,
    input  wire logic [23:0]             resp_una_psn,

    // the MR table's writes (its copy here, for the READ responses' recheck)
    input  wire logic                    mr_wr_en,
    input  wire logic [MR_W-1:0]         mr_wr_index,
    input  wire logic [4:0]              mr_wr_word,
    input  wire logic [31:0]             mr_wr_data,
    // the response queue (fp_resp_q): a duplicate READ's drop; a READ
    // response descriptor waits or is held; one came in (this cycle)
    input  wire logic                    drop_en,
    input  wire logic [23:0]             drop_qpn,
    input  wire logic [23:0]             drop_psn,
    output logic                         reads_wait,
    output logic                         rd_in,
    // QP rd_cnt_qpn's READ response descriptors and ATOMIC ACKNOWLEDGEs queued or
    // held (fp_resp_q's rd_count: a register, the cycle before's)
    input  wire logic [23:0]             rd_cnt_qpn,
    output logic [7:0]                   rd_count,

    // DMA reads
    output logic [63:0]                  m_dma_rd_req_addr,
    output logic [15:0]                  m_dma_rd_req_len,
    output logic                         m_dma_rd_req_last,
    output logic                         m_dma_rd_req_valid,
    input  wire logic                    m_dma_rd_req_ready,

    input  wire logic [DATA_WIDTH-1:0]   s_dma_rd_tdata,
    input  wire logic [KEEP_WIDTH-1:0]   s_dma_rd_tkeep,
    input  wire logic                    s_dma_rd_tvalid,
    output logic                         s_dma_rd_tready,
    input  wire logic                    s_dma_rd_tlast,
    input  wire logic                    s_dma_rd_terr,

    // frames to the wire
    output logic [DATA_WIDTH-1:0]        m_axis_tdata,
    output logic [KEEP_WIDTH-1:0]        m_axis_tkeep,
    output logic                         m_axis_tvalid,
    input  wire logic                    m_axis_tready,
    output logic                         m_axis_tlast,
    output logic                         m_axis_tuser,   // abort: on the last beat

    output logic [31:0]                  bad_desc,
    output logic [31:0]                  resent,
    output logic [31:0]                  dma_errors,
    output logic                         idle,
    output logic [5:0]                   slots_used   // the planner's, of 32
);

  localparam int SC_WORDS = SCTX_BYTES / 4;
  localparam int FRAME_DEPTH = 16;
  localparam int HDR_STAGES = 6;
  // room for a job: what is in the FIFO, in the builder, and one in the planner's hand
  localparam int ROOM_MAX = FRAME_DEPTH - HDR_STAGES - 3;

  // ------------------------------------------------- send context table
  logic                     plan_rd_en;
  logic [QPN_W-1:0]         plan_rd_addr;
  logic [SCTX_BYTES*8-1:0]  ram_rd_data;
  logic                     wb_en;
  logic [QPN_W-1:0]         wb_addr;
  logic [31:0]              wb_psn, wb_noack;
  logic                     wb_una_en;
  logic [23:0]              wb_una;
  logic                     fw_wr, fw_rd;
  logic [4:0]               rd_word_q;

  // the table's one write port: the planner's write-back, then the response
  // path's una_psn, then the firmware
  logic resp_wr;
  assign resp_una_ready = !wb_en;
  assign resp_wr = resp_una_valid && resp_una_ready;
  assign cfg_wr_ready = !wb_en && !resp_una_valid;
  assign fw_wr = cfg_wr_valid && cfg_wr_ready;
  assign cfg_rd_ready = !plan_rd_en;
  assign fw_rd = cfg_rd_valid && cfg_rd_ready;

  logic [SC_WORDS-1:0]      ram_we;
  logic [QPN_W-1:0]         ram_wa;
  logic [SCTX_BYTES*8-1:0]  ram_wd;

  always_comb begin
    ram_we = '0;
    ram_wa = cfg_wr_index;
    ram_wd = {SC_WORDS{cfg_wr_data}};
    if (wb_en) begin
      ram_we[SC_WORD_PSN] = 1'b1;
      ram_we[SC_WORD_NOACK] = 1'b1;
      ram_wa = wb_addr;
      ram_wd[32*SC_WORD_PSN +: 32] = wb_psn;
      ram_wd[32*SC_WORD_NOACK +: 32] = wb_noack;
      if (wb_una_en) begin
        ram_we[SC_WORD_UNA] = 1'b1;
        ram_wd[32*SC_WORD_UNA +: 32] = {8'd0, wb_una};
      end
    end else if (resp_wr) begin
      ram_we[SC_WORD_UNA] = 1'b1;
      ram_wa = resp_una_addr;
      ram_wd[32*SC_WORD_UNA +: 32] = {8'd0, resp_una_psn};
    end else if (fw_wr && 32'(cfg_wr_word) < SC_WORDS) begin
      ram_we[cfg_wr_word] = 1'b1;
    end
  end

  roce_ram #(
    .WORDS(SC_WORDS),
    .DEPTH(NQP)
  ) sctx_ram_inst (
    .clk(clk),
    .wr_addr(ram_wa),
    .wr_en(ram_we),
    .wr_data(ram_wd),
    .rd_addr(plan_rd_en ? plan_rd_addr : cfg_rd_index),
    .rd_en(plan_rd_en || fw_rd),
    .rd_data(ram_rd_data)
  );

  // the response path's copy of words 0, 3 and 4, written with the table
  roce_ram #(
    .WORDS(3),
    .DEPTH(NQP)
  ) resp_view_inst (
    .clk(clk),
    .wr_addr(ram_wa),
    .wr_en({ram_we[SC_WORD_UNA], ram_we[SC_WORD_PSN], ram_we[0]}),
    .wr_data({ram_wd[32*SC_WORD_UNA +: 32], ram_wd[32*SC_WORD_PSN +: 32], ram_wd[31:0]}),
    .rd_addr(resp_rd_addr),
    .rd_en(resp_rd_en),
    .rd_data(resp_rd_data)
  );

  always_ff @(posedge clk) begin
    cfg_rdata_valid <= fw_rd;
    if (fw_rd) rd_word_q <= cfg_rd_word;
    if (rst) cfg_rdata_valid <= 1'b0;
  end
  assign cfg_rdata = ram_rd_data[32*rd_word_q[4:0] +: 32];

  // ------------------------------------------------- the MR table's copy
  logic [MR_W-1:0]        mr_rd_addr;
  logic                   mr_rd_en;
  logic [MR_BYTES*8-1:0]  mr_rd_data;
  fp_mr_copy #(
    .NMR(NMR)
  ) mr_copy_inst (
    .clk(clk),
    .mr_wr_en(mr_wr_en),
    .mr_wr_index(mr_wr_index),
    .mr_wr_word(mr_wr_word),
    .mr_wr_data(mr_wr_data),
    .rd_addr(mr_rd_addr),
    .rd_en(mr_rd_en),
    .rd_data(mr_rd_data)
  );

  // ------------------------------------------------------------ planner
  fp_tx_job_t job;
  logic       job_valid;
  logic       job_room;
  logic [63:0] rq_addr;
  logic [15:0] rq_len;
  logic        rq_last, rq_valid, rq_ready;

  // the response queue in front of the planner
  logic [RESPD_BYTES*8-1:0] rq_data;
  logic        rq_dvalid, rq_dready, rd_busy;
  logic [23:0] rd_busy_qpn;

  fp_resp_q resp_q_inst (
    .clk(clk),
    .rst(rst),
    .s_data(s_ackd_data),
    .s_valid(s_ackd_valid),
    .s_ready(s_ackd_ready),
    .m_data(rq_data),
    .m_valid(rq_dvalid),
    .m_ready(rq_dready),
    .drop_en(drop_en),
    .drop_qpn(drop_qpn),
    .drop_psn(drop_psn),
    .rd_busy(rd_busy),
    .rd_busy_qpn(rd_busy_qpn),
    .reads_wait(reads_wait),
    .rd_in(rd_in),
    .cnt_qpn(rd_cnt_qpn),
    .rd_count(rd_count)
  );

  fp_tx_plan #(
    .NQP(NQP),
    .NMR(NMR)
  ) plan_inst (
    .clk(clk),
    .rst(rst),
    .s_txd_data(s_txd_data),
    .s_txd_valid(s_txd_valid),
    .s_txd_ready(s_txd_ready),
    .s_ackd_data(rq_data),
    .s_ackd_valid(rq_dvalid),
    .s_ackd_ready(rq_dready),
    .ctx_rd_en(plan_rd_en),
    .ctx_rd_addr(plan_rd_addr),
    .ctx_rd_data(ram_rd_data),
    .ctx_wb_en(wb_en),
    .ctx_wb_addr(wb_addr),
    .ctx_wb_psn(wb_psn),
    .ctx_wb_noack(wb_noack),
    .ctx_wb_una_en(wb_una_en),
    .ctx_wb_una(wb_una),
    // (the write-back, the response path and the firmware never write in one cycle)
    .una_wr_en((wb_en && wb_una_en) || resp_wr || (fw_wr && cfg_wr_word == 5'(SC_WORD_UNA))),
    .una_wr_addr(wb_en ? wb_addr : resp_wr ? resp_una_addr : cfg_wr_index),
    .una_wr_psn(wb_en ? wb_una : resp_wr ? resp_una_psn : cfg_wr_data[23:0]),
    .inval_wr_en(fw_wr && cfg_wr_word == 5'd0 && !cfg_wr_data[8*SC_FLAGS + 2]),
    .inval_wr_addr(cfg_wr_index),
    .mr_rd_en(mr_rd_en),
    .mr_rd_addr(mr_rd_addr),
    .mr_rd_data(mr_rd_data),
    .rd_busy(rd_busy),
    .rd_busy_qpn(rd_busy_qpn),
    .drop_en(drop_en),
    .drop_qpn(drop_qpn),
    .drop_psn(drop_psn),
    .m_job(job),
    .m_job_valid(job_valid),
    .job_room(job_room),
    .m_rd_addr(rq_addr),
    .m_rd_len(rq_len),
    .m_rd_last(rq_last),
    .m_rd_valid(rq_valid),
    .m_rd_ready(rq_ready),
    .bad_desc(bad_desc),
    .resent(resent),
    .idle(idle),
    .slots_used(slots_used)
  );

  // DMA requests leave through a register slice
  axis_skid #(
    .WIDTH(64 + 16 + 1)
  ) rd_req_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data({rq_last, rq_len, rq_addr}),
    .s_valid(rq_valid),
    .s_ready(rq_ready),
    .m_data({m_dma_rd_req_last, m_dma_rd_req_len, m_dma_rd_req_addr}),
    .m_valid(m_dma_rd_req_valid),
    .m_ready(m_dma_rd_req_ready)
  );

  // ------------------------------------------------- header builder, FIFO
  fp_tx_frame_t hdr_frame;
  logic         hdr_valid;

  fp_tx_hdr hdr_inst (
    .clk(clk),
    .rst(rst),
    .s_job(job),
    .s_valid(job_valid),
    .m_frame(hdr_frame),
    .m_valid(hdr_valid)
  );

  localparam int FCNT_W = $clog2(FRAME_DEPTH + 1);
  fp_tx_frame_t      fq_head;
  logic              fq_pop;
  logic [FCNT_W-1:0] fq_count;

  roce_fifo #(
    .WIDTH($bits(fp_tx_frame_t)),
    .DEPTH(FRAME_DEPTH)
  ) frame_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data(hdr_frame),
    .wr_en(hdr_valid),
    .rd_data(fq_head),
    .rd_en(fq_pop),
    .count(fq_count)
  );

  // a register: the builder's jobs in flight are covered by the margin
  always_ff @(posedge clk) begin
    job_room <= fq_count <= FCNT_W'(ROOM_MAX) && !job_valid;
    if (rst) job_room <= 1'b0;
  end

  // ----------------------------------------------------------- payload in
  logic [DATA_WIDTH-1:0] pay_data;
  logic [KEEP_WIDTH-1:0] pay_keep;
  logic                  pay_valid, pay_ready, pay_last, pay_err;

  axis_skid #(
    .WIDTH(DATA_WIDTH + KEEP_WIDTH + 2)
  ) rd_data_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data({s_dma_rd_terr, s_dma_rd_tlast, s_dma_rd_tkeep, s_dma_rd_tdata}),
    .s_valid(s_dma_rd_tvalid),
    .s_ready(s_dma_rd_tready),
    .m_data({pay_err, pay_last, pay_keep, pay_data}),
    .m_valid(pay_valid),
    .m_ready(pay_ready)
  );

  // ------------------------------------------------- DMA read errors
  // Frames and payloads stay in order from the emitter to the wire: one entry
  // per frame the emitter takes (whether it has a payload), one per payload
  // (whether a beat of it had an error); a frame's last beat on the wire pops
  // its entry and, with a payload, the payload's.
  localparam int ERR_DEPTH = 16;
  localparam int ECNT_W = $clog2(ERR_DEPTH + 1);
  logic              pay_err_acc;       // an error in the payload so far
  logic              fe_has_pay, pe_err;
  logic              fe_pop, pe_pop;
  logic [ECNT_W-1:0] fe_count, pe_count;
  logic              out_end;

  always_ff @(posedge clk) begin
    if (pay_valid && pay_ready) pay_err_acc <= pay_last ? 1'b0 : pay_err_acc || pay_err;
    if (out_end && m_axis_tuser) dma_errors <= dma_errors + 32'd1;
    if (rst) begin
      pay_err_acc <= 1'b0;
      dma_errors <= '0;
    end
  end

  roce_fifo #(
    .WIDTH(1),
    .DEPTH(ERR_DEPTH)
  ) frame_err_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data(fq_head.plen != '0),
    .wr_en(fq_pop),
    .rd_data(fe_has_pay),
    .rd_en(fe_pop),
    .count(fe_count)
  );

  roce_fifo #(
    .WIDTH(1),
    .DEPTH(ERR_DEPTH)
  ) pay_err_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data(pay_err_acc || pay_err),
    .wr_en(pay_valid && pay_ready && pay_last),
    .rd_data(pe_err),
    .rd_en(pe_pop),
    .count(pe_count)
  );

  assign out_end = m_axis_tvalid && m_axis_tready && m_axis_tlast;
  assign fe_pop = out_end && fe_count != '0;
  assign pe_pop = fe_pop && fe_has_pay && pe_count != '0;
  assign m_axis_tuser = m_axis_tlast && fe_count != '0 && fe_has_pay && pe_count != '0
      && pe_err;

  // ------------------------------------------------------------ emitter
  logic [DATA_WIDTH-1:0] e_data;
  logic [KEEP_WIDTH-1:0] e_keep;
  logic                  e_valid, e_ready, e_last;

  fp_tx_emit #(
    .DATA_WIDTH(DATA_WIDTH)
  ) emit_inst (
    .clk(clk),
    .rst(rst),
    .s_frame(fq_head),
    .s_frame_valid(fq_count != '0),
    .s_frame_pop(fq_pop),
    .s_pay_tdata(pay_data),
    .s_pay_tkeep(pay_keep),
    .s_pay_tvalid(pay_valid),
    .s_pay_tready(pay_ready),
    .m_axis_tdata(e_data),
    .m_axis_tkeep(e_keep),
    .m_axis_tvalid(e_valid),
    .m_axis_tready(e_ready),
    .m_axis_tlast(e_last)
  );

  tx_icrc_insert #(
    .DATA_WIDTH(DATA_WIDTH)
  ) icrc_insert_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(e_data),
    .s_axis_tkeep(e_keep),
    .s_axis_tvalid(e_valid),
    .s_axis_tready(e_ready),
    .s_axis_tlast(e_last),
    .m_axis_tdata(m_axis_tdata),
    .m_axis_tkeep(m_axis_tkeep),
    .m_axis_tvalid(m_axis_tvalid),
    .m_axis_tready(m_axis_tready),
    .m_axis_tlast(m_axis_tlast)
  );

endmodule

`resetall
