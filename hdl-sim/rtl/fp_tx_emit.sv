// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_tx_emit: the fast path's TX frame emitter. Joins each frame's header
// bytes (from fp_tx_hdr, through a FIFO) with its payload (from the DMA,
// packed from byte 0, full beats except the packet's last) into one
// AXI-stream frame without ICRC: header beats first, then beats that carry
// the header's tail and the payload shifted by hlen mod KEEP_WIDTH bytes,
// then the pad (zero bytes: the payload is masked by its tkeep).
//
// One beat per cycle while the DMA keeps up, and the next frame's first beat
// right after the last one (a frame record is loaded in the cycle its
// predecessor's last beat goes). The shift is a funnel shift of {payload,
// previous payload beat} split into two registered steps (coarse by 8-byte
// groups, then fine), so no stage has a KEEP_WIDTH-way byte mux.
//
// Latency: a beat leaves 3 cycles after its payload beat was taken (control,
// coarse shift, fine shift + output register). `en` (the consumer's
// registered tready) freezes the whole pipeline.

`resetall
`default_nettype none

module fp_tx_emit
  import fp_pkg::*;
#(
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8
) (
    input  wire logic                  clk,
    input  wire logic                  rst,

    // frame records (first-word-fall-through FIFO head)
    input  fp_tx_frame_t               s_frame,
    input  wire logic                  s_frame_valid,
    output logic                       s_frame_pop,

    // payload from the DMA
    input  wire logic [DATA_WIDTH-1:0] s_pay_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_pay_tkeep,
    input  wire logic                  s_pay_tvalid,
    output logic                       s_pay_tready,

    // frames without ICRC
    output logic [DATA_WIDTH-1:0]      m_axis_tdata,
    output logic [KEEP_WIDTH-1:0]      m_axis_tkeep,
    output logic                       m_axis_tvalid,
    input  wire logic                  m_axis_tready,
    output logic                       m_axis_tlast
);

  localparam int K = KEEP_WIDTH;
  localparam int KW = $clog2(K);
  localparam int HV_W = HV_BYTES * 8;

  initial begin
    if (DATA_WIDTH != 64 && DATA_WIDTH != 128 && DATA_WIDTH != 256 && DATA_WIDTH != 512) begin
      $error("fp_tx_emit: DATA_WIDTH must be 64, 128, 256 or 512 (got %0d)", DATA_WIDTH);
      $finish;
    end
    if (KEEP_WIDTH * 8 != DATA_WIDTH) begin
      $error("fp_tx_emit: KEEP_WIDTH must be DATA_WIDTH/8");
      $finish;
    end
  end

  logic en;
  assign en = m_axis_tready;

  // ------------------------------------------------------- frame control
  logic              active;
  logic [HV_W-1:0]   hsh;       // header bytes not yet sent, from byte 0
  logic [7:0]        a_left;    // beats of header only still to send
  logic [KW-1:0]     h;         // header bytes in the first mixed beat
  logic [15:0]       rb;        // frame bytes not yet sent
  logic [15:0]       prb;       // payload bytes not yet taken from the DMA
  logic [DATA_WIDTH-1:0] carry; // the previous payload beat (masked)

  logic need_pay, last, go;
  assign need_pay = a_left == 0 && prb != 0;
  assign last = rb <= 16'(K);
  assign go = en && active && (!need_pay || s_pay_tvalid);
  assign s_pay_tready = en && active && need_pay;
  assign s_frame_pop = s_frame_valid && en && (!active || (go && last));

  function automatic logic [K-1:0] keep_of(input logic [15:0] n);
    return (n >= 16'(K)) ? '1 : ~({K{1'b1}} << n[KW:0]);
  endfunction

  // stage X: one beat's parts
  logic                  x_valid, x_last;
  logic [DATA_WIDTH-1:0] x_hdr, x_pay, x_carry;
  logic [K-1:0]          x_keep;
  logic [KW:0]           x_s;       // funnel shift in bytes: K - h (1..K)

  always_ff @(posedge clk) begin
    logic [DATA_WIDTH-1:0] pay;
    if (en) begin
      x_valid <= go;
      if (go) begin
        for (int i = 0; i < K; i++) pay[8*i +: 8] = s_pay_tkeep[i] ? s_pay_tdata[8*i +: 8] : 8'd0;
        if (!need_pay) pay = '0;
        x_hdr <= hsh[DATA_WIDTH-1:0];
        x_pay <= pay;
        x_carry <= carry;
        x_s <= (KW+1)'(K) - {1'b0, h};
        x_last <= last;
        x_keep <= keep_of(rb);
        carry <= pay;
        hsh <= hsh >> DATA_WIDTH;
        if (a_left != 0) a_left <= a_left - 8'd1;
        if (need_pay) prb <= (prb > 16'(K)) ? prb - 16'(K) : 16'd0;
        rb <= rb - 16'(K);
        if (last) active <= 1'b0;
      end
      if (s_frame_pop) begin
        active <= 1'b1;
        hsh <= s_frame.hv;
        a_left <= s_frame.hlen >> KW;
        h <= s_frame.hlen[KW-1:0];
        rb <= s_frame.flen;
        prb <= s_frame.plen;
        carry <= '0;
      end
    end
    if (rst) begin
      active <= 1'b0;
      x_valid <= 1'b0;
    end
  end

  // stage Y: coarse shift of {pay, carry} by whole 8-byte groups
  logic                    y_valid, y_last;
  logic [DATA_WIDTH-1:0]   y_hdr;
  logic [DATA_WIDTH+63:0]  y_f;     // K + 8 bytes: enough for the fine step
  logic [K-1:0]            y_keep;
  logic [2:0]              y_fine;

  always_ff @(posedge clk) begin
    /* verilator lint_off UNUSEDSIGNAL */
    logic [2*DATA_WIDTH-1:0] f;    // the top bytes shift out
    /* verilator lint_on UNUSEDSIGNAL */
    if (en) begin
      y_valid <= x_valid;
      if (x_valid) begin
        f = {x_pay, x_carry} >> (32'(x_s[KW:3]) * 64);
        y_f <= f[DATA_WIDTH+63:0];
        y_fine <= x_s[2:0];
        y_hdr <= x_hdr;
        y_keep <= x_keep;
        y_last <= x_last;
      end
    end
    if (rst) y_valid <= 1'b0;
  end

  // stage Z: fine shift (0..7 bytes), merge with the header bytes, output
  always_ff @(posedge clk) begin
    /* verilator lint_off UNUSEDSIGNAL */
    logic [DATA_WIDTH+63:0] f;     // the top bytes shift out
    /* verilator lint_on UNUSEDSIGNAL */
    if (en) begin
      m_axis_tvalid <= y_valid;
      if (y_valid) begin
        f = y_f >> (32'(y_fine) * 8);
        m_axis_tdata <= y_hdr | f[DATA_WIDTH-1:0];
        m_axis_tkeep <= y_keep;
        m_axis_tlast <= y_last;
      end
    end
    if (rst) m_axis_tvalid <= 1'b0;
  end

endmodule

`resetall
