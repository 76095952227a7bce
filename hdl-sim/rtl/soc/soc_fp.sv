// SPDX-License-Identifier: MIT OR Apache-2.0
//
// soc_fp: the RC fast path (roce_fp_top, docs/fastpath.md) inside the SoC,
// MMIO block 0x6_0000 (firmware/image/src/mmio.rs `fp_reg`). nic_soc builds
// it only with FASTPATH = 1 (the ECP5-85 build leaves it out: that part has
// no block RAM left for it, docs/fastpath.md §6 "In the SoC").
//
// Where it sits: between the DCB block (the wire side) and soc_datapath (the
// firmware's frame buffers), and between the DMA engine and the host port.
// With `on` (the board's strap; the simulation chooses):
// * RX: every frame from the wire goes into the fast path; the frames it
//   hands to the firmware (EXCEPTION events) go on into soc_datapath's RX
//   ring, where the firmware reads them as before. Off: the wire goes
//   straight into soc_datapath and the fast path sees nothing.
// * TX: the segmenter's frames (ICRC appended by it) and the firmware's
//   (soc_datapath's, ICRC appended there) share the wire a whole frame at a
//   time, taking turns. A frame the segmenter aborts (a host read error,
//   tuser on its last beat) leaves with its last beat inverted, so its ICRC
//   fails at any receiver (the SoC's wire has no abort signal).
// * Host memory: the fast path's payload reads (TX) and placement writes
//   (RX) go through a bridge onto the SoC's host port (1 to 4 bytes per
//   request), which it shares with the DMA engine; each side keeps the port
//   while it has requests, for at most YIELD requests when the other waits,
//   and the port changes hands only with no answer outstanding. Reads are
//   issued one per cycle (as many answers outstanding as the beat queue has
//   room for) and packed into the fast path's 64-bit stream; writes go out
//   one per cycle.
// * The WQE fetch (fp_sqf, HW_NOW) runs without the firmware per WQE: it
//   keeps the SoC's time (`now_ns`, soc_timer's) and hears the host's send
//   doorbells (soc_host_regs' `hdb_*`): a doorbell of a queue it holds is
//   taken here (`hdb_taken`: the firmware is not woken for it), the
//   producer index kept per QP (the latest the host wrote, for every QPN
//   below NQP) and handed to the fetch, one QP at a time (a pending bit per
//   QP: doorbells rung faster than the fetch takes them merge into the
//   latest). A queue handed over gets the latest index too: a doorbell
//   written while the firmware handed it over (seen by the firmware as
//   before it) is not lost or taken twice, and the firmware never writes
//   the fetch's doorbell word itself.
// * The receive check's `rq_empty` (an RNR NAK for a SEND to an empty receive
//   queue, docs/fastpath.md §3.4 "Receiver not ready") is the firmware's view,
//   which a host receive doorbell makes stale before the firmware hears it.
//   So a QP's receive doorbell (QPN below NQP) sets its bit of `rq_posted`,
//   which masks the flag in the check (such a SEND is an exception, as without
//   the flag), until the firmware sets the flag by its command having read
//   that doorbell register since (below: it fetched what the host posted, so
//   the flag is the truth). A QP_DB write (doorbell records, read from host
//   memory, not the registers) sets every bit for good.
//   A QPN at or past NQP shares an entry with one below (its doorbells and
//   reads would clear another's bit), so the firmware never sets the flag
//   for one (firmware/image/src/mmio.rs).
//
// Registers (byte offsets; every read answers in one cycle, but CFG_WDATA and
// CFG_RD stores and CFG_RDATA loads, which the bus holds as said there):
//   0x000 CONFIG       bit 31 the fast path is on; 15..0 context entries (NQP)
//   0x004 MR_ENTRIES   entries of the MR table (NMR)
//   0x008 STATUS       bit 0 a table write or read is in progress; bit 1 the
//                      read's word is in CFG_RDATA; bit 2 a descriptor waits
//                      to be taken; bit 3 an event is in EV; bits 13..8 the
//                      segmenter's slots in use; bit 16 tx_idle; bit 17 rx_idle
//   0x00C CFG_SEL      table word to access: 30..29 table, 28..24 word,
//                      23..0 index (roce_fp_top's table port); bit 31 holds
//                      the word (CFG_WDATA and CFG_RD leave it as it is: the
//                      CQE port's staging word takes a CQE word after word)
//   0x010 CFG_WDATA    write: writes the word CFG_SEL names, then CFG_SEL's
//                      word moves on by one; while a table access is in
//                      progress (STATUS bit 0) the store is held on the bus
//                      (no ack) until the port takes it, so the firmware
//                      stores word after word without polling STATUS
//   0x014 CFG_RD       write: reads the word CFG_SEL names into CFG_RDATA
//                      (STATUS bit 1), then CFG_SEL's word moves on by one;
//                      held as CFG_WDATA
//   0x018 CFG_RDATA    the word read; a load while a read is on its way is
//                      held until the word is there
//                      (a hold ends after 2^16 - 1 cycles whatever the port
//                      does: the store dropped, the load answering the word
//                      before, so a port that never answers cannot stop the
//                      core; STATUS says the port's state as before)
//   0x01C TXD_POST     write: offers the descriptor in TXD to the segmenter
//                      (STATUS bit 2 until it takes it)
//   0x020 TX_FRAMES    frames the segmenter and the ACK path sent
//   0x024 RX_FRAMES    frames the fast path took from the wire
//   0x028 RX_DROPS     frames its parser dropped
//   0x02C TX_DMA_ERR   packets aborted for a host read error
//   0x030 TX_RESENT    request packets sent again (fp_tx_plan)
//   0x034 CTX_HITS     frames whose context was in its entry
//   0x038 CTX_MISSES   frames whose entry held another QP's
//   0x03C TX_BAD_DESC  descriptors the segmenter dropped
//   0x040 DMA_WR_ERR   placement writes the host refused
//   0x044 EV_POP       write: the event in EV is consumed
//   0x048 RX_OOS       requests out of sequence the receive path dropped
//                      (one NAK per gap), the engine's out_of_seq_request
//   0x04C RX_DUPS      duplicate SEND/WRITE requests it ACKed again, the
//                      engine's duplicate_request
//   0x050 SQ_NEWS      the WQE fetch's news word (table 3's SQ_R_NEWS: bit 3
//                      Go-Back-N's counts moved, 2 a queue it holds stopped,
//                      1 busy, 0 CQEs written); the read clears bits 3 and 0, as
//                      the table read does, at the edge that samples them (a
//                      bit set at that edge stays for the next read)
//   0x054 SQ_TAKEN     its running count of WQEs taken (SQ_R_TAKEN)
//   0x058 SQ_SENDS     ... of them SENDs (SQ_R_SENDS)
//                      (plain registers: one load each where the table port
//                      takes a select, a read command and a wait for the word;
//                      the firmware reads the news word at every poll)
//   0x080..0x0BC EV    the oldest event (64 bytes, §3.5), read
//   0x100..0x15C TXD   the descriptor to post (96 bytes, §2.2), write

`resetall
`default_nettype none

module soc_fp
  import fp_pkg::*;
#(
    // context entries (a power of two) and MR entries of the fast path
    parameter int NQP = 64,
    parameter int NMR = 256,
    // host-port requests one side may make in a row while the other waits
    parameter int YIELD = 32,
    // the first QPN (roce_core::engine::QPN_BASE): SQ doorbell index i is QPN i + QPN_BASE
    parameter int QPN_BASE = 16
) (
    input  wire logic         clk,
    input  wire logic         rst,
    // use the fast path (a strap: fixed after reset)
    input  wire logic         on,

    // firmware port (MMIO)
    input  wire logic         req,
    input  wire logic         we,
    input  wire logic [11:0]  addr,
    input  wire logic [31:0]  wdata,
    output logic              ack,
    output logic [31:0]       rdata,

    // the wire side (the DCB block)
    input  wire logic [63:0]  w_rx_tdata,
    input  wire logic [7:0]   w_rx_tkeep,
    input  wire logic         w_rx_tvalid,
    output logic              w_rx_tready,
    input  wire logic         w_rx_tlast,
    output logic [63:0]       w_tx_tdata,
    output logic [7:0]        w_tx_tkeep,
    output logic              w_tx_tvalid,
    input  wire logic         w_tx_tready,
    output logic              w_tx_tlast,

    // the firmware's frame side (soc_datapath)
    output logic [63:0]       d_rx_tdata,
    output logic [7:0]        d_rx_tkeep,
    output logic              d_rx_tvalid,
    input  wire logic         d_rx_tready,
    output logic              d_rx_tlast,
    input  wire logic [63:0]  d_tx_tdata,
    input  wire logic [7:0]   d_tx_tkeep,
    input  wire logic         d_tx_tvalid,
    output logic              d_tx_tready,
    input  wire logic         d_tx_tlast,

    // the DMA engine's host requests (soc_dma)
    input  wire logic         e_req_valid,
    output logic              e_req_ready,
    input  wire logic         e_req_write,
    input  wire logic [63:0]  e_req_addr,
    input  wire logic [2:0]   e_req_len,
    input  wire logic [31:0]  e_req_wdata,
    output logic              e_rsp_valid,
    output logic              e_rsp_error,
    output logic [31:0]       e_rsp_rdata,

    // the host port (nic_soc's pins)
    output logic              h_req_valid,
    input  wire logic         h_req_ready,
    output logic              h_req_write,
    output logic [63:0]       h_req_addr,
    output logic [2:0]        h_req_len,
    output logic [31:0]       h_req_wdata,
    input  wire logic         h_rsp_valid,
    input  wire logic         h_rsp_error,
    input  wire logic [31:0]  h_rsp_rdata,

    // the SoC's time (ns) and the host's send doorbells (soc_host_regs): the
    // doorbell's QP index, the producer index written; taken here when the
    // WQE fetch holds that QP's send queue
    input  wire logic [63:0]  now_ns,
    input  wire logic         hdb_valid,
    input  wire logic         hdb_rq,
    input  wire logic [9:0]   hdb_index,
    input  wire logic [31:0]  hdb_pi,
    output logic              hdb_taken,
    // the firmware's reads of receive doorbells (its QP index), host QP_DB writes
    input  wire logic         fdb_rq_read,
    input  wire logic [9:0]   fdb_index,
    input  wire logic         hqpdb
);

  // ------------------------------------------------------------------ the fast path
  logic [63:0] f_rx_tdata;
  logic [7:0]  f_rx_tkeep;
  logic        f_rx_tvalid, f_rx_tready, f_rx_tlast;
  logic [63:0] f_tx_tdata;
  logic [7:0]  f_tx_tkeep;
  logic        f_tx_tvalid, f_tx_tready, f_tx_tlast, f_tx_tuser;

  logic [TXD_BYTES*8-1:0] txd;
  logic                   txd_valid, txd_ready;

  logic        cfg_wr_valid, cfg_wr_ready, cfg_rd_valid, cfg_rd_ready, cfg_rdata_valid;
  logic [1:0]  cfg_wr_table, cfg_rd_table;
  logic [23:0] cfg_wr_index, cfg_rd_index;
  logic [4:0]  cfg_wr_word, cfg_rd_word;
  logic [31:0] cfg_wr_data, cfg_rdata;

  logic [EV_BYTES*8-1:0] ev_data;
  // the firmware posts no ACK descriptors (the receive side makes its own)
  /* verilator lint_off UNUSEDSIGNAL */
  logic                  ackd_ready;
  /* verilator lint_on UNUSEDSIGNAL */
  logic                  ev_valid, ev_ready;

  logic [63:0] exc_tdata;
  logic [7:0]  exc_tkeep;
  logic        exc_tvalid, exc_tready, exc_tlast;

  logic [63:0] rd_req_addr;
  logic [15:0] rd_req_len;
  logic        rd_req_last, rd_req_valid, rd_req_ready;
  logic [63:0] rd_tdata;
  logic [7:0]  rd_tkeep;
  logic        rd_tvalid, rd_tready, rd_tlast, rd_terr;
  logic [63:0] wr_desc_addr;
  logic [15:0] wr_desc_len;
  logic        wr_desc_valid, wr_desc_ready;
  logic [63:0] wr_tdata;
  /* verilator lint_off UNUSEDSIGNAL */
  logic [7:0]  wr_tkeep;       // the descriptor's length says which bytes count
  logic        wr_tlast;
  /* verilator lint_on UNUSEDSIGNAL */
  logic        wr_tvalid, wr_tready;

  logic [31:0] c_bad_desc, c_resent, c_dma_err, c_rx_drops, c_hits, c_misses, c_oos, c_dups;
  logic        tx_idle, rx_idle;
  logic [5:0]  slots_used;

  localparam int QPN_W = $clog2(NQP);
  logic             sq_db_valid, sq_db_ready;
  logic [QPN_W-1:0] sq_db_qpn;
  logic [31:0]      sq_db_pi;
  logic [NQP-1:0]   sq_active;
  logic [3:0]       sq_news;
  logic [31:0]      sq_taken, sq_sends;

  roce_fp_top #(
    .DATA_WIDTH(64),
    .NQP(NQP),
    .NMR(NMR),
    .HW_NOW(1'b1)
  ) fp_inst (
    .clk(clk),
    .rst(rst),
    .rx_s_axis_tdata(f_rx_tdata),
    .rx_s_axis_tkeep(f_rx_tkeep),
    .rx_s_axis_tvalid(f_rx_tvalid),
    .rx_s_axis_tready(f_rx_tready),
    .rx_s_axis_tlast(f_rx_tlast),
    .tx_m_axis_tdata(f_tx_tdata),
    .tx_m_axis_tkeep(f_tx_tkeep),
    .tx_m_axis_tvalid(f_tx_tvalid),
    .tx_m_axis_tready(f_tx_tready),
    .tx_m_axis_tlast(f_tx_tlast),
    .tx_m_axis_tuser(f_tx_tuser),
    .txd_data(txd),
    .txd_valid(txd_valid),
    .txd_ready(txd_ready),
    .ackd_data('0),
    .ackd_valid(1'b0),
    .ackd_ready(ackd_ready),
    .cfg_wr_valid(cfg_wr_valid),
    .cfg_wr_ready(cfg_wr_ready),
    .cfg_wr_table(cfg_wr_table),
    .cfg_wr_index(cfg_wr_index),
    .cfg_wr_word(cfg_wr_word),
    .cfg_wr_data(cfg_wr_data),
    .cfg_rd_valid(cfg_rd_valid),
    .cfg_rd_ready(cfg_rd_ready),
    .cfg_rd_table(cfg_rd_table),
    .cfg_rd_index(cfg_rd_index),
    .cfg_rd_word(cfg_rd_word),
    .cfg_rdata(cfg_rdata),
    .cfg_rdata_valid(cfg_rdata_valid),
    .ev_data(ev_data),
    .ev_valid(ev_valid),
    .ev_ready(ev_ready),
    .exc_tdata(exc_tdata),
    .exc_tkeep(exc_tkeep),
    .exc_tvalid(exc_tvalid),
    .exc_tready(exc_tready),
    .exc_tlast(exc_tlast),
    .dma_rd_req_addr(rd_req_addr),
    .dma_rd_req_len(rd_req_len),
    .dma_rd_req_last(rd_req_last),
    .dma_rd_req_valid(rd_req_valid),
    .dma_rd_req_ready(rd_req_ready),
    .dma_rd_tdata(rd_tdata),
    .dma_rd_tkeep(rd_tkeep),
    .dma_rd_tvalid(rd_tvalid),
    .dma_rd_tready(rd_tready),
    .dma_rd_tlast(rd_tlast),
    .dma_rd_terr(rd_terr),
    .dma_wr_desc_addr(wr_desc_addr),
    .dma_wr_desc_len(wr_desc_len),
    .dma_wr_desc_valid(wr_desc_valid),
    .dma_wr_desc_ready(wr_desc_ready),
    .dma_wr_tdata(wr_tdata),
    .dma_wr_tkeep(wr_tkeep),
    .dma_wr_tvalid(wr_tvalid),
    .dma_wr_tready(wr_tready),
    .dma_wr_tlast(wr_tlast),
    .tx_bad_desc(c_bad_desc),
    .tx_resent(c_resent),
    .tx_dma_errors(c_dma_err),
    .rx_drops(c_rx_drops),
    .rx_ctx_hits(c_hits),
    .rx_ctx_misses(c_misses),
    .rx_oos(c_oos),
    .rx_dups(c_dups),
    .tx_idle(tx_idle),
    .tx_slots_used(slots_used),
    .rx_idle(rx_idle),
    .now_ns(now_ns),
    .sq_db_valid(sq_db_valid),
    .sq_db_ready(sq_db_ready),
    .sq_db_qpn(sq_db_qpn),
    .sq_db_pi(sq_db_pi),
    .sq_active(sq_active),
    .rq_posted(rq_posted),
    .sq_news(sq_news),
    .sq_taken(sq_taken),
    .sq_sends(sq_sends),
    .sq_news_rd(req && !we && addr == 12'h050)
  );

  // ------------------------------------------------------------------ send doorbells
  logic [10:0]      h_qpn;      // the doorbell's QPN
  logic             h_ours;     // below NQP: an entry of the fast path's
  assign h_qpn = 11'(hdb_index) + 11'(QPN_BASE);
  assign h_ours = on && hdb_valid && !hdb_rq && h_qpn < 11'(NQP);
  assign hdb_taken = h_ours && sq_active[h_qpn[QPN_W-1:0]];

  logic [31:0]      db_pi [NQP];   // the latest producer index the host wrote, per QPN
  logic [NQP-1:0]   db_pend;       // ... not yet handed to the fetch
  logic [NQP-1:0]   db_seen;       // ... written since reset (else the firmware's start holds)
  logic [NQP-1:0]   was_active;
  logic             db_pick_v;     // the lowest pending QPN (registered)
  logic [QPN_W-1:0] db_pick;
  assign sq_db_valid = db_pick_v && db_pend[db_pick];
  assign sq_db_qpn = db_pick;
  assign sq_db_pi = db_pi[db_pick];
  always_ff @(posedge clk) begin
    logic [NQP-1:0] set, clr;
    set = sq_active & ~was_active & db_seen;   // handed over: the latest index goes to it
    if (hdb_taken) set[h_qpn[QPN_W-1:0]] = 1'b1;
    clr = '0;
    if (sq_db_valid && sq_db_ready) clr[db_pick] = 1'b1;
    db_pend <= (db_pend & ~clr) | set;   // a doorbell in the cycle it goes: again
    was_active <= sq_active;
    if (h_ours) begin
      db_pi[h_qpn[QPN_W-1:0]] <= hdb_pi;
      db_seen[h_qpn[QPN_W-1:0]] <= 1'b1;
    end
    db_pick_v <= 1'b0;
    db_pick <= '0;
    for (int i = NQP - 1; i >= 0; i--)
      if (db_pend[i]) begin
        db_pick_v <= 1'b1;
        db_pick <= QPN_W'(i);
      end
    if (rst) begin
      db_pend <= '0;
      db_seen <= '0;
      was_active <= '0;
      db_pick_v <= 1'b0;
    end
  end

  // ------------------------------------------------------------------ receive doorbells
  // Per QPN below NQP: `rq_unread`, a receive doorbell the firmware has not read
  // since; `rq_posted`, the mask of `rq_empty`, set by a receive doorbell and
  // cleared only by the firmware's `rq_empty` set (fp_rx's command, table 1 word RL_W_CMD
  // op 2, or a context write with the flag) while `rq_unread` is clear: the firmware then decided on a view that
  // holds every WQE the host rang for (it read the doorbell, then fetched up to
  // it, before it can find the queue empty). Clearing it at the read was too early:
  // the flag stayed set, unmasked, while the firmware fetched the WQE.
  logic [NQP-1:0] rq_posted, rq_unread;
  logic [10:0]    r_host_qpn, r_fw_qpn;
  logic           r_set_cmd;   // the firmware sets `rq_empty`
  assign r_host_qpn = 11'(hdb_index) + 11'(QPN_BASE);
  assign r_fw_qpn = 11'(fdb_index) + 11'(QPN_BASE);
  // (or its write of a context's flags word with `rq_empty` set: an exception's
  // write-back, a QP coming on, decided on the same view)
  assign r_set_cmd = cfg_wr_valid && cfg_wr_ready && cfg_wr_table == 2'd1 &&
                     cfg_wr_index < 24'(NQP) &&
                     ((32'(cfg_wr_word) == RL_W_CMD && cfg_wr_data[1:0] == 2'd2) ||
                      (32'(cfg_wr_word) == RC_FLAGS / 4 && cfg_wr_data[8 * (RC_FLAGS % 4) + 4]));
  always_ff @(posedge clk) begin
    logic [NQP-1:0] set, read, cmd;
    set = hqpdb ? '1 : '0;
    if (hdb_valid && hdb_rq && r_host_qpn < 11'(NQP)) set[r_host_qpn[QPN_W-1:0]] = 1'b1;
    read = '0;
    if (fdb_rq_read && r_fw_qpn < 11'(NQP)) read[r_fw_qpn[QPN_W-1:0]] = 1'b1;
    cmd = '0;
    if (r_set_cmd) cmd[cfg_wr_index[QPN_W-1:0]] = 1'b1;
    // (a doorbell in the cycle of a read or a command wins: it is not seen yet)
    rq_unread <= (rq_unread & ~read) | set;
    rq_posted <= (rq_posted & ~(cmd & ~rq_unread)) | set;
    if (rst) begin
      rq_unread <= '0;
      rq_posted <= '0;
    end
  end

  // ------------------------------------------------------------------ RX routing
  assign f_rx_tdata = w_rx_tdata;
  assign f_rx_tkeep = w_rx_tkeep;
  assign f_rx_tlast = w_rx_tlast;
  assign f_rx_tvalid = on && w_rx_tvalid;
  assign exc_tready = on && d_rx_tready;
  assign d_rx_tdata = on ? exc_tdata : w_rx_tdata;
  assign d_rx_tkeep = on ? exc_tkeep : w_rx_tkeep;
  assign d_rx_tlast = on ? exc_tlast : w_rx_tlast;
  assign d_rx_tvalid = on ? exc_tvalid : w_rx_tvalid;
  assign w_rx_tready = on ? f_rx_tready : d_rx_tready;

  // ------------------------------------------------------------------ TX: whole frames in turn
  logic tx_busy;      // a frame is on offer or going out
  logic tx_from_fp;   // ... from the segmenter (else the firmware's)
  logic tx_last_fp;   // the last frame started was the segmenter's
  logic tx_pick_fp;   // who goes next, when no frame is going out
  assign tx_pick_fp = f_tx_tvalid && (!d_tx_tvalid || !tx_last_fp);
  logic use_fp;
  assign use_fp = tx_busy ? tx_from_fp : tx_pick_fp;
  assign w_tx_tvalid = use_fp ? f_tx_tvalid : d_tx_tvalid;
  assign w_tx_tdata = use_fp ? (f_tx_tdata ^ {64{f_tx_tlast && f_tx_tuser}}) : d_tx_tdata;
  assign w_tx_tkeep = use_fp ? f_tx_tkeep : d_tx_tkeep;
  assign w_tx_tlast = use_fp ? f_tx_tlast : d_tx_tlast;
  assign f_tx_tready = use_fp && w_tx_tready;
  assign d_tx_tready = !use_fp && w_tx_tready;

  logic [31:0] c_tx_frames, c_rx_frames;
  always_ff @(posedge clk) begin
    // the choice holds from the frame's first offer to its last beat
    if (!tx_busy && w_tx_tvalid) begin
      tx_from_fp <= use_fp;
      tx_last_fp <= use_fp;
      tx_busy <= !(w_tx_tready && w_tx_tlast);
    end else if (tx_busy && w_tx_tvalid && w_tx_tready && w_tx_tlast) begin
      tx_busy <= 1'b0;
    end
    if (w_tx_tvalid && w_tx_tready && w_tx_tlast && use_fp) c_tx_frames <= c_tx_frames + 1'b1;
    if (f_rx_tvalid && f_rx_tready && f_rx_tlast) c_rx_frames <= c_rx_frames + 1'b1;
    if (rst) begin
      tx_busy <= 1'b0;
      tx_from_fp <= 1'b0;
      tx_last_fp <= 1'b0;
      c_tx_frames <= '0;
      c_rx_frames <= '0;
    end
  end

  // ------------------------------------------------------------------ host port
  // The bridge's requests (b_*) and the DMA engine's share it; `owner` 1 = the
  // bridge. The port changes hands only with no answer outstanding, so each
  // answer goes to the side that asked.
  logic        b_req_valid, b_req_ready, b_req_write;
  logic [63:0] b_req_addr;
  logic [2:0]  b_req_len;
  logic [31:0] b_req_wdata;
  logic        owner;
  logic [2:0]  h_out;          // answers outstanding on the port
  logic [$clog2(YIELD+1)-1:0] run_len;
  logic        want_cur, want_other, yield_now, h_fire;
  assign want_cur = owner ? b_req_valid : e_req_valid;
  assign want_other = owner ? e_req_valid : b_req_valid;
  assign yield_now = want_other && run_len >= $bits(run_len)'(YIELD);
  assign h_req_valid = !yield_now && want_cur;
  assign h_req_write = owner ? b_req_write : e_req_write;
  assign h_req_addr = owner ? b_req_addr : e_req_addr;
  assign h_req_len = owner ? b_req_len : e_req_len;
  assign h_req_wdata = owner ? b_req_wdata : e_req_wdata;
  assign e_req_ready = !owner && !yield_now && h_req_ready;
  assign b_req_ready = owner && !yield_now && h_req_ready;
  assign h_fire = h_req_valid && h_req_ready;
  assign e_rsp_valid = !owner && h_rsp_valid;
  assign e_rsp_error = h_rsp_error;
  assign e_rsp_rdata = h_rsp_rdata;
  logic b_rsp_valid;
  assign b_rsp_valid = owner && h_rsp_valid;

  always_ff @(posedge clk) begin
    h_out <= h_out + 3'(h_fire) - 3'(h_rsp_valid);
    if (h_fire && run_len < $bits(run_len)'(YIELD)) run_len <= run_len + 1'b1;
    if (h_out == 3'd0 && !h_fire && want_other && (!want_cur || yield_now)) begin
      owner <= !owner;
      run_len <= '0;
    end
    if (rst) begin
      h_out <= '0;
      owner <= 1'b0;
      run_len <= '0;
    end
  end

  // ------------------------------------------------------------------ DMA bridge
  // One job at a time: a read request of the segmenter or a write of the
  // mover, each started with no answer of the last job outstanding.
  typedef enum logic [1:0] {J_IDLE, J_READ, J_WRITE} job_e;
  job_e        job;
  logic [63:0] j_addr;
  logic [15:0] j_left;         // bytes not yet asked for
  logic        j_last;         // the read request is its packet's last
  logic        j_half;         // a write: the beat's upper four bytes are next
  logic [2:0]  b_out;          // the bridge's answers outstanding (at most QD)
  logic [2:0]  j_n;            // bytes of the next request
  assign j_n = j_left >= 16'd4 ? 3'd4 : 3'(j_left);

  // read answers, packed into beats: `acc` holds `acc_n` bytes (< 8) of the
  // beat being filled; whole beats go into a queue of QD to the fast path. A read
  // is issued only while the queue has room for a beat per answer outstanding
  // and one more, so an answer always finds room (the host port cannot be held);
  // with four entries a read goes out every cycle while the fast path takes a
  // beat a cycle.
  logic [95:0] acc;
  logic [3:0]  acc_n;
  logic        acc_err;
  logic        flush;          // the packet's last bytes wait in `acc` for a beat of their own
  localparam int QD = 4;
  logic [63:0] q_data [QD];
  logic [7:0]  q_keep [QD];
  logic        q_last [QD], q_err [QD];
  logic [1:0]  q_rp;
  logic [2:0]  q_n;

  assign rd_tvalid = q_n != 3'd0;
  assign rd_tdata = q_data[q_rp];
  assign rd_tkeep = q_keep[q_rp];
  assign rd_tlast = q_last[q_rp];
  assign rd_terr = q_err[q_rp];

  logic read_room;             // an answer to one more read has a place in the queue
  assign read_room = q_n + b_out < 3'(QD) && !flush;

  assign rd_req_ready = job == J_IDLE && b_out == 3'd0 && !flush && !wr_desc_valid;
  assign wr_desc_ready = job == J_IDLE && b_out == 3'd0 && !flush;

  always_comb begin
    b_req_valid = 1'b0;
    b_req_write = 1'b0;
    b_req_wdata = '0;
    wr_tready = 1'b0;
    if (job == J_READ) begin
      b_req_valid = j_left != 16'd0 && read_room;
    end else if (job == J_WRITE) begin
      b_req_valid = wr_tvalid;
      b_req_write = 1'b1;
      b_req_wdata = j_half ? wr_tdata[63:32] : wr_tdata[31:0];
      // the beat is done with its upper half, or with the write's last bytes
      wr_tready = b_req_ready && (j_half || j_left <= 16'd4);
    end
  end
  assign b_req_addr = j_addr;
  assign b_req_len = j_n;

  // the answer's bytes added to `acc`
  logic        a_fire, a_fin;
  logic [2:0]  a_n;
  logic [95:0] a_acc;
  logic [3:0]  a_tot;
  logic        a_err;
  logic        q_push, q_pop;
  logic [63:0] push_data;
  logic [7:0]  push_keep;
  logic        push_last, push_err;
  // per outstanding read (in order, oldest at fa_rp): its bytes, and whether it
  // ends its packet
  logic [2:0]  ans_n [QD];
  logic        fin_q [QD];
  logic [1:0]  fa_rp;
  logic [2:0]  fa_n;
  logic        last_was_write; // the answers outstanding are a write's
  assign a_fire = b_rsp_valid && !last_was_write;
  assign a_fin = fin_q[fa_rp];
  assign a_n = ans_n[fa_rp];
  logic [31:0] a_word;         // the answer's bytes, lanes past its length cleared
  always_comb begin
    a_word = h_rsp_rdata;
    for (int i = 0; i < 4; i++) if (3'(i) >= a_n) a_word[8*i +: 8] = 8'd0;
  end
  assign a_acc = acc | (96'(a_word) << (8 * acc_n));
  assign a_tot = acc_n + 4'(a_n);
  assign a_err = acc_err || h_rsp_error;
  assign q_pop = rd_tvalid && rd_tready;
  logic [1:0] q_wi;            // the queue's next free entry (a push never meets a full queue)
  assign q_wi = q_rp + q_n[1:0];

  always_comb begin
    q_push = 1'b0;
    push_data = a_acc[63:0];
    push_keep = 8'hFF;
    push_last = 1'b0;
    push_err = a_err;
    if (a_fire) begin
      if (a_tot >= 4'd8) begin
        q_push = 1'b1;
        push_last = a_fin && a_tot == 4'd8;
      end else if (a_fin) begin
        q_push = 1'b1;
        push_keep = 8'((9'h1 << a_tot) - 1'b1);
        push_last = 1'b1;
      end
    end else if (flush && b_out == 3'd0 && q_n != 3'(QD)) begin
      q_push = 1'b1;
      push_data = acc[63:0];
      push_keep = 8'((9'h1 << acc_n) - 1'b1);
      push_last = 1'b1;
      push_err = acc_err;
    end
  end

  logic [31:0] c_wr_err;
  logic b_fire, r_push, r_fin;
  assign b_fire = b_req_valid && b_req_ready;
  assign r_push = job == J_READ && b_fire;
  assign r_fin = j_last && j_left == 16'(j_n);

  always_ff @(posedge clk) begin
    b_out <= b_out + 3'(b_fire) - 3'(b_rsp_valid);
    // jobs
    case (job)
      J_IDLE: begin
        if (wr_desc_valid && wr_desc_ready) begin
          j_addr <= wr_desc_addr;
          j_left <= wr_desc_len;
          j_half <= 1'b0;
          job <= wr_desc_len != 16'd0 ? J_WRITE : J_IDLE;
          last_was_write <= 1'b1;
        end else if (rd_req_valid && rd_req_ready) begin
          j_addr <= rd_req_addr;
          j_left <= rd_req_len;
          j_last <= rd_req_last;
          last_was_write <= 1'b0;
          if (rd_req_len != 16'd0) job <= J_READ;
          else if (rd_req_last) flush <= 1'b1;   // the packet ends with what `acc` holds
        end
      end
      J_READ: begin
        if (b_fire) begin
          j_addr <= j_addr + 64'(j_n);
          j_left <= j_left - 16'(j_n);
          if (j_left == 16'(j_n)) job <= J_IDLE;
        end
      end
      J_WRITE: begin
        if (b_fire) begin
          j_addr <= j_addr + 64'(j_n);
          j_left <= j_left - 16'(j_n);
          j_half <= !j_half && j_left > 16'd4;
          if (j_left == 16'(j_n)) job <= J_IDLE;
        end
      end
      default: job <= J_IDLE;
    endcase
    // the outstanding reads' sizes and packet ends
    if (r_push) begin
      fin_q[fa_rp + fa_n[1:0]] <= r_fin;
      ans_n[fa_rp + fa_n[1:0]] <= j_n;
    end
    if (a_fire) fa_rp <= fa_rp + 1'b1;
    fa_n <= fa_n + 3'(r_push) - 3'(a_fire);
    // packing
    if (a_fire) begin
      if (a_tot >= 4'd8) begin
        acc <= a_acc >> 64;
        acc_n <= a_tot - 4'd8;
        // bytes left over are this answer's
        acc_err <= a_tot > 4'd8 && h_rsp_error;
        flush <= a_fin && a_tot > 4'd8;
      end else if (a_fin) begin
        acc <= '0;
        acc_n <= '0;
        acc_err <= 1'b0;
      end else begin
        acc <= a_acc;
        acc_n <= a_tot;
        acc_err <= a_err;
      end
    end else if (q_push) begin
      // the flush beat
      flush <= 1'b0;
      acc <= '0;
      acc_n <= '0;
      acc_err <= 1'b0;
    end
    if (b_rsp_valid && h_rsp_error && last_was_write) c_wr_err <= c_wr_err + 1'b1;
    // the queue
    if (q_push) begin
      q_data[q_wi] <= push_data;
      q_keep[q_wi] <= push_keep;
      q_last[q_wi] <= push_last;
      q_err[q_wi] <= push_err;
    end
    if (q_pop) q_rp <= q_rp + 1'b1;
    q_n <= q_n + 3'(q_push) - 3'(q_pop);
    if (rst) begin
      job <= J_IDLE;
      b_out <= '0;
      acc <= '0;
      acc_n <= '0;
      acc_err <= 1'b0;
      flush <= 1'b0;
      fa_rp <= '0;
      fa_n <= '0;
      q_rp <= '0;
      q_n <= '0;
      last_was_write <= 1'b0;
      c_wr_err <= '0;
    end
  end

  // ------------------------------------------------------------------ firmware port
  logic [30:0] sel_q;          // CFG_SEL
  logic        sel_hold;       // CFG_SEL bit 31
  logic        wr_pend, rd_pend, rd_wait, rd_have;
  logic [31:0] wr_q, rdata_q;
  logic [1:0]  rw_table;
  logic [23:0] rw_index;
  logic [4:0]  rw_word;
  logic        txd_pend;

  assign cfg_wr_valid = wr_pend;
  assign cfg_wr_table = rw_table;
  assign cfg_wr_index = rw_index;
  assign cfg_wr_word = rw_word;
  assign cfg_wr_data = wr_q;
  assign cfg_rd_valid = rd_pend;
  assign cfg_rd_table = rw_table;
  assign cfg_rd_index = rw_index;
  assign cfg_rd_word = rw_word;
  assign txd_valid = txd_pend;
  // The oldest event stays in the fast path until the firmware pops it (EV
  // reads it there): until then an exception is in flight, and a write that
  // clears its QP's `held` leaves it set (fp_rx).
  assign ev_ready = wr_cmd && addr == 12'h044;

  logic wr_cmd;
  assign wr_cmd = req && we;

  // The table port holds the bus instead of being polled: a CFG_WDATA or CFG_RD
  // store while a table access is in progress, and a CFG_RDATA load while a read
  // is on its way, are acknowledged only once the port takes the store or the
  // word is there (the firmware's STATUS poll before each word was 20 to 50
  // instructions; a held store costs the cycles alone). A hold ends after
  // STALL_MAX cycles whatever the port does (the store then dropped, the load
  // answering the last word), so a port that never answers cannot stop the core.
  localparam int STALL_W = 16;
  logic               port_busy, stall;
  logic [STALL_W-1:0] stall_n;   // cycles the present request was held
  assign port_busy = wr_pend || rd_pend || rd_wait;
  assign stall = req && !(&stall_n) &&
                 (we ? (addr == 12'h010 || addr == 12'h014) && port_busy
                     : addr == 12'h018 && (rd_pend || rd_wait));

  always_ff @(posedge clk) begin
    ack <= req && !stall;
    stall_n <= stall ? stall_n + 1'b1 : '0;
    rdata <= '0;
    if (req && !we) begin
      casez (addr)
        12'h000: rdata <= {on, 15'd0, 16'(NQP)};
        12'h004: rdata <= 32'(NMR);
        12'h008: rdata <= {14'd0, rx_idle, tx_idle, 2'd0, slots_used, 4'd0,
                           ev_valid, txd_pend, rd_have, wr_pend || rd_pend || rd_wait};
        12'h00C: rdata <= {sel_hold, sel_q};
        12'h018: rdata <= rdata_q;
        12'h020: rdata <= c_tx_frames;
        12'h024: rdata <= c_rx_frames;
        12'h028: rdata <= c_rx_drops;
        12'h02C: rdata <= c_dma_err;
        12'h030: rdata <= c_resent;
        12'h034: rdata <= c_hits;
        12'h038: rdata <= c_misses;
        12'h03C: rdata <= c_bad_desc;
        12'h040: rdata <= c_wr_err;
        12'h048: rdata <= c_oos;
        12'h04C: rdata <= c_dups;
        12'h050: rdata <= {28'd0, sq_news};
        12'h054: rdata <= sq_taken;
        12'h058: rdata <= sq_sends;
        12'b0000_10??_??00: rdata <= ev_data[32*addr[5:2] +: 32];
        default: rdata <= '0;
      endcase
    end
    // the table port
    if (cfg_wr_valid && cfg_wr_ready) wr_pend <= 1'b0;
    if (cfg_rd_valid && cfg_rd_ready) begin
      rd_pend <= 1'b0;
      rd_wait <= 1'b1;
    end
    if (cfg_rdata_valid && (rd_wait || rd_pend)) begin
      rdata_q <= cfg_rdata;
      rd_have <= 1'b1;
      rd_wait <= 1'b0;
    end
    if (wr_cmd && addr == 12'h00C) {sel_hold, sel_q} <= wdata;
    if (wr_cmd && addr == 12'h010 && !(wr_pend || rd_pend || rd_wait)) begin
      wr_pend <= 1'b1;
      wr_q <= wdata;
      {rw_table, rw_word, rw_index} <= sel_q;
      if (!sel_hold) sel_q[28:24] <= sel_q[28:24] + 1'b1;
    end
    if (wr_cmd && addr == 12'h014 && !(wr_pend || rd_pend || rd_wait)) begin
      rd_pend <= 1'b1;
      rd_have <= 1'b0;
      {rw_table, rw_word, rw_index} <= sel_q;
      if (!sel_hold) sel_q[28:24] <= sel_q[28:24] + 1'b1;
    end
    // descriptors
    if (txd_valid && txd_ready) txd_pend <= 1'b0;
    if (wr_cmd && addr[11:8] == 4'h1 && !txd_pend && addr[7:2] < 6'd24)
      txd[32*addr[6:2] +: 32] <= wdata;
    if (wr_cmd && addr == 12'h01C) txd_pend <= 1'b1;
    if (rst) begin
      ack <= 1'b0;
      stall_n <= '0;
      sel_q <= '0;
      sel_hold <= 1'b0;
      wr_pend <= 1'b0;
      rd_pend <= 1'b0;
      rd_wait <= 1'b0;
      rd_have <= 1'b0;
      txd_pend <= 1'b0;
    end
  end

endmodule

`resetall
