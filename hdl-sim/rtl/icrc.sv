// SPDX-License-Identifier: MIT OR Apache-2.0
//
// icrc: streaming RoCE Invariant CRC (roce-facts.md section 5), DATA_WIDTH bits
// per clock.
//
// The input is the frame from its first byte (Ethernet destination MAC), one
// beat per cycle while `en` is high, byte 0 in tdata[7:0]. s_keep selects the
// bytes that belong to the ICRC region end: every beat but the last must be
// full, the last one (s_last) may be partial (contiguous low bytes). The
// region starts at the IP header: bytes before it are ignored, the 8-byte 0xFF
// prefix and the invariant-field masks are applied here from s_vlan/s_kind.
//
// Arithmetic (all linear over GF(2), so it maps to XOR trees):
// * CRC-32 with init 0xFFFFFFFF over M equals CRC with init 0 over M with its
//   first 4 bytes inverted, and leading zero bytes do not move a zero
//   register. The 8 prefix bytes (0xFF) sit at frame offsets l3-8..l3-1, so
//   the raw register starts at 0 and sees zeros at offsets 0..l3-5, then
//   0xFF at l3-4..l3-1 (the first four prefix bytes cancel against the init).
// * A partial last beat is processed as a full beat with the missing bytes
//   zero, and the m appended zero bytes are then removed by multiplying the
//   register by x^(-8m) mod P: log2(KEEP_WIDTH) fixed 32x32 matrices, each
//   applied or bypassed by one bit of m. No per-byte-count CRC matrices.
//
// Pipeline (every stage advances with `en`; icrc_latency() in roce_rx_pkg
// gives the total, 6 cycles at 64 bits, 9 at 512):
//   X  the masks looked up (by layout and beat index), registered with the beat;
//   D1 the masks applied and the data's share of the CRC step XOR-folded per
//      64-bit chunk;
//   D2 the CRC register: its own 32 bits through the step matrix, XORed with
//      the chunk results (the only loop, at most 32 + DATA_WIDTH/64 inputs
//      per bit);
//   U  one stage per bit of the appended-zero count, the last one inverting:
//      m_crc/m_valid (the final ICRC value, as a number; it goes on the wire
//      least significant byte first).
//
// s_vlan / s_kind / s_ihl are sampled on every beat: they must be right for
// every byte at or after the one they are read from (0x8100 at 12..13, inner
// EtherType at 16..17, IHL in the first IP byte), which is all the masks
// depend on. The TX path derives them on the fly, beat by beat. IPv4 options
// (IHL 6..15) are covered unmasked; the UDP checksum and BTH byte 4 move with
// IHL (as roce-core's wire::icrc does).

`resetall
`default_nettype none

module icrc
  import roce_rx_pkg::*;
#(
    // bus width, bits; a power of two, at least 64
    parameter int DATA_WIDTH = 64,
    // bytes per beat (derived)
    parameter int KEEP_WIDTH = DATA_WIDTH / 8
) (
    input  wire logic                  clk,
    input  wire logic                  rst,
    // pipeline enable: all state advances only when en is high
    input  wire logic                  en,

    input  wire logic [DATA_WIDTH-1:0] s_data,
    input  wire logic [KEEP_WIDTH-1:0] s_keep,
    input  wire logic                  s_valid,
    input  wire logic                  s_first,   // first beat of a frame: restart
    input  wire logic                  s_last,    // last beat of the ICRC region
    input  wire logic                  s_vlan,    // one 802.1Q tag present
    input  wire logic [1:0]            s_kind,    // roce_rx_pkg::L3_*
    input  wire logic [3:0]            s_ihl,     // IPv4 header length, 32-bit words

    output logic [31:0]                m_crc,
    output logic                       m_valid
);

  localparam int MASK_BYTES = 128;  // masks are all within the first 128 bytes
  localparam int MASK_BEATS = (MASK_BYTES + KEEP_WIDTH - 1) / KEEP_WIDTH;
  localparam int MASK_BITS = MASK_BEATS * DATA_WIDTH;
  localparam int SHIFT_BITS = $clog2(KEEP_WIDTH);
  localparam int BEAT_CNT_W = $clog2(MASK_BEATS + 1);
  localparam int BEAT_IDX_W = $clog2(MASK_BEATS);  // MASK_BEATS is a power of two
  localparam int DW_LOG = $clog2(DATA_WIDTH);
  localparam int IW = 32 + DATA_WIDTH;
  localparam logic [31:0] POLY = 32'hEDB88320;  // reflected 0x04C11DB7

  // parameter checks
  initial begin
    if (DATA_WIDTH < 64 || (DATA_WIDTH & (DATA_WIDTH - 1)) != 0) begin
      $error("icrc: DATA_WIDTH must be a power of two >= 64 (got %0d)", DATA_WIDTH);
      $finish;
    end
    if (KEEP_WIDTH * 8 != DATA_WIDTH) begin
      $error("icrc: KEEP_WIDTH must be DATA_WIDTH/8");
      $finish;
    end
  end

  // ---------------------------------------------------------------- masks
  // One pattern per layout: sel = {vlan, idx}, idx 0..10 = IPv4 with IHL 5..15,
  // 11 = IPv6, 12 = RoCEv1 GRH, 13..15 unused (IPv4 IHL 5; the result is unused).
  localparam int NPAT = 32;

  function automatic logic [MASK_BITS-1:0] or_pattern(input int sel);
    logic [MASK_BITS-1:0] m;
    int l3;
    int idx;
    int udp;
    m = '0;
    l3 = (sel >= 16) ? 18 : 14;
    idx = sel % 16;
    for (int i = l3 - 4; i < l3; i++) m[i*8 +: 8] = 8'hFF;
    if (idx == 11 || idx == 12) begin
      // IPv6 / GRH: traffic class + flow label, hop limit
      m[l3*8 +: 4] = 4'hF;
      for (int i = 1; i < 4; i++) m[(l3+i)*8 +: 8] = 8'hFF;
      m[(l3+7)*8 +: 8] = 8'hFF;
      if (idx == 11) begin
        m[(l3+46)*8 +: 16] = 16'hFFFF;  // UDP checksum
        m[(l3+52)*8 +: 8] = 8'hFF;      // BTH byte 4
      end else begin
        m[(l3+44)*8 +: 8] = 8'hFF;      // BTH byte 4 (no UDP)
      end
    end else begin
      // IPv4: TOS, TTL, header checksum; options unmasked
      udp = l3 + 4 * ((idx <= 10) ? idx + 5 : 5);
      m[(l3+1)*8 +: 8] = 8'hFF;
      m[(l3+8)*8 +: 8] = 8'hFF;
      m[(l3+10)*8 +: 16] = 16'hFFFF;
      m[(udp+6)*8 +: 16] = 16'hFFFF;    // UDP checksum
      m[(udp+12)*8 +: 8] = 8'hFF;       // BTH byte 4
    end
    return m;
  endfunction

  // bytes before the (first four bytes of the) prefix: forced to zero (bit mask)
  function automatic logic [MASK_BITS-1:0] zero_pattern(input int sel);
    logic [MASK_BITS-1:0] z;
    int l3;
    z = '0;
    l3 = (sel >= 16) ? 18 : 14;
    for (int i = 0; i < l3 - 4; i++) z[i*8 +: 8] = 8'hFF;
    return z;
  endfunction

  // ------------------------------------------------------- CRC matrices
  // Row o of the beat update: out[o] = ^({data, state} & FWD[o]).
  // Data bit n is processed n-th (byte 0 LSB first, as the reflected CRC does).
  function automatic logic [32*IW-1:0] fwd_matrix();
    logic [32*IW-1:0] m;
    logic [31:0] e;
    logic [31:0] v;
    /* verilator lint_off WIDTHCONCAT */
    m = '0;  // wider than 8k bits at DATA_WIDTH 512: intended
    /* verilator lint_on WIDTHCONCAT */
    // a data bit at serial position n injects POLY, then DATA_WIDTH-1-n zero steps
    e = POLY;
    for (int n = DATA_WIDTH - 1; n >= 0; n--) begin
      for (int o = 0; o < 32; o++) m[o*IW + 32 + n] = e[o];
      e = (e >> 1) ^ (e[0] ? POLY : 32'h0);
    end
    // a state bit goes through DATA_WIDTH zero steps
    for (int i = 0; i < 32; i++) begin
      v = 32'h1 << i;
      for (int n = 0; n < DATA_WIDTH; n++) v = (v >> 1) ^ (v[0] ? POLY : 32'h0);
      for (int o = 0; o < 32; o++) m[o*IW + i] = v[o];
    end
    return m;
  endfunction

  // Removing 2^k trailing zero bytes: the inverse of the zero-bit step is
  // t -> t[31] ? ((t ^ POLY) << 1) | 1 : t << 1 (POLY has bit 31 set).
  function automatic logic [32*32-1:0] unshift_matrix(input int bytes);
    logic [32*32-1:0] m;
    logic [31:0] v;
    for (int i = 0; i < 32; i++) begin
      v = 32'h1 << i;
      for (int n = 0; n < 8 * bytes; n++) v = v[31] ? (((v ^ POLY) << 1) | 32'h1) : (v << 1);
      for (int o = 0; o < 32; o++) m[o*32 + i] = v[o];
    end
    return m;
  endfunction

  localparam logic [32*IW-1:0] FWD = fwd_matrix();

  // all stages in one constant: stage k removes 2^k bytes
  function automatic logic [SHIFT_BITS*1024-1:0] unshift_all();
    logic [SHIFT_BITS*1024-1:0] m;
    for (int k = 0; k < SHIFT_BITS; k++) m[k*1024 +: 1024] = unshift_matrix(1 << k);
    return m;
  endfunction

  localparam logic [SHIFT_BITS*1024-1:0] UNS = unshift_all();

  // all patterns in one constant each, pattern g at [g*MASK_BITS +: MASK_BITS]
  function automatic logic [NPAT*MASK_BITS-1:0] or_all();
    logic [NPAT*MASK_BITS-1:0] m;
    /* verilator lint_off WIDTHCONCAT */
    m = '0;  // wider than 8k bits: intended
    /* verilator lint_on WIDTHCONCAT */
    for (int g = 0; g < NPAT; g++) m[g*MASK_BITS +: MASK_BITS] = or_pattern(g);
    return m;
  endfunction

  function automatic logic [NPAT*MASK_BITS-1:0] zero_all();
    logic [NPAT*MASK_BITS-1:0] m;
    /* verilator lint_off WIDTHCONCAT */
    m = '0;  // wider than 8k bits: intended
    /* verilator lint_on WIDTHCONCAT */
    for (int g = 0; g < NPAT; g++) m[g*MASK_BITS +: MASK_BITS] = zero_pattern(g);
    return m;
  endfunction

  localparam logic [NPAT*MASK_BITS-1:0] OR_ALL = or_all();
  localparam logic [NPAT*MASK_BITS-1:0] ZERO_ALL = zero_all();

  // ------------------------------------------------------- X: masks
  logic [BEAT_CNT_W-1:0] beat_reg;    // beat index within the frame, saturating
  logic [BEAT_CNT_W-1:0] beat;
  logic [DATA_WIDTH-1:0] or_mask;
  logic [DATA_WIDTH-1:0] zero_mask;   // bit mask: 1 = force to zero
  logic [DATA_WIDTH-1:0] keep_mask;

  assign beat = s_first ? '0 : beat_reg;

  always_comb begin
    logic [4:0] sel;
    logic [3:0] idx;
    case (s_kind)
      L3_IPV6: idx = 4'd11;
      L3_GRH:  idx = 4'd12;
      default: idx = (s_ihl >= 4'd5) ? s_ihl - 4'd5 : 4'd0;
    endcase
    sel = {s_vlan, idx};
    // The pattern's bit offset sel * MASK_BITS + beat * DATA_WIDTH written as a
    // concatenation (both factors are powers of two and beat < MASK_BEATS):
    // a plain select of constants by 5 + log2(MASK_BEATS) register bits, with
    // no adder in front of it.
    if (beat < BEAT_CNT_W'(MASK_BEATS)) begin
      or_mask = OR_ALL[{sel, beat[BEAT_IDX_W-1:0], DW_LOG'(0)} +: DATA_WIDTH];
      zero_mask = ZERO_ALL[{sel, beat[BEAT_IDX_W-1:0], DW_LOG'(0)} +: DATA_WIDTH];
    end else begin
      or_mask = '0;
      zero_mask = '0;
    end
    // tkeep is contiguous from bit 0: on the last beat, its bytes
    for (int i = 0; i < KEEP_WIDTH; i++) keep_mask[i*8 +: 8] = {8{s_keep[i] || !s_last}};
  end

  // the beat and its masks, registered: D1 applies them (one LUT level in
  // front of its XOR trees)
  logic                  x_valid, x_first, x_last;
  logic [DATA_WIDTH-1:0] x_data, x_or, x_zero, x_keep;
  logic [SHIFT_BITS-1:0] x_zeros;     // zero bytes the partial last beat appended

  always_ff @(posedge clk) begin
    if (en) begin
      x_valid <= s_valid;
      if (s_valid) begin
        x_data <= s_data;
        x_or <= or_mask;
        x_zero <= zero_mask;
        x_keep <= keep_mask;
        x_first <= s_first;
        x_last <= s_last;
        x_zeros <= SHIFT_BITS'(KEEP_WIDTH - int'(keep_count(64'(s_keep))));
        if (beat != {BEAT_CNT_W{1'b1}}) beat_reg <= beat + 1'b1;
        if (s_last) beat_reg <= '0;
      end
    end
    if (rst) begin
      x_valid <= 1'b0;
      beat_reg <= '0;
    end
  end

  // ------------------------------------------------------- D1: data fold
  // Row o of the step splits into its state part FWD[o*IW +: 32] and its data
  // part; the data part is linear, so it is folded per chunk here and the
  // chunk results are XORed into the state in D2.
  localparam int CHUNK = 64;
  localparam int NCHUNK = DATA_WIDTH / CHUNK;

  logic                          d1_valid, d1_first, d1_last;
  logic [NCHUNK-1:0][31:0]       d1_part;
  logic [SHIFT_BITS-1:0]         d1_zeros;

  always_ff @(posedge clk) begin
    logic [DATA_WIDTH-1:0] x;
    if (en) begin
      d1_valid <= x_valid;
      if (x_valid) begin
        x = ((x_data & ~x_zero) | x_or) & x_keep;
        for (int c = 0; c < NCHUNK; c++) begin
          for (int o = 0; o < 32; o++) begin
            d1_part[c][o] <= ^(x[c*CHUNK +: CHUNK] & FWD[o*IW + 32 + c*CHUNK +: CHUNK]);
          end
        end
        d1_first <= x_first;
        d1_last <= x_last;
        d1_zeros <= x_zeros;
      end
    end
    if (rst) d1_valid <= 1'b0;
  end

  // ------------------------------------------------------- D2: the register
  logic [31:0]           crc_reg;
  logic                  fin_reg;         // crc_reg holds a finished region
  logic [SHIFT_BITS-1:0] zeros_reg;

  always_ff @(posedge clk) begin
    logic [31:0] r;
    if (en) begin
      fin_reg <= d1_valid && d1_last;
      if (d1_valid) begin
        for (int o = 0; o < 32; o++) begin
          r[o] = d1_first ? 1'b0 : ^(crc_reg & FWD[o*IW +: 32]);
          for (int c = 0; c < NCHUNK; c++) r[o] = r[o] ^ d1_part[c][o];
        end
        crc_reg <= r;
        zeros_reg <= d1_zeros;
      end
    end
    if (rst) begin
      fin_reg <= 1'b0;
      crc_reg <= '0;
      zeros_reg <= '0;
    end
  end

  // ------------------------------------------------------- U: trailing zeros
  // Stage k multiplies by x^(-8 * 2^k) when bit k of the zero count is set;
  // the last stage also inverts (the CRC's final XOR).
  logic [SHIFT_BITS-1:0][31:0]           u_crc;
  logic [SHIFT_BITS-1:0]                 u_valid;
  logic [SHIFT_BITS-1:0][SHIFT_BITS-1:0] u_zeros;
  // stage k's inputs: the CRC register for stage 0, stage k-1 after it
  logic [SHIFT_BITS-1:0][31:0]           u_in_crc;
  logic [SHIFT_BITS-1:0]                 u_in_valid;
  logic [SHIFT_BITS-1:0][SHIFT_BITS-1:0] u_in_zeros;

  always_comb begin
    u_in_crc[0] = crc_reg;
    u_in_valid[0] = fin_reg;
    u_in_zeros[0] = zeros_reg;
    for (int k = 1; k < SHIFT_BITS; k++) begin
      u_in_crc[k] = u_crc[k-1];
      u_in_valid[k] = u_valid[k-1];
      u_in_zeros[k] = u_zeros[k-1];
    end
  end

  always_ff @(posedge clk) begin
    logic [31:0] v;
    logic [31:0] t;
    if (en) begin
      for (int k = 0; k < SHIFT_BITS; k++) begin
        u_valid[k] <= u_in_valid[k];
        if (u_in_valid[k]) begin
          v = u_in_crc[k];
          for (int o = 0; o < 32; o++) t[o] = ^(v & UNS[k*1024 + o*32 +: 32]);
          if (u_in_zeros[k][k]) v = t;
          u_crc[k] <= (k == SHIFT_BITS - 1) ? ~v : v;
          u_zeros[k] <= u_in_zeros[k];
        end
      end
    end
    if (rst) begin
      u_valid <= '0;
      u_crc <= '0;
    end
  end

  assign m_crc = u_crc[SHIFT_BITS-1];
  assign m_valid = u_valid[SHIFT_BITS-1];

endmodule

`resetall
