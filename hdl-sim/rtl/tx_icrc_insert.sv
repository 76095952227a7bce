// SPDX-License-Identifier: MIT OR Apache-2.0
//
// tx_icrc_insert: appends the RoCE ICRC to frames the firmware built.
//
// s_axis: a complete RoCE frame without its ICRC (Ethernet [802.1Q] IPv4 |
//   IPv6 UDP BTH ... payload pad, or RoCEv1 GRH BTH ...), lengths already
//   counting the 4 ICRC bytes; byte 0 in tdata[7:0], tkeep contiguous, full
//   except on tlast.
// m_axis: the same frame followed by the 4 ICRC bytes, least significant
//   byte first (roce-facts.md section 5.2). The ICRC covers everything from
//   the IP header on, so the EtherType must say IPv4, IPv6 or RoCEv1; other
//   frames get an ICRC computed with the IPv4 masks (meaningless, not
//   harmful). Non-RoCE traffic should bypass this module.
//
// The CRC streams with the frame (masks from the EtherType, decided beat by
// beat), so nothing is buffered: latency 3 + icrc_latency cycles (9 at 64
// bits, 12 at 512: input register, layout register, the ICRC pipeline with
// the data beside it, output slice). When the last input beat has fewer than
// 4 free bytes the frame grows by one beat and the input is held for one
// cycle (s_axis_tready low), so the output runs at one beat per cycle while
// the input loses one cycle on those frames only.

`resetall
`default_nettype none

module tx_icrc_insert
  import roce_rx_pkg::*;
#(
    // bus width, bits: 64, 128, 256 or 512
    parameter int DATA_WIDTH = 64,
    // bytes per beat (derived)
    parameter int KEEP_WIDTH = DATA_WIDTH / 8
) (
    input  wire logic                  clk,
    input  wire logic                  rst,

    input  wire logic [DATA_WIDTH-1:0] s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_tkeep,
    input  wire logic                  s_axis_tvalid,
    output logic                       s_axis_tready,
    input  wire logic                  s_axis_tlast,

    output logic [DATA_WIDTH-1:0]      m_axis_tdata,
    output logic [KEEP_WIDTH-1:0]      m_axis_tkeep,
    output logic                       m_axis_tvalid,
    input  wire logic                  m_axis_tready,
    output logic                       m_axis_tlast
);

  localparam int VIEW = 19;                       // bytes that decide the layout
  localparam int VIEW_BEATS = (VIEW + KEEP_WIDTH - 1) / KEEP_WIDTH;
  localparam int BEAT_W = $clog2(VIEW_BEATS + 1);

  initial begin
    if (DATA_WIDTH != 64 && DATA_WIDTH != 128 && DATA_WIDTH != 256 && DATA_WIDTH != 512) begin
      $error("tx_icrc_insert: DATA_WIDTH must be 64, 128, 256 or 512 (got %0d)", DATA_WIDTH);
      $finish;
    end
    if (KEEP_WIDTH * 8 != DATA_WIDTH) begin
      $error("tx_icrc_insert: KEEP_WIDTH must be DATA_WIDTH/8");
      $finish;
    end
  end

  logic en_up;          // input side and T1/T2 advance
  logic skid_ready;
  logic extra_pending;
  assign en_up = skid_ready && !extra_pending;
  assign s_axis_tready = en_up;

  logic s_accept;
  assign s_accept = s_axis_tvalid && en_up;

  // T0: input register (everything below hangs off registers)
  logic [DATA_WIDTH-1:0] t0_data;
  logic [KEEP_WIDTH-1:0] t0_keep;
  logic                  t0_valid, t0_last;

  always_ff @(posedge clk) begin
    if (en_up) begin
      t0_valid <= s_accept;
      t0_data <= s_axis_tdata;
      t0_keep <= s_axis_tkeep;
      t0_last <= s_axis_tlast;
    end
    if (rst) t0_valid <= 1'b0;
  end

  // ------------------------------------------------- layout, beat by beat
  // decided from the bytes seen so far, then registered with the beat (L)
  logic [BEAT_W-1:0] beat;          // beat index, saturating at VIEW_BEATS
  logic [VIEW*8-1:0] view_reg;      // bytes 0..18 from earlier beats
  logic [VIEW*8-1:0] view;
  logic              vlan;
  logic [1:0]        kind;
  logic [3:0]        ihl;

  function automatic logic [1:0] l3_of(input logic [15:0] ethertype);
    case (ethertype)
      16'h86DD: return L3_IPV6;
      16'h8915: return L3_GRH;
      default:  return L3_IPV4;
    endcase
  endfunction

  always_comb begin
    logic [15:0] tpid;
    logic [15:0] et;
    for (int i = 0; i < VIEW; i++) begin
      if (beat == BEAT_W'(i / KEEP_WIDTH)) view[i*8 +: 8] = t0_data[(i % KEEP_WIDTH)*8 +: 8];
      else view[i*8 +: 8] = view_reg[i*8 +: 8];
    end
    // both EtherType positions classified at once, then the tag picks one
    tpid = {view[12*8 +: 8], view[13*8 +: 8]};
    et = {view[16*8 +: 8], view[17*8 +: 8]};
    vlan = tpid == 16'h8100;
    kind = vlan ? l3_of(et) : l3_of(tpid);
    ihl = vlan ? view[18*8 +: 4] : view[14*8 +: 4];
  end

  always_ff @(posedge clk) begin
    if (en_up && t0_valid) begin
      view_reg <= view;
      if (t0_last) beat <= '0;
      else if (beat != BEAT_W'(VIEW_BEATS)) beat <= beat + 1'b1;
    end
    if (rst) beat <= '0;
  end

  logic [DATA_WIDTH-1:0] l_data;
  logic [KEEP_WIDTH-1:0] l_keep;
  logic                  l_valid, l_first, l_last, l_vlan;
  logic [1:0]            l_kind;
  logic [3:0]            l_ihl;

  always_ff @(posedge clk) begin
    if (en_up) begin
      l_valid <= t0_valid;
      l_data <= t0_data;
      l_keep <= t0_keep;
      l_last <= t0_last;
      l_first <= beat == '0;
      l_vlan <= vlan;
      l_kind <= kind;
      l_ihl <= ihl;
    end
    if (rst) l_valid <= 1'b0;
  end

  logic [31:0] crc;
  logic        crc_valid;

  icrc #(
    .DATA_WIDTH(DATA_WIDTH)
  ) icrc_inst (
    .clk(clk),
    .rst(rst),
    .en(en_up),
    .s_data(l_data),
    .s_keep(l_keep),
    .s_valid(l_valid),
    .s_first(l_first),
    .s_last(l_last),
    .s_vlan(l_vlan),
    .s_kind(l_kind),
    .s_ihl(l_ihl),
    .m_crc(crc),
    .m_valid(crc_valid)
  );

  // ------------------------------------------- the beats beside the ICRC
  // d_*[ICRC_LAT-1] is the beat whose ICRC (if it is a last beat) is on `crc`
  localparam int ICRC_LAT = icrc_latency(DATA_WIDTH);
  logic [ICRC_LAT-1:0][DATA_WIDTH-1:0] d_data;
  logic [ICRC_LAT-1:0][KEEP_WIDTH-1:0] d_keep;
  logic [ICRC_LAT-1:0]                 d_valid, d_last;

  always_ff @(posedge clk) begin
    if (en_up) begin
      d_valid <= {d_valid[ICRC_LAT-2:0], l_valid};
      d_data <= {d_data[ICRC_LAT-2:0], l_data};
      d_keep <= {d_keep[ICRC_LAT-2:0], l_keep};
      d_last <= {d_last[ICRC_LAT-2:0], l_last};
    end
    if (rst) d_valid <= '0;
  end

  logic [DATA_WIDTH-1:0] ins_data;
  logic [KEEP_WIDTH-1:0] ins_keep;
  logic                  ins_valid, ins_last;
  assign ins_data = d_data[ICRC_LAT-1];
  assign ins_keep = d_keep[ICRC_LAT-1];
  assign ins_valid = d_valid[ICRC_LAT-1];
  assign ins_last = d_last[ICRC_LAT-1];

  // ------------------------------------------------------- ICRC insertion
  // The ICRC's byte j goes to byte n + j of the last beat, n its byte count,
  // or to byte n + j - KEEP_WIDTH of an extra beat. Where each one goes is
  // worked out from the beat's tkeep one stage before it meets the ICRC
  // (registered beside d_*[ICRC_LAT-1]), so the insertion itself is a small
  // one-hot select in front of the output slice.
  logic [KEEP_WIDTH-1:0][3:0] ins_at;     // ICRC byte j -> last beat byte b
  logic [KEEP_WIDTH-1:0][3:0] ext_at;     // ICRC byte j -> extra beat byte b
  logic                       ins_overflow;

  always_ff @(posedge clk) begin
    logic [6:0] n;
    if (en_up) begin
      n = keep_count(64'(d_keep[ICRC_LAT-2]));
      for (int b = 0; b < KEEP_WIDTH; b++) begin
        for (int j = 0; j < 4; j++) begin
          ins_at[b][j] <= b >= j && n == 7'(b - j);
          ext_at[b][j] <= b + KEEP_WIDTH - j <= KEEP_WIDTH && n == 7'(b + KEEP_WIDTH - j);
        end
      end
      ins_overflow <= n > 7'(KEEP_WIDTH - 4);
    end
  end

  logic [DATA_WIDTH-1:0] out_data, extra_data_next;
  logic [KEEP_WIDTH-1:0] out_keep, extra_keep_next;
  logic                  out_last, overflow;

  always_comb begin
    out_data = ins_data;
    out_keep = ins_keep;
    out_last = ins_last;
    overflow = 1'b0;
    extra_data_next = '0;
    extra_keep_next = '0;
    if (ins_last) begin
      // crc_valid is high here: it left icrc together with this beat
      for (int b = 0; b < KEEP_WIDTH; b++) begin
        for (int j = 0; j < 4; j++) begin
          if (ins_at[b][j]) begin
            out_data[b*8 +: 8] = crc[j*8 +: 8];
            out_keep[b] = 1'b1;
          end
          if (ext_at[b][j]) begin
            extra_data_next[b*8 +: 8] = crc[j*8 +: 8];
            extra_keep_next[b] = 1'b1;
          end
        end
      end
      overflow = ins_overflow;
      out_last = !overflow;
    end
  end

  logic [DATA_WIDTH-1:0] extra_data;
  logic [KEEP_WIDTH-1:0] extra_keep;

  always_ff @(posedge clk) begin
    if (skid_ready) begin
      if (extra_pending) begin
        extra_pending <= 1'b0;
      end else if (ins_valid && overflow) begin
        extra_pending <= 1'b1;
        extra_data <= extra_data_next;
        extra_keep <= extra_keep_next;
      end
    end
    if (rst) extra_pending <= 1'b0;
  end

  logic unused_crc_valid;
  assign unused_crc_valid = crc_valid;

  axis_skid #(
    .WIDTH(DATA_WIDTH + KEEP_WIDTH + 1)
  ) out_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data(extra_pending ? {1'b1, extra_keep, extra_data} : {out_last, out_keep, out_data}),
    .s_valid(extra_pending || ins_valid),
    .s_ready(skid_ready),
    .m_data({m_axis_tlast, m_axis_tkeep, m_axis_tdata}),
    .m_valid(m_axis_tvalid),
    .m_ready(m_axis_tready)
  );

endmodule

`resetall
