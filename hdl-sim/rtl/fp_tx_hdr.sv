// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_tx_hdr: the fast path's TX header builder. One job per cycle in (a
// packet the planner decided), one frame record out FP_TX_HDR_LATENCY cycles
// later: the frame's header bytes (the QP's template with IP total/payload
// length, IPv4 checksum and UDP length patched, then BTH and the extended
// headers), the header length and the frame length without the ICRC.
//
// The lengths and the checksum are split over stages (issue 19: no long
// adder chains in one cycle), and so is the placement of the transport
// headers behind the template (a shift by hdr_len bytes, in two steps of
// at most 8 byte positions each, in stages 4 and 5, so that the 128-byte
// header vector is carried by few registers). The pipeline never stalls: the consumer
// (a FIFO) tells the planner when there is room for the jobs in flight.
//
// Arithmetic as roce_core's HeaderTemplate::emit_with: IPv4 total length =
// frame length - l3_off, IPv6 payload length = that - 40, UDP length = frame
// length - UDP offset, IPv4 checksum = !fold(ip_sum + total length) with a
// single fold (ip_sum and the length are both 16 bits). The frame length
// counts the 4 ICRC bytes that tx_icrc_insert appends.

`resetall
`default_nettype none

module fp_tx_hdr
  import fp_pkg::*;
(
    input  wire logic  clk,
    input  wire logic  rst,

    input  fp_tx_job_t s_job,
    input  wire logic  s_valid,

    output fp_tx_frame_t m_frame,
    output logic       m_valid
);

  localparam int HV_W = HV_BYTES * 8;

  // ------------------------------------------------------------ stage 1
  // transport headers (BTH + extensions) as bytes, header and body lengths
  logic              v1;
  fp_tx_job_t        j1;
  logic [TH_BYTES*8-1:0] th1;
  logic [7:0]        hl1;     // all header bytes: template + BTH + extensions
  logic [15:0]       body1;   // payload + pad

  function automatic logic [7:0] b8(input logic [63:0] v, input int i, input int n);
    // byte i (0 = most significant) of the n-byte big-endian number v
    return v[8*(n-1-i) +: 8];
  endfunction

  always_ff @(posedge clk) begin
    logic [TH_BYTES*8-1:0] th;
    int at;
    v1 <= s_valid;
    if (s_valid) begin
      th = '0;
      th[0 +: 8] = s_job.opcode;
      th[8 +: 8] = {s_job.se, 1'b0, s_job.pad, 4'd0};
      th[16 +: 8] = s_job.pkey[15:8];
      th[24 +: 8] = s_job.pkey[7:0];
      // byte 4: FECN, BECN, resv6 all zero
      for (int i = 0; i < 3; i++) th[8*(5+i) +: 8] = b8({40'd0, s_job.dest_qpn}, i, 3);
      th[64 +: 8] = {s_job.ackreq, s_job.resv7};
      for (int i = 0; i < 3; i++) th[8*(9+i) +: 8] = b8({40'd0, s_job.psn}, i, 3);
      if (s_job.has_reth) begin
        for (int i = 0; i < 8; i++) th[8*(12+i) +: 8] = b8(s_job.reth_va, i, 8);
        for (int i = 0; i < 4; i++) th[8*(20+i) +: 8] = b8({32'd0, s_job.reth_rkey}, i, 4);
        for (int i = 0; i < 4; i++) th[8*(24+i) +: 8] = b8({32'd0, s_job.reth_len}, i, 4);
      end
      if (s_job.has_imm) begin
        at = s_job.has_reth ? 28 : 12;
        for (int i = 0; i < 4; i++) th[8*(at+i) +: 8] = b8({32'd0, s_job.imm}, i, 4);
      end
      if (s_job.has_atomic) begin
        for (int i = 0; i < 8; i++) th[8*(12+i) +: 8] = b8(s_job.reth_va, i, 8);
        for (int i = 0; i < 4; i++) th[8*(20+i) +: 8] = b8({32'd0, s_job.reth_rkey}, i, 4);
        for (int i = 0; i < 8; i++) th[8*(24+i) +: 8] = b8(s_job.swap_add, i, 8);
        for (int i = 0; i < 8; i++) th[8*(32+i) +: 8] = b8(s_job.compare, i, 8);
      end
      if (s_job.has_aeth) begin
        for (int i = 0; i < 4; i++) th[8*(12+i) +: 8] = b8({32'd0, s_job.aeth}, i, 4);
      end
      // an ATOMIC ACKNOWLEDGE: the AtomicAckETH (the original value) after the AETH
      if (s_job.has_atack) begin
        for (int i = 0; i < 8; i++) th[8*(16+i) +: 8] = b8(s_job.swap_add, i, 8);
      end
      th1 <= th;
      j1 <= s_job;
      hl1 <= s_job.hdr_len + 8'd12 + (s_job.has_reth ? 8'd16 : 8'd0)
          + (s_job.has_atomic ? 8'd28 : 8'd0) + ((s_job.has_imm || s_job.has_aeth) ? 8'd4 : 8'd0)
          + (s_job.has_atack ? 8'd8 : 8'd0);
      body1 <= s_job.plen + {14'd0, s_job.pad};
    end
    if (rst) v1 <= 1'b0;
  end

  // ------------------------------------------------------------ stage 2
  // frame length
  logic              v2;
  fp_tx_job_t        j2;
  logic [TH_BYTES*8-1:0] th2;
  logic [7:0]        hl2;
  logic [15:0]       flen2;   // without ICRC
  logic [15:0]       total2;  // with ICRC

  always_ff @(posedge clk) begin
    v2 <= v1;
    if (v1) begin
      j2 <= j1;
      hl2 <= hl1;
      flen2 <= {8'd0, hl1} + body1;
      total2 <= {8'd0, hl1} + body1 + 16'd4;
      th2 <= th1;
    end
    if (rst) v2 <= 1'b0;
  end

  // ------------------------------------------------------------ stage 3
  // IP and UDP lengths
  logic              v3;
  fp_tx_job_t        j3;
  logic [TH_BYTES*8-1:0] th3;
  logic [7:0]        hl3;
  logic [15:0]       flen3, ip_len3, udp_len3;

  always_ff @(posedge clk) begin
    v3 <= v2;
    if (v2) begin
      j3 <= j2;
      hl3 <= hl2;
      flen3 <= flen2;
      ip_len3 <= total2 - {8'd0, j2.l3_off} - (j2.ipv6 ? 16'd40 : 16'd0);
      udp_len3 <= total2 - {8'd0, j2.l3_off} - (j2.ipv6 ? 16'd40 : 16'd20);
      th3 <= th2;
    end
    if (rst) v3 <= 1'b0;
  end

  // ------------------------------------------------------------ stage 4
  // IPv4 checksum: template sum + total length (17 bits); the transport
  // headers shifted behind the template by hdr_len[6:3] * 8 bytes (the wide
  // vector exists from here on only)
  logic              v4;
  /* verilator lint_off UNUSEDSIGNAL */
  fp_tx_job_t        j4;      // the fields later stages need are taken out of it
  /* verilator lint_on UNUSEDSIGNAL */
  logic [HV_W-1:0]   th4;
  logic [7:0]        hl4;
  logic [15:0]       flen4, ip_len4, udp_len4;
  logic [16:0]       sum4;

  always_ff @(posedge clk) begin
    v4 <= v3;
    if (v3) begin
      j4 <= j3;
      th4 <= HV_W'(th3) << (32'(j3.hdr_len[6:3]) * 64);
      hl4 <= hl3;
      flen4 <= flen3;
      ip_len4 <= ip_len3;
      udp_len4 <= udp_len3;
      sum4 <= {1'b0, j3.ip_sum} + {1'b0, ip_len3};
    end
    if (rst) v4 <= 1'b0;
  end

  // ------------------------------------------------------------ stage 5
  // fold and complement; positions of the patched fields; the fine shift
  logic              v5;
  logic [TMPL_BYTES*8-1:0] tmpl5;
  logic [7:0]        hdr_len5;
  logic [15:0]       plen5;
  logic [HV_W-1:0]   th5;
  logic [7:0]        hl5;
  logic [15:0]       flen5, ip_len5, udp_len5, csum5;
  logic [7:0]        at_iplen5, at_csum5, at_udplen5;
  logic              v4csum5;   // IPv4: patch the header checksum

  always_ff @(posedge clk) begin
    v5 <= v4;
    if (v4) begin
      tmpl5 <= j4.tmpl;
      hdr_len5 <= j4.hdr_len;
      plen5 <= j4.plen;
      th5 <= th4 << (32'(j4.hdr_len[2:0]) * 8);
      hl5 <= hl4;
      flen5 <= flen4;
      ip_len5 <= ip_len4;
      udp_len5 <= udp_len4;
      csum5 <= ~(sum4[15:0] + {15'd0, sum4[16]});
      at_iplen5 <= j4.l3_off + (j4.ipv6 ? 8'd4 : 8'd2);
      at_csum5 <= j4.l3_off + 8'd10;
      v4csum5 <= !j4.ipv6;
      at_udplen5 <= j4.l3_off + (j4.ipv6 ? 8'd44 : 8'd24);
    end
    if (rst) v5 <= 1'b0;
  end

  // ------------------------------------------------------------ stage 6
  // the template cut at hdr_len and patched, with the transport headers behind it
  always_ff @(posedge clk) begin
    logic [HV_W-1:0] hv;
    m_valid <= v5;
    if (v5) begin
      hv = th5;
      for (int i = 0; i < TMPL_BYTES; i++) begin
        logic [7:0] b;
        b = tmpl5[8*i +: 8];
        if (8'(i) == at_iplen5) b = ip_len5[15:8];
        if (8'(i) == at_iplen5 + 8'd1) b = ip_len5[7:0];
        if (v4csum5 && 8'(i) == at_csum5) b = csum5[15:8];
        if (v4csum5 && 8'(i) == at_csum5 + 8'd1) b = csum5[7:0];
        if (8'(i) == at_udplen5) b = udp_len5[15:8];
        if (8'(i) == at_udplen5 + 8'd1) b = udp_len5[7:0];
        if (8'(i) < hdr_len5) hv[8*i +: 8] = b;
      end
      m_frame.hv <= hv;
      m_frame.hlen <= hl5;
      m_frame.flen <= flen5;
      m_frame.plen <= plen5;
    end
    if (rst) m_valid <= 1'b0;
  end

endmodule

`resetall
