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
// Structure (every register-to-register path within a few LUT levels and
// at most two carry chains: 125 MHz on an ECP5 at 64 bits, see BENCHMARKS.md):
//   input: beats go into a data FIFO; the first HDR_BYTES of each frame are
//     captured and handed to rx_hdr_decode (5 stages), whose header fields go
//     into a metadata FIFO (read once per frame, at its verdict) and whose
//     small control record (offsets, errors, layout) goes into a context FIFO;
//   stream: beats leave the data FIFO once their frame's context is there
//     and run through four stages: R0 the beat and its context registered,
//     R1 offsets relative to the beat (one adder each), R2 comparisons, the
//     ICRC and pad bytes picked out, R3 the payload window realigned (one
//     barrel shift) and the ICRC region fed to `icrc`; at the frame's last
//     beat an end-of-frame record waits for the ICRC (icrc_latency cycles),
//     the verdict is registered and written to a small verdict FIFO; the
//     record on m_axis_meta is the metadata FIFO's head completed with the
//     verdict FIFO's head (both distributed RAM read in place: no register
//     slice 1,550 bits wide behind the output handshake).
// The payload goes through an axis_skid register slice; the stream stages
// stall (global enable) only when it is full or the verdict FIFO could fill.
// s_axis_tready is a register.
//
// Latency, outputs ready, for a frame of NB beats that does not wait behind
// the one before it (always the case at line rate with equal frames):
//   metadata:   min(NB, HDR_BEATS) + 12 + icrc_latency cycles after the
//               frame's last beat (64 bits: 26 for a 60-byte frame, 34 from
//               128 bytes on; 512 bits: 22 for 60 bytes, 23 from 65 on);
//   payload:    a beat leaves min(NB, HDR_BEATS) + 11 cycles after the input
//               beat that completes it;
// HDR_BEATS = 128 / KEEP_WIDTH (16 at 64 bits, 2 at 512 bits): the context
// is ready 7 cycles after the beat that closes the 128-byte header window
// (capture 1, rx_hdr_decode 5, context FIFO 1), the stream stages take 4
// (R0..R3), the ICRC icrc_latency more (6 at 64 bits, 9 at 512), the verdict
// 1 and the verdict FIFO (payload: the output slice) 1.
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
  // beats wait here while their header is decoded: capture 1 + decoder 5 +
  // context FIFO 1 cycles after the window closes, plus slack for tready
  localparam int DATA_DEPTH = 2 ** $clog2(HDR_BEATS + 10);
  localparam int DCNT_W = $clog2(DATA_DEPTH + 1);
  localparam int CCNT_W = $clog2(CTX_DEPTH + 1);
  localparam int ICRC_LAT = icrc_latency(DATA_WIDTH);
  // end-of-frame records in flight after the last beat left the data FIFO:
  // R0..R3, then one per ICRC cycle (fin[CRC_AT] meets the frame's ICRC), then
  // the verdict, registered
  localparam int CRC_AT = ICRC_LAT;
  localparam int FIN_STAGES = ICRC_LAT + 2;
  // verdicts waiting for m_axis_meta_tready (see "verdict" below)
  localparam int VER_DEPTH = 4;
  localparam int VCNT_W = $clog2(VER_DEPTH + 1);
  // a frame's header fields wait from decoding until its record leaves: at
  // most CTX_DEPTH frames before their last beat leaves, 4 + FIN_STAGES in
  // the stream stages after it, VER_DEPTH verdicts waiting for the output
  localparam int META_DEPTH = 2 ** $clog2(CTX_DEPTH + 4 + FIN_STAGES + VER_DEPTH);
  localparam int MCNT_W = $clog2(META_DEPTH + 1);
  localparam logic [OFS_W-1:0] OFS_MAX = '1;
  localparam logic [OFS_W-1:0] OFS_K = OFS_W'(KEEP_WIDTH);

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
    logic [DATA_WIDTH-1:0] m;
    for (int i = 0; i < KEEP_WIDTH; i++) m[i*8 +: 8] = {8{k[i]}};
    return m;
  endfunction

  // tkeep with the low n bytes set (all of them for n >= KEEP_WIDTH)
  function automatic logic [KEEP_WIDTH-1:0] keep_of(input logic [OFS_W-1:0] n);
    return (n >= OFS_K) ? '1 : ~({KEEP_WIDTH{1'b1}} << n[SHIFT_W:0]);
  endfunction

  function automatic logic [OFS_W-1:0] sat_add(input logic [OFS_W-1:0] a, input logic [OFS_W-1:0] b);
    logic [OFS_W:0] s;
    s = {1'b0, a} + {1'b0, b};
    return s[OFS_W] ? OFS_MAX : s[OFS_W-1:0];
  endfunction

  function automatic logic [OFS_W-1:0] bytes_in(input logic [KEEP_WIDTH-1:0] k);
    return OFS_W'(keep_count(64'(k)));
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
          h0_len <= OFS_W'(in_beat) * OFS_K + bytes_in(s_axis_tkeep);
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

  rx_meta_t dec_meta;
  logic     dec_meta_valid;
  rx_ctl_t  dec_ctl;
  logic     dec_valid;

  rx_hdr_decode #(
    .HDR_BYTES(HDR_BYTES)
  ) hdr_decode_inst (
    .clk(clk),
    .rst(rst),
    .s_hdr(h0_hdr),
    .s_valid(h0_valid),
    .s_len_known(h0_len_known),
    .s_len(h0_len),
    .m_meta(dec_meta),
    .m_meta_valid(dec_meta_valid),
    .m_ctl(dec_ctl),
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

  // context FIFO: read with every beat
  rx_ctl_t           ctx;
  logic [CCNT_W-1:0] cq_count;

  roce_fifo #(
    .WIDTH($bits(rx_ctl_t)),
    .DEPTH(CTX_DEPTH)
  ) ctx_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data(dec_ctl),
    .wr_en(dec_valid),
    .rd_data(ctx),
    .rd_en(pop && cur_last),
    .count(cq_count)
  );

  // metadata FIFO: header fields, read once per frame at its verdict
  rx_meta_t          meta_head;
  logic              meta_pop;
  logic [MCNT_W-1:0] mq_count;

  roce_fifo #(
    .WIDTH($bits(rx_meta_t)),
    .DEPTH(META_DEPTH)
  ) meta_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data(dec_meta),
    .wr_en(dec_meta_valid),
    .rd_data(meta_head),
    .rd_en(meta_pop),
    .count(mq_count)
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
  // Every stage below advances only with `en`, so the stages behave as one
  // stage would, delayed: a bubble (no beat popped) travels down like a beat.
  logic en;            // stream stage enable: the payload slice and the verdict FIFO can take one
  logic pay_s_ready;
  logic ver_room;
  assign en = pay_s_ready && ver_room;
  assign pop = en && dq_count != '0 && cq_count != '0;

  logic [OFS_W-1:0] base;             // frame offset of the head beat

  always_ff @(posedge clk) begin
    if (pop) base <= cur_last ? '0 : sat_add(base, OFS_K);
    if (rst) base <= '0;
  end

  // ---- R0: the beat, its frame offset and its frame's context, registered;
  // the offsets of the 7 bytes around the ICRC start (pad bytes and ICRC)
  logic                  r0_valid, r0_last;
  logic [DATA_WIDTH-1:0] r0_data;
  logic [KEEP_WIDTH-1:0] r0_keep;
  logic [OFS_W-1:0]      r0_base, r0_ps_k;
  logic [6:0][OFS_W-1:0] r0_q;        // icrc_ofs - 3 + i
  rx_ctl_t               r0_ctx;

  always_ff @(posedge clk) begin
    if (en) begin
      r0_valid <= pop;
      if (pop) begin
        r0_data <= cur_data;
        r0_keep <= cur_keep;
        r0_last <= cur_last;
        r0_base <= base;
        r0_ctx <= ctx;
        r0_ps_k <= ctx.pay_start + OFS_K;
        for (int i = 0; i < 7; i++) r0_q[i] <= ctx.icrc_ofs + OFS_W'(i) - OFS_W'(3);
      end
    end
    if (rst) r0_valid <= 1'b0;
  end

  // ---- R1: offsets relative to the beat
  logic                  r1_valid, r1_last, r1_first, r1_cf_valid;
  logic [DATA_WIDTH-1:0] r1_data;
  logic [OFS_W-1:0]      r1_len_here;   // frame length if this is the last beat
  logic [OFS_W-1:0]      r1_wend;       // end of the payload window completed by this beat
  logic [OFS_W-1:0]      r1_wstart;     // its start, wend - KEEP_WIDTH
  logic [OFS_W-1:0]      r1_bk;         // base + KEEP_WIDTH
  logic [OFS_W-1:0]      r1_dofs;       // icrc_ofs - base
  logic [OFS_W-1:0]      r1_ps_k;
  logic [6:0]            r1_sel;        // byte i of the 7 is in this beat ...
  logic [6:0][SHIFT_W-1:0] r1_lane;    // ... at this lane
  rx_ctl_t               r1_ctx;

  always_ff @(posedge clk) begin
    logic [SHIFT_W-1:0] p;
    logic [OFS_W-1:0] o;
    if (en) begin
      r1_valid <= r0_valid;
      if (r0_valid) begin
        p = r0_ctx.pay_start[SHIFT_W-1:0];
        r1_len_here <= sat_add(r0_base, bytes_in(r0_keep));
        r1_wend <= r0_base + OFS_W'(p);
        r1_wstart <= r0_base + (OFS_W'(p) - OFS_K);
        r1_bk <= r0_base + OFS_K;
        r1_dofs <= r0_ctx.icrc_ofs - r0_base;
        r1_cf_valid <= r0_base < r0_ctx.icrc_ofs;
        r1_first <= r0_base == '0;
        for (int i = 0; i < 7; i++) begin
          o = r0_q[i] - r0_base;
          r1_sel[i] <= r0_q[i] >= r0_base && o < OFS_K;
          r1_lane[i] <= o[SHIFT_W-1:0];
        end
        r1_data <= r0_data;
        r1_last <= r0_last;
        r1_ps_k <= r0_ps_k;
        r1_ctx <= r0_ctx;
      end
    end
    if (rst) r1_valid <= 1'b0;
  end

  // ---- R2: comparisons; ICRC and pad bytes collected
  // The payload end clipped to the frame, pe_eff, is len_here on a last beat
  // that ends before pay_end, else pay_end. R3 compares three offsets X
  // (wstart, wend, pay_start) with it and takes their distances to it; R2
  // works both out against both candidates, so that R3 only picks.
  localparam int X_WSTART = 0;
  localparam int X_WEND = 1;
  localparam int X_PAY_START = 2;
  logic                  r2_valid, r2_last, r2_first, r2_cf_valid, r2_cf_last;
  logic                  r2_emit_ok;    // wend >= pay_start + KEEP_WIDTH
  logic                  r2_pend_ok;    // wend >= pay_start
  logic [DATA_WIDTH-1:0] r2_data;
  logic [DATA_WIDTH-1:0] r2_prev;       // the beat before (payload windows straddle two)
  logic [KEEP_WIDTH-1:0] r2_cf_keep;
  logic [OFS_W-1:0]      r2_len_here;
  logic                  r2_use_len;    // pe_eff = len_here
  logic [2:0]            r2_lt_len, r2_lt_end;  // X < len_here, X < pay_end
  logic [2:0][OFS_W-1:0] r2_d_len, r2_d_end;    // len_here - X, pay_end - X
  logic [31:0]           r2_icrc;       // ICRC bytes seen so far
  logic [23:0]           r2_pad;        // the three bytes before the ICRC
  /* verilator lint_off UNUSEDSIGNAL */
  rx_ctl_t               r2_ctx;        // R2 no longer needs every field: synthesis drops them
  /* verilator lint_on UNUSEDSIGNAL */

  always_ff @(posedge clk) begin
    logic [2:0][OFS_W-1:0] x;
    if (en) begin
      r2_valid <= r1_valid;
      if (r1_valid) begin
        r2_use_len <= r1_last && r1_len_here < r1_ctx.pay_end;
        x[X_WSTART] = r1_wstart;
        x[X_WEND] = r1_wend;
        x[X_PAY_START] = r1_ctx.pay_start;
        for (int k = 0; k < 3; k++) begin
          r2_lt_len[k] <= x[k] < r1_len_here;
          r2_lt_end[k] <= x[k] < r1_ctx.pay_end;
          r2_d_len[k] <= r1_len_here - x[k];
          r2_d_end[k] <= r1_ctx.pay_end - x[k];
        end
        r2_emit_ok <= r1_wend >= r1_ps_k;
        r2_pend_ok <= r1_wend >= r1_ctx.pay_start;
        r2_cf_last <= r1_bk >= r1_ctx.icrc_ofs;
        r2_cf_keep <= (r1_bk >= r1_ctx.icrc_ofs) ? keep_of(r1_dofs) : '1;
        for (int i = 0; i < 4; i++) begin
          if (r1_sel[3 + i]) r2_icrc[i*8 +: 8] <= r1_data[r1_lane[3 + i]*8 +: 8];
        end
        for (int i = 0; i < 3; i++) begin
          if (r1_sel[i]) r2_pad[(2-i)*8 +: 8] <= r1_data[r1_lane[i]*8 +: 8];
        end
        r2_prev <= r2_data;
        r2_data <= r1_data;
        r2_last <= r1_last;
        r2_first <= r1_first;
        r2_cf_valid <= r1_cf_valid;
        r2_len_here <= r1_len_here;
        r2_ctx <= r1_ctx;
      end
    end
    if (rst) r2_valid <= 1'b0;
  end

  // ---- R3: payload window, ICRC feed, end-of-frame record
  logic [31:0]           crc_out;     // from icrc (below)
  logic                  crc_out_valid;
  logic [31:0]           crc_hold;
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

  // end-of-frame records: fin[0] set with the ICRC feed of the last beat,
  // fin[CRC_AT] meeting the frame's ICRC, fin[FIN_STAGES-1] the verdict; `v`
  // is what the record on m_axis_meta takes from them (the verdict FIFO's entry)
  typedef struct packed {
    rx_err_e          err;          // the verdict without the ICRC check (CRC_AT), with it (last)
    logic [OFS_W-1:0] len;
    logic [15:0]      payload_len;
    logic [31:0]      icrc;
    logic [31:0]      crc;          // the ICRC computed (last stage)
    logic [23:0]      pad;
    logic [OFS_W-1:0] trailer_len;  // (from CRC_AT on)
    logic [OFS_W-1:0] stream_len;
  } verdict_t;
  typedef struct packed {
    verdict_t         v;
    logic [OFS_W-1:0] ip_end;
    rx_err_e          pre_err;
    rx_err_e          post_err;
  } fin_t;
  fin_t [FIN_STAGES-1:0] fin;
  logic [FIN_STAGES-1:0] fin_valid;

  always_ff @(posedge clk) begin
    logic [SHIFT_W-1:0] p;
    logic stream_en;
    logic [2:0] lt;                   // X < pe_eff
    logic [2:0][OFS_W-1:0] d;         // pe_eff - X
    logic [31:0] crc;
    if (en) begin
      cf_valid <= 1'b0;
      fin_valid[0] <= 1'b0;
      pay_in_valid <= 1'b0;
      if (pend_valid) begin
        // flush: this cycle's beat (if any) starts a frame, so has no window
        pay_in_valid <= 1'b1;
        pay_in_data <= pend_data;
        pay_in_keep <= pend_keep;
        pay_in_last <= 1'b1;
        pend_valid <= 1'b0;
      end
      if (r2_valid) begin
        p = r2_ctx.pay_start[SHIFT_W-1:0];
        stream_en = r2_ctx.stream_en;
        lt = r2_use_len ? r2_lt_len : r2_lt_end;
        d = r2_use_len ? r2_d_len : r2_d_end;
        // ICRC region: beats until the one holding byte icrc_ofs-1
        cf_valid <= r2_cf_valid;
        cf_first <= r2_first;
        cf_last <= r2_cf_last;
        cf_keep <= r2_cf_keep;
        cf_data <= r2_data;
        cf_vlan <= r2_ctx.vlan;
        cf_kind <= r2_ctx.kind;
        cf_ihl <= r2_ctx.ihl;

        // window [wend-K, wend) ends in this beat; it exists once wend >= start+K
        if (stream_en && r2_emit_ok && lt[X_WSTART]) begin
          pay_in_valid <= 1'b1;
          pay_in_data <= DATA_WIDTH'({r2_data, r2_prev} >> (32'(p) * 8));
          pay_in_keep <= keep_of(d[X_WSTART]);
          pay_in_last <= !lt[X_WEND];
        end
        // on the last beat, the window starting at wend may remain
        if (stream_en && r2_last && r2_pend_ok && lt[X_WEND]) begin
          pend_valid <= 1'b1;
          pend_data <= DATA_WIDTH'(r2_data >> (32'(p) * 8));
          pend_keep <= keep_of(d[X_WEND]);
        end

        if (r2_last) begin
          fin_valid[0] <= 1'b1;
          fin[0].v.len <= r2_len_here;
          fin[0].v.icrc <= r2_icrc;
          fin[0].v.pad <= r2_pad;
          fin[0].v.stream_len <= (stream_en && lt[X_PAY_START]) ? d[X_PAY_START] : '0;
          fin[0].ip_end <= r2_ctx.ip_end;
          fin[0].v.payload_len <= r2_ctx.payload_len;
          fin[0].pre_err <= r2_ctx.pre_err;
          fin[0].post_err <= r2_ctx.post_err;
        end
      end
      for (int i = 1; i < FIN_STAGES; i++) begin
        fin_valid[i] <= fin_valid[i-1];
        if (fin_valid[i-1]) fin[i] <= fin[i-1];
      end
      // the checks that do not wait for the ICRC, one stage early
      if (fin_valid[CRC_AT-1]) begin
        if (fin[CRC_AT-1].pre_err != ERR_NONE) fin[CRC_AT].v.err <= fin[CRC_AT-1].pre_err;
        else if (fin[CRC_AT-1].v.len < fin[CRC_AT-1].ip_end) fin[CRC_AT].v.err <= ERR_TRUNCATED_FRAME;
        else fin[CRC_AT].v.err <= fin[CRC_AT-1].post_err;
        fin[CRC_AT].v.trailer_len <= (fin[CRC_AT-1].v.len > fin[CRC_AT-1].ip_end)
                                   ? fin[CRC_AT-1].v.len - fin[CRC_AT-1].ip_end : '0;
      end
      // then the ICRC: a region that ended before the frame's last beat left
      // its CRC in crc_hold
      if (fin_valid[CRC_AT]) begin
        crc = crc_out_valid ? crc_out : crc_hold;
        fin[FIN_STAGES-1].v.crc <= crc;
        if (fin[CRC_AT].v.err != ERR_NONE) fin[FIN_STAGES-1].v.err <= fin[CRC_AT].v.err;
        else if (crc != fin[CRC_AT].v.icrc) fin[FIN_STAGES-1].v.err <= ERR_ICRC_MISMATCH;
        else fin[FIN_STAGES-1].v.err <= ERR_NONE;
      end
    end
    if (rst) begin
      pend_valid <= 1'b0;
      cf_valid <= 1'b0;
      fin_valid <= '0;
      pay_in_valid <= 1'b0;
    end
  end

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

  // verdict: each frame's end-of-frame fields wait in a small FIFO; the record
  // on m_axis_meta is the head of the metadata FIFO completed with them. No
  // register slice holds the 1,550-bit record: both FIFOs are read where they
  // stand (distributed RAM), so no wide register bank hangs off the output
  // handshake. The stream stages stop (en) while the verdict FIFO could fill:
  // ver_room is registered from the count, so it allows one write more than
  // it sees.

  verdict_t          ver_head;
  logic [VCNT_W-1:0] ver_count;

  roce_fifo #(
    .WIDTH($bits(verdict_t)),
    .DEPTH(VER_DEPTH)
  ) ver_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data(fin[FIN_STAGES-1].v),
    .wr_en(en && fin_valid[FIN_STAGES-1]),
    .rd_data(ver_head),
    .rd_en(meta_pop),
    .count(ver_count)
  );

  always_ff @(posedge clk) begin
    ver_room <= ver_count < VCNT_W'(VER_DEPTH - 1);
    if (rst) ver_room <= 1'b0;
  end

  assign m_axis_meta_tvalid = ver_count != '0;
  assign meta_pop = m_axis_meta_tvalid && m_axis_meta_tready;

  rx_meta_t meta_out;
  assign m_axis_meta_tdata = meta_out;

  always_comb begin
    meta_out = meta_head;
    meta_out.error = ver_head.err;
    meta_out.frame_len = ver_head.len;
    meta_out.payload_len = ver_head.payload_len;
    // the wire bytes read least significant first: the 32-bit number as stored
    meta_out.icrc = ver_head.icrc;
    meta_out.icrc_calc = ver_head.crc;
    meta_out.pad_bytes = ver_head.pad;
    meta_out.trailer_len = ver_head.trailer_len;
    meta_out.stream_len = ver_head.stream_len;
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

  logic unused_mq_count;
  assign unused_mq_count = ^mq_count;

endmodule

`resetall
