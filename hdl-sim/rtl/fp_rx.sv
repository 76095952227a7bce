// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_rx: the fast path's receive side (docs/fastpath.md §3): the parser, the
// receive context and MR tables, the placement check and the mover.
//
//   s_axis ─┬─ rx_parser ─┬─ payload ──────── payload FIFO ─┐
//           │             └─ meta ── fp_rx_check ── verdicts ── fp_rx_move ─┬─ m_dma_wr_desc / m_dma_wr
//           └─ frame FIFO (the frame as received) ──────────┘              ├─ m_exc (frames for the firmware)
//                                                                          ├─ m_ev (events)
//                                                                          └─ m_ack (ACK descriptors)
//
// The frame FIFO keeps each frame until its verdict: an exception hands the
// frame itself to the firmware. Both FIFOs hold a maximum-size frame plus
// the parser's and the check's latency, so a line-rate input never waits
// (FIFO_DEPTH beats: 1024 at 64 bits, 128 at 512).
//
// The firmware reaches the tables through the cfg port (table 0 = receive
// contexts, 16 words each; table 1 = MR entries, 8 words each), one 32-bit
// word at a time; the check's write-back and reads have priority.
// A firmware write of the context table waits while the check holds a
// context it read (its write-back would undo the word), and the check takes
// no new frame while such a write waits. Firmware writes to the context of a
// QP whose packets are placed meanwhile still race with the placement: the
// firmware writes only a held QP's context (or one whose fast path is off).
//
// The receive load (docs/fastpath.md §6 "In the SoC"): words 20..22 of table 1
// (RL_W_*) stage a receive buffer (address low, high, length; any index) and a
// write of word 23 with the QP's number as index commits a command (data bits 1..0: 0
// load the staged buffer, with bit 2 `recv_cqe` too (its wr_id is in fp_cqw's
// table, §3.7), 1 unload, 2 set `rq_empty` with the RNR timer in bits 15..8, 3
// clear it). The command reads the context, applies
// roce_core::fastpath::layout's load_rctx / rnr_rctx rule to it and writes the
// words that change, all while the check holds no context and takes no new
// one (as a firmware word's write waits): between two frames' checks, none
// judged on the old state, none's write-back lost. A load or `rq_empty` set
// also fails while a MSG_DONE of the entry is in flight (raised, not yet
// taken by the firmware: msg_taken): the engine has not completed the WQE it
// names, still its head. A read of word 23 (waiting for the command) answers
// bit 0: the last command changed the context.
//
// `held` (docs/fastpath.md §3.2): a firmware write of the context word that
// holds it leaves it set while an EXCEPTION of the entry is in flight
// (raised by the check, not yet taken by the firmware: exc_taken). The
// firmware releases a QP only while no event waits, but its last look and
// its write landing are cycles apart: a frame checked between them waits
// as an exception, and the fast path must not judge the QP's later frames
// on a context without it. Counted per entry, so another QP's exception in
// the same entry (a miss) holds it too; its next frame is then an exception
// the firmware handles and releases it after.

`resetall
`default_nettype none

module fp_rx
  import roce_rx_pkg::*;
  import fp_pkg::*;
#(
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    parameter int NQP = 256,
    parameter int NMR = 256,
    parameter int QPN_W = $clog2(NQP),
    parameter int MR_W = $clog2(NMR),
    parameter int FIFO_DEPTH = (DATA_WIDTH >= 512) ? 128 : (DATA_WIDTH >= 256) ? 256 :
                               (DATA_WIDTH >= 128) ? 512 : 1024
) (
    input  wire logic                    clk,
    input  wire logic                    rst,

    // the port's MAC and GID, as little-endian records of the wire bytes
    input  wire logic [47:0]             port_mac,
    input  wire logic [127:0]            port_gid,
    // receive queues whose `rq_empty` is stale (roce_fp_top)
    input  wire logic [NQP-1:0]          rq_posted,

    input  wire logic [DATA_WIDTH-1:0]   s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0]   s_axis_tkeep,
    input  wire logic                    s_axis_tvalid,
    output logic                         s_axis_tready,
    input  wire logic                    s_axis_tlast,

    // tables, firmware side (table 0 receive contexts, 1 MRs)
    input  wire logic                    cfg_wr_valid,
    output logic                         cfg_wr_ready,
    input  wire logic                    cfg_wr_table,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire logic [23:0]             cfg_wr_index,   // the low bits index the table
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire logic [4:0]              cfg_wr_word,
    input  wire logic [31:0]             cfg_wr_data,
    input  wire logic                    cfg_rd_valid,
    output logic                         cfg_rd_ready,
    input  wire logic                    cfg_rd_table,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire logic [23:0]             cfg_rd_index,
    /* verilator lint_on UNUSEDSIGNAL */
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire logic [4:0]              cfg_rd_word,    // 0..16, LD_W_CMD
    /* verilator lint_on UNUSEDSIGNAL */
    output logic [31:0]                  cfg_rdata,
    output logic                         cfg_rdata_valid,

    output logic [63:0]                  m_dma_wr_desc_addr,
    output logic [15:0]                  m_dma_wr_desc_len,
    output logic                         m_dma_wr_desc_valid,
    input  wire logic                    m_dma_wr_desc_ready,

    output logic [DATA_WIDTH-1:0]        m_dma_wr_tdata,
    output logic [KEEP_WIDTH-1:0]        m_dma_wr_tkeep,
    output logic                         m_dma_wr_tvalid,
    input  wire logic                    m_dma_wr_tready,
    output logic                         m_dma_wr_tlast,

    output logic [DATA_WIDTH-1:0]        m_exc_tdata,
    output logic [KEEP_WIDTH-1:0]        m_exc_tkeep,
    output logic                         m_exc_tvalid,
    input  wire logic                    m_exc_tready,
    output logic                         m_exc_tlast,

    output logic [EV_BYTES*8-1:0]        m_ev_data,
    output logic                         m_ev_valid,
    input  wire logic                    m_ev_ready,
    // an EXCEPTION event of entry exc_taken_row reached the firmware (taken
    // from roce_fp_top's event port)
    input  wire logic                    exc_taken,
    input  wire logic [QPN_W-1:0]        exc_taken_row,
    // a MSG_DONE event of entry msg_taken_row reached the firmware
    input  wire logic                    msg_taken,
    input  wire logic [QPN_W-1:0]        msg_taken_row,

    // ACK and READ response descriptors (fp_pkg's RESPD_*)
    output logic [RESPD_BYTES*8-1:0]     m_ack_data,
    output logic                         m_ack_valid,
    input  wire logic                    m_ack_ready,

    // the response path: the send context's words 0, 3, 4 and una_psn writes
    // (fp_tx), the in-flight list (fp_inflight); fp_rx_check's ports
    output logic                         sctx_rd_en,
    output logic [QPN_W-1:0]             sctx_rd_addr,
    input  wire logic [95:0]             sctx_rd_data,
    output logic                         una_valid,
    input  wire logic                    una_ready,
    output logic [QPN_W-1:0]             una_addr,
    output logic [23:0]                  una_psn,
    input  wire logic [IF_ENTRIES*IF_BITS-1:0] if_row,
    input  wire logic [$clog2(IF_ENTRIES)-1:0] if_head,
    input  wire logic [$clog2(IF_ENTRIES):0]   if_count,
    output logic                         if_ret_en,
    output logic [QPN_W-1:0]             if_ret_addr,
    output logic [$clog2(IF_ENTRIES):0]  if_ret_n,
    output logic                         sg_rd_en,
    output logic [QPN_W-1:0]             sg_rd_addr,
    output logic [$clog2(IF_ENTRIES)-1:0] sg_rd_lane,
    input  wire logic [SG_BITS-1:0]      sg_rd_data,
    // the CQE writer (fp_cqw): fp_rx_check's groups and records
    output logic                         grp_valid,
    output logic [23:0]                  grp_qpn,
    output logic [$clog2(IF_ENTRIES):0]  grp_n,
    input  wire logic                    grp_room,
    output logic                         cq_rd_en,
    output logic [QPN_W-1:0]             cq_rd_addr,
    output logic [$clog2(IF_ENTRIES)-1:0] cq_rd_lane,
    output logic                         rec_valid,
    output logic [31:0]                  rec_len,
    input  wire logic                    rec_room,

    output logic [31:0]                  drops,       // frames the parser rejected
    output logic [31:0]                  ctx_hits,    // the context cache (fp_rx_check)
    output logic [31:0]                  ctx_misses,
    output logic [31:0]                  oos,         // requests answered (fp_rx_check)
    output logic [31:0]                  dups,
    output logic                         acc_valid,   // a frame hit entry acc_row
    output logic [QPN_W-1:0]             acc_row,
    // Go-Back-N at a NAK (fp_rx_check; the WQE fetch's flags and takes)
    input  wire logic [NQP-1:0]          gbn_ok,
    input  wire logic [NQP-1:0]          gbn_retrying,
    // an RNR NAK the WQE fetch may let wait, a wait under way (§3.8)
    input  wire logic [NQP-1:0]          rnr_ok,
    input  wire logic [NQP-1:0]          rnr_wait,
    input  wire logic                    gbn_taken,
    input  wire logic [QPN_W-1:0]        gbn_taken_e,
    output logic [31:0]                  gbn_drops,
    // the response queue (fp_resp_q): a READ's responses wait, a READ response
    // descriptor came in; a duplicate READ's drop of the QP's later ones
    input  wire logic                    reads_wait,
    input  wire logic                    rd_in,
    // the READ responses and atomic replies queued of QP rd_cnt_qpn (the cycle before)
    output logic [23:0]                  rd_cnt_qpn,
    input  wire logic [7:0]              rd_count,
    output logic                         drop_en,
    output logic [23:0]                  drop_qpn,
    output logic [23:0]                  drop_psn,
    // an atomic request's 8-byte read (fp_rx_check; a requester of the shared
    // DMA read port: at_rd_t* are its answer's beats only)
    output logic [63:0]                  at_rd_req_addr,
    output logic                         at_rd_req_valid,
    input  wire logic                    at_rd_req_ready,
    input  wire logic [63:0]             at_rd_tdata,
    input  wire logic                    at_rd_tvalid,
    input  wire logic                    at_rd_tlast,
    input  wire logic                    at_rd_terr,
    // every frame taken in is done with: placed, handed on or dropped, its
    // outputs delivered (a dropped frame drains without touching any port)
    output logic                         idle
);

  localparam int RC_WORDS = RCTX_BYTES / 4;
  localparam int MR_WORDS = MR_BYTES / 4;
  localparam int BEAT_W = DATA_WIDTH + KEEP_WIDTH + 1;

  initial begin
    if (KEEP_WIDTH * 8 != DATA_WIDTH) begin
      $error("fp_rx: KEEP_WIDTH must be DATA_WIDTH/8");
      $finish;
    end
  end

  // ------------------------------------------------------------ the tee
  logic parser_ready, raw_ready;
  assign s_axis_tready = parser_ready && raw_ready;

  logic [DATA_WIDTH-1:0] pay_tdata;
  logic [KEEP_WIDTH-1:0] pay_tkeep;
  logic                  pay_tvalid, pay_tready, pay_tlast;
  rx_meta_t              meta;
  logic                  meta_valid, meta_ready;

  rx_parser #(
    .DATA_WIDTH(DATA_WIDTH)
  ) parser_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(s_axis_tdata),
    .s_axis_tkeep(s_axis_tkeep),
    .s_axis_tvalid(s_axis_tvalid && raw_ready),
    .s_axis_tready(parser_ready),
    .s_axis_tlast(s_axis_tlast),
    .m_axis_payload_tdata(pay_tdata),
    .m_axis_payload_tkeep(pay_tkeep),
    .m_axis_payload_tvalid(pay_tvalid),
    .m_axis_payload_tready(pay_tready),
    .m_axis_payload_tlast(pay_tlast),
    .m_axis_meta_tdata(meta),
    .m_axis_meta_tvalid(meta_valid),
    .m_axis_meta_tready(meta_ready)
  );

  localparam int FC_W = $clog2(FIFO_DEPTH + 4 + 1);
  logic [BEAT_W-1:0] raw_head;
  logic              raw_valid, raw_pop;
  logic [FC_W-1:0]   raw_count, pay_count;
  /* verilator lint_off UNUSEDSIGNAL */
  logic [15:0]       exc_slot;               // the slot counter the events carry
  /* verilator lint_on UNUSEDSIGNAL */

  roce_bram_fifo #(
    .WIDTH(BEAT_W),
    .DEPTH(FIFO_DEPTH)
  ) raw_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data({s_axis_tlast, s_axis_tkeep, s_axis_tdata}),
    .wr_en(s_axis_tvalid && s_axis_tready),
    .wr_ready(raw_ready),
    .rd_data(raw_head),
    .rd_valid(raw_valid),
    .rd_en(raw_pop),
    .count(raw_count)
  );

  logic [BEAT_W-1:0] pq_head;
  logic              pq_valid, pq_pop;

  roce_bram_fifo #(
    .WIDTH(BEAT_W),
    .DEPTH(FIFO_DEPTH)
  ) pay_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data({pay_tlast, pay_tkeep, pay_tdata}),
    .wr_en(pay_tvalid && pay_tready),
    .wr_ready(pay_tready),
    .rd_data(pq_head),
    .rd_valid(pq_valid),
    .rd_en(pq_pop),
    .count(pay_count)
  );

  // ------------------------------------------------------------ tables
  logic                    rc_rd_en, rc_wr_en, mr_rd_en;
  logic [QPN_W-1:0]        rc_rd_addr, rc_wr_addr;
  logic [MR_W-1:0]         mr_rd_addr;
  logic [RCTX_BYTES*8-1:0] rc_rd_data, rc_wr_data;
  logic [MR_BYTES*8-1:0]   mr_rd_data;
  logic                    fw_wr, fw_rd;
  logic                    rd_table_q;
  logic [4:0]              rd_word_q;

  // the check's write-back and reads win; the firmware waits a cycle then. A write of
  // the context table also waits while the check holds a context it read (from its
  // read to its write-back: after an exception that writes back the context as read,
  // `held` set, and a firmware word landing in between was lost to the old one), and
  // the check reads no new one while such a write waits.
  // While a receive load runs (ld_st) the firmware's other accesses wait.
  logic rc_free;
  typedef enum logic [1:0] { LD_IDLE, LD_RD, LD_CK, LD_WR } ld_st_t;
  ld_st_t ld_st;
  logic ld_busy;
  assign ld_busy = ld_st != LD_IDLE;
  assign cfg_wr_ready = !rc_wr_en && (cfg_wr_table || rc_free) && !ld_busy;
  assign cfg_rd_ready = !rc_rd_en && !mr_rd_en && !ld_busy;
  assign fw_wr = cfg_wr_valid && cfg_wr_ready;
  assign fw_rd = cfg_rd_valid && cfg_rd_ready;

  localparam int LD_LO = RC_RECV_ADDR; // the bytes it may change: RECV_ADDR .. RECV_RESID
  localparam int LD_BITS = 8 * (RCTX_BYTES - RC_RECV_ADDR);
  logic [RC_WORDS-1:0] rc_we;
  logic [MR_WORDS-1:0] mr_we;
  logic                ld_ok;          // the command applies (LD_WR: its words written)
  logic [RC_WORDS-1:0] ld_we;          // the words it changes (of words 8..16)
  logic [LD_BITS-1:0] ld_part;         // those words after it
  logic [RCTX_BYTES*8-1:0] ld_row;     // in the context's place (the rest not written)
  always_comb begin
    ld_row = '0;
    ld_row[8*LD_LO +: LD_BITS] = ld_part;
  end
  always_comb begin
    rc_we = '0;
    mr_we = '0;
    if (rc_wr_en) rc_we = '1;
    else if (ld_st == LD_WR && ld_ok) rc_we = ld_we;
    else if (fw_wr && !cfg_wr_table && 32'(cfg_wr_word) < RC_WORDS) rc_we[cfg_wr_word] = 1'b1;
    if (fw_wr && cfg_wr_table && 32'(cfg_wr_word) < MR_WORDS) mr_we[cfg_wr_word[2:0]] = 1'b1;
  end

  // The EXCEPTION events in flight per entry: raised with the check's
  // write-back (the verdict comes in the same cycle, and the firmware's
  // writes wait that cycle), until the firmware takes them. At most the
  // verdict FIFO's and the event path's few registers hold them (the check
  // stops when those are full): EXC_W bits count far more.
  fp_rx_verdict_t   vd;        // the check's verdicts (below)
  logic             vd_valid, vd_room;
  localparam int EXC_W = 5;
  localparam int HELD_WORD = RC_FLAGS / 4;
  localparam int HELD_BIT = 8 * (RC_FLAGS % 4) + 2;
  logic [NQP-1:0][EXC_W-1:0] exc_n;
  logic             exc_raised;
  logic [QPN_W-1:0] exc_raised_row;
  assign exc_raised = vd_valid && vd.action == ACT_EXC;
  assign exc_raised_row = vd.ev[8*EV_QPN +: QPN_W];

  always_ff @(posedge clk) begin
    if (exc_raised && !(exc_taken && exc_taken_row == exc_raised_row))
      exc_n[exc_raised_row] <= exc_n[exc_raised_row] + 1'b1;
    if (exc_taken && !(exc_raised && exc_taken_row == exc_raised_row))
      exc_n[exc_taken_row] <= exc_n[exc_taken_row] - 1'b1;
    if (rst) exc_n <= '0;
  end

  // The MSG_DONE events in flight per entry, counted as the exceptions are: the
  // firmware loads the next WQE only after it took the last one's MSG_DONE, so at
  // most one is (MSG_W bits count three).
  localparam int MSG_W = 2;
  logic [NQP-1:0][MSG_W-1:0] msg_n;
  logic             msg_raised;
  logic [QPN_W-1:0] msg_raised_row;
  assign msg_raised = vd_valid && vd.ev_valid && vd.ev[8*EV_KIND +: 8] == EVK_MSG_DONE;
  assign msg_raised_row = vd.ev[8*EV_QPN +: QPN_W];

  always_ff @(posedge clk) begin
    if (msg_raised && !(msg_taken && msg_taken_row == msg_raised_row))
      msg_n[msg_raised_row] <= msg_n[msg_raised_row] + 1'b1;
    if (msg_taken && !(msg_raised && msg_taken_row == msg_raised_row))
      msg_n[msg_taken_row] <= msg_n[msg_taken_row] - 1'b1;
    if (rst) msg_n <= '0;
  end

  // ------------------------------------------------------- the receive load
  localparam int LD_W_ADDR = RL_W_ADDR;   // address low, then high
  localparam int LD_W_LEN = RL_W_LEN;
  localparam int LD_W_CMD = RL_W_CMD;
  localparam logic [1:0] LD_LOAD = 2'd0, LD_UNLOAD = 2'd1, LD_RNR = 2'd2, LD_RNR_CLR = 2'd3;
  localparam int LD_FLAGS_WORD = RC_FLAGS / 4;
  localparam logic [7:0] RF_LOADED = 8'h02, RF_HELD = 8'h04, RF_RQ_EMPTY = 8'h10;
  localparam logic [7:0] RF_CQE = 8'h20;
  logic             ld_cqe;           // a load with its wr_id (recv_cqe, §3.7)
  logic [63:0]      ld_addr;
  logic [31:0]      ld_len;
  logic [1:0]       ld_op;
  logic [7:0]       ld_timer;
  logic [23:0]      ld_qpn;
  logic             ld_done;          // the last command's answer (LD_W_CMD's bit 0)

  // the rule (layout::load_rctx, layout::rnr_rctx) on the context read (LD_CK)
  logic             ld_ok_c;
  logic [RC_WORDS-1:0] ld_we_c;
  logic [LD_BITS-1:0] ld_part_c;        // words 8..16 after it
  logic [7:0] ld_fl;
  logic ld_ours, ld_between, ld_loaded, ld_held;
  assign ld_fl = rc_rd_data[8*RC_FLAGS +: 8];
  assign ld_ours = rc_rd_data[8*RC_QPN +: 24] == ld_qpn;
  assign ld_between = rc_rd_data[8*RC_STATE +: 8] == 8'd1 && rc_rd_data[8*RC_CUR +: 8] == 8'd0;
  assign ld_loaded = (ld_fl & RF_LOADED) != '0;
  assign ld_held = (ld_fl & RF_HELD) != '0;
  always_comb begin
    ld_part_c = rc_rd_data[8*LD_LO +: LD_BITS];
    ld_ok_c = 1'b0;
    ld_we_c = '0;
    ld_we_c[LD_FLAGS_WORD] = 1'b1;
    unique case (ld_op)
      LD_LOAD: begin
        ld_ok_c = ld_ours && ld_between && !ld_held && !ld_loaded && msg_n[ld_qpn[QPN_W-1:0]] == '0;
        ld_part_c[8*(RC_RECV_ADDR-LD_LO) +: 64] = ld_addr;
        ld_part_c[8*(RC_RECV_RESID-LD_LO) +: 32] = ld_len;
        ld_part_c[8*(RC_FLAGS-LD_LO) +: 8] = (ld_fl & ~(RF_RQ_EMPTY | RF_CQE)) | RF_LOADED
            | (ld_cqe ? RF_CQE : 8'h00);
        ld_we_c[RC_RECV_ADDR / 4] = 1'b1;
        ld_we_c[RC_RECV_ADDR / 4 + 1] = 1'b1;
        ld_we_c[RC_RECV_RESID / 4] = 1'b1;
      end
      LD_UNLOAD: begin
        ld_ok_c = ld_ours && ld_between && ld_loaded;
        ld_part_c[8*(RC_FLAGS-LD_LO) +: 8] = ld_fl & ~(RF_LOADED | RF_CQE);
      end
      LD_RNR: begin
        ld_ok_c = ld_ours && ld_between && !ld_held && !ld_loaded && msg_n[ld_qpn[QPN_W-1:0]] == '0;
        ld_part_c[8*(RC_FLAGS-LD_LO) +: 8] = ld_fl | RF_RQ_EMPTY;
        ld_part_c[8*(RC_RECV_ADDR-LD_LO) +: 8] = ld_timer;
        ld_we_c[RC_RECV_ADDR / 4] = 1'b1;
      end
      LD_RNR_CLR: begin
        ld_ok_c = ld_ours && (ld_fl & RF_RQ_EMPTY) != '0;
        ld_part_c[8*(RC_FLAGS-LD_LO) +: 8] = ld_fl & ~RF_RQ_EMPTY;
      end
    endcase
  end

  always_ff @(posedge clk) begin
    if (fw_wr && !cfg_wr_table) begin
      if (32'(cfg_wr_word) == LD_W_ADDR) ld_addr[31:0] <= cfg_wr_data;
      if (32'(cfg_wr_word) == LD_W_ADDR + 1) ld_addr[63:32] <= cfg_wr_data;
      if (32'(cfg_wr_word) == LD_W_LEN) ld_len <= cfg_wr_data;
    end
    unique case (ld_st)
      LD_IDLE: if (fw_wr && !cfg_wr_table && 32'(cfg_wr_word) == LD_W_CMD) begin
        ld_op <= cfg_wr_data[1:0];
        ld_cqe <= cfg_wr_data[2];
        ld_timer <= cfg_wr_data[15:8];
        ld_qpn <= cfg_wr_index;
        ld_st <= LD_RD;
      end
      LD_RD: ld_st <= LD_CK;
      LD_CK: begin
        ld_ok <= ld_ok_c;
        ld_we <= ld_we_c;
        ld_part <= ld_part_c;
        ld_st <= LD_WR;
      end
      default: begin  // LD_WR: the words written
        ld_done <= ld_ok;
        ld_st <= LD_IDLE;
      end
    endcase
    if (rst) begin
      ld_st <= LD_IDLE;
      ld_done <= 1'b0;
      ld_ok <= 1'b0;
    end
  end

  // the firmware's word, `held` kept while an exception of the entry is in flight
  logic [31:0] fw_rc_data;
  always_comb begin
    fw_rc_data = cfg_wr_data;
    if (32'(cfg_wr_word) == HELD_WORD && exc_n[cfg_wr_index[QPN_W-1:0]] != '0)
      fw_rc_data[HELD_BIT] = 1'b1;
  end

  roce_ram #(
    .WORDS(RC_WORDS),
    .DEPTH(NQP)
  ) rctx_ram_inst (
    .clk(clk),
    .wr_addr(rc_wr_en ? rc_wr_addr : ld_busy ? ld_qpn[QPN_W-1:0] : cfg_wr_index[QPN_W-1:0]),
    .wr_en(rc_we),
    .wr_data(rc_wr_en ? rc_wr_data : ld_busy ? ld_row : {RC_WORDS{fw_rc_data}}),
    .rd_addr(rc_rd_en ? rc_rd_addr : ld_busy ? ld_qpn[QPN_W-1:0] : cfg_rd_index[QPN_W-1:0]),
    .rd_en(rc_rd_en || ld_st == LD_RD || (fw_rd && !cfg_rd_table)),
    .rd_data(rc_rd_data)
  );

  roce_ram #(
    .WORDS(MR_WORDS),
    .DEPTH(NMR)
  ) mr_ram_inst (
    .clk(clk),
    .wr_addr(cfg_wr_index[MR_W-1:0]),
    .wr_en(mr_we),
    .wr_data({MR_WORDS{cfg_wr_data}}),
    .rd_addr(mr_rd_en ? mr_rd_addr : cfg_rd_index[MR_W-1:0]),
    .rd_en(mr_rd_en || (fw_rd && cfg_rd_table)),
    .rd_data(mr_rd_data)
  );

  logic rd_ld_q;   // the read was of LD_W_CMD: the receive load's answer
  always_ff @(posedge clk) begin
    cfg_rdata_valid <= fw_rd;
    if (fw_rd) begin
      rd_table_q <= cfg_rd_table;
      rd_word_q <= cfg_rd_word;
      rd_ld_q <= !cfg_rd_table && 32'(cfg_rd_word) == LD_W_CMD;
    end
    if (rst) cfg_rdata_valid <= 1'b0;
  end
  assign cfg_rdata = rd_ld_q ? {31'd0, ld_done}
                   : rd_table_q ? mr_rd_data[32*rd_word_q[2:0] +: 32]
                   : 32'(rd_word_q) < RC_WORDS ? rc_rd_data[32*rd_word_q +: 32] : '0;

  // ------------------------------------------------------------- check

  logic [2:0]     vq_count;
  logic           move_idle;
  fp_rx_check #(
    .NQP(NQP),
    .NMR(NMR)
  ) check_inst (
    .clk(clk),
    .rst(rst),
    .port_mac(port_mac),
    .port_gid(port_gid),
    .rq_posted(rq_posted),
    .s_meta(meta),
    .s_meta_valid(meta_valid),
    .s_meta_ready(meta_ready),
    .rctx_rd_en(rc_rd_en),
    .rctx_rd_addr(rc_rd_addr),
    .rctx_rd_data(rc_rd_data),
    .rctx_wr_en(rc_wr_en),
    .rctx_wr_addr(rc_wr_addr),
    .rctx_wr_data(rc_wr_data),
    .fw_wr_wait((cfg_wr_valid && !cfg_wr_table) || ld_busy),
    .rctx_free(rc_free),
    .mr_rd_en(mr_rd_en),
    .mr_rd_addr(mr_rd_addr),
    .mr_rd_data(mr_rd_data),
    .m_verdict(vd),
    .m_verdict_valid(vd_valid),
    .verdict_room(vd_room),
    .frame_slot(exc_slot),
    .sctx_rd_en(sctx_rd_en),
    .sctx_rd_addr(sctx_rd_addr),
    .sctx_rd_data(sctx_rd_data),
    .una_valid(una_valid),
    .una_ready(una_ready),
    .una_addr(una_addr),
    .una_psn(una_psn),
    .if_row(if_row),
    .if_head(if_head),
    .if_count(if_count),
    .if_ret_en(if_ret_en),
    .if_ret_addr(if_ret_addr),
    .if_ret_n(if_ret_n),
    .sg_rd_en(sg_rd_en),
    .sg_rd_addr(sg_rd_addr),
    .sg_rd_lane(sg_rd_lane),
    .sg_rd_data(sg_rd_data),
    .grp_valid(grp_valid),
    .grp_qpn(grp_qpn),
    .grp_n(grp_n),
    .grp_room(grp_room),
    .cq_rd_en(cq_rd_en),
    .cq_rd_addr(cq_rd_addr),
    .cq_rd_lane(cq_rd_lane),
    .rec_valid(rec_valid),
    .rec_len(rec_len),
    .rec_room(rec_room),
    .ctx_hits(ctx_hits),
    .ctx_misses(ctx_misses),
    .oos(oos),
    .dups(dups),
    .acc_valid(acc_valid),
    .acc_row(acc_row),
    .gbn_ok(gbn_ok),
    .gbn_retrying(gbn_retrying),
    .rnr_ok(rnr_ok),
    .rnr_wait(rnr_wait),
    .gbn_taken(gbn_taken),
    .gbn_taken_e(gbn_taken_e),
    .gbn_drops(gbn_drops),
    .reads_wait(reads_wait),
    .rd_in(rd_in),
    .rd_cnt_qpn(rd_cnt_qpn),
    .rd_count(rd_count),
    .drop_en(drop_en),
    .drop_qpn(drop_qpn),
    .drop_psn(drop_psn),
    // the verdicts before an atomic are carried out, their DMA writes gone
    .moved(vq_count == '0 && move_idle),
    .at_rd_req_addr(at_rd_req_addr),
    .at_rd_req_valid(at_rd_req_valid),
    .at_rd_req_ready(at_rd_req_ready),
    .at_rd_tdata(at_rd_tdata),
    .at_rd_tvalid(at_rd_tvalid),
    .at_rd_tlast(at_rd_tlast),
    .at_rd_terr(at_rd_terr)
  );

  fp_rx_verdict_t vq_head;
  logic           vq_pop;

  roce_fifo #(
    .WIDTH($bits(fp_rx_verdict_t)),
    .DEPTH(4)
  ) verdict_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data(vd),
    .wr_en(vd_valid),
    .rd_data(vq_head),
    .rd_en(vq_pop),
    .count(vq_count)
  );

  // the check pushes at most one verdict per five cycles
  always_ff @(posedge clk) begin
    vd_room <= vq_count <= 3'd2;
    if (vd_valid && vd.action == ACT_DROP) drops <= drops + 32'd1;
    if (rst) begin
      vd_room <= 1'b0;
      drops <= '0;
    end
  end

  // ------------------------------------------------------------- mover
  // A frame is in the frame FIFO from its first beat until the mover is done
  // with it, so with that FIFO empty the parser and the check hold nothing.
  assign idle = raw_count == '0 && pay_count == '0 && vq_count == '0 && move_idle;

  fp_rx_move #(
    .DATA_WIDTH(DATA_WIDTH)
  ) move_inst (
    .clk(clk),
    .rst(rst),
    .s_verdict(vq_head),
    .s_verdict_valid(vq_count != '0),
    .s_verdict_pop(vq_pop),
    .s_raw_tdata(raw_head[DATA_WIDTH-1:0]),
    .s_raw_tkeep(raw_head[DATA_WIDTH +: KEEP_WIDTH]),
    .s_raw_tlast(raw_head[BEAT_W-1]),
    .s_raw_tvalid(raw_valid),
    .s_raw_pop(raw_pop),
    .s_pay_tdata(pq_head[DATA_WIDTH-1:0]),
    .s_pay_tkeep(pq_head[DATA_WIDTH +: KEEP_WIDTH]),
    .s_pay_tlast(pq_head[BEAT_W-1]),
    .s_pay_tvalid(pq_valid),
    .s_pay_pop(pq_pop),
    .m_dma_wr_desc_addr(m_dma_wr_desc_addr),
    .m_dma_wr_desc_len(m_dma_wr_desc_len),
    .m_dma_wr_desc_valid(m_dma_wr_desc_valid),
    .m_dma_wr_desc_ready(m_dma_wr_desc_ready),
    .m_dma_wr_tdata(m_dma_wr_tdata),
    .m_dma_wr_tkeep(m_dma_wr_tkeep),
    .m_dma_wr_tvalid(m_dma_wr_tvalid),
    .m_dma_wr_tready(m_dma_wr_tready),
    .m_dma_wr_tlast(m_dma_wr_tlast),
    .m_exc_tdata(m_exc_tdata),
    .m_exc_tkeep(m_exc_tkeep),
    .m_exc_tvalid(m_exc_tvalid),
    .m_exc_tready(m_exc_tready),
    .m_exc_tlast(m_exc_tlast),
    .m_ev_data(m_ev_data),
    .m_ev_valid(m_ev_valid),
    .m_ev_ready(m_ev_ready),
    .m_ack_data(m_ack_data),
    .m_ack_valid(m_ack_valid),
    .m_ack_ready(m_ack_ready),
    .idle(move_idle)
  );

endmodule

`resetall
