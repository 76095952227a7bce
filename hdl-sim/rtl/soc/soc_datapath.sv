// SPDX-License-Identifier: MIT OR Apache-2.0
//
// soc_datapath: the firmware's frame interface to the wire (MMIO block
// 0x2_0000; firmware/image/src/mmio.rs `dp_reg`) around the RTL datapath
// (`roce_dp_top`, 64-bit: the RX parser and the TX ICRC inserter).
//
// RX: frames from the wire go into the parser and, beat for beat, into a
// ring of RX_FRAMES frames (RING_BYTES; in the SoC 8 KiB and 2 frames: the
// frame the firmware reads and the next one). Frames wait in the DCB
// block's receive buffer in front of it (nic_soc), where PFC counts them;
// a frame in this ring is no longer counted, so the ring is kept small
// (docs/dcb.md §3). A frame's descriptor (length, beats) is queued at its last
// beat and judged when the parser's metadata record for it comes out (in
// frame order): frames with an error (bad ICRC, not RoCE, ...) or longer
// than MAX_FRAME bytes are dropped in hardware and counted; the oldest good
// frame is what the firmware sees in RX_STATUS / RX_BUF until it writes
// RX_POP. A new frame is taken only while the ring has room for a frame of
// MAX_FRAME bytes and the descriptor queue has a free entry; otherwise the
// input holds the wire back (tready low).
//
// TX: the firmware writes a whole frame, ICRC included (the engine writes
// it), into TX_BUF and its length into TX_LEN; the frame minus its last four
// bytes is streamed into the ICRC inserter, which appends the ICRC it
// computes. TX_STATUS.ready is low from TX_LEN until the last beat is out of
// the buffer.
//
// Registers (byte offsets): 0x0000 RX_STATUS (bit 31 a frame is waiting,
// 15..0 its length), 0x0004 RX_POP, 0x0008 TX_STATUS (bit 0 ready),
// 0x000C TX_LEN, 0x0010 MAC_LO, 0x0014 MAC_HI, 0x0018 DOORBELL (bit 0 a host
// doorbell rang since the last read; reading clears it, in the cycle it samples
// the bit: a doorbell written in that cycle stays for the next read), 0x001C RX_DROPS
// (frames dropped), 0x0020..0x002C GID, 0x2000 RX_BUF (8 KiB, read),
// 0x4000 TX_BUF (8 KiB, write). Every read answers in one cycle.

`resetall
`default_nettype none

module soc_datapath
  import roce_rx_pkg::*;
#(
    // longest frame accepted, bytes (a 4096-byte MTU plus every header)
    parameter int MAX_FRAME = 4224,
    // the RX ring: bytes (a power of two, at least MAX_FRAME and at most the
    // 8 KiB RX_BUF window) and frames held (a power of two, at least 2)
    parameter int RING_BYTES = 8192,
    parameter int RX_FRAMES = 2
) (
    input  wire logic         clk,
    input  wire logic         rst,

    // firmware port (MMIO)
    input  wire logic         req,
    input  wire logic         we,
    input  wire logic [14:0]  addr,
    input  wire logic [31:0]  wdata,
    input  wire logic [3:0]   sel,
    output logic              ack,
    output logic [31:0]       rdata,

    // the port's addresses (board straps, or the simulation)
    input  wire logic [47:0]  port_mac,
    input  wire logic [127:0] port_gid,
    input  wire logic         db_pending,
    output logic              db_clear,
    output logic              rx_waiting,

    // the wire, 64-bit AXI-stream, frames without FCS
    input  wire logic [63:0]  rx_axis_tdata,
    input  wire logic [7:0]   rx_axis_tkeep,
    input  wire logic         rx_axis_tvalid,
    output logic              rx_axis_tready,
    input  wire logic         rx_axis_tlast,

    output logic [63:0]       tx_axis_tdata,
    output logic [7:0]        tx_axis_tkeep,
    output logic              tx_axis_tvalid,
    input  wire logic         tx_axis_tready,
    output logic              tx_axis_tlast
);

  localparam int RING_BEATS = RING_BYTES / 8;
  localparam int RB = $clog2(RING_BEATS);
  localparam int MAX_BEATS = (MAX_FRAME + 7) / 8;
  localparam int DESCS = RX_FRAMES;
  localparam int DB = $clog2(DESCS);

  initial begin
    if ((RING_BYTES & (RING_BYTES - 1)) != 0 || RING_BYTES < MAX_FRAME || RING_BYTES > 8192
        || DESCS < 2 || (DESCS & (DESCS - 1)) != 0) begin
      $error("soc_datapath: RING_BYTES and RX_FRAMES out of range");
      $finish;
    end
  end
  localparam int TX_BEATS = 1024;              // 8 KiB
  localparam int TB = $clog2(TX_BEATS);

  // ------------------------------------------------------------------ RX
  localparam int META_W = $bits(rx_meta_t);
  logic rx_s_ready, rx_s_valid;
  logic [META_W-1:0] meta_data;
  logic meta_valid;
  logic [63:0] tx_s_data;
  logic [7:0]  tx_s_keep;
  logic        tx_s_valid, tx_s_ready, tx_s_last;

  // the payload output is not used: the firmware reads whole frames
  /* verilator lint_off UNUSEDSIGNAL */
  logic [63:0] pl_data;
  logic [7:0]  pl_keep;
  logic        pl_valid, pl_last;
  /* verilator lint_on UNUSEDSIGNAL */

  roce_dp_top #(
    .DATA_WIDTH(64)
  ) dp_inst (
    .clk(clk),
    .rst(rst),
    .rx_s_axis_tdata(rx_axis_tdata),
    .rx_s_axis_tkeep(rx_axis_tkeep),
    .rx_s_axis_tvalid(rx_s_valid),
    .rx_s_axis_tready(rx_s_ready),
    .rx_s_axis_tlast(rx_axis_tlast),
    .rx_m_axis_payload_tdata(pl_data),
    .rx_m_axis_payload_tkeep(pl_keep),
    .rx_m_axis_payload_tvalid(pl_valid),
    .rx_m_axis_payload_tready(1'b1),
    .rx_m_axis_payload_tlast(pl_last),
    .rx_m_axis_meta_tdata(meta_data),
    .rx_m_axis_meta_tvalid(meta_valid),
    .rx_m_axis_meta_tready(1'b1),
    .tx_s_axis_tdata(tx_s_data),
    .tx_s_axis_tkeep(tx_s_keep),
    .tx_s_axis_tvalid(tx_s_valid),
    .tx_s_axis_tready(tx_s_ready),
    .tx_s_axis_tlast(tx_s_last),
    .tx_m_axis_tdata(tx_axis_tdata),
    .tx_m_axis_tkeep(tx_axis_tkeep),
    .tx_m_axis_tvalid(tx_axis_tvalid),
    .tx_m_axis_tready(tx_axis_tready),
    .tx_m_axis_tlast(tx_axis_tlast)
  );

  // only the verdict is used: the firmware parses the frame itself
  /* verilator lint_off UNUSEDSIGNAL */
  rx_meta_t meta;
  /* verilator lint_on UNUSEDSIGNAL */
  assign meta = rx_meta_t'(meta_data);

  // ring and descriptor queue
  logic [RB-1:0]  wptr;        // next beat written
  logic [RB-1:0]  rptr;        // first beat of the oldest frame held
  logic [RB:0]    used;        // beats held (frames in the queue and the one arriving)
  logic           in_frame;
  logic [15:0]    cur_len;
  logic [RB:0]    cur_beats;
  logic           cur_oversize;

  logic [15:0]    d_len   [DESCS];
  logic [RB:0]    d_beats [DESCS];
  logic           d_ok    [DESCS];
  logic [DB:0]    d_head, d_judge, d_tail;   // one extra bit: full vs empty

  logic desc_free, room, gate, beat_in, head_judged, head_ok, release_head, pop_req;
  assign desc_free = (d_tail - d_head) != (DB + 1)'(DESCS);
  assign room = used <= (RB + 1)'(RING_BEATS - MAX_BEATS);
  assign gate = in_frame || (room && desc_free);
  assign rx_s_valid = rx_axis_tvalid && gate;
  assign rx_axis_tready = rx_s_ready && gate;
  assign beat_in = rx_axis_tvalid && rx_axis_tready;
  assign head_judged = d_head != d_judge;
  assign head_ok = head_judged && d_ok[d_head[DB-1:0]];
  assign pop_req = req && we && addr == 15'h0004 && wdata[0];
  assign release_head = head_judged && (!d_ok[d_head[DB-1:0]] || pop_req);
  assign rx_waiting = head_ok;

  // bytes in a beat whose tkeep is contiguous from bit 0
  function automatic logic [3:0] keep_bytes(input logic [7:0] keep);
    keep_bytes = 4'd0;
    for (int i = 0; i < 8; i++) if (keep[i]) keep_bytes = 4'(i + 1);
  endfunction

  // a frame is oversize once it would need more than MAX_BEATS beats
  logic [RB:0] beats_next;
  logic cur_oversize_next;
  assign beats_next = (in_frame ? cur_beats : '0) + 1'b1;
  assign cur_oversize_next = (in_frame && cur_oversize) || beats_next > (RB + 1)'(MAX_BEATS);

  logic ring_we;
  logic [RB-1:0] ring_waddr;
  logic [63:0] ring_wdata;
  assign ring_we = beat_in && !cur_oversize_next;
  assign ring_waddr = wptr;
  assign ring_wdata = rx_axis_tdata;

  logic [31:0] rx_drops;

  always_ff @(posedge clk) begin
    if (beat_in) begin
      in_frame <= !rx_axis_tlast;
      cur_beats <= beats_next;
      cur_oversize <= cur_oversize_next;
      cur_len <= (in_frame ? cur_len : 16'd0) + 16'(keep_bytes(rx_axis_tkeep));
      if (!cur_oversize_next) wptr <= wptr + 1'b1;
      if (rx_axis_tlast) begin
        d_len[d_tail[DB-1:0]] <= (in_frame ? cur_len : 16'd0) + 16'(keep_bytes(rx_axis_tkeep));
        d_beats[d_tail[DB-1:0]] <= cur_oversize_next ? (RB + 1)'(MAX_BEATS) : beats_next;
        d_ok[d_tail[DB-1:0]] <= !cur_oversize_next;
        d_tail <= d_tail + 1'b1;
      end
    end
    if (meta_valid) begin
      if (meta.error != ERR_NONE) d_ok[d_judge[DB-1:0]] <= 1'b0;
      d_judge <= d_judge + 1'b1;
    end
    if (release_head) begin
      rptr <= rptr + d_beats[d_head[DB-1:0]][RB-1:0];
      d_head <= d_head + 1'b1;
      if (!d_ok[d_head[DB-1:0]]) rx_drops <= rx_drops + 1'b1;
    end
    used <= used + (RB + 1)'(ring_we) - (release_head ? d_beats[d_head[DB-1:0]] : '0);
    if (rst) begin
      wptr <= '0;
      rptr <= '0;
      used <= '0;
      in_frame <= 1'b0;
      cur_oversize <= 1'b0;
      d_head <= '0;
      d_judge <= '0;
      d_tail <= '0;
      rx_drops <= '0;
    end
  end

  // ring RAM: 64-bit write from the wire, 64-bit read for the firmware
  logic [63:0] ring [RING_BEATS];
  logic [63:0] ring_rdata;
  logic [RB-1:0] ring_raddr;
  assign ring_raddr = rptr + RB'(addr[12:3]);
  always_ff @(posedge clk) begin
    if (ring_we) ring[ring_waddr] <= ring_wdata;
    ring_rdata <= ring[ring_raddr];
  end

  // ------------------------------------------------------------------ TX
  logic [63:0] txbuf [TX_BEATS];
  logic        tx_busy;
  logic [TB:0] tx_beat;        // next beat to read
  logic [TB:0] tx_beats;       // beats to send
  logic [2:0]  tx_last_bytes;  // bytes in the last beat, minus one
  logic [63:0] tx_rdata;
  logic        tx_rd_pending;  // the RAM output holds beat tx_beat - 1

  logic tx_buf_we;
  logic [7:0] tx_buf_be;
  assign tx_buf_we = req && we && addr[14:13] == 2'b10;
  assign tx_buf_be = addr[2] ? {sel, 4'b0000} : {4'b0000, sel};
  logic [63:0] tx_wdata64;
  assign tx_wdata64 = {wdata, wdata};

  always_ff @(posedge clk) begin
    if (tx_buf_we) begin
      for (int i = 0; i < 8; i++) begin
        if (tx_buf_be[i]) txbuf[addr[TB+2:3]][8*i +: 8] <= tx_wdata64[8*i +: 8];
      end
    end
  end

  // the frame without its ICRC: length - 4 bytes
  logic [15:0] send_len;
  assign send_len = wdata[15:0] - 16'd4;

  logic tx_take;   // the output register is free or moves on now
  assign tx_take = !tx_s_valid || tx_s_ready;

  always_ff @(posedge clk) begin
    if (!tx_busy && req && we && addr == 15'h000C && wdata[15:0] > 16'd4 &&
        wdata[15:0] <= 16'(TX_BEATS * 8)) begin
      tx_busy <= 1'b1;
      tx_beat <= '0;
      tx_beats <= (TB + 1)'((send_len + 16'd7) >> 3);
      tx_last_bytes <= 3'(send_len - 16'd1);
      tx_rd_pending <= 1'b0;
    end
    if (tx_s_valid && tx_s_ready) tx_s_valid <= 1'b0;
    if (tx_busy) begin
      if (tx_rd_pending && tx_take) begin
        // the RAM output has the next beat: present it
        tx_s_valid <= 1'b1;
        tx_s_data <= tx_rdata;
        tx_s_last <= tx_beat == tx_beats;
        tx_s_keep <= (tx_beat == tx_beats) ? 8'((9'h2 << tx_last_bytes) - 1'b1) : 8'hFF;
        tx_rd_pending <= 1'b0;
        if (tx_beat == tx_beats) tx_busy <= 1'b0;
      end else if (!tx_rd_pending && tx_beat != tx_beats) begin
        tx_rdata <= txbuf[tx_beat[TB-1:0]];
        tx_beat <= tx_beat + 1'b1;
        tx_rd_pending <= 1'b1;
      end
    end
    if (rst) begin
      tx_busy <= 1'b0;
      tx_s_valid <= 1'b0;
      tx_rd_pending <= 1'b0;
    end
  end

  // ------------------------------------------------------------------ registers
  logic        use_ring;
  logic        rd_ring_hi;
  logic [31:0] reg_rdata;
  // The DOORBELL read clears the pending bit at the edge that samples it: cleared a
  // cycle later, the clear would take a doorbell the host wrote at that edge, unread,
  // and the firmware would not fetch its WQEs until another doorbell rang.
  assign db_clear = req && !we && addr == 15'h0018;
  always_ff @(posedge clk) begin
    ack <= req;
    use_ring <= req && !we && addr[14:13] == 2'b01;
    rd_ring_hi <= addr[2];
    reg_rdata <= '0;
    if (req && !we) begin
      case (addr)
        15'h0000: reg_rdata <= {head_ok, 15'd0, head_ok ? d_len[d_head[DB-1:0]] : 16'd0};
        15'h0008: reg_rdata <= {31'd0, !tx_busy};
        15'h0010: reg_rdata <= {port_mac[23:16], port_mac[31:24], port_mac[39:32], port_mac[47:40]};
        15'h0014: reg_rdata <= {16'd0, port_mac[7:0], port_mac[15:8]};
        15'h0018: reg_rdata <= {31'd0, db_pending};
        15'h001C: reg_rdata <= rx_drops;
        15'h0020: reg_rdata <= {port_gid[103:96], port_gid[111:104], port_gid[119:112], port_gid[127:120]};
        15'h0024: reg_rdata <= {port_gid[71:64], port_gid[79:72], port_gid[87:80], port_gid[95:88]};
        15'h0028: reg_rdata <= {port_gid[39:32], port_gid[47:40], port_gid[55:48], port_gid[63:56]};
        15'h002C: reg_rdata <= {port_gid[7:0], port_gid[15:8], port_gid[23:16], port_gid[31:24]};
        default: reg_rdata <= '0;
      endcase
    end
    if (rst) ack <= 1'b0;
  end
  assign rdata = !ack ? 32'h0 : use_ring ? (rd_ring_hi ? ring_rdata[63:32] : ring_rdata[31:0]) : reg_rdata;

endmodule

`resetall
