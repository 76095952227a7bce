// SPDX-License-Identifier: MIT OR Apache-2.0
//
// roce_fp_top: the RC fast path (docs/fastpath.md) at one bus width: fp_tx
// and fp_rx, the receive side's ACK descriptors joined to the firmware's in
// front of the segmenter, and the firmware's table port split by table (0
// send contexts, 1 receive
// contexts (words 0..16), words 20..23 the receive load, fp_rx; 2 MR entries, 3 the port's addresses: words 0..1 MAC, 2..5 GID,
// as little-endian records of the wire bytes; word 8 the context entries'
// accessed bits, 32 per index, read and cleared; words 16..20 and 24 the CQE
// writer's CQ rings and send CQs, fp_cqw; words 9..15, 21..23, 25..28 the
// WQE fetch's, fp_sqf). The Verilator top of roce-hdl-sim's fast-path
// model; the SoC instantiates it the same way, with HW_NOW: the WQE fetch
// then takes the time and the host's send doorbells from the SoC (now_ns,
// sq_db_*) and watches its deadlines itself (fp_sqf); without it those
// inputs are not looked at and the firmware writes both through the table
// port.

`resetall
`default_nettype none

module roce_fp_top
  import fp_pkg::*;
#(
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    parameter int NQP = 256,
    parameter int NMR = 256,
    parameter bit HW_NOW = 1'b0
) (
    input  wire logic                    clk,
    input  wire logic                    rst,

    // the wire
    input  wire logic [DATA_WIDTH-1:0]   rx_s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0]   rx_s_axis_tkeep,
    input  wire logic                    rx_s_axis_tvalid,
    output logic                         rx_s_axis_tready,
    input  wire logic                    rx_s_axis_tlast,

    output logic [DATA_WIDTH-1:0]        tx_m_axis_tdata,
    output logic [KEEP_WIDTH-1:0]        tx_m_axis_tkeep,
    output logic                         tx_m_axis_tvalid,
    input  wire logic                    tx_m_axis_tready,
    output logic                         tx_m_axis_tlast,
    output logic                         tx_m_axis_tuser,   // abort the frame (last beat)

    // firmware: descriptors
    input  wire logic [TXD_BYTES*8-1:0]  txd_data,
    input  wire logic                    txd_valid,
    output logic                         txd_ready,
    input  wire logic [ACKD_BYTES*8-1:0] ackd_data,
    input  wire logic                    ackd_valid,
    output logic                         ackd_ready,

    // firmware: tables
    input  wire logic                    cfg_wr_valid,
    output logic                         cfg_wr_ready,
    input  wire logic [1:0]              cfg_wr_table,
    input  wire logic [23:0]             cfg_wr_index,
    input  wire logic [4:0]              cfg_wr_word,
    input  wire logic [31:0]             cfg_wr_data,
    input  wire logic                    cfg_rd_valid,
    output logic                         cfg_rd_ready,
    input  wire logic [1:0]              cfg_rd_table,
    input  wire logic [23:0]             cfg_rd_index,
    input  wire logic [4:0]              cfg_rd_word,
    output logic [31:0]                  cfg_rdata,
    output logic                         cfg_rdata_valid,

    // firmware: events and exception frames
    output logic [EV_BYTES*8-1:0]        ev_data,
    output logic                         ev_valid,
    input  wire logic                    ev_ready,

    output logic [DATA_WIDTH-1:0]        exc_tdata,
    output logic [KEEP_WIDTH-1:0]        exc_tkeep,
    output logic                         exc_tvalid,
    input  wire logic                    exc_tready,
    output logic                         exc_tlast,

    // host memory: DMA reads (TX payload) and writes (RX placement)
    output logic [63:0]                  dma_rd_req_addr,
    output logic [15:0]                  dma_rd_req_len,
    output logic                         dma_rd_req_last,
    output logic                         dma_rd_req_valid,
    input  wire logic                    dma_rd_req_ready,

    input  wire logic [DATA_WIDTH-1:0]   dma_rd_tdata,
    input  wire logic [KEEP_WIDTH-1:0]   dma_rd_tkeep,
    input  wire logic                    dma_rd_tvalid,
    output logic                         dma_rd_tready,
    input  wire logic                    dma_rd_tlast,
    input  wire logic                    dma_rd_terr,       // the host could not read it

    output logic [63:0]                  dma_wr_desc_addr,
    output logic [15:0]                  dma_wr_desc_len,
    output logic                         dma_wr_desc_valid,
    input  wire logic                    dma_wr_desc_ready,

    output logic [DATA_WIDTH-1:0]        dma_wr_tdata,
    output logic [KEEP_WIDTH-1:0]        dma_wr_tkeep,
    output logic                         dma_wr_tvalid,
    input  wire logic                    dma_wr_tready,
    output logic                         dma_wr_tlast,

    // counters
    output logic [31:0]                  tx_bad_desc,
    output logic [31:0]                  tx_resent,
    output logic [31:0]                  tx_dma_errors,
    output logic [31:0]                  rx_drops,
    // the receive-context cache: frames whose QP's context was in its entry
    // (qpn mod NQP, tagged with the QPN) and on; frames whose entry held another
    // QP's (an EXCEPTION with reason 14: the firmware fills the entry)
    output logic [31:0]                  rx_ctx_hits,
    output logic [31:0]                  rx_ctx_misses,
    // request packets the receive path answered itself (docs/fastpath.md §3.4):
    // out of sequence (dropped; one NAK per gap) and duplicate SEND/WRITE
    // (dropped, ACKed again): the engine's out_of_seq_request and
    // duplicate_request never see them
    output logic [31:0]                  rx_oos,
    output logic [31:0]                  rx_dups,
    // the segmenter holds no message: a descriptor offered now is taken at once
    output logic                         tx_idle,
    // descriptors the segmenter holds (its 32 slots): the descriptor ring's
    // entries still in use, a consumer index the firmware reads
    output logic [5:0]                   tx_slots_used,
    // the receive side holds no frame: every frame taken in was placed, handed
    // to the firmware or dropped
    output logic                         rx_idle,

    // with HW_NOW (the SoC): the time in ns, the host's send doorbells (QPN,
    // producer index) and the send queues the WQE fetch holds (fp_sqf)
    input  wire logic [63:0]             now_ns,
    input  wire logic                    sq_db_valid,
    output logic                         sq_db_ready,
    input  wire logic [$clog2(NQP)-1:0]  sq_db_qpn,
    input  wire logic [31:0]             sq_db_pi,
    output logic [NQP-1:0]               sq_active,
    // per context entry: the receive queue may hold WQEs the firmware has not
    // seen, so its `rq_empty` is stale and not acted on (the SoC's soc_fp;
    // elsewhere tied low: the firmware's flag is written as one step with
    // what it knows, docs/fastpath.md §3.4 "Receiver not ready")
    input  wire logic [NQP-1:0]          rq_posted,
    // the WQE fetch's news word and running counts of WQEs taken and of them
    // SENDs, as table 3's SQ_R_NEWS / SQ_R_TAKEN / SQ_R_SENDS read them (the SoC's
    // plain registers: one load each); sq_news_rd clears the news word as its
    // read does (elsewhere tied low)
    output logic [3:0]                   sq_news,
    output logic [31:0]                  sq_taken,
    output logic [31:0]                  sq_sends,
    input  wire logic                    sq_news_rd
);

  localparam int QPN_W = $clog2(NQP);

  // ------------------------------------------------- ACKs into the segmenter
  // (and the receive side's READ response descriptors, fp_pkg's RESPD_*)
  logic [RESPD_BYTES*8-1:0] rx_ack;
  logic                     rx_ack_valid, rx_ack_ready;
  logic [RESPD_BYTES*8-1:0] ack_in, fw_ack;
  logic                     ack_in_valid, ack_in_ready, ack_skid_ready;
  // the response queue's READ state (to fp_rx_check) and a duplicate READ's drop
  logic                     reads_wait, rd_in, drop_en;
  logic [23:0]              drop_qpn, drop_psn;
  // a QP's READ responses and atomic replies queued (fp_resp_q's rd_count), for
  // fp_rx_check's max_dest_rd_atomic
  logic [23:0]              rd_cnt_qpn;
  logic [7:0]               rd_count;

  // the receive side's ACKs first; the firmware's when there is none. The
  // firmware's are ACK descriptors only: the bits that would make one a READ
  // response descriptor are cleared.
  assign rx_ack_ready = ack_skid_ready;
  assign ackd_ready = ack_skid_ready && !rx_ack_valid;
  always_comb begin
    fw_ack = '0;
    fw_ack[ACKD_BYTES*8-1:0] = ackd_data;
    fw_ack[8*AD_FLAGS + AD_F_READ] = 1'b0;
    fw_ack[8*AD_FLAGS + AD_F_FIRST] = 1'b0;
    fw_ack[8*AD_FLAGS + AD_F_MERGE] = 1'b0;
    fw_ack[8*AD_FLAGS + AD_F_ATOMIC] = 1'b0;
  end

  axis_skid #(
    .WIDTH(RESPD_BYTES * 8)
  ) ack_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data(rx_ack_valid ? rx_ack : fw_ack),
    .s_valid(rx_ack_valid || ackd_valid),
    .s_ready(ack_skid_ready),
    .m_data(ack_in),
    .m_valid(ack_in_valid),
    .m_ready(ack_in_ready)
  );

  // Go-Back-N at a NAK (§3.8): the WQE fetch's per-entry flags for fp_rx_check,
  // its takes of the rewind events, fp_rx_check's count of the NAKs it dropped
  logic [NQP-1:0]   gbn_ok, gbn_retrying;
  logic [NQP-1:0]   rnr_ok, rnr_wait;
  logic             gbn_taken;
  logic [QPN_W-1:0] gbn_taken_e;
  logic [31:0]      gbn_drops;
  logic             sq_scanning;

  // -------------------------------------------------------------- tables
  logic tx_wr_ready, rx_wr_ready, tx_rd_ready, rx_rd_ready;
  logic [31:0] tx_rdata, rx_rdata;
  logic tx_rdata_valid, rx_rdata_valid;
  logic wr_tx, rd_tx, wr_port, rd_port;
  assign wr_tx = cfg_wr_table == 2'd0;
  assign rd_tx = cfg_rd_table == 2'd0;
  assign wr_port = cfg_wr_table == 2'd3;
  assign rd_port = cfg_rd_table == 2'd3;
  // the CQE writer's words of table 3 (fp_pkg's CQW_*)
  logic wr_cqw, rd_cqw, cqw_wr_ready, cqw_rd_ready;
  logic [31:0] cqw_rdata;
  logic cqw_rdata_valid;
  assign wr_cqw = wr_port && cqw_wr_word(cfg_wr_word);
  assign rd_cqw = rd_port && cqw_rd_word(cfg_rd_word);
  // the WQE fetch's words of table 3 (fp_pkg's SQ_*)
  logic wr_sq, rd_sq, sq_wr_ready, sq_rd_ready;
  logic [31:0] sq_rdata;
  logic sq_rdata_valid;
  assign wr_sq = wr_port && sq_wr_word(cfg_wr_word);
  assign rd_sq = rd_port && sq_rd_word(cfg_rd_word);
  assign cfg_wr_ready = wr_cqw ? cqw_wr_ready : wr_sq ? sq_wr_ready
      : wr_port || (wr_tx ? tx_wr_ready : rx_wr_ready);
  assign cfg_rd_ready = rd_cqw ? cqw_rd_ready : rd_sq ? sq_rd_ready
      : rd_port || (rd_tx ? tx_rd_ready : rx_rd_ready);

  // the port's addresses (table 3): words 0..1 the MAC (bytes 0..5), 2..5 the GID
  logic [255:0] port_rec;
  logic [31:0]  port_rdata;
  logic         port_rdata_valid;

  // the accessed bits (docs/scale.md, "The accessed bits"): one flip-flop per
  // context entry, set by each frame that hits its entry (fp_rx_check's
  // acc_valid), read and cleared 32 at a time by the firmware's cache before it
  // evicts a QP (table 3, word 8, index w: entries 32w..32w+31; an index past
  // the entries reads 0). Only the bits a read returns are cleared, so a frame
  // that hits in the cycle of the read keeps its bit for the next one.
  localparam int ACC_WORDS = (NQP + 31) / 32;
  logic [31:0]      accessed [ACC_WORDS];
  logic             acc_valid;
  logic [QPN_W-1:0] acc_row;
  logic             rd_acc;
  logic [31:0]      acc_word;   // the word the read names
  assign rd_acc = cfg_rd_valid && rd_port && cfg_rd_word == 5'd8;
  always_comb begin
    acc_word = '0;
    for (int w = 0; w < ACC_WORDS; w++)
      if (cfg_rd_index == 24'(w)) acc_word = accessed[w];
  end

  always_ff @(posedge clk) begin
    if (cfg_wr_valid && wr_port && cfg_wr_word[4:3] == 2'd0)
      port_rec[32*cfg_wr_word[2:0] +: 32] <= cfg_wr_data;
    port_rdata_valid <= cfg_rd_valid && rd_port && !rd_cqw && !rd_sq;
    port_rdata <= cfg_rd_word == 5'd8 ? acc_word : port_rec[32*cfg_rd_word[2:0] +: 32];
    for (int w = 0; w < ACC_WORDS; w++) begin
      logic [31:0] clr, set;
      clr = (rd_acc && cfg_rd_index == 24'(w)) ? accessed[w] : '0;
      set = (acc_valid && 32'(acc_row) / 32 == w) ? 32'd1 << (32'(acc_row) % 32) : '0;
      accessed[w] <= (accessed[w] & ~clr) | set;
    end
    if (rst) begin
      port_rdata_valid <= 1'b0;
      for (int w = 0; w < ACC_WORDS; w++) accessed[w] <= '0;
    end
  end
  assign cfg_rdata = tx_rdata_valid ? tx_rdata : port_rdata_valid ? port_rdata
      : cqw_rdata_valid ? cqw_rdata : sq_rdata_valid ? sq_rdata : rx_rdata;
  assign cfg_rdata_valid = tx_rdata_valid || rx_rdata_valid || port_rdata_valid || cqw_rdata_valid
      || sq_rdata_valid;

  // ------------------------------------------- descriptors into the segmenter
  // the WQE fetch's (fp_sqf) ahead of the firmware's, which wait while a fetch
  // is under way
  logic [TXD_BYTES*8-1:0] sq_txd, seg_txd;
  logic                   sq_txd_valid, seg_txd_valid, seg_txd_ready, sq_busy;
  assign seg_txd = sq_txd_valid ? sq_txd : txd_data;
  assign seg_txd_valid = sq_txd_valid || (txd_valid && !sq_busy);
  assign txd_ready = seg_txd_ready && !sq_txd_valid && !sq_busy;

  // ------------------------------------------------ the shared DMA read port
  // the segmenter's payload reads, the fetch's WQE reads and the receive
  // path's atomic reads (8 bytes, docs/fastpath.md §6 "Atomic requests in
  // RTL"). The answers come back in request order, so the port is lent whole:
  // the fetch asks only with none of the segmenter's outstanding (fp_sqf), so
  // the answer until its last beat is the fetch's; the atomic read likewise.
  // An atomic that waits holds the segmenter's next packet (at_hold: not in
  // the middle of one, whose other pieces must go first, and not while the
  // fetch holds or owns the port; the fetch asks only without it, rd_other),
  // asks once the segmenter's packets are answered (at_go: stable until taken,
  // since nothing else may ask meanwhile) and owns the data until its last beat.
  logic [63:0] tx_rd_req_addr, sq_rd_req_addr, at_rd_req_addr;
  logic [15:0] tx_rd_req_len;
  logic        tx_rd_req_last, tx_rd_req_valid, tx_rd_req_ready;
  logic        sq_rd_req_valid, sq_rd_hold, sq_rd_own;
  logic        tx_rd_tvalid, tx_rd_tready;
  logic        at_rd_req_valid, at_own, at_hold, at_go, sq_tx_none, sq_tx_half;
  assign at_hold = at_rd_req_valid && !at_own && !sq_tx_half && !sq_rd_hold && !sq_rd_own;
  assign at_go = at_hold && sq_tx_none;
  assign dma_rd_req_addr = sq_rd_req_valid ? sq_rd_req_addr : at_go ? at_rd_req_addr
      : tx_rd_req_addr;
  assign dma_rd_req_len = sq_rd_req_valid ? 16'd160 : at_go ? 16'd8 : tx_rd_req_len;
  assign dma_rd_req_last = sq_rd_req_valid || at_go || tx_rd_req_last;
  assign dma_rd_req_valid = sq_rd_req_valid || at_go
      || (tx_rd_req_valid && !sq_rd_hold && !at_hold);
  assign tx_rd_req_ready = dma_rd_req_ready && !sq_rd_hold && !at_hold;
  assign tx_rd_tvalid = dma_rd_tvalid && !sq_rd_own && !at_own;
  assign dma_rd_tready = sq_rd_own || at_own || tx_rd_tready;
  always_ff @(posedge clk) begin
    if (at_go && dma_rd_req_ready) at_own <= 1'b1;
    if (at_own && dma_rd_tvalid && dma_rd_tlast) at_own <= 1'b0;
    if (rst) at_own <= 1'b0;
  end

  // ------------------------------------- the response path's shared state
  logic                          resp_rd_en;
  logic [QPN_W-1:0]              resp_rd_addr;
  logic [95:0]                   resp_rd_data;
  logic                          resp_una_valid, resp_una_ready;
  logic [QPN_W-1:0]              resp_una_addr;
  logic [23:0]                   resp_una_psn;
  logic [IF_ENTRIES*IF_BITS-1:0] if_row;
  logic [$clog2(IF_ENTRIES)-1:0] if_head;
  logic [$clog2(IF_ENTRIES):0]   if_count, if_ret_n;
  logic                          if_ret_en;
  logic [QPN_W-1:0]              if_ret_addr;
  logic                          sg_rd_en;
  logic [QPN_W-1:0]              sg_rd_addr;
  logic [$clog2(IF_ENTRIES)-1:0] sg_rd_lane;
  logic [SG_BITS-1:0]            sg_rd_data;
  // the CQE writer's inputs (fp_rx_check) and the records it reads
  logic                          grp_valid, grp_room, rec_valid, rec_room;
  logic [23:0]                   grp_qpn;
  logic [$clog2(IF_ENTRIES):0]   grp_n;
  logic                          cq_rd_en;
  logic [QPN_W-1:0]              cq_rd_addr;
  logic [$clog2(IF_ENTRIES)-1:0] cq_rd_lane;
  logic [CQ_INFO_BITS-1:0]       cq_rd_data;
  logic [31:0]                   rec_len;
  // fp_rx's events and DMA writes, into the CQE writer
  logic [EV_BYTES*8-1:0]         rx_ev_data;
  logic                          rx_ev_valid, rx_ev_ready;
  logic [63:0]                   rx_wr_desc_addr;
  logic [15:0]                   rx_wr_desc_len;
  logic                          rx_wr_desc_valid, rx_wr_desc_ready;
  logic [DATA_WIDTH-1:0]         rx_wr_tdata;
  logic [KEEP_WIDTH-1:0]         rx_wr_tkeep;
  logic                          rx_wr_tvalid, rx_wr_tready, rx_wr_tlast;
  logic                          rx_side_idle, cqw_idle;
  logic                          cqw_ev_valid, cqw_ev_ready;
  /* verilator lint_off UNUSEDSIGNAL */
  logic [31:0]                   cqw_cqes;   // for waveforms; not a port (yet)
  /* verilator lint_on UNUSEDSIGNAL */

  // the in-flight list: a new message joins it as the TX intake takes its
  // descriptor (not a FLUSH, not a REPLAY)
  fp_inflight #(
    .NQP(NQP)
  ) inflight_inst (
    .clk(clk),
    .rst(rst),
    .ap_valid(seg_txd_valid && seg_txd_ready && !seg_txd[8*TD_FLAGS + 1]),
    .ap_qpn(seg_txd[8*TD_QPN +: QPN_W]),
    .ap_op(seg_txd[8*TD_OP +: 8]),
    .ap_first(seg_txd[8*TD_FIRST_PSN +: 24]),
    .ap_len(seg_txd[8*TD_LENGTH +: 32]),
    .ap_wqe(seg_txd[8*TD_WQE +: 16]),
    .ap_nsge(seg_txd[8*TD_NUM_SGE +: 8]),
    .ap_sge(seg_txd[8*TD_SGE +: SG_BITS]),
    .ap_cqe(seg_txd[8*TD_FLAGS + TD_F_CQE]),
    .ap_wrid(seg_txd[8*TD_WR_ID +: 64]),
    .ap_imm(seg_txd[8*TD_IMM +: 32]),
    .w0_wr_en(cfg_wr_valid && cfg_wr_ready && wr_tx && cfg_wr_word == 5'd0),
    .w0_wr_addr(cfg_wr_index[QPN_W-1:0]),
    .w0_wr_data(cfg_wr_data),
    .rd_en(resp_rd_en),
    .rd_addr(resp_rd_addr),
    .rd_row(if_row),
    .rd_head(if_head),
    .rd_count(if_count),
    .ret_en(if_ret_en),
    .ret_addr(if_ret_addr),
    .ret_n(if_ret_n),
    .sg_rd_en(sg_rd_en),
    .sg_rd_addr(sg_rd_addr),
    .sg_rd_lane(sg_rd_lane),
    .sg_rd_data(sg_rd_data),
    .cq_rd_en(cq_rd_en),
    .cq_rd_addr(cq_rd_addr),
    .cq_rd_lane(cq_rd_lane),
    .cq_rd_data(cq_rd_data)
  );

  // ----------------------------------------------------------------- TX

  fp_tx #(
    .DATA_WIDTH(DATA_WIDTH),
    .NQP(NQP),
    .NMR(NMR)
  ) tx_inst (
    .clk(clk),
    .rst(rst),
    .s_txd_data(seg_txd),
    .s_txd_valid(seg_txd_valid),
    .s_txd_ready(seg_txd_ready),
    .s_ackd_data(ack_in),
    .s_ackd_valid(ack_in_valid),
    .s_ackd_ready(ack_in_ready),
    .cfg_wr_valid(cfg_wr_valid && wr_tx),
    .cfg_wr_ready(tx_wr_ready),
    .cfg_wr_index(cfg_wr_index[QPN_W-1:0]),
    .cfg_wr_word(cfg_wr_word),
    .cfg_wr_data(cfg_wr_data),
    .cfg_rd_valid(cfg_rd_valid && rd_tx),
    .cfg_rd_ready(tx_rd_ready),
    .cfg_rd_index(cfg_rd_index[QPN_W-1:0]),
    .cfg_rd_word(cfg_rd_word),
    .cfg_rdata(tx_rdata),
    .cfg_rdata_valid(tx_rdata_valid),
    .resp_rd_en(resp_rd_en),
    .resp_rd_addr(resp_rd_addr),
    .resp_rd_data(resp_rd_data),
    .resp_una_valid(resp_una_valid),
    .resp_una_ready(resp_una_ready),
    .resp_una_addr(resp_una_addr),
    .resp_una_psn(resp_una_psn),
    .mr_wr_en(cfg_wr_valid && cfg_wr_ready && cfg_wr_table == 2'd2),
    .mr_wr_index(cfg_wr_index[$clog2(NMR)-1:0]),
    .mr_wr_word(cfg_wr_word),
    .mr_wr_data(cfg_wr_data),
    .drop_en(drop_en),
    .drop_qpn(drop_qpn),
    .drop_psn(drop_psn),
    .reads_wait(reads_wait),
    .rd_in(rd_in),
    .rd_cnt_qpn(rd_cnt_qpn),
    .rd_count(rd_count),
    .m_dma_rd_req_addr(tx_rd_req_addr),
    .m_dma_rd_req_len(tx_rd_req_len),
    .m_dma_rd_req_last(tx_rd_req_last),
    .m_dma_rd_req_valid(tx_rd_req_valid),
    .m_dma_rd_req_ready(tx_rd_req_ready),
    .s_dma_rd_tdata(dma_rd_tdata),
    .s_dma_rd_tkeep(dma_rd_tkeep),
    .s_dma_rd_tvalid(tx_rd_tvalid),
    .s_dma_rd_tready(tx_rd_tready),
    .s_dma_rd_tlast(dma_rd_tlast),
    .s_dma_rd_terr(dma_rd_terr),
    .m_axis_tdata(tx_m_axis_tdata),
    .m_axis_tkeep(tx_m_axis_tkeep),
    .m_axis_tvalid(tx_m_axis_tvalid),
    .m_axis_tready(tx_m_axis_tready),
    .m_axis_tlast(tx_m_axis_tlast),
    .m_axis_tuser(tx_m_axis_tuser),
    .bad_desc(tx_bad_desc),
    .resent(tx_resent),
    .dma_errors(tx_dma_errors),
    .idle(tx_idle),
    .slots_used(tx_slots_used)
  );

  // ----------------------------------------------------------------- RX
  fp_rx #(
    .DATA_WIDTH(DATA_WIDTH),
    .NQP(NQP),
    .NMR(NMR)
  ) rx_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(rx_s_axis_tdata),
    .s_axis_tkeep(rx_s_axis_tkeep),
    .s_axis_tvalid(rx_s_axis_tvalid),
    .s_axis_tready(rx_s_axis_tready),
    .s_axis_tlast(rx_s_axis_tlast),
    .port_mac(port_rec[47:0]),
    .port_gid(port_rec[64 +: 128]),
    .rq_posted(rq_posted),
    .cfg_wr_valid(cfg_wr_valid && !wr_tx && !wr_port),
    .cfg_wr_ready(rx_wr_ready),
    .cfg_wr_table(cfg_wr_table == 2'd2),
    .cfg_wr_index(cfg_wr_index),
    .cfg_wr_word(cfg_wr_word),
    .cfg_wr_data(cfg_wr_data),
    .cfg_rd_valid(cfg_rd_valid && !rd_tx && !rd_port),
    .cfg_rd_ready(rx_rd_ready),
    .cfg_rd_table(cfg_rd_table == 2'd2),
    .cfg_rd_index(cfg_rd_index),
    .cfg_rd_word(cfg_rd_word),
    .cfg_rdata(rx_rdata),
    .cfg_rdata_valid(rx_rdata_valid),
    .m_dma_wr_desc_addr(rx_wr_desc_addr),
    .m_dma_wr_desc_len(rx_wr_desc_len),
    .m_dma_wr_desc_valid(rx_wr_desc_valid),
    .m_dma_wr_desc_ready(rx_wr_desc_ready),
    .m_dma_wr_tdata(rx_wr_tdata),
    .m_dma_wr_tkeep(rx_wr_tkeep),
    .m_dma_wr_tvalid(rx_wr_tvalid),
    .m_dma_wr_tready(rx_wr_tready),
    .m_dma_wr_tlast(rx_wr_tlast),
    .m_exc_tdata(exc_tdata),
    .m_exc_tkeep(exc_tkeep),
    .m_exc_tvalid(exc_tvalid),
    .m_exc_tready(exc_tready),
    .m_exc_tlast(exc_tlast),
    .m_ev_data(rx_ev_data),
    .m_ev_valid(rx_ev_valid),
    .m_ev_ready(rx_ev_ready),
    .exc_taken(ev_valid && ev_ready && ev_data[8*EV_KIND +: 8] == EVK_EXCEPTION),
    .exc_taken_row(ev_data[8*EV_QPN +: QPN_W]),
    .msg_taken(ev_valid && ev_ready && ev_data[8*EV_KIND +: 8] == EVK_MSG_DONE),
    .msg_taken_row(ev_data[8*EV_QPN +: QPN_W]),
    .m_ack_data(rx_ack),
    .m_ack_valid(rx_ack_valid),
    .m_ack_ready(rx_ack_ready),
    .sctx_rd_en(resp_rd_en),
    .sctx_rd_addr(resp_rd_addr),
    .sctx_rd_data(resp_rd_data),
    .una_valid(resp_una_valid),
    .una_ready(resp_una_ready),
    .una_addr(resp_una_addr),
    .una_psn(resp_una_psn),
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
    .drops(rx_drops),
    .ctx_hits(rx_ctx_hits),
    .ctx_misses(rx_ctx_misses),
    .oos(rx_oos),
    .dups(rx_dups),
    .acc_valid(acc_valid),
    .acc_row(acc_row),
    // Go-Back-N at a NAK (docs/fastpath.md §3.8, "in RTL"): the WQE fetch's
    // flags say which NAKs fp_rx_check takes; it rewinds the queue
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
    // an atomic's 8-byte read (the shared DMA read port, above)
    .at_rd_req_addr(at_rd_req_addr),
    .at_rd_req_valid(at_rd_req_valid),
    .at_rd_req_ready(at_go && dma_rd_req_ready),
    .at_rd_tdata(dma_rd_tdata[63:0]),
    .at_rd_tvalid(at_own && dma_rd_tvalid),
    .at_rd_tlast(dma_rd_tlast),
    .at_rd_terr(dma_rd_terr),
    .idle(rx_side_idle)
  );

  // ------------------------------------------------------ the CQE writer
  fp_cqw #(
    .DATA_WIDTH(DATA_WIDTH),
    .NQP(NQP)
  ) cqw_inst (
    .clk(clk),
    .rst(rst),
    .grp_valid(grp_valid),
    .grp_qpn(grp_qpn),
    .grp_n(grp_n),
    .grp_room(grp_room),
    .rec_valid(rec_valid),
    .rec_data({rec_len, cq_rd_data}),
    .rec_room(rec_room),
    .s_ev_data(rx_ev_data),
    .s_ev_valid(rx_ev_valid),
    .s_ev_ready(rx_ev_ready),
    .m_ev_data(ev_data),
    .m_ev_valid(cqw_ev_valid),
    .m_ev_ready(cqw_ev_ready),
    .s_dma_wr_desc_addr(rx_wr_desc_addr),
    .s_dma_wr_desc_len(rx_wr_desc_len),
    .s_dma_wr_desc_valid(rx_wr_desc_valid),
    .s_dma_wr_desc_ready(rx_wr_desc_ready),
    .s_dma_wr_tdata(rx_wr_tdata),
    .s_dma_wr_tkeep(rx_wr_tkeep),
    .s_dma_wr_tvalid(rx_wr_tvalid),
    .s_dma_wr_tready(rx_wr_tready),
    .s_dma_wr_tlast(rx_wr_tlast),
    .m_dma_wr_desc_addr(dma_wr_desc_addr),
    .m_dma_wr_desc_len(dma_wr_desc_len),
    .m_dma_wr_desc_valid(dma_wr_desc_valid),
    .m_dma_wr_desc_ready(dma_wr_desc_ready),
    .m_dma_wr_tdata(dma_wr_tdata),
    .m_dma_wr_tkeep(dma_wr_tkeep),
    .m_dma_wr_tvalid(dma_wr_tvalid),
    .m_dma_wr_tready(dma_wr_tready),
    .m_dma_wr_tlast(dma_wr_tlast),
    .cfg_wr_valid(cfg_wr_valid && wr_cqw),
    .cfg_wr_ready(cqw_wr_ready),
    .cfg_wr_index(cfg_wr_index),
    .cfg_wr_word(cfg_wr_word),
    .cfg_wr_data(cfg_wr_data),
    .cfg_rd_valid(cfg_rd_valid && rd_cqw),
    .cfg_rd_ready(cqw_rd_ready),
    .cfg_rd_index(cfg_rd_index),
    .cfg_rd_word(cfg_rd_word),
    .cfg_rdata(cqw_rdata),
    .cfg_rdata_valid(cqw_rdata_valid),
    .cqes(cqw_cqes),
    .idle(cqw_idle)
  );
  // (a deadline scan the time's write started is work under way too: FpPort
  // waits for its rewinds)
  assign rx_idle = rx_side_idle && cqw_idle && !sq_scanning;

  // ------------------------------------------------------- the WQE fetch
  // A queue holds at most as many unfinished WQEs as fp_inflight's row has
  // entries: a ninth message in flight would find no entry, and its ACK would go
  // to the firmware (docs/fastpath.md §3.8, "How deep a queue runs").
  fp_sqf #(
    .DATA_WIDTH(DATA_WIDTH),
    .NQP(NQP),
    .NMR(NMR),
    .SQH(IF_ENTRIES),
    .HW_NOW(HW_NOW)
  ) sqf_inst (
    .clk(clk),
    .rst(rst),
    .cfg_wr_valid(cfg_wr_valid && wr_sq),
    .cfg_wr_ready(sq_wr_ready),
    .cfg_wr_index(cfg_wr_index),
    .cfg_wr_word(cfg_wr_word),
    .cfg_wr_data(cfg_wr_data),
    .cfg_rd_valid(cfg_rd_valid && rd_sq),
    .cfg_rd_ready(sq_rd_ready),
    .cfg_rd_index(cfg_rd_index),
    .cfg_rd_word(cfg_rd_word),
    .cfg_rdata(sq_rdata),
    .cfg_rdata_valid(sq_rdata_valid),
    .now_ns(now_ns),
    .db_valid(sq_db_valid),
    .db_ready(sq_db_ready),
    .db_qpn(sq_db_qpn),
    .db_pi(sq_db_pi),
    .sq_active(sq_active),
    .mr_wr_en(cfg_wr_valid && cfg_wr_ready && cfg_wr_table == 2'd2),
    .mr_wr_index(cfg_wr_index[$clog2(NMR)-1:0]),
    .mr_wr_word(cfg_wr_word),
    .mr_wr_data(cfg_wr_data),
    .sc0_wr_en(cfg_wr_valid && cfg_wr_ready && wr_tx && cfg_wr_word == 5'd0),
    .sc0_wr_index(cfg_wr_index[QPN_W-1:0]),
    .sc0_wr_data(cfg_wr_data),
    .m_txd_data(sq_txd),
    .m_txd_valid(sq_txd_valid),
    .m_txd_ready(seg_txd_ready),
    .busy(sq_busy),
    .slots_used(tx_slots_used),
    .tx_req_valid(tx_rd_req_valid),
    .tx_req_ready(tx_rd_req_ready),
    .tx_req_last(tx_rd_req_last),
    .tx_data_valid(tx_rd_tvalid),
    .tx_data_ready(tx_rd_tready),
    .tx_data_last(dma_rd_tlast),
    .rd_req_addr(sq_rd_req_addr),
    .rd_req_valid(sq_rd_req_valid),
    .rd_req_ready(dma_rd_req_ready),
    .rd_hold(sq_rd_hold),
    .rd_own(sq_rd_own),
    .rd_other(at_hold || at_own),
    .tx_none(sq_tx_none),
    .tx_half(sq_tx_half),
    .rd_tdata(dma_rd_tdata),
    .rd_tvalid(dma_rd_tvalid),
    .rd_tlast(dma_rd_tlast),
    .rd_terr(dma_rd_terr),
    .s_ev_data(ev_data),
    .s_ev_valid(cqw_ev_valid),
    .s_ev_ready(cqw_ev_ready),
    .m_ev_valid(ev_valid),
    .m_ev_ready(ev_ready),
    .gbn_ok(gbn_ok),
    .gbn_retrying(gbn_retrying),
    .rnr_ok(rnr_ok),
    .rnr_wait(rnr_wait),
    .gbn_taken(gbn_taken),
    .gbn_taken_e(gbn_taken_e),
    .gbn_drops(gbn_drops),
    .scanning(sq_scanning),
    .news(sq_news),
    .n_taken(sq_taken),
    .n_sends(sq_sends),
    .news_rd(sq_news_rd)
  );

endmodule

`resetall
