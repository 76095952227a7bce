// SPDX-License-Identifier: MIT OR Apache-2.0
//
// dcb_tx: the transmit side of the port's DCB block. Frames from the
// datapath are classified by priority (dcb_frame_class) into eight queues,
// one per priority, each holding whole frames (a frame can be chosen once
// its last beat is in). At each frame boundary the transmitter sends, in
// this order:
//   1. a PFC frame, when the PFC generator has something to announce (MAC
//      Control frames are never paused);
//   2. the head frame of the queue dcb_ets picks among the queues with a
//      frame that are not paused (a paused priority's queue stops, the
//      others flow; a frame already started finishes).
// `room[p]`: queue p takes one more frame of up to MAX_FRAME bytes (the
// datapath sends a frame of priority p only then, so a full queue never
// blocks the others behind it on the input).
//
// QUEUE_BYTES = 0 builds it without queues (the SoC's, docs/dcb.md §3: its
// engine already schedules per priority and asks which are paused): each
// frame passes through in order, after any PFC frame due at its start, and
// a frame of a paused priority waits at the input until the pause ends.
// Each frame's start is a decision from the eligible set {its priority};
// `room` is the unpaused priorities.

`resetall
`default_nettype none

module dcb_tx
  import dcb_pkg::*;
#(
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    // bytes per priority queue; a power of two, at least twice MAX_FRAME;
    // 0: no queues (frames pass through in order)
    parameter int QUEUE_BYTES = 16384,
    // the longest frame, bytes
    parameter int MAX_FRAME = 4608
) (
    input  wire logic                      clk,
    input  wire logic                      rst,

    /* verilator lint_off UNUSEDSIGNAL */
    input  wire dcb_cfg_t                  cfg,      // the TX side's fields
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire logic [NPRIO-1:0]          paused,

    input  wire logic [NPRIO-1:0]          pfc_announce,
    input  wire logic [NPRIO-1:0]          pfc_xoff,
    output logic                           pfc_take,

    input  wire logic [DATA_WIDTH-1:0]     s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0]     s_axis_tkeep,
    input  wire logic                      s_axis_tvalid,
    output logic                           s_axis_tready,
    input  wire logic                      s_axis_tlast,

    output logic [DATA_WIDTH-1:0]          m_axis_tdata,
    output logic [KEEP_WIDTH-1:0]          m_axis_tkeep,
    output logic                           m_axis_tvalid,
    input  wire logic                      m_axis_tready,
    output logic                           m_axis_tlast,

    output logic [NPRIO-1:0]               room,

    // each decision: the eligible set it was taken from and the class chosen
    output logic                           dec_valid,
    output logic [NPRIO-1:0]               dec_eligible,
    output logic [2:0]                     dec_prio
);

  localparam int BW = DATA_WIDTH + KEEP_WIDTH + 1;
  localparam int QDEPTH = QUEUE_BYTES / KEEP_WIDTH;
  localparam int QCNT_W = $clog2(QDEPTH + 4 + 1);
  localparam int MAX_BEATS = (MAX_FRAME + KEEP_WIDTH - 1) / KEEP_WIDTH;
  // beats that may be on their way into a queue and not yet counted by it
  localparam int IN_FLIGHT = 10;
  localparam int LDEPTH = 16;
  localparam int PFC_BEATS = (PFC_FRAME_BYTES + KEEP_WIDTH - 1) / KEEP_WIDTH;
  localparam int PFC_LAST_BYTES = PFC_FRAME_BYTES - (PFC_BEATS - 1) * KEEP_WIDTH;

  initial begin
    if (QUEUE_BYTES != 0 && (QDEPTH < 2 * MAX_BEATS || (QDEPTH & (QDEPTH - 1)) != 0)) begin
      $error("dcb_tx: QUEUE_BYTES must be 0 or a power of two of at least two frames");
      $finish;
    end
  end

  // ------------------------------------------------------- classification
  logic [DATA_WIDTH-1:0] c_data;
  logic [KEEP_WIDTH-1:0] c_keep;
  logic                  c_valid, c_ready, c_last;
  logic [2:0]            c_prio;
  /* verilator lint_off UNUSEDSIGNAL */
  logic [CLASS_BYTES*8-1:0] cap_unused;
  logic [15:0]           cap_len_unused;
  logic                  cap_valid_unused;
  // MAC Control frames from the datapath go out as any frame of their priority
  logic                  c_mac_ctl;
  /* verilator lint_on UNUSEDSIGNAL */

  dcb_frame_class #(
    .DATA_WIDTH(DATA_WIDTH),
    .CAP_BYTES(CLASS_BYTES)
  ) class_inst (
    .clk(clk),
    .rst(rst),
    .dscp_map(cfg.dscp_map),
    .pcp_map(cfg.pcp_map),
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
    .cap_data(cap_unused),
    .cap_len(cap_len_unused),
    .cap_valid(cap_valid_unused)
  );

  // -------------------------------------------------- selection, sending
  // S_WAIT: the ETS decision is on its way (queued build only)
  typedef enum logic [1:0] {S_IDLE, S_WAIT, S_DATA, S_PFC} state_t;
  state_t            state;
  /* verilator lint_off UNUSEDSIGNAL */
  logic [2:0]        cur;   // the queue being sent (the queued build reads it)
  /* verilator lint_on UNUSEDSIGNAL */
  logic [$clog2(PFC_BEATS+1)-1:0] pbeat;
  logic [PFC_BEATS*DATA_WIDTH-1:0] pfc_vec, pfc_build;
  // the frame being sent (S_DATA): its next beat, and whether it moves now
  logic [BW-1:0]     d_data;
  logic              d_valid, d_take;
  // a frame starts now (without PFC to send first): the eligible set, the choice
  logic              start;
  logic [NPRIO-1:0]  start_eligible;
  logic [2:0]        start_prio;
  // an ETS decision was asked for (queued build only)
  logic              ets_go;

  assign pfc_take = state == S_IDLE && pfc_announce != '0;

  if (QUEUE_BYTES != 0) begin : g_queues
    // ---------------------------------------------------------- queues
    logic [NPRIO-1:0]             q_wr_ready, q_rd_valid, q_rd_en, l_wr_en, l_rd_en;
    logic [NPRIO-1:0][BW-1:0]     q_rd_data;
    logic [NPRIO-1:0][QCNT_W-1:0] q_count;
    logic [NPRIO-1:0][15:0]       l_head;
    logic [NPRIO-1:0][4:0]        l_count;
    logic [15:0]                  wlen, wlen_next;
    logic                         c_fire;

    assign c_ready = q_wr_ready[c_prio];
    assign c_fire = c_valid && c_ready;
    always_comb begin
      wlen_next = wlen + 16'(keep_bytes(64'(c_keep), KEEP_WIDTH));
      if (wlen_next < wlen) wlen_next = 16'hFFFF;
    end

    always_ff @(posedge clk) begin
      if (c_fire) wlen <= c_last ? '0 : wlen_next;
      if (rst) wlen <= '0;
    end

    for (genvar p = 0; p < NPRIO; p++) begin : g_queue
      roce_bram_fifo #(
        .WIDTH(BW),
        .DEPTH(QDEPTH)
      ) data_fifo_inst (
        .clk(clk),
        .rst(rst),
        .wr_data({c_last, c_keep, c_data}),
        .wr_en(c_fire && c_prio == 3'(p)),
        .wr_ready(q_wr_ready[p]),
        .rd_data(q_rd_data[p]),
        .rd_valid(q_rd_valid[p]),
        .rd_en(q_rd_en[p]),
        .count(q_count[p])
      );

      assign l_wr_en[p] = c_fire && c_last && c_prio == 3'(p);

      roce_fifo #(
        .WIDTH(16),
        .DEPTH(LDEPTH)
      ) len_fifo_inst (
        .clk(clk),
        .rst(rst),
        .wr_data(wlen_next),
        .wr_en(l_wr_en[p]),
        .rd_data(l_head[p]),
        .rd_en(l_rd_en[p]),
        .count(l_count[p])
      );

      always_ff @(posedge clk) begin
        room[p] <= 32'(q_count[p]) + MAX_BEATS + IN_FLIGHT <= QDEPTH && 32'(l_count[p]) < LDEPTH - 2;
        if (rst) room[p] <= 1'b0;
      end
    end

    // ------------------------------------------------------------- ETS
    logic [NPRIO-1:0] nonempty, eligible;
    logic             ets_busy, ets_req, grant_valid;
    logic [2:0]       grant_prio;
    /* verilator lint_off UNUSEDSIGNAL */
    logic [15:0]      grant_len;   // the length is the queue's to count
    /* verilator lint_on UNUSEDSIGNAL */
    logic [NPRIO-1:0] req_eligible;

    always_comb begin
      for (int p = 0; p < NPRIO; p++) nonempty[p] = l_count[p] != '0;
    end
    assign eligible = nonempty & ~paused;
    assign ets_req = state == S_IDLE && pfc_announce == '0 && eligible != '0 && !ets_busy;
    assign ets_go = ets_req;

    dcb_ets ets_inst (
      .clk(clk),
      .rst(rst),
      .strict(cfg.strict),
      .cost(cfg.cost),
      .req(ets_req),
      .eligible(eligible),
      .head_len(l_head),
      .busy(ets_busy),
      .grant_valid(grant_valid),
      .grant_prio(grant_prio),
      .grant_len(grant_len)
    );

    always_ff @(posedge clk) begin
      if (ets_req) req_eligible <= eligible;
    end

    assign start = state == S_WAIT && grant_valid;
    assign start_eligible = req_eligible;
    assign start_prio = grant_prio;
    assign d_data = q_rd_data[cur];
    assign d_valid = q_rd_valid[cur];
    always_comb begin
      q_rd_en = '0;
      l_rd_en = '0;
      q_rd_en[cur] = d_take;
      l_rd_en[cur] = d_take && d_data[BW-1];
    end
  end else begin : g_direct
    // ------------------------------------------------ no queues: in order
    assign room = ~paused;
    assign ets_go = 1'b0;
    assign c_ready = d_take;
    assign start = state == S_IDLE && pfc_announce == '0 && c_valid && !paused[c_prio];
    assign start_eligible = NPRIO'(1) << c_prio;
    assign start_prio = c_prio;
    assign d_data = {c_last, c_keep, c_data};
    assign d_valid = c_valid;
  end

  // the PFC frame of the current announcement (roce-facts §8)
  always_comb begin
    pfc_build = '0;
    pfc_build[0*8 +: 48] = 48'h01_00_00_C2_80_01;  // 01-80-C2-00-00-01, byte 0 first
    pfc_build[6*8 +: 48] = cfg.mac;
    pfc_build[12*8 +: 8] = 8'h88;
    pfc_build[13*8 +: 8] = 8'h08;
    pfc_build[14*8 +: 8] = 8'h01;
    pfc_build[15*8 +: 8] = 8'h01;
    pfc_build[17*8 +: 8] = pfc_announce;
    for (int p = 0; p < NPRIO; p++) begin
      if (pfc_announce[p] && pfc_xoff[p]) begin
        pfc_build[(18 + 2*p)*8 +: 8] = cfg.quanta[15:8];
        pfc_build[(19 + 2*p)*8 +: 8] = cfg.quanta[7:0];
      end
    end
  end

  // output: a register slice to the wire
  logic [BW-1:0] o_data;
  logic          o_valid, o_ready, pfc_last;
  logic [KEEP_WIDTH-1:0] pfc_keep;

  assign pfc_last = 32'(pbeat) == PFC_BEATS - 1;
  always_comb begin
    pfc_keep = '1;
    if (pfc_last) pfc_keep = KEEP_WIDTH'((65'(1) << PFC_LAST_BYTES) - 1);
  end

  assign d_take = state == S_DATA && o_ready && d_valid;
  always_comb begin
    o_valid = 1'b0;
    o_data = d_data;
    if (state == S_DATA) begin
      o_valid = d_valid;
    end else if (state == S_PFC) begin
      o_valid = 1'b1;
      o_data = {pfc_last, pfc_keep, pfc_vec[32'(pbeat)*DATA_WIDTH +: DATA_WIDTH]};
    end
  end

  always_ff @(posedge clk) begin
    dec_valid <= 1'b0;
    if (start) begin
      cur <= start_prio;
      dec_valid <= 1'b1;
      dec_eligible <= start_eligible;
      dec_prio <= start_prio;
      state <= S_DATA;
    end
    case (state)
      S_IDLE: begin
        if (pfc_take) begin
          pfc_vec <= pfc_build;
          pbeat <= '0;
          state <= S_PFC;
        end else if (ets_go) begin
          state <= S_WAIT;
        end
      end
      S_WAIT: ;
      S_DATA: begin
        if (d_take && d_data[BW-1]) state <= S_IDLE;
      end
      S_PFC: begin
        if (o_ready) begin
          pbeat <= pbeat + 1'b1;
          if (pfc_last) state <= S_IDLE;
        end
      end
      default: state <= S_IDLE;
    endcase
    if (rst) begin
      state <= S_IDLE;
      dec_valid <= 1'b0;
      cur <= '0;
    end
  end

  axis_skid #(
    .WIDTH(BW)
  ) out_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data(o_data),
    .s_valid(o_valid),
    .s_ready(o_ready),
    .m_data({m_axis_tlast, m_axis_tkeep, m_axis_tdata}),
    .m_valid(m_axis_tvalid),
    .m_ready(m_axis_tready)
  );

endmodule

`resetall
