// SPDX-License-Identifier: MIT OR Apache-2.0
//
// dcb_frame_class: classifies frames on an AXI stream by 802.1p priority
// (dcb_pkg::frame_prio: PCP when tagged, else DSCP) and marks MAC Control
// frames (EtherType 0x8808), and passes the frames on with both as
// sideband, constant over each frame. It also captures each frame's first
// CAP_BYTES bytes and length, presented for one cycle after the frame's
// last beat (for the PFC parser).
//
// Beats wait in a small FIFO until their frame is classified (two cycles
// after its CLASS_BYTES-th byte or its last beat), so the output lags the
// input by a few cycles and keeps one beat per cycle.

`resetall
`default_nettype none

module dcb_frame_class
  import dcb_pkg::*;
#(
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    // bytes captured from the start of each frame (at least CLASS_BYTES)
    parameter int CAP_BYTES = CLASS_BYTES
) (
    input  wire logic                    clk,
    input  wire logic                    rst,

    input  wire logic [63:0][2:0]        dscp_map,
    input  wire logic [NPRIO-1:0][2:0]   pcp_map,

    input  wire logic [DATA_WIDTH-1:0]   s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0]   s_axis_tkeep,
    input  wire logic                    s_axis_tvalid,
    output logic                         s_axis_tready,
    input  wire logic                    s_axis_tlast,

    output logic [DATA_WIDTH-1:0]        m_axis_tdata,
    output logic [KEEP_WIDTH-1:0]        m_axis_tkeep,
    output logic                         m_axis_tvalid,
    input  wire logic                    m_axis_tready,
    output logic                         m_axis_tlast,
    output logic [2:0]                   m_prio,
    output logic                         m_mac_ctl,

    // the frame that just ended: its first CAP_BYTES bytes and its length
    output logic [CAP_BYTES*8-1:0]       cap_data,
    output logic [15:0]                  cap_len,
    output logic                         cap_valid
);

  localparam int BEAT_DEPTH = 8;
  // a frame's record waits for its beats, at most one per beat held, plus the
  // frame coming in
  localparam int INFO_DEPTH = BEAT_DEPTH;
  localparam int BW = DATA_WIDTH + KEEP_WIDTH + 1;
  // beats whose bytes are captured
  localparam int CAP_BEATS = (CAP_BYTES + KEEP_WIDTH - 1) / KEEP_WIDTH;
  // index of the beat holding byte CLASS_BYTES-1
  localparam int CLS_BEAT = (CLASS_BYTES - 1) / KEEP_WIDTH;
  localparam int IDX_W = $clog2(CAP_BEATS + 2);

  initial begin
    if (CAP_BYTES < CLASS_BYTES) begin
      $error("dcb_frame_class: CAP_BYTES must be at least %0d", CLASS_BYTES);
      $finish;
    end
  end

  // ---------------------------------------------------------------- input
  logic                 in_fire;
  logic [IDX_W-1:0]     beat_idx;   // beats of the current frame so far (saturating)
  logic [15:0]          len_acc;    // bytes of the current frame so far (saturating)
  logic [CAP_BYTES*8-1:0] cap;
  logic                 cls_go;     // classify the current frame next cycle
  logic                 cls_done;   // the current frame is classified
  logic                 cls_have;   // it had CLASS_BYTES bytes when classified
  logic                 cls_have14; // it had an EtherType
  logic [3:0]           bcount;

  assign in_fire = s_axis_tvalid && s_axis_tready;
  // one slot spare: `count` is registered and lags a write by a cycle
  assign s_axis_tready = 32'(bcount) < BEAT_DEPTH - 1;

  logic [15:0] len_next;
  always_comb begin
    len_next = len_acc + 16'(keep_bytes(64'(s_axis_tkeep), KEEP_WIDTH));
    if (len_next < len_acc) len_next = 16'hFFFF;
  end

  always_ff @(posedge clk) begin
    cls_go <= 1'b0;
    cap_valid <= 1'b0;
    if (in_fire) begin
      for (int k = 0; k < CAP_BYTES; k++) begin
        if (32'(beat_idx) == k / KEEP_WIDTH) cap[8*k +: 8] <= s_axis_tdata[8*(k % KEEP_WIDTH) +: 8];
      end
      if (32'(beat_idx) <= CAP_BEATS) beat_idx <= beat_idx + 1'b1;
      len_acc <= len_next;
      if (!cls_done && (32'(beat_idx) == CLS_BEAT || s_axis_tlast)) begin
        cls_go <= 1'b1;
        cls_done <= 1'b1;
        cls_have <= len_next >= 16'(CLASS_BYTES);
        cls_have14 <= len_next >= 16'd14;
      end
      if (s_axis_tlast) begin
        beat_idx <= '0;
        len_acc <= '0;
        cls_done <= 1'b0;
        cap_len <= len_next;
        cap_valid <= 1'b1;
      end
    end
    if (rst) begin
      beat_idx <= '0;
      len_acc <= '0;
      cls_go <= 1'b0;
      cls_done <= 1'b0;
      cap_valid <= 1'b0;
    end
  end

  // the capture register holds the ended frame's bytes until the next frame's
  // bytes overwrite them, at the earliest in the cycle after `cap_valid`
  assign cap_data = cap;

  // ------------------------------------------- classification (registered)
  logic [15:0] ethertype;
  logic [3:0]  info_in;
  logic        info_push;
  assign ethertype = {cap[12*8 +: 8], cap[13*8 +: 8]};

  always_ff @(posedge clk) begin
    info_push <= cls_go;
    info_in <= {cls_have14 && ethertype == ETHERTYPE_MAC_CTL,
                frame_prio(cap[12*8 +: 32], cls_have, dscp_map, pcp_map)};
    if (rst) info_push <= 1'b0;
  end

  // -------------------------------------------------------- FIFOs, output
  logic [3:0] info_head;
  logic [3:0] icount;
  logic [BW-1:0] beat_head;
  logic       out_fire;

  roce_fifo #(
    .WIDTH(BW),
    .DEPTH(BEAT_DEPTH)
  ) beat_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data({s_axis_tlast, s_axis_tkeep, s_axis_tdata}),
    .wr_en(in_fire),
    .rd_data(beat_head),
    .rd_en(out_fire),
    .count(bcount)
  );

  roce_fifo #(
    .WIDTH(4),
    .DEPTH(INFO_DEPTH)
  ) info_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data(info_in),
    .wr_en(info_push),
    .rd_data(info_head),
    .rd_en(out_fire && m_axis_tlast),
    .count(icount)
  );

  assign m_axis_tvalid = bcount != '0 && icount != '0;
  assign {m_axis_tlast, m_axis_tkeep, m_axis_tdata} = beat_head;
  assign m_prio = info_head[2:0];
  assign m_mac_ctl = info_head[3];
  assign out_fire = m_axis_tvalid && m_axis_tready;

endmodule

`resetall
