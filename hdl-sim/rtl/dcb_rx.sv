// SPDX-License-Identifier: MIT OR Apache-2.0
//
// dcb_rx: the receive side of the port's DCB block. Frames from the wire
// are classified (dcb_frame_class). MAC Control frames stop here: a valid
// PFC frame (opcode 0x0101, the vector's high byte zero, at least 34 bytes;
// roce_core::wire::pfc::PfcRepr::parse_frame's rules) becomes a request to
// the pause timers; any other is counted and dropped. Every other frame
// enters the receive buffer, which the datapath drains: a frame is admitted
// whole if, at its first beat, the buffer has room for a frame of MAX_FRAME
// bytes (else it is dropped and counted; with HOLD_WIRE the frame waits at
// the input, holding the wire back, until there is). The buffer reports each frame's
// priority and length as it enters (`add`, at its last beat) and leaves
// (`sub`, at its last beat out): the PFC generator's accounting.
//
// Storage (sized for the SoC's block RAM, docs/dcb.md §3): a beat's tkeep is
// stored as its byte count (tkeep is contiguous from bit 0 on these buses,
// hdl-sim's `Beat`), log2(KEEP_WIDTH) bits with 0 for a full beat, so a
// 64-bit beat is 68 bits, eight 2048 x 9 block RAMs per 16 KiB instead of
// nine for 73; the frame records (priority and length, read asynchronously)
// sit in distributed RAM (roce_fifo), not in a block RAM of their own.

`resetall
`default_nettype none

module dcb_rx
  import dcb_pkg::*;
#(
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    // receive buffer bytes; a power of two, at least twice MAX_FRAME
    parameter int BUF_BYTES = 65536,
    parameter int MAX_FRAME = 4608,
    // 1: a frame the buffer has no room for waits (tready low) instead of being
    // dropped: for a wire that can wait (the simulated SoC's), not a MAC's
    parameter bit HOLD_WIRE = 1'b0
) (
    input  wire logic                     clk,
    input  wire logic                     rst,

    input  wire logic [63:0][2:0]         dscp_map,
    input  wire logic [NPRIO-1:0][2:0]    pcp_map,

    input  wire logic [DATA_WIDTH-1:0]    s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0]    s_axis_tkeep,
    input  wire logic                     s_axis_tvalid,
    output logic                          s_axis_tready,
    input  wire logic                     s_axis_tlast,

    output logic [DATA_WIDTH-1:0]         m_axis_tdata,
    output logic [KEEP_WIDTH-1:0]         m_axis_tkeep,
    output logic                          m_axis_tvalid,
    input  wire logic                     m_axis_tready,
    output logic                          m_axis_tlast,

    // PFC requests received
    output logic                          req_valid,
    output logic [NPRIO-1:0]              req_enable,
    output logic [NPRIO-1:0][15:0]        req_quanta,

    // the buffer's accounting
    output logic                          add_valid,
    output logic [2:0]                    add_prio,
    output logic [15:0]                   add_len,
    output logic                          sub_valid,
    output logic [2:0]                    sub_prio,
    output logic [15:0]                   sub_len,

    output logic [31:0]                   pfc_frames,
    output logic [31:0]                   bad_mac_ctl,
    output logic [31:0]                   drops
);

  // a beat's byte count, modulo KEEP_WIDTH (0: all bytes)
  localparam int KCNT_W = $clog2(KEEP_WIDTH);
  localparam int BW = DATA_WIDTH + KCNT_W + 1;
  localparam int BDEPTH = BUF_BYTES / KEEP_WIDTH;
  localparam int BCNT_W = $clog2(BDEPTH + 4 + 1);
  localparam int MAX_BEATS = (MAX_FRAME + KEEP_WIDTH - 1) / KEEP_WIDTH;
  // frames of at least 60 bytes: at most one per 64 bytes of buffer
  localparam int IDEPTH = BUF_BYTES / 64;
  localparam int ICNT_W = $clog2(IDEPTH + 4 + 1);

  initial begin
    if (BDEPTH < 2 * MAX_BEATS || (BUF_BYTES & (BUF_BYTES - 1)) != 0) begin
      $error("dcb_rx: BUF_BYTES must be a power of two of at least two frames");
      $finish;
    end
  end

  // ------------------------------------------------------- classification
  logic [DATA_WIDTH-1:0]  c_data;
  logic [KEEP_WIDTH-1:0]  c_keep;
  logic                   c_valid, c_ready, c_last, c_mac_ctl;
  logic [2:0]             c_prio;
  logic [PFC_BYTES*8-1:0] cap;
  logic [15:0]            cap_len;
  logic                   cap_valid;

  dcb_frame_class #(
    .DATA_WIDTH(DATA_WIDTH),
    .CAP_BYTES(PFC_BYTES)
  ) class_inst (
    .clk(clk),
    .rst(rst),
    .dscp_map(dscp_map),
    .pcp_map(pcp_map),
    .s_axis_tdata(s_axis_tdata),
    .s_axis_tkeep(s_axis_tkeep),
    .s_axis_tvalid(s_axis_tvalid),
    .s_axis_tready(s_axis_tready),
    .s_axis_tlast(s_axis_tlast),
    .m_axis_tdata(c_data),
    .m_axis_tkeep(c_keep),
    .m_axis_tvalid(c_valid),
    .m_axis_tready(c_ready),
    .m_axis_tlast(c_last),
    .m_prio(c_prio),
    .m_mac_ctl(c_mac_ctl),
    .cap_data(cap),
    .cap_len(cap_len),
    .cap_valid(cap_valid)
  );

  // --------------------------------------------- PFC frames (input side)
  logic        is_ctl, is_pfc;
  assign is_ctl = cap_len >= 16'd14 && {cap[12*8 +: 8], cap[13*8 +: 8]} == ETHERTYPE_MAC_CTL;
  assign is_pfc = is_ctl && cap_len >= 16'(PFC_BYTES)
      && {cap[14*8 +: 8], cap[15*8 +: 8]} == OPCODE_PFC && cap[16*8 +: 8] == 8'h00;

  always_ff @(posedge clk) begin
    req_valid <= cap_valid && is_pfc;
    if (cap_valid && is_pfc) begin
      req_enable <= cap[17*8 +: 8];
      for (int p = 0; p < NPRIO; p++) req_quanta[p] <= {cap[(18 + 2*p)*8 +: 8], cap[(19 + 2*p)*8 +: 8]};
      pfc_frames <= pfc_frames + 1;
    end
    if (cap_valid && is_ctl && !is_pfc) bad_mac_ctl <= bad_mac_ctl + 1;
    if (rst) begin
      req_valid <= 1'b0;
      pfc_frames <= '0;
      bad_mac_ctl <= '0;
    end
  end

  // ------------------------------------------------------ the buffer
  logic               b_wr_ready, b_rd_valid, b_rd_en;
  logic [BW-1:0]      b_rd_data;
  logic [BCNT_W-1:0]  b_count;
  logic [ICNT_W-1:0]  i_count;
  logic [18:0]        i_head;
  logic               c_fire, first, keep_frame, admit, wr;
  logic [15:0]        wlen, wlen_next;
  logic [KCNT_W-1:0]  c_kcnt, m_kcnt;
  assign c_kcnt = KCNT_W'(keep_bytes(64'(c_keep), KEEP_WIDTH));

  // room is checked per frame, at its first beat
  assign c_ready = !HOLD_WIRE || !first || c_mac_ctl || admit;
  assign c_fire = c_valid && c_ready;
  assign admit = !c_mac_ctl && b_wr_ready
      && 32'(b_count) + MAX_BEATS + 2 <= BDEPTH && 32'(i_count) + 2 <= IDEPTH;
  // the frame's fate is decided at its first beat
  assign wr = c_fire && (first ? admit : keep_frame);
  always_comb begin
    wlen_next = wlen + 16'(keep_bytes(64'(c_keep), KEEP_WIDTH));
    if (wlen_next < wlen) wlen_next = 16'hFFFF;
  end

  always_ff @(posedge clk) begin
    add_valid <= 1'b0;
    if (c_fire) begin
      first <= c_last;
      if (first) keep_frame <= admit;
      wlen <= c_last ? '0 : wlen_next;
      if (first && !admit && !c_mac_ctl) drops <= drops + 1;
      if (wr && c_last) begin
        add_valid <= 1'b1;
        add_prio <= c_prio;
        add_len <= wlen_next;
      end
    end
    if (rst) begin
      first <= 1'b1;
      keep_frame <= 1'b0;
      wlen <= '0;
      add_valid <= 1'b0;
      drops <= '0;
    end
  end

  roce_bram_fifo #(
    .WIDTH(BW),
    .DEPTH(BDEPTH)
  ) data_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data({c_last, c_kcnt, c_data}),
    .wr_en(wr),
    .wr_ready(b_wr_ready),
    .rd_data(b_rd_data),
    .rd_valid(b_rd_valid),
    .rd_en(b_rd_en),
    .count(b_count)
  );

  // distributed RAM: an asynchronous read does not map to block RAM. Never
  // full when written (admission leaves room for two records) and never
  // empty when read: a frame's record is in at its last beat in, before that
  // beat can come out of the data FIFO.
  roce_fifo #(
    .WIDTH(19),
    .DEPTH(IDEPTH),
    .CNT_W(ICNT_W)
  ) info_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data({c_prio, wlen_next}),
    .wr_en(wr && c_last),
    .rd_data(i_head),
    .rd_en(b_rd_en && m_axis_tlast),
    .count(i_count)
  );

  assign m_axis_tvalid = b_rd_valid;
  assign {m_axis_tlast, m_kcnt, m_axis_tdata} = b_rd_data;
  assign m_axis_tkeep = m_kcnt == '0 ? '1 : KEEP_WIDTH'((KEEP_WIDTH+1)'(1) << m_kcnt) - 1'b1;
  assign b_rd_en = m_axis_tvalid && m_axis_tready;

  always_ff @(posedge clk) begin
    sub_valid <= b_rd_en && m_axis_tlast;
    sub_prio <= i_head[18:16];
    sub_len <= i_head[15:0];
    if (rst) sub_valid <= 1'b0;
  end

endmodule

`resetall
