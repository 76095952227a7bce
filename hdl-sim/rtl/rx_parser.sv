// SPDX-License-Identifier: MIT OR Apache-2.0
//
// rx_parser: RoCE receive frame parser and classifier.
//
// s_axis: Ethernet frames without FCS, byte 0 (destination MAC) in
//   tdata[7:0]; tkeep contiguous from bit 0, all ones except on the tlast
//   beat. One beat per cycle, no bubbles needed.
// m_axis_payload: the payload of each good-looking RoCE frame (no headers, no
//   pad, no ICRC), realigned to byte 0, one packet per frame whose metadata
//   has stream_len != 0, in frame order. It leaves before the frame's verdict
//   is known (the ICRC is at the end): the metadata record says whether it
//   may be used.
// m_axis_meta: one roce_rx_pkg::rx_meta_t per frame, in frame order, after
//   the frame's last beat: every header field, offsets, and the error code.
//
// Structure:
//   input: beats go into a data FIFO; the first HDR_BYTES of each frame are
//     captured and handed to rx_hdr_decode (2 stages) whose context lands in
//     a context FIFO;
//   stream: beats leave the data FIFO once their frame's context is there:
//     payload realignment (one barrel shift), ICRC region feed to `icrc`
//     (2 stages), capture of the ICRC and pad bytes, and at the last beat the
//     final verdict -> m_axis_meta.
// Both outputs go through axis_skid register slices; the stream stage stalls
// (global enable) only when one of them is full. s_axis_tready is a register.
//
// Latency, outputs ready, for a frame of NB beats that does not wait behind
// the one before it (always the case at line rate with equal frames):
//   metadata:   min(NB, HDR_BEATS) + 8 cycles after the frame's last beat;
//   payload:    a beat leaves min(NB, HDR_BEATS) + 6 cycles after the input
//               beat that completes it;
// HDR_BEATS = 128 / KEEP_WIDTH (16 at 64 bits, 2 at 512 bits): the context
// is ready 5 cycles after the beat that closes the 128-byte header window
// (capture 1, rx_hdr_decode 3, context FIFO 1), the stream stage runs 3 more
// (beat, CRC, final CRC) and the output slice 1.
// At line rate the input never stalls and payload packets have no bubble:
// tests/line_rate.rs checks all of this cycle by cycle.

`resetall
`default_nettype none

module rx_parser
  import roce_rx_pkg::*;
#(
    // bus width, bits: 64, 128, 256 or 512
    parameter int DATA_WIDTH = 64,
    // bytes per beat (derived)
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    // frames the parser may hold at once (context FIFO entries)
    parameter int CTX_DEPTH = 16,
    // metadata record width (derived)
    parameter int META_WIDTH = $bits(rx_meta_t)
) (
    input  wire logic                  clk,
    input  wire logic                  rst,

    input  wire logic [DATA_WIDTH-1:0] s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_tkeep,
    input  wire logic                  s_axis_tvalid,
    output logic                       s_axis_tready,
    input  wire logic                  s_axis_tlast,

    output logic [DATA_WIDTH-1:0]      m_axis_payload_tdata,
    output logic [KEEP_WIDTH-1:0]      m_axis_payload_tkeep,
    output logic                       m_axis_payload_tvalid,
    input  wire logic                  m_axis_payload_tready,
    output logic                       m_axis_payload_tlast,

    output logic [META_WIDTH-1:0]      m_axis_meta_tdata,
    output logic                       m_axis_meta_tvalid,
    input  wire logic                  m_axis_meta_tready
);

  localparam int HDR_BYTES = 128;
  localparam int HDR_BEATS = HDR_BYTES / KEEP_WIDTH;
  localparam int HDR_CNT_W = $clog2(HDR_BEATS + 1);
  localparam int SHIFT_W = $clog2(KEEP_WIDTH);
  localparam int DATA_DEPTH = 2 ** $clog2(HDR_BEATS + 8);
  localparam int DCNT_W = $clog2(DATA_DEPTH + 1);
  localparam int CCNT_W = $clog2(CTX_DEPTH + 1);
  localparam logic [OFS_W-1:0] OFS_MAX = '1;

  initial begin
    if (DATA_WIDTH != 64 && DATA_WIDTH != 128 && DATA_WIDTH != 256 && DATA_WIDTH != 512) begin
      $error("rx_parser: DATA_WIDTH must be 64, 128, 256 or 512 (got %0d)", DATA_WIDTH);
      $finish;
    end
    if (KEEP_WIDTH * 8 != DATA_WIDTH) begin
      $error("rx_parser: KEEP_WIDTH must be DATA_WIDTH/8");
      $finish;
    end
    if (META_WIDTH != $bits(rx_meta_t)) begin
      $error("rx_parser: META_WIDTH must be $bits(rx_meta_t) = %0d", $bits(rx_meta_t));
      $finish;
    end
    if (CTX_DEPTH < 2 || (CTX_DEPTH & (CTX_DEPTH - 1)) != 0) begin
      $error("rx_parser: CTX_DEPTH must be a power of two >= 2");
      $finish;
    end
  end

  // tkeep (contiguous from bit 0) as a bit mask
  function automatic logic [DATA_WIDTH-1:0] keep_bits(input logic [KEEP_WIDTH-1:0] k);
    return ~({DATA_WIDTH{1'b1}} << (32'($countones(k)) * 8));
  endfunction

  function automatic logic [SHIFT_W:0] keep_count(input logic [KEEP_WIDTH-1:0] k);
    return (SHIFT_W+1)'($countones(k));
  endfunction

  // tkeep with the low n bytes set (all of them for n >= KEEP_WIDTH)
  function automatic logic [KEEP_WIDTH-1:0] keep_of(input logic [OFS_W-1:0] n);
    return (n >= OFS_W'(KEEP_WIDTH)) ? '1 : ~({KEEP_WIDTH{1'b1}} << n[SHIFT_W:0]);
  endfunction

  function automatic logic [OFS_W-1:0] sat_add(input logic [OFS_W-1:0] a, input logic [OFS_W-1:0] b);
    logic [OFS_W:0] s;
    s = {1'b0, a} + {1'b0, b};
    return s[OFS_W] ? OFS_MAX : s[OFS_W-1:0];
  endfunction

  // ================================================================ input
  logic s_accept;
  assign s_accept = s_axis_tvalid && s_axis_tready;

  logic [HDR_CNT_W-1:0]    in_beat;        // beat index in the frame, saturating at HDR_BEATS
  logic [HDR_BYTES*8-1:0]  hdr_buf;
  logic [HDR_BYTES*8-1:0]  h0_hdr;
  logic                    h0_valid;
  logic                    h0_len_known;
  logic [OFS_W-1:0]        h0_len;

  always_ff @(posedge clk) begin
    logic [DATA_WIDTH-1:0] in_data_masked;
    h0_valid <= 1'b0;
    if (s_accept) begin
      in_data_masked = s_axis_tdata & keep_bits(s_axis_tkeep);
      if (in_beat < HDR_CNT_W'(HDR_BEATS)) begin
        hdr_buf[in_beat*DATA_WIDTH +: DATA_WIDTH] <= in_data_masked;
        if (in_beat == HDR_CNT_W'(HDR_BEATS - 1) || s_axis_tlast) begin
          // window closes: current beat merged, bytes past the frame zeroed
          for (int s = 0; s < HDR_BEATS; s++) begin
            if (HDR_CNT_W'(s) < in_beat) h0_hdr[s*DATA_WIDTH +: DATA_WIDTH] <= hdr_buf[s*DATA_WIDTH +: DATA_WIDTH];
            else if (HDR_CNT_W'(s) == in_beat) h0_hdr[s*DATA_WIDTH +: DATA_WIDTH] <= in_data_masked;
            else h0_hdr[s*DATA_WIDTH +: DATA_WIDTH] <= '0;
          end
          h0_valid <= 1'b1;
          h0_len_known <= s_axis_tlast;
          h0_len <= OFS_W'(in_beat) * OFS_W'(KEEP_WIDTH) + OFS_W'(keep_count(s_axis_tkeep));
        end
      end
      if (s_axis_tlast) in_beat <= '0;
      else if (in_beat != HDR_CNT_W'(HDR_BEATS)) in_beat <= in_beat + 1'b1;
    end
    if (rst) begin
      in_beat <= '0;
      h0_valid <= 1'b0;
    end
  end

  rx_ctx_t dec_ctx;
  logic    dec_valid;

  rx_hdr_decode #(
    .HDR_BYTES(HDR_BYTES)
  ) hdr_decode_inst (
    .clk(clk),
    .rst(rst),
    .s_hdr(h0_hdr),
    .s_valid(h0_valid),
    .s_len_known(h0_len_known),
    .s_len(h0_len),
    .m_ctx(dec_ctx),
    .m_valid(dec_valid)
  );

  // data FIFO: {tlast, tkeep, tdata}
  logic                                  pop;
  logic [DATA_WIDTH+KEEP_WIDTH:0]        dq_head;
  logic [DCNT_W-1:0]                     dq_count;
  logic [DATA_WIDTH-1:0]                 cur_data;
  logic [KEEP_WIDTH-1:0]                 cur_keep;
  logic                                  cur_last;

  roce_fifo #(
    .WIDTH(DATA_WIDTH + KEEP_WIDTH + 1),
    .DEPTH(DATA_DEPTH)
  ) data_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data({s_axis_tlast, s_axis_tkeep, s_axis_tdata}),
    .wr_en(s_accept),
    .rd_data(dq_head),
    .rd_en(pop),
    .count(dq_count)
  );
  assign {cur_last, cur_keep, cur_data} = dq_head;

  // context FIFO
  rx_ctx_t           ctx;
  logic [CCNT_W-1:0] cq_count;

  roce_fifo #(
    .WIDTH($bits(rx_ctx_t)),
    .DEPTH(CTX_DEPTH)
  ) ctx_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data(dec_ctx),
    .wr_en(dec_valid),
    .rd_data(ctx),
    .rd_en(pop && cur_last),
    .count(cq_count)
  );

  // frames in flight: first beat accepted .. last beat popped; bounds the
  // context FIFO. s_axis_tready is registered from the next-cycle counts.
  logic [CCNT_W-1:0] in_flight;
  always_ff @(posedge clk) begin
    logic [DCNT_W-1:0] dq_next;
    logic [CCNT_W-1:0] fl_next;
    logic first_next;
    dq_next = dq_count + DCNT_W'(s_accept) - DCNT_W'(pop);
    fl_next = in_flight + CCNT_W'(s_accept && in_beat == '0) - CCNT_W'(pop && cur_last);
    first_next = s_accept ? s_axis_tlast : in_beat == '0;
    in_flight <= fl_next;
    s_axis_tready <= dq_next < DCNT_W'(DATA_DEPTH) && !(first_next && fl_next >= CCNT_W'(CTX_DEPTH));
    if (rst) begin
      in_flight <= '0;
      s_axis_tready <= 1'b0;
    end
  end

  // =============================================================== stream
  logic en;            // stream stage enable: both output slices can take one
  logic pay_s_ready;
  logic meta_s_ready;
  assign en = pay_s_ready && meta_s_ready;
  assign pop = en && dq_count != '0 && cq_count != '0;

  logic [OFS_W-1:0]      base;        // frame offset of the head beat
  logic [DATA_WIDTH-1:0] prev_data;   // previous beat of the frame
  logic [31:0]           icrc_acc;    // ICRC bytes seen so far
  logic [23:0]           pad_acc;     // the three bytes before the ICRC
  logic                  pend_valid;  // last payload window of a frame, waiting one cycle
  logic [DATA_WIDTH-1:0] pend_data;
  logic [KEEP_WIDTH-1:0] pend_keep;

  // icrc feed (registered)
  logic [DATA_WIDTH-1:0] cf_data;
  logic [KEEP_WIDTH-1:0] cf_keep;
  logic                  cf_valid, cf_first, cf_last, cf_vlan;
  logic [1:0]            cf_kind;
  logic [3:0]            cf_ihl;

  // payload slice input
  logic [DATA_WIDTH-1:0] pay_in_data;
  logic [KEEP_WIDTH-1:0] pay_in_keep;
  logic                  pay_in_valid, pay_in_last;

  // end-of-frame pipeline, aligned with icrc's two stages
  typedef struct packed {
    rx_ctx_t          ctx;
    logic [OFS_W-1:0] len;
    logic [31:0]      icrc;
    logic [23:0]      pad;
    logic [OFS_W-1:0] stream_len;
  } fin_t;
  fin_t fin1, fin2, fin3;
  logic fin1_valid, fin2_valid, fin3_valid;

  // per-beat combinational view
  logic [SHIFT_W-1:0]    p;
  logic [OFS_W-1:0]      len_here;    // frame length if this is the last beat
  logic [OFS_W-1:0]      pe_eff;      // payload end, clipped to the frame
  logic [OFS_W-1:0]      wend;        // end of the payload window completed by this beat
  logic                  win_emit, win_last, pend_set;
  logic [OFS_W-1:0]      win_cnt, pend_cnt;
  logic [DATA_WIDTH-1:0] win_data;
  logic [31:0]           icrc_next;
  logic [23:0]           pad_next;

  always_comb begin
    logic [OFS_W-1:0] wstart;
    logic [OFS_W-1:0] o;
    p = ctx.pay_start[SHIFT_W-1:0];
    len_here = sat_add(base, OFS_W'(keep_count(cur_keep)));
    pe_eff = (cur_last && len_here < ctx.pay_end) ? len_here : ctx.pay_end;
    wend = base + OFS_W'(p);
    wstart = wend - OFS_W'(KEEP_WIDTH);
    // window [wend-K, wend) ends in this beat; it exists once wend >= start+K
    win_emit = ctx.stream_en && wend >= ctx.pay_start + OFS_W'(KEEP_WIDTH) && wstart < pe_eff;
    win_cnt = (pe_eff - wstart > OFS_W'(KEEP_WIDTH)) ? OFS_W'(KEEP_WIDTH) : pe_eff - wstart;
    win_last = wend >= pe_eff;
    win_data = DATA_WIDTH'({cur_data, prev_data} >> (32'(p) * 8));
    // on the last beat, the window starting at wend may remain
    pend_set = ctx.stream_en && cur_last && wend >= ctx.pay_start && wend < pe_eff;
    pend_cnt = pe_eff - wend;
    // ICRC bytes [icrc_ofs, +4) and the three before, wherever they fall
    icrc_next = icrc_acc;
    for (int i = 0; i < 4; i++) begin
      o = ctx.icrc_ofs + OFS_W'(i) - base;
      if (ctx.icrc_ofs + OFS_W'(i) >= base && o < OFS_W'(KEEP_WIDTH))
        icrc_next[i*8 +: 8] = cur_data[o[SHIFT_W-1:0]*8 +: 8];
    end
    pad_next = pad_acc;
    for (int i = 0; i < 3; i++) begin
      o = ctx.icrc_ofs - OFS_W'(3 - i) - base;
      if (ctx.icrc_ofs - OFS_W'(3 - i) >= base && o < OFS_W'(KEEP_WIDTH))
        pad_next[(2-i)*8 +: 8] = cur_data[o[SHIFT_W-1:0]*8 +: 8];
    end
  end

  always_ff @(posedge clk) begin
    if (en) begin
      cf_valid <= 1'b0;
      fin1_valid <= 1'b0;
      pay_in_valid <= 1'b0;
      if (pend_valid) begin
        // flush: this cycle's beat (if any) starts a frame, so has no window
        pay_in_valid <= 1'b1;
        pay_in_data <= pend_data;
        pay_in_keep <= pend_keep;
        pay_in_last <= 1'b1;
        pend_valid <= 1'b0;
      end
      if (pop) begin
        // ICRC region: beats until the one holding byte icrc_ofs-1
        cf_valid <= base < ctx.icrc_ofs;
        cf_first <= base == '0;
        cf_last <= base + OFS_W'(KEEP_WIDTH) >= ctx.icrc_ofs;
        cf_keep <= (base + OFS_W'(KEEP_WIDTH) >= ctx.icrc_ofs) ? keep_of(ctx.icrc_ofs - base) : '1;
        cf_data <= cur_data;
        cf_vlan <= ctx.vlan;
        cf_kind <= ctx.kind;
        cf_ihl <= ctx.ihl;

        if (win_emit) begin
          pay_in_valid <= 1'b1;
          pay_in_data <= win_data;
          pay_in_keep <= keep_of(win_cnt);
          pay_in_last <= win_last;
        end
        if (pend_set) begin
          pend_valid <= 1'b1;
          pend_data <= DATA_WIDTH'(cur_data >> (32'(p) * 8));
          pend_keep <= keep_of(pend_cnt);
        end

        icrc_acc <= icrc_next;
        pad_acc <= pad_next;
        prev_data <= cur_data;
        base <= cur_last ? '0 : sat_add(base, OFS_W'(KEEP_WIDTH));

        if (cur_last) begin
          fin1_valid <= 1'b1;
          fin1.ctx <= ctx;
          fin1.len <= len_here;
          fin1.icrc <= icrc_next;
          fin1.pad <= pad_next;
          fin1.stream_len <= (ctx.stream_en && pe_eff > ctx.pay_start) ? pe_eff - ctx.pay_start : '0;
        end
      end
      fin2_valid <= fin1_valid;
      if (fin1_valid) fin2 <= fin1;
      fin3_valid <= fin2_valid;
      if (fin2_valid) fin3 <= fin2;
    end
    if (rst) begin
      base <= '0;
      pend_valid <= 1'b0;
      cf_valid <= 1'b0;
      fin1_valid <= 1'b0;
      fin2_valid <= 1'b0;
      fin3_valid <= 1'b0;
      pay_in_valid <= 1'b0;
    end
  end

  logic [31:0] crc_out;
  logic        crc_out_valid;
  logic [31:0] crc_hold;

  icrc #(
    .DATA_WIDTH(DATA_WIDTH)
  ) icrc_inst (
    .clk(clk),
    .rst(rst),
    .en(en),
    .s_data(cf_data),
    .s_keep(cf_keep),
    .s_valid(cf_valid),
    .s_first(cf_first),
    .s_last(cf_last),
    .s_vlan(cf_vlan),
    .s_kind(cf_kind),
    .s_ihl(cf_ihl),
    .m_crc(crc_out),
    .m_valid(crc_out_valid)
  );

  // a region that ended before the frame's last beat left its CRC here
  always_ff @(posedge clk) begin
    if (en && crc_out_valid) crc_hold <= crc_out;
  end

  // verdict
  rx_meta_t meta_out;
  always_comb begin
    logic [31:0] crc;
    logic [31:0] rx_icrc;
    rx_err_e err;
    crc = crc_out_valid ? crc_out : crc_hold;
    rx_icrc = {fin3.icrc[31:24], fin3.icrc[23:16], fin3.icrc[15:8], fin3.icrc[7:0]};
    if (fin3.ctx.pre_err != ERR_NONE) err = fin3.ctx.pre_err;
    else if (fin3.len < fin3.ctx.ip_end) err = ERR_TRUNCATED_FRAME;
    else if (fin3.ctx.post_err != ERR_NONE) err = fin3.ctx.post_err;
    else if (crc != rx_icrc) err = ERR_ICRC_MISMATCH;
    else err = ERR_NONE;
    meta_out = fin3.ctx.meta;
    meta_out.error = err;
    meta_out.frame_len = fin3.len;
    meta_out.icrc = rx_icrc;
    meta_out.icrc_calc = crc;
    meta_out.pad_bytes = fin3.pad;
    meta_out.trailer_len = (fin3.len > fin3.ctx.ip_end) ? fin3.len - fin3.ctx.ip_end : '0;
    meta_out.stream_len = fin3.stream_len;
  end

  // ============================================================== outputs
  axis_skid #(
    .WIDTH(DATA_WIDTH + KEEP_WIDTH + 1)
  ) pay_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data({pay_in_last, pay_in_keep, pay_in_data}),
    .s_valid(pay_in_valid && en),
    .s_ready(pay_s_ready),
    .m_data({m_axis_payload_tlast, m_axis_payload_tkeep, m_axis_payload_tdata}),
    .m_valid(m_axis_payload_tvalid),
    .m_ready(m_axis_payload_tready)
  );

  axis_skid #(
    .WIDTH(META_WIDTH)
  ) meta_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data(meta_out),
    .s_valid(fin3_valid && en),
    .s_ready(meta_s_ready),
    .m_data(m_axis_meta_tdata),
    .m_valid(m_axis_meta_tvalid),
    .m_ready(m_axis_meta_tready)
  );

endmodule

`resetall
