// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_sqf: the WQE fetch (docs/fastpath.md §3.8). For a QP whose send queue
// the firmware handed over, it reads the send WQEs (abi::SendWqe, 160 bytes)
// from the host ring at a doorbell, checks them as roce_core::fastpath::
// wqe_msg does (SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM,
// RDMA_READ, CMP_AND_SWP, FETCH_AND_ADD; not inline, no fence, at most 4 SGEs,
// at most 2^31 bytes, every SGE of non-zero length inside an MR of the table
// in the QP's PD, with LOCAL_WRITE for a READ or atomic, an atomic one 8-byte
// SGE and an 8-byte-aligned remote address), and queues the descriptor the
// engine would post (first PSN the end of the previous message, the CQE flag
// when signaled). A READ or atomic waits while max_rd_atomic of them are held
// (the initiator credits; their last response's retirement gives one back). The model is roce_firmware::
// fastpath::FastPathPort's sq_* methods; FpPort (roce_hdl_sim) drives this
// through the table port.
//
// Per context entry an SQ context (a RAM of SQ_WORDS words: ring, log2
// depth, sig_all, the local ACK timeout, MTU, ring indexes ci / pi / done,
// PSNs base / una / next, PD, depth, deadline) and, beside it, the first PSN
// of each WQE it holds (SQH per entry, so that a take-back can say where the
// oldest unfinished one starts). active / stopped / pending are flip-flops
// per entry (the event filter and the scheduler look at them every cycle).
//
// The table port (roce_fp_top's table 3; fp_pkg's SQ_* words):
//   writes: SQ_W_RING_LO/HI, SQ_W_CFG {max_rd_atomic [31:24], rnr_retry [22:20],
//     retry_cnt [18:16], mtu_log2 [15:12],
//     rto valid [9], sig_all [8], log2 depth [4:0]}, SQ_W_CI, SQ_W_PSN, SQ_W_PD, SQ_W_DEPTH,
//     SQ_W_RTO_LO/HI stage a hand-over (any index); SQ_W_CMD (index = the
//     QPN) 1 hands the staged queue over, 2 takes it back (fetching stops);
//     SQ_W_DB (index = the QPN) a doorbell, the host's producer index;
//     SQ_W_NOW_LO/HI the time (ns) the deadlines are computed from.
//   reads (index = the QPN): SQ_R_CI, SQ_R_DONE, SQ_R_BASE, SQ_R_UNA,
//     SQ_R_DL_LO/HI, SQ_R_FLAGS {an RNR wait, the deadline its end [9], RNR NAKs
//     waited out [8:6], retries spent [5:3], deadline valid [2],
//     stopped [1], active [0]; after a take-back [9:1] and the other words stay
//     as the command left them, till the next hand-over}; global: SQ_R_TAKEN,
//     SQ_R_SENDS (running counts of WQEs taken and of them SENDs), SQ_R_NEWS
//     {Go-Back-N's counts moved [3], a queue it holds is stopped [2], busy [1],
//     CQEs written [0]; 3 and 0 since the last read of this word, cleared by the
//     read}, SQ_R_NAKS, SQ_R_RETRIES, SQ_R_TIMEOUTS
//     (Go-Back-N's running counts: NAK sequence errors taken, fp_rx_check's
//     dropped ones too; retries started; of them at the local ACK timeout),
//     SQ_R_RNRS (RNR NAKs taken).
//     A fetch runs by itself after its doorbell (it may wait behind the
//     segmenter's payload reads on the shared DMA read port), so a stop can
//     come after the doorbell's own reads: bit 2 tells the firmware at its
//     next look at the news, and it takes the stopped queue back (FLAGS says
//     which).
//
// The hand-over's checks that nothing of the QP is under way (send context
// valid, una_psn and next_psn at the staged PSN, no queued descriptor, an
// empty in-flight list) are made by whoever drives the port before it hands
// over (FpPort: the model's sq_hand_over conditions); this unit takes what it
// is given.
//
// One FSM does everything, one thing at a time, so the SQ context RAM has one
// read and one write port: the firmware's commands and reads (only while it
// is idle), a response's retirement (an ACKED event of an active QP whose
// CQEs the writer wrote, an ACK's, a READ response's or an ATOMIC
// ACKNOWLEDGE's: the event is dropped, the queue moves on: done += n, una,
// base from the first-PSN RAM, a READ's or atomic's credit back, the deadline
// restarted at now + timeout or cleared when everything is acknowledged),
// and the fetch of the lowest pending entry. A fetch waits (from idle) until
// the segmenter has a free slot and no payload read of its own outstanding
// or half asked, then asks for the WQE's 160 bytes on the shared DMA read
// port (the segmenter's requests held meanwhile; the answer is all its own
// since nothing else is outstanding), decodes it, reads the MR entry of each
// SGE from its own copy of the MR table (written with the table port's MR
// writes), and offers the descriptor ahead of the firmware's (whose ready is
// low while a fetch is under way). A table-port access waiting aborts a fetch
// that has not asked for its WQE yet or waits to offer its descriptor (it is
// fetched again), so the port never waits on the host or the segmenter.
// A WQE it does not take, a producer index past the ring or a read error
// stops the queue (until taken back).
//
// With HW_NOW (the SoC: docs/fastpath.md §6 "In the SoC") the unit hears the
// host by itself and keeps its own time, so the firmware has nothing to do
// per WQE: the time is `now_ns` (the SoC's clock; SQ_W_NOW is ignored), the
// host's send doorbells of the queues it holds come in on `db_*` (the same as
// SQ_W_DB; `sq_active` tells the SoC which queues those are), and with the
// FSM idle it reads one entry's context after another and stops a queue
// whose deadline passed, so the firmware learns of it as of any stop (NEWS
// bit 2) and takes the queue back with the deadline: it reads no deadline
// while the queue is here. Without HW_NOW (FpPort, the model's twin) the
// firmware writes the time and the doorbells and reads the deadlines.

`resetall
`default_nettype none

module fp_sqf
  import fp_pkg::*;
#(
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    parameter int NQP = 256,
    parameter int NMR = 256,
    // WQEs one queue may hold unfinished (first PSNs kept), a power of two
    parameter int SQH = 32,
    // the time and the host's doorbells from the hardware, deadlines watched here
    parameter bit HW_NOW = 1'b0,
    parameter int QPN_W = $clog2(NQP),
    parameter int MR_W = $clog2(NMR)
) (
    input  wire logic                    clk,
    input  wire logic                    rst,

    // the table port (table 3's SQ words, already selected)
    input  wire logic                    cfg_wr_valid,
    output logic                         cfg_wr_ready,
    input  wire logic [23:0]             cfg_wr_index,
    input  wire logic [4:0]              cfg_wr_word,
    input  wire logic [31:0]             cfg_wr_data,
    input  wire logic                    cfg_rd_valid,
    output logic                         cfg_rd_ready,
    input  wire logic [23:0]             cfg_rd_index,
    input  wire logic [4:0]              cfg_rd_word,
    output logic [31:0]                  cfg_rdata,
    output logic                         cfg_rdata_valid,

    // with HW_NOW: the time (ns), the host's send doorbells (QPN, producer
    // index) and the queues held (a doorbell of any other goes to the firmware)
    input  wire logic [63:0]             now_ns,
    input  wire logic                    db_valid,
    output logic                         db_ready,
    input  wire logic [QPN_W-1:0]        db_qpn,
    input  wire logic [31:0]             db_pi,
    output logic [NQP-1:0]               sq_active,

    // snooped table writes: MR entries (table 2) and send-context word 0
    input  wire logic                    mr_wr_en,
    input  wire logic [MR_W-1:0]         mr_wr_index,
    input  wire logic [4:0]              mr_wr_word,
    input  wire logic [31:0]             mr_wr_data,
    input  wire logic                    sc0_wr_en,
    input  wire logic [QPN_W-1:0]        sc0_wr_index,
    input  wire logic [31:0]             sc0_wr_data,

    // the segmenter's descriptor input, ahead of the firmware's
    output logic [TXD_BYTES*8-1:0]       m_txd_data,
    output logic                         m_txd_valid,
    input  wire logic                    m_txd_ready,
    output logic                         busy,        // the firmware's descriptors wait
    input  wire logic [5:0]              slots_used,

    // the shared DMA read port: the segmenter's traffic, and this unit's
    input  wire logic                    tx_req_valid,
    input  wire logic                    tx_req_ready,
    input  wire logic                    tx_req_last,
    input  wire logic                    tx_data_valid,
    input  wire logic                    tx_data_ready,
    input  wire logic                    tx_data_last,
    output logic [63:0]                  rd_req_addr,
    output logic                         rd_req_valid,
    input  wire logic                    rd_req_ready,
    output logic                         rd_hold,     // the segmenter's requests wait
    output logic                         rd_own,      // the read data is this unit's
    // a third requester (the receive path's atomic read, roce_fp_top) holds the
    // port: this unit asks only without it; and what that one needs of the
    // segmenter's traffic: none of its packets asked and not answered, one half asked
    input  wire logic                    rd_other,
    output logic                         tx_none,
    output logic                         tx_half,
    input  wire logic [DATA_WIDTH-1:0]   rd_tdata,
    input  wire logic                    rd_tvalid,
    input  wire logic                    rd_tlast,
    input  wire logic                    rd_terr,

    // events (after the CQE writer): ACKED of an active queue are taken here
    input  wire logic [EV_BYTES*8-1:0]   s_ev_data,
    input  wire logic                    s_ev_valid,
    output logic                         s_ev_ready,
    output logic                         m_ev_valid,
    input  wire logic                    m_ev_ready,

    // Go-Back-N at a NAK sequence error (docs/fastpath.md §3.8): per entry,
    // fp_rx_check may take one as a rewind (gbn_ok: held, not stopped, a retry
    // budget) or drops one without progress (gbn_retrying: retries spent since
    // the last progress); this unit took the rewind event of entry gbn_taken_e;
    // fp_rx_check's count of the NAKs it dropped (for SQ_R_NAKS)
    output logic [NQP-1:0]               gbn_ok,
    output logic [NQP-1:0]               gbn_retrying,
    output logic                         gbn_taken,
    output logic [QPN_W-1:0]             gbn_taken_e,
    input  wire logic [31:0]             gbn_drops,
    // an RNR NAK (docs/fastpath.md §3.8, "An RNR NAK"): per entry, fp_rx_check may
    // take one (rnr_ok: held, not stopped, RNR budget left; it retires nothing) and
    // the queue waits one out (rnr_wait: nothing fetched, a NAK sequence error
    // retries nothing; its end is the deadline, then the replay from una)
    output logic [NQP-1:0]               rnr_ok,
    output logic [NQP-1:0]               rnr_wait,
    // without HW_NOW: the deadline scan a time write started is under way
    output logic                         scanning,
    // SQ_R_NEWS's word and the running counts SQ_R_TAKEN and SQ_R_SENDS, as the
    // port reads them, for plain registers (the SoC's, soc_fp); news_rd clears
    // the news word's bits 3 and 0 as a port read of it does
    output logic [3:0]                   news,
    output logic [31:0]                  n_taken,
    output logic [31:0]                  n_sends,
    input  wire logic                    news_rd
);

  localparam int WQE_BYTES = 160;
  localparam int BEATS = (WQE_BYTES + KEEP_WIDTH - 1) / KEEP_WIDTH;
  localparam int BEAT_W = $clog2(BEATS + 1);
  localparam int SQH_W = $clog2(SQH);
  localparam int SQ_WORDS = 19;

  // SQ context words (per entry)
  localparam int X_RING_LO = 0;
  localparam int X_RING_HI = 1;
  localparam int X_CFG = 2;       // [4:0] log, [8] sig_all, [9] rto valid, [15:12] mtu
  localparam int X_CI = 3;
  localparam int X_PI = 4;
  localparam int X_DONE = 5;
  localparam int X_BASE = 6;
  localparam int X_UNA = 7;
  localparam int X_NEXT = 8;
  localparam int X_PD = 9;
  localparam int X_DEPTH = 10;
  localparam int X_RTO_LO = 11;
  localparam int X_RTO_HI = 12;
  localparam int X_DL_LO = 13;
  localparam int X_DL_HI = 14;
  localparam int X_DL_V = 15;
  localparam int X_QPN = 16;
  // Go-Back-N (docs/fastpath.md §3.8, "in RTL"): [10:8] the retries spent since the
  // last progress (the budget, retry_cnt, is X_CFG [18:16]; SQ_R_FLAGS [5:3],
  // SqBack::spent), [16] a replay under way: the WQEs from X_REPLAY up to ci are read
  // again and sent as REPLAYs before any new one, [21:19] the RNR NAKs waited out since
  // the last progress (the budget, rnr_retry, is X_CFG [22:20]; SqSpent::rnr),
  // [29:24] the READs and atomics held (their initiator credits in use: at most
  // max_rd_atomic, X_CFG [31:24]; one more as one is fetched, one fewer as the event
  // of its last response or ATOMIC ACKNOWLEDGE retires it)
  localparam int X_RETRY = 17;
  localparam int X_REPLAY = 18;

  initial begin
    if (SQH < 2 || (SQH & (SQH - 1)) != 0) begin
      $error("fp_sqf: SQH must be a power of two >= 2 (got %0d)", SQH);
      $finish;
    end
  end

  // ------------------------------------------------------------ registers
  logic [NQP-1:0] active, stopped, pending;
  logic [31:0] st_ring_lo, st_ring_hi, st_cfg, st_ci, st_psn, st_pd, st_depth;
  logic [31:0] st_rto_lo, st_rto_hi;
  logic [63:0] now;
  logic        news_cqe;
  // Go-Back-N: per entry, a retry budget (retry_cnt != 0), retries spent since the
  // last progress, a FLUSH owed to the segmenter (the rewind's: offered by the
  // fetch before anything else of the queue); the running counts
  logic [NQP-1:0] gbn_en, retrying, flush_due;
  logic [31:0] n_naks, n_retries, n_timeouts;
  // RNR NAKs: per entry, budget left (rnr_retry 7, or fewer spent), a wait under
  // way; the running count
  logic [NQP-1:0] rnr_left, rnr_wt;
  logic [31:0] n_rnrs;
  // the counts moved since the last read of SQ_R_NEWS (its bit 3): the firmware
  // reads them only then; fp_rx_check's drops as last seen
  logic        news_gbn;
  logic [31:0] drops_q;
  // without HW_NOW: entries left to scan after a time write
  logic [QPN_W:0] scan_left;

  // --------------------------------------------------------- the SQ RAM
  logic [QPN_W-1:0]      x_wr_addr, x_rd_addr;
  logic [SQ_WORDS-1:0]   x_wr_en;
  logic [SQ_WORDS*32-1:0] x_wr_data, x_rd_data;
  logic                  x_rd_en;

  roce_ram #(
    .WORDS(SQ_WORDS),
    .DEPTH(NQP)
  ) sq_ram_inst (
    .clk(clk),
    .wr_addr(x_wr_addr),
    .wr_en(x_wr_en),
    .wr_data(x_wr_data),
    .rd_addr(x_rd_addr),
    .rd_en(x_rd_en),
    .rd_data(x_rd_data)
  );

  // first PSNs of the WQEs held: entry e, WQE i at e * SQH + i mod SQH
  logic [QPN_W+SQH_W-1:0] f_wr_addr, f_rd_addr;
  logic                   f_wr_en, f_rd_en;
  logic [31:0]            f_wr_data, f_rd_data;
  // (no initial contents: an entry is read only for a WQE held, whose first PSN was
  // written when it was fetched)
  roce_ram #(
    .WORDS(1),
    .DEPTH(NQP * SQH),
    .INIT(1'b0)
  ) fpsn_ram_inst (
    .clk(clk),
    .wr_addr(f_wr_addr),
    .wr_en(f_wr_en),
    .wr_data(f_wr_data),
    .rd_addr(f_rd_addr),
    .rd_en(f_rd_en),
    .rd_data(f_rd_data)
  );

  // the MR table's copy (written with the table port's MR writes)
  logic [MR_W-1:0]        m_rd_addr;
  logic                   m_rd_en;
  logic [MR_BYTES*8-1:0]  m_rd_data;
  fp_mr_copy #(
    .NMR(NMR)
  ) mr_copy_inst (
    .clk(clk),
    .mr_wr_en(mr_wr_en),
    .mr_wr_index(mr_wr_index),
    .mr_wr_word(mr_wr_word),
    .mr_wr_data(mr_wr_data),
    .rd_addr(m_rd_addr),
    .rd_en(m_rd_en),
    .rd_data(m_rd_data)
  );

  // ---------------------------------------------------------- the FSM
  typedef enum logic [4:0] {
    S_IDLE,
    S_RD,        // a firmware read: data out
    S_R_CTX,     // retirement: the context read
    S_R_FPSN,    // retirement: the new oldest WQE's first PSN read
    S_R_WB,      // retirement: write back
    S_F_CTX,     // fetch: the context read
    S_F_CHK,     // fetch: may it go
    S_F_REQ,     // fetch: the WQE asked
    S_F_DATA,    // fetch: its bytes
    S_F_DEC,     // fetch: decoded
    S_F_MR,      // fetch: an SGE's MR read
    S_F_MRC,     // fetch: its check
    S_F_BUILD,   // fetch: the descriptor
    S_F_OFFER,   // fetch: offered to the segmenter
    S_F_COMMIT,  // fetch: the context moves on
    S_F_COOL,    // fetch: the segmenter's slot count catches up
    S_F_STOP,    // fetch: a WQE not taken
    S_SCAN,      // an entry's deadline looked at
    S_F_FLUSH,   // fetch: a rewind's FLUSH offered to the segmenter
    S_F_RFP      // fetch: a replayed WQE's first PSN read
  } state_t;
  state_t st;
  assign news = {news_gbn, (active & stopped) != '0,
                 (st != S_IDLE && st != S_SCAN) || pending != '0, news_cqe};

  // the command and read words
  logic w_cmd, w_db, w_now, r_ctx, r_glob;
  assign w_cmd = cfg_wr_word == SQ_W_CMD;
  assign w_db = cfg_wr_word == SQ_W_DB;
  assign w_now = cfg_wr_word == SQ_W_NOW_LO || cfg_wr_word == SQ_W_NOW_HI;
  assign r_glob = cfg_rd_word == SQ_R_TAKEN || cfg_rd_word == SQ_R_SENDS
      || cfg_rd_word == SQ_R_NEWS || cfg_rd_word == SQ_R_NAKS
      || cfg_rd_word == SQ_R_RETRIES || cfg_rd_word == SQ_R_TIMEOUTS
      || cfg_rd_word == SQ_R_RNRS;
  assign r_ctx = !r_glob;

  logic fw_wait;   // a table-port access that needs the FSM waits
  // a host doorbell (HW_NOW) is taken in S_IDLE after the firmware's accesses
  logic db_go;
  // the entry whose deadline is looked at next (HW_NOW)
  logic [QPN_W-1:0] scan_e;
  assign fw_wait = (cfg_wr_valid && (w_cmd || w_db)) || (cfg_rd_valid && r_ctx);
  assign cfg_wr_ready = (w_cmd || w_db) ? st == S_IDLE : 1'b1;
  assign cfg_rd_ready = r_ctx ? (st == S_IDLE && !(cfg_wr_valid && (w_cmd || w_db)))
      : st != S_RD;

  logic [QPN_W-1:0] e;           // the entry at work
  logic [4:0]       rd_word_q;
  logic             rd_glob_q, glob_valid_q;
  logic [31:0]      glob_q;

  // the entry to fetch for: the lowest pending one (registered; a tree, not a
  // chain of NQP selections: roce_first_set)
  logic             pick_v, first_v;
  logic [QPN_W-1:0] pick, first;
  roce_first_set #(
    .N(NQP),
    .W(QPN_W)
  ) pick_inst (
    .v(pending),
    .found(first_v),
    .index(first)
  );
  always_ff @(posedge clk) begin
    pick_v <= first_v;
    pick <= first;
    if (rst) pick_v <= 1'b0;
  end

  // the ACKED event this unit takes: an active queue's (an ACK, a READ response, an
  // ATOMIC ACKNOWLEDGE), its CQEs written (or none owed)
  logic [QPN_W-1:0] ev_e;
  logic             ev_take;
  assign ev_e = s_ev_data[8*EV_QPN +: QPN_W];
  // (an RNR NAK's retired nothing and owes no CQE: taken whatever the writer said)
  assign ev_take = s_ev_data[8*EV_KIND +: 8] == EVK_ACKED && active[ev_e]
      && (s_ev_data[8*EV_RFLAGS + 2] || s_ev_data[8*EV_RFLAGS + 5]);
  logic ret_go;   // the FSM takes the event this cycle
  assign m_ev_valid = s_ev_valid && !ev_take;
  assign s_ev_ready = ev_take ? ret_go : m_ev_ready;
  // a rewind event (EV_RFLAGS bit 3) leaves: taken here, or on to the firmware (its
  // CQEs not written, the queue taken back): fp_rx_check's own record of it goes
  logic ev_rew;
  assign ev_rew = s_ev_data[8*EV_KIND +: 8] == EVK_ACKED && s_ev_data[8*EV_RFLAGS + 3];
  assign gbn_taken = s_ev_valid && s_ev_ready && ev_rew;
  assign gbn_taken_e = ev_e;
  assign gbn_ok = active & ~stopped & gbn_en;
  assign gbn_retrying = retrying;
  assign rnr_ok = active & ~stopped & rnr_left;
  // (rnr_wt outlives a take-back, for SQ_R_FLAGS: a queue taken back waits out nothing here)
  assign rnr_wait = rnr_wt & active;
  assign scanning = scan_left != '0;

  // the segmenter's payload reads: packets asked and not answered, one half asked
  logic [7:0] tx_out;
  logic       tx_mid;
  logic       dma_free;
  assign dma_free = tx_out == 0 && !tx_mid && !rd_other;
  assign tx_none = tx_out == 0;
  assign tx_half = tx_mid;
  always_ff @(posedge clk) begin
    if (tx_req_valid && tx_req_ready) tx_mid <= !tx_req_last;
    tx_out <= tx_out + 8'(tx_req_valid && tx_req_ready && tx_req_last)
        - 8'(tx_data_valid && tx_data_ready && tx_data_last);
    if (rst) begin
      tx_out <= '0;
      tx_mid <= 1'b0;
    end
  end

  // an SQ context's fields, from its words
  typedef struct packed {
    logic [63:0] ring, rto, dl;
    logic [4:0]  log;
    logic        sig_all, rto_v, dl_v;
    logic [3:0]  mtu;
    logic [31:0] ci, pi, done, pd, depth;
    logic [23:0] base, una, next, qpn;
    logic [2:0]  retry_cnt, spent, rnr_retry, rnr_spent;
    logic        rp;
    logic [31:0] replay;
    logic [7:0]  max_rd;
    logic [5:0]  rdc;
  } sqx_t;
  function automatic sqx_t sqx(input logic [SQ_WORDS*32-1:0] w);
    sqx_t f;
    f.ring = {w[32*X_RING_HI +: 32], w[32*X_RING_LO +: 32]};
    f.log = w[32*X_CFG +: 5];
    f.sig_all = w[32*X_CFG + 8];
    f.rto_v = w[32*X_CFG + 9];
    f.mtu = w[32*X_CFG + 12 +: 4];
    f.ci = w[32*X_CI +: 32];
    f.pi = w[32*X_PI +: 32];
    f.done = w[32*X_DONE +: 32];
    f.base = w[32*X_BASE +: 24];
    f.una = w[32*X_UNA +: 24];
    f.next = w[32*X_NEXT +: 24];
    f.pd = w[32*X_PD +: 32];
    f.depth = w[32*X_DEPTH +: 32];
    f.rto = {w[32*X_RTO_HI +: 32], w[32*X_RTO_LO +: 32]};
    f.dl = {w[32*X_DL_HI +: 32], w[32*X_DL_LO +: 32]};
    f.dl_v = w[32*X_DL_V];
    f.qpn = w[32*X_QPN +: 24];
    f.retry_cnt = w[32*X_CFG + 16 +: 3];
    f.spent = w[32*X_RETRY + 8 +: 3];
    f.rnr_retry = w[32*X_CFG + 20 +: 3];
    f.rnr_spent = w[32*X_RETRY + 19 +: 3];
    f.rp = w[32*X_RETRY + 16];
    f.replay = w[32*X_REPLAY +: 32];
    f.max_rd = w[32*X_CFG + 24 +: 8];
    f.rdc = w[32*X_RETRY + 24 +: 6];
    return f;
  endfunction
  // the context read (registered RAM output), and the one held through a fetch or
  // retirement (the RAM output is reused)
  logic [SQ_WORDS*32-1:0] ctx;
  sqx_t c;
  // (the held copy's base, una and deadline are never read: the FSM takes them from
  // the RAM's output when it needs them)
  /* verilator lint_off UNUSEDSIGNAL */
  sqx_t k;
  /* verilator lint_on UNUSEDSIGNAL */
  assign c = sqx(x_rd_data);
  assign k = sqx(ctx);

  // ------------------------------------------------------ the WQE bytes
  logic [BEATS*DATA_WIDTH-1:0] wqe;
  logic [BEAT_W-1:0]           beat;
  logic                        rd_err;
  logic [7:0]                  w_opcode, w_flags, w_nsge;
  logic [63:0]                 w_wr_id, w_raddr;
  logic [31:0]                 w_imm, w_rkey;
  logic [63:0]                 w_compare, w_swap;
  logic [63:0]                 w_sge_addr [4];
  logic [31:0]                 w_sge_len [4];
  logic [31:0]                 w_sge_key [4];
  always_comb begin
    w_wr_id = wqe[0 +: 64];
    w_opcode = wqe[8*8 +: 8];
    w_flags = wqe[8*9 +: 8];
    w_nsge = wqe[8*10 +: 8];
    w_imm = wqe[8*12 +: 32];
    w_raddr = wqe[8*16 +: 64];
    w_rkey = wqe[8*24 +: 32];
    w_compare = wqe[8*32 +: 64];
    w_swap = wqe[8*40 +: 64];
    for (int i = 0; i < 4; i++) begin
      w_sge_addr[i] = wqe[8*(96 + 16*i) +: 64];
      w_sge_len[i] = wqe[8*(96 + 16*i + 8) +: 32];
      w_sge_key[i] = wqe[8*(96 + 16*i + 12) +: 32];
    end
  end

  // decoded (S_F_DEC)
  logic [7:0]  d_op;          // the descriptor's op (fp_pkg OP_*; SEND = 0)
  logic        d_remote;      // a WRITE, READ or atomic (carries the remote address and key)
  logic        d_imm;         // WITH_IMM
  logic        d_rd;          // a READ or atomic: an initiator credit, local write access
  logic        d_atomic;      // CMP_AND_SWP or FETCH_AND_ADD
  logic        d_ok;          // the WQE passes the checks that need no MR
  logic [33:0] d_len;
  logic [2:0]  sg;            // the SGE being checked
  always_comb begin
    logic [33:0] sum;
    logic        keys_ok;
    sum = '0;
    keys_ok = 1'b1;
    for (int i = 0; i < 4; i++)
      if (32'(i) < 32'(w_nsge)) begin
        sum = sum + {2'd0, w_sge_len[i]};
        if (w_sge_key[i] == 32'hFFFF_FFFF) keys_ok = 1'b0;   // the firmware's WQE_LKEY
      end
    d_len = sum;
    // (an atomic exactly as the responder takes it, wqe_msg's rule: one 8-byte SGE and an
    // 8-byte-aligned remote address; the engine sends others as they are: the firmware's)
    d_ok = w_opcode <= 8'd6 && (w_flags & 8'h09) == 8'h00 && w_nsge <= 8'd4 && keys_ok
        && sum <= 34'h8000_0000 && !rd_err
        && !(d_atomic && (w_nsge != 8'd1 || w_sge_len[0] != 32'd8 || w_raddr[2:0] != 3'd0));
  end

  // the MR check of SGE sg over two cycles (in one it was the fetch's deepest path,
  // 19 LUT levels: the SGE picked by sg, two 64-bit subtractions and a compare in a
  // row). S_F_MRC (the entry read in S_F_MR) registers the key/PD/valid match and
  // both ends, the SGE's (addr + len) and the MR's (base + length), side by side;
  // S_F_MR decides on them in the next cycle while it reads the next SGE's entry,
  // so a WQE that passes takes no cycle more. MemoryRegion::check with no rights
  // asked, range_within's arithmetic: addr >= base, off = addr - base <= length and
  // len <= length - off, which in 65 bits is addr + len <= base + length.
  logic [31:0] mr_key, mr_pd;
  logic [7:0]  mr_valid, mr_access;
  logic        mr_ids;        // key, PD and valid match (S_F_MRC's cycle)
  logic        mc_v;          // a check registered (S_F_MRC was the last cycle)
  logic        mc_ids, mc_ge; // registered: the match, addr >= base
  logic [64:0] mc_end, mc_lim;
  logic        mc_ok;
  always_comb begin
    mr_key = m_rd_data[8*MR_KEY +: 32];
    mr_pd = m_rd_data[8*MR_PD +: 32];
    mr_valid = m_rd_data[8*MR_VALID +: 8];
    mr_access = m_rd_data[8*MR_ACCESS +: 8];
    // (a READ or atomic writes its local buffers: LOCAL_WRITE, req_select's check)
    mr_ids = mr_key != 0 && mr_key == w_sge_key[sg[1:0]] && mr_pd == k.pd && mr_valid != 0
        && (!d_rd || (mr_access & ACC_LOCAL_WRITE) != 0);
  end
  assign mc_ok = mc_ids && mc_ge && mc_end <= mc_lim;
  always_ff @(posedge clk) begin
    mc_v <= st == S_F_MRC;
    if (st == S_F_MRC) begin
      mc_ids <= mr_ids;
      mc_ge <= w_sge_addr[sg[1:0]] >= m_rd_data[8*MR_BASE +: 64];
      mc_end <= {1'b0, w_sge_addr[sg[1:0]]} + {33'd0, w_sge_len[sg[1:0]]};
      mc_lim <= {1'b0, m_rd_data[8*MR_BASE +: 64]} + {1'b0, m_rd_data[8*MR_LENGTH +: 64]};
    end
  end

  // the descriptor (S_F_BUILD)
  logic [TXD_BYTES*8-1:0] txd;
  logic [23:0]            d_first, d_after;
  logic                   d_send;
  // The message's PSN count and end over three cycles (in S_F_BUILD alone, the SGE
  // lengths' sum, its rounding up to packets and the sum with next were 20 LUT levels):
  // the length registered in S_F_DEC (the WQE bytes do not change until the next
  // fetch), the packets, ceil(len / 2^mtu) and 1 for an empty message, in S_F_BUILD,
  // the end in S_F_OFFER (which always comes between S_F_BUILD and S_F_COMMIT, the
  // end's only reader): no cycle more.
  logic [31:0]            d_len_q;
  logic [23:0]            d_npk;
  always_ff @(posedge clk) begin
    if (st == S_F_DEC) d_len_q <= d_len[31:0];
    if (st == S_F_BUILD) begin
      logic [31:0] mtu_m1;
      mtu_m1 = (32'd1 << k.mtu) - 32'd1;
      d_npk <= d_len_q == 32'd0 ? 24'd1 : 24'(({1'b0, d_len_q} + {1'b0, mtu_m1}) >> k.mtu);
    end
    if (st == S_F_OFFER) d_after <= k.next + d_npk;
  end
  assign m_txd_data = txd;
  assign m_txd_valid = (st == S_F_OFFER || st == S_F_FLUSH) && active[e] && !fw_wait;
  assign busy = st != S_IDLE && st != S_RD && st != S_R_CTX && st != S_R_FPSN && st != S_R_WB
      && st != S_SCAN;

  // the WQE read: the next new one, or in a replay the next to send again
  logic [31:0] w_idx, slot_i;
  assign w_idx = k.rp ? k.replay : k.ci;
  assign slot_i = w_idx & ((32'd1 << k.log) - 32'd1);
  assign rd_req_addr = k.ring + {32'd0, slot_i} * 64'(WQE_BYTES);
  assign rd_req_valid = st == S_F_REQ && dma_free && !fw_wait;
  assign rd_hold = st == S_F_REQ;

  // the held count and the limits
  logic [31:0] held;
  assign held = k.ci - k.done;

  // (declared before their first use: slang, the synthesis frontend, insists)
  // a doorbell of a queue the unit holds and has not stopped
  logic db_ok, hdb_ok;
  assign db_ok = active[cfg_wr_index[QPN_W-1:0]] && !stopped[cfg_wr_index[QPN_W-1:0]];
  assign hdb_ok = active[db_qpn] && !stopped[db_qpn];
  assign sq_active = active;
  // the time: the SoC's, or the firmware's word
  logic [63:0] now_w;
  assign now_w = HW_NOW ? now_ns : now;

  // the retirement's event fields, held from the take (S_IDLE) on: a rewind
  // (EV_RFLAGS bit 3: a NAK sequence error, Go-Back-N to EV_UNA) and whether it made
  // progress (bit 4)
  logic [7:0]  r_done;
  logic [23:0] r_una;
  logic        r_rew, r_prog, r_rnr, r_rdret;
  logic [4:0]  r_timer;
  always_ff @(posedge clk) begin
    if (st == S_IDLE && ret_go) begin
      r_done <= s_ev_data[8*EV_DONE +: 8];
      r_una <= s_ev_data[8*EV_UNA +: 24];
      // (an RNR NAK's event has bit 3 too, for the firmware: bit 5 says which)
      r_rew <= s_ev_data[8*EV_RFLAGS + 3] && !s_ev_data[8*EV_RFLAGS + 5];
      r_prog <= s_ev_data[8*EV_RFLAGS + 4];
      r_rnr <= s_ev_data[8*EV_RFLAGS + 5];
      // a READ's last response or an ATOMIC ACKNOWLEDGE: it retires that READ or atomic
      // (fp_rx_check takes one only at una, with no READ or atomic before it)
      r_rdret <= (s_ev_data[8*EV_RFLAGS] && s_ev_data[8*EV_RFLAGS + 1])
          || s_ev_data[8*EV_RFLAGS + 6];
      r_timer <= s_ev_data[8*EV_RNR +: 5];
    end
  end
  // the retirement's progress (the budgets start afresh): an ACK's una moved, a
  // rewind's bit 4; an RNR NAK never (it retired nothing: its PSN inside the oldest
  // moves the acknowledgement alone, as the engine's on_rnr_nak)
  logic r_fresh;
  assign r_fresh = !r_rnr && (r_rew ? r_prog : r_una != k.una);
  // the RNR timer's wait in ns (RnrTimer::nanos, IBTA table 45)
  function automatic logic [31:0] rnr_ns(input logic [4:0] t);
    logic [19:0] us;
    case (t)
      5'd0: us = 20'd655360;
      5'd1: us = 20'd10;
      5'd2: us = 20'd20;
      5'd3: us = 20'd30;
      5'd4: us = 20'd40;
      5'd5: us = 20'd60;
      5'd6: us = 20'd80;
      5'd7: us = 20'd120;
      5'd8: us = 20'd160;
      5'd9: us = 20'd240;
      5'd10: us = 20'd320;
      5'd11: us = 20'd480;
      5'd12: us = 20'd640;
      5'd13: us = 20'd960;
      5'd14: us = 20'd1280;
      5'd15: us = 20'd1920;
      5'd16: us = 20'd2560;
      5'd17: us = 20'd3840;
      5'd18: us = 20'd5120;
      5'd19: us = 20'd7680;
      5'd20: us = 20'd10240;
      5'd21: us = 20'd15360;
      5'd22: us = 20'd20480;
      5'd23: us = 20'd30720;
      5'd24: us = 20'd40960;
      5'd25: us = 20'd61440;
      5'd26: us = 20'd81920;
      5'd27: us = 20'd122880;
      5'd28: us = 20'd163840;
      5'd29: us = 20'd245760;
      5'd30: us = 20'd327680;
      default: us = 20'd491520;
    endcase
    return 32'(us) * 32'd1000;
  endfunction
  // a replayed WQE's first PSN (S_F_RFP), and the packet its replay starts at: the
  // acknowledged PSN's in the oldest, 0 in the later ones (the model's go_back)
  logic [23:0] d_rfirst;
  logic [31:0] d_rstart;
  assign d_rstart = psn_diff(k.una, d_rfirst) > 0 ? {8'd0, k.una - d_rfirst} : 32'd0;
  // the local ACK timeout of the entry scanned, with something outstanding and a
  // retry left: Go-Back-N to una (the model's sq_timeouts), as a NAK's rewind
  // without the retirement
  logic scan_rew, scan_rnr;
  assign scan_rew = st == S_SCAN && active[e] && !stopped[e] && !rnr_wt[e] && c.dl_v
      && now_w >= c.dl && c.una != c.next && c.spent < c.retry_cnt;
  // an RNR wait over: the replay from done (the engine's handle_timeout: go_back_n,
  // no retry spent), the local ACK timer started
  assign scan_rnr = st == S_SCAN && active[e] && !stopped[e] && rnr_wt[e] && c.dl_v
      && now_w >= c.dl;

  always_ff @(posedge clk) begin
    glob_valid_q <= 1'b0;

    // the staging words, the time
    if (cfg_wr_valid && cfg_wr_ready) begin
      case (cfg_wr_word)
        SQ_W_RING_LO: st_ring_lo <= cfg_wr_data;
        SQ_W_RING_HI: st_ring_hi <= cfg_wr_data;
        SQ_W_CFG: st_cfg <= cfg_wr_data;
        SQ_W_CI: st_ci <= cfg_wr_data;
        SQ_W_PSN: st_psn <= cfg_wr_data;
        SQ_W_PD: st_pd <= cfg_wr_data;
        SQ_W_DEPTH: st_depth <= cfg_wr_data;
        SQ_W_RTO_LO: st_rto_lo <= cfg_wr_data;
        SQ_W_RTO_HI: st_rto_hi <= cfg_wr_data;
        SQ_W_NOW_LO: now[31:0] <= cfg_wr_data;
        SQ_W_NOW_HI: now[63:32] <= cfg_wr_data;
        default: ;
      endcase
      // without HW_NOW the time comes here: every entry's deadline is looked at
      // (while a queue with a retry budget is held; a rewind's FLUSH and replays
      // follow, and roce_fp_top's rx_idle waits for the scan)
      if (!HW_NOW && cfg_wr_word == SQ_W_NOW_HI && (active & (gbn_en | rnr_wt)) != '0)
        scan_left <= (QPN_W + 1)'(NQP);
    end
    // global reads (ready but in S_RD)
    if (cfg_rd_valid && cfg_rd_ready && r_glob) begin
      glob_valid_q <= 1'b1;
      rd_glob_q <= 1'b1;
      glob_q <= cfg_rd_word == SQ_R_TAKEN ? n_taken
          : cfg_rd_word == SQ_R_SENDS ? n_sends
          : cfg_rd_word == SQ_R_NAKS ? n_naks + gbn_drops
          : cfg_rd_word == SQ_R_RETRIES ? n_retries
          : cfg_rd_word == SQ_R_TIMEOUTS ? n_timeouts
          : cfg_rd_word == SQ_R_RNRS ? n_rnrs
          : {28'd0, news};
    end
    // (a news bit set in the cycle of the read stays: the assignments below win)
    if ((cfg_rd_valid && cfg_rd_ready && cfg_rd_word == SQ_R_NEWS) || news_rd) begin
      news_cqe <= 1'b0;
      news_gbn <= 1'b0;
    end

    case (st)
      S_IDLE: begin
        if (cfg_wr_valid && w_cmd) begin
          if (cfg_wr_data[1:0] == 2'd1) begin
            // hand over: the staged queue into the entry (x_wr_*)
            active[cfg_wr_index[QPN_W-1:0]] <= 1'b1;
            stopped[cfg_wr_index[QPN_W-1:0]] <= 1'b0;
            pending[cfg_wr_index[QPN_W-1:0]] <= 1'b0;
            gbn_en[cfg_wr_index[QPN_W-1:0]] <= st_cfg[18:16] != 3'd0;
            retrying[cfg_wr_index[QPN_W-1:0]] <= 1'b0;
            flush_due[cfg_wr_index[QPN_W-1:0]] <= 1'b0;
            rnr_left[cfg_wr_index[QPN_W-1:0]] <= st_cfg[22:20] != 3'd0;
            rnr_wt[cfg_wr_index[QPN_W-1:0]] <= 1'b0;
          end else if (cfg_wr_data[1:0] == 2'd2) begin
            // take back: rnr_wt stays (as the context and stopped do), so SQ_R_FLAGS
            // read after the command tells the state at the command (the SoC's firmware
            // reads after it, the hardware running beside the core); the hand-over
            // clears it
            active[cfg_wr_index[QPN_W-1:0]] <= 1'b0;
            pending[cfg_wr_index[QPN_W-1:0]] <= 1'b0;
            flush_due[cfg_wr_index[QPN_W-1:0]] <= 1'b0;
          end
        end else if (cfg_wr_valid && w_db) begin
          if (db_ok) pending[cfg_wr_index[QPN_W-1:0]] <= 1'b1;
        end else if (cfg_rd_valid && r_ctx) begin
          e <= cfg_rd_index[QPN_W-1:0];
          rd_word_q <= cfg_rd_word;
          rd_glob_q <= 1'b0;
          st <= S_RD;
        end else if (db_go) begin
          if (hdb_ok) pending[db_qpn] <= 1'b1;
        end else if (ret_go) begin
          e <= ev_e;
          st <= S_R_CTX;
          // a rewind: a second NAK of the same PSN is dropped from now on (until
          // here fp_rx_check's nak_inflight said so); an RNR NAK: the wait starts
          if (s_ev_data[8*EV_RFLAGS + 5]) rnr_wt[ev_e] <= 1'b1;
          else if (s_ev_data[8*EV_RFLAGS + 3]) retrying[ev_e] <= 1'b1;
        end else if (pick_v && pending[pick]) begin
          e <= pick;
          st <= S_F_CTX;
        end else if (HW_NOW || scan_left != '0) begin
          e <= scan_e;
          st <= S_SCAN;
        end
      end

      S_RD: begin
        st <= S_IDLE;
      end

      // a deadline passed: with something outstanding and a retry left, Go-Back-N
      // (x_wr_*: a retry spent, the replay from done, the deadline restarted; the
      // FLUSH follows); else (HW_NOW) the queue stops and the firmware takes it back
      // (without HW_NOW the firmware reads the deadline itself)
      S_SCAN: begin
        if (scan_rnr) begin
          rnr_wt[e] <= 1'b0;
          pending[e] <= 1'b1;
        end else if (scan_rew) begin
          retrying[e] <= 1'b1;
          flush_due[e] <= 1'b1;
          pending[e] <= 1'b1;
          n_retries <= n_retries + 32'd1;
          n_timeouts <= n_timeouts + 32'd1;
        end else if (HW_NOW && active[e] && !rnr_wt[e] && c.dl_v && now_w >= c.dl) begin
          stopped[e] <= 1'b1;
          pending[e] <= 1'b0;
        end
        scan_e <= scan_e + QPN_W'(1);
        if (scan_left != '0) scan_left <= scan_left - (QPN_W + 1)'(1);
        st <= S_IDLE;
      end

      // --------------------------------------------------- retirement
      S_R_CTX: begin
        ctx <= x_rd_data;
        st <= S_R_FPSN;   // (f_rd_*: the new oldest WQE's first PSN, done + n)
      end
      S_R_FPSN: begin
        st <= S_R_WB;
      end
      S_R_WB: begin
        // (x_wr_*: done, base, una, the deadline, the retries spent; a rewind's
        // replay from the new done)
        // room again: the fetch looks once more
        if (active[e] && !stopped[e]) pending[e] <= 1'b1;
        news_cqe <= 1'b1;
        if (r_rnr) begin
          // an RNR NAK: the FLUSH goes at once, the replay at the wait's end (S_SCAN);
          // one of rnr_retry spent (7: none)
          flush_due[e] <= 1'b1;
          n_rnrs <= n_rnrs + 32'd1;
          rnr_left[e] <= k.rnr_retry == 3'd7 || k.rnr_spent + 3'd1 < k.rnr_retry;
        end else if (r_rew) begin
          // Go-Back-N to una: the FLUSH goes first, the fetch offers it
          flush_due[e] <= 1'b1;
          n_naks <= n_naks + 32'd1;
          n_retries <= n_retries + 32'd1;
        end else if (r_una != k.una) begin
          retrying[e] <= 1'b0;   // progress: the budget starts afresh
        end
        if (r_fresh) rnr_left[e] <= k.rnr_retry != 3'd0;   // (and the RNR budget)
        st <= S_IDLE;
      end

      // -------------------------------------------------------- fetch
      S_F_CTX: begin
        ctx <= x_rd_data;
        st <= S_F_CHK;
      end
      S_F_CHK: begin
        if (!active[e] || stopped[e]) begin
          pending[e] <= 1'b0;
          st <= S_IDLE;
        end else if (flush_due[e]) begin
          // a rewind's FLUSH (op 15, bytes 12..14 the new una: fp_tx_plan drops the
          // QP's queued descriptors, sets noack 0, moves una_psn forward), ahead of
          // the replays
          if (fw_wait) st <= S_IDLE;   // offered again
          else begin
            txd <= '0;
            txd[8*TD_QPN +: 24] <= k.qpn;
            txd[8*TD_OP +: 8] <= OP_FLUSH;
            txd[8*TD_IMM +: 24] <= k.una;
            st <= S_F_FLUSH;
          end
        end else if (rnr_wt[e]) begin
          // an RNR wait: nothing sent, no new WQE fetched (the engine's
          // req_may_select); its end (S_SCAN) makes the queue pending again
          pending[e] <= 1'b0;
          st <= S_IDLE;
        end else if (k.rp && k.replay == k.ci) begin
          // the replay is over (x_wr_*): new WQEs next
          st <= S_IDLE;
        end else if (!k.rp && (k.ci == k.pi || held >= k.depth || held >= 32'(SQH))) begin
          // nothing to fetch, or as much held as allowed: a retirement or a
          // doorbell makes it pending again
          pending[e] <= 1'b0;
          st <= S_IDLE;
        end else if (slots_used >= 6'd32 || fw_wait || !dma_free) begin
          // still pending: tried again (S_F_REQ holds the segmenter's requests, so
          // it is entered only with none of them outstanding)
          st <= S_IDLE;
        end else if (k.rp) begin
          // a WQE held (its first PSN read: f_rd_*), unless retired while the
          // replay waited (the model stops there too: the firmware takes over)
          if (k.replay - k.done >= held) st <= S_F_STOP;
          else st <= S_F_RFP;
        end else if (k.pi - k.ci > (32'd1 << k.log)) begin
          st <= S_F_STOP;   // a producer index past the ring
        end else begin
          st <= S_F_REQ;
        end
      end
      S_F_RFP: begin
        d_rfirst <= f_rd_data[23:0];
        st <= S_F_REQ;
      end
      S_F_FLUSH: begin
        if (!active[e] || fw_wait) st <= S_IDLE;   // offered again
        else if (m_txd_ready) begin
          flush_due[e] <= 1'b0;
          st <= S_F_COOL;
        end
      end
      S_F_REQ: begin
        if (fw_wait || !dma_free) st <= S_IDLE;   // tried again
        else if (rd_req_ready) begin
          beat <= '0;
          rd_err <= 1'b0;
          st <= S_F_DATA;
        end
      end
      S_F_DATA: begin
        if (rd_tvalid && rd_own) begin
          if (32'(beat) < BEATS) wqe[32'(beat) * DATA_WIDTH +: DATA_WIDTH] <= rd_tdata;
          if (32'(beat) < BEATS) beat <= beat + BEAT_W'(1);
          if (rd_terr) rd_err <= 1'b1;
          if (rd_tlast) st <= S_F_DEC;
        end
      end
      S_F_DEC: begin
        sg <= '0;
        st <= d_ok ? S_F_MR : S_F_STOP;
      end
      S_F_MR: begin
        if (mc_v && !mc_ok) st <= S_F_STOP;   // the previous SGE's check failed
        else if (32'(sg) >= 32'(w_nsge) && !k.rp && d_rd && {2'd0, k.rdc} >= k.max_rd) begin
          // a new READ or atomic with the QP's initiator credits all held waits (the
          // engine's req_select; the model's sq_fetch reads it again): the retirement
          // that gives one back makes the queue pending again
          pending[e] <= 1'b0;
          st <= S_IDLE;
        end else if (32'(sg) >= 32'(w_nsge)) st <= S_F_BUILD;
        else if (w_sge_len[sg[1:0]] == 32'd0) sg <= sg + 3'd1;
        else st <= S_F_MRC;   // (m_rd_*: the SGE's MR entry)
      end
      S_F_MRC: begin
        // (its check registered above, decided in S_F_MR)
        sg <= sg + 3'd1;
        st <= S_F_MR;
      end
      S_F_BUILD: begin
        // (the end, d_after: above)
        d_first <= k.next;
        d_send <= (d_op == 8'd0 || d_op == OP_SEND_IMM) && !k.rp;
        txd <= '0;
        txd[8*TD_QPN +: 24] <= k.qpn;
        txd[8*TD_OP +: 8] <= d_op;
        txd[8*TD_FLAGS] <= w_flags[2];                       // SOLICITED -> SE
        txd[8*TD_FLAGS + TD_F_CQE] <= k.sig_all || w_flags[1];
        txd[8*TD_FLAGS + 1] <= k.rp;                         // REPLAY: in flight already
        txd[8*TD_NUM_SGE +: 8] <= w_nsge;
        txd[8*TD_WQE +: 16] <= w_idx[15:0];
        txd[8*TD_LENGTH +: 32] <= d_len_q;
        txd[8*TD_IMM +: 32] <= d_imm ? w_imm : 32'd0;
        txd[8*TD_RADDR +: 64] <= d_remote ? w_raddr : 64'd0;
        txd[8*TD_RKEY +: 32] <= d_remote ? w_rkey : 32'd0;
        txd[8*TD_FIRST_PSN +: 24] <= k.rp ? d_rfirst : k.next;
        txd[8*TD_START_PKT +: 32] <= k.rp ? d_rstart : 32'd0;
        for (int i = 0; i < 4; i++)
          if (32'(i) < 32'(w_nsge)) begin
            txd[8*(TD_SGE + 12*i) +: 64] <= w_sge_addr[i];
            txd[8*(TD_SGE + 12*i + 8) +: 32] <= w_sge_len[i];
          end
        // an atomic's operands in place of SGEs 2 and 3 (it has one SGE): the AtomicETH's
        // compare (CMP_AND_SWP) and swap or add
        if (w_opcode == 8'd5) txd[8*TD_COMPARE +: 64] <= w_compare;
        if (d_atomic) txd[8*TD_SWAP_ADD +: 64] <= w_swap;
        if (k.sig_all || w_flags[1]) txd[8*TD_WR_ID +: 64] <= w_wr_id;
        st <= S_F_OFFER;
      end
      S_F_OFFER: begin
        if (!active[e] || fw_wait) st <= S_IDLE;   // fetched again later
        else if (m_txd_ready) st <= S_F_COMMIT;
      end
      S_F_COMMIT: begin
        // (x_wr_*: ci, next, the deadline when none runs; f_wr_*: the first PSN;
        // a replay: its index)
        if (!k.rp) n_taken <= n_taken + 32'd1;
        if (d_send) n_sends <= n_sends + 32'd1;
        st <= S_F_COOL;
      end
      S_F_COOL: begin
        st <= S_IDLE;
      end
      S_F_STOP: begin
        stopped[e] <= 1'b1;
        pending[e] <= 1'b0;
        st <= S_IDLE;
      end
      default: st <= S_IDLE;
    endcase

    drops_q <= gbn_drops;
    if (gbn_drops != drops_q || scan_rew || (st == S_R_WB && (r_rew || r_rnr)))
      news_gbn <= 1'b1;

    // a send context written with valid clear: the queue is gone (the model's
    // write_sctx drops q.sq)
    if (sc0_wr_en && !sc0_wr_data[8*SC_FLAGS + 2]) begin
      active[sc0_wr_index] <= 1'b0;
      pending[sc0_wr_index] <= 1'b0;
      flush_due[sc0_wr_index] <= 1'b0;
    end

    if (rst) begin
      st <= S_IDLE;
      active <= '0;
      stopped <= '0;
      pending <= '0;
      n_taken <= '0;
      n_sends <= '0;
      n_naks <= '0;
      n_retries <= '0;
      n_timeouts <= '0;
      n_rnrs <= '0;
      rnr_left <= '0;
      rnr_wt <= '0;
      retrying <= '0;
      flush_due <= '0;
      gbn_en <= '0;
      scan_left <= '0;
      scan_e <= '0;
      news_cqe <= 1'b0;
      news_gbn <= 1'b0;
      drops_q <= '0;
      now <= '0;
      glob_valid_q <= 1'b0;
      rd_glob_q <= 1'b0;
    end
  end

  // the RAMs' ports: reads and writes in the cycle the FSM decides them, so
  // the next state sees the data and a read after a write the new contents
  logic [63:0] dl_new, dl_scan, dl_rnr;
  assign dl_new = now_w + k.rto;
  assign dl_scan = now_w + c.rto;
  assign dl_rnr = now_w + {32'd0, rnr_ns(r_timer)};
  logic [31:0] done_n;
  assign done_n = k.done + {24'd0, r_done};
  always_comb begin
    x_rd_en = 1'b0;
    x_rd_addr = pick;
    x_wr_en = '0;
    x_wr_addr = e;
    x_wr_data = '0;
    f_rd_en = 1'b0;
    f_rd_addr = {e, SQH_W'(c.done + {24'd0, r_done})};
    f_wr_en = 1'b0;
    f_wr_addr = {e, k.ci[SQH_W-1:0]};
    f_wr_data = {8'd0, d_first};
    m_rd_en = 1'b0;
    m_rd_addr = w_sge_key[sg[1:0]][8 +: MR_W];
    case (st)
      S_IDLE: begin
        if (cfg_wr_valid && w_cmd) begin
          if (cfg_wr_data[1:0] == 2'd1) begin
            x_wr_addr = cfg_wr_index[QPN_W-1:0];
            x_wr_en = '1;
            x_wr_data = {
              32'd0,                                         // X_REPLAY
              32'd0,                                         // X_RETRY: none spent
              {8'd0, cfg_wr_index},                          // X_QPN
              32'd0,                                         // X_DL_V
              32'd0, 32'd0,                                  // X_DL_HI, X_DL_LO
              st_rto_hi, st_rto_lo,
              st_depth, st_pd,
              {8'd0, st_psn[23:0]},                          // X_NEXT
              {8'd0, st_psn[23:0]},                          // X_UNA
              {8'd0, st_psn[23:0]},                          // X_BASE
              st_ci,                                         // X_DONE
              st_ci,                                         // X_PI
              st_ci,                                         // X_CI
              st_cfg, st_ring_hi, st_ring_lo
            };
          end
        end else if (cfg_wr_valid && w_db) begin
          if (db_ok) begin
            x_wr_addr = cfg_wr_index[QPN_W-1:0];
            x_wr_en = SQ_WORDS'(1) << X_PI;
            x_wr_data = {SQ_WORDS{cfg_wr_data}};
          end
        end else if (cfg_rd_valid && r_ctx) begin
          x_rd_en = 1'b1;
          x_rd_addr = cfg_rd_index[QPN_W-1:0];
        end else if (db_go) begin
          if (hdb_ok) begin
            x_wr_addr = db_qpn;
            x_wr_en = SQ_WORDS'(1) << X_PI;
            x_wr_data = {SQ_WORDS{db_pi}};
          end
        end else if (ret_go) begin
          x_rd_en = 1'b1;
          x_rd_addr = ev_e;
        end else if (pick_v && pending[pick]) begin
          x_rd_en = 1'b1;
          x_rd_addr = pick;
        end else if (HW_NOW || scan_left != '0) begin
          x_rd_en = 1'b1;
          x_rd_addr = scan_e;
        end
      end
      S_SCAN: if (scan_rew || scan_rnr) begin
        // (an RNR wait's end spends no retry and starts the timer as the engine's
        // hand-out of the replay does)
        x_wr_en = (SQ_WORDS'(1) << X_RETRY) | (SQ_WORDS'(1) << X_REPLAY)
            | (SQ_WORDS'(1) << X_DL_LO) | (SQ_WORDS'(1) << X_DL_HI) | (SQ_WORDS'(1) << X_DL_V);
        x_wr_data[32*X_RETRY + 8 +: 3] = c.spent + 3'(scan_rew);
        x_wr_data[32*X_RETRY + 16] = 1'b1;
        x_wr_data[32*X_RETRY + 19 +: 3] = c.rnr_spent;
        x_wr_data[32*X_RETRY + 24 +: 6] = c.rdc;
        x_wr_data[32*X_REPLAY +: 32] = c.done;
        x_wr_data[32*X_DL_LO +: 32] = dl_scan[31:0];
        x_wr_data[32*X_DL_HI +: 32] = dl_scan[63:32];
        x_wr_data[32*X_DL_V] = scan_rew || c.rto_v;
      end
      S_R_CTX: f_rd_en = 1'b1;
      S_R_WB: begin
        x_wr_en = (SQ_WORDS'(1) << X_DONE) | (SQ_WORDS'(1) << X_BASE)
            | (SQ_WORDS'(1) << X_UNA) | (SQ_WORDS'(1) << X_DL_LO)
            | (SQ_WORDS'(1) << X_DL_HI) | (SQ_WORDS'(1) << X_DL_V)
            | (SQ_WORDS'(1) << X_RETRY) | (SQ_WORDS'(1) << X_REPLAY);
        x_wr_data[32*X_DONE +: 32] = done_n;
        x_wr_data[32*X_BASE +: 24] = done_n == k.ci ? k.next : f_rd_data[23:0];
        x_wr_data[32*X_UNA +: 24] = r_una;
        x_wr_data[32*X_DL_LO +: 32] = dl_new[31:0];
        x_wr_data[32*X_DL_HI +: 32] = dl_new[63:32];
        // stopped when everything is acknowledged, as the engine's completer; a
        // rewind restarts it (the engine arms it as it hands the replay out)
        x_wr_data[32*X_DL_V] = (r_rew || r_una != k.next) && k.rto_v;
        if (r_rnr) begin
          // an RNR NAK: the deadline is the wait's end (no ACK timer meanwhile)
          x_wr_data[32*X_DL_LO +: 32] = dl_rnr[31:0];
          x_wr_data[32*X_DL_HI +: 32] = dl_rnr[63:32];
          x_wr_data[32*X_DL_V] = 1'b1;
        end else if (rnr_wt[e]) begin
          // an ACK in a wait: the wait's end stays (comp_progress restarts no timer)
          x_wr_data[32*X_DL_LO +: 32] = k.dl[31:0];
          x_wr_data[32*X_DL_HI +: 32] = k.dl[63:32];
          x_wr_data[32*X_DL_V] = k.dl_v;
        end
        // the retries spent: none since progress, one more at a rewind (the
        // model's sq_nak and go_back); a rewind replays from the new done, an RNR
        // NAK's replay waits (S_SCAN); one of rnr_retry spent at an RNR NAK (7: none)
        x_wr_data[32*X_RETRY + 8 +: 3] = (r_fresh ? 3'd0 : k.spent) + 3'(r_rew);
        x_wr_data[32*X_RETRY + 16] = r_rew || (k.rp && !r_rnr);
        x_wr_data[32*X_RETRY + 19 +: 3] = (r_fresh ? 3'd0 : k.rnr_spent)
            + 3'(r_rnr && k.rnr_retry != 3'd7);
        // (the READ or atomic whose last response this is gives its credit back)
        x_wr_data[32*X_RETRY + 24 +: 6] = k.rdc - 6'(r_rdret);
        x_wr_data[32*X_REPLAY +: 32] = r_rew ? done_n : k.replay;
      end
      S_F_CHK: begin
        // a replay's WQE: its first PSN; a replay over: the flag cleared
        f_rd_en = k.rp;
        f_rd_addr = {e, k.replay[SQH_W-1:0]};
        if (active[e] && !stopped[e] && !flush_due[e] && !rnr_wt[e] && k.rp
            && k.replay == k.ci) begin
          x_wr_en = SQ_WORDS'(1) << X_RETRY;
          x_wr_data[32*X_RETRY + 8 +: 3] = k.spent;
          x_wr_data[32*X_RETRY + 19 +: 3] = k.rnr_spent;
          x_wr_data[32*X_RETRY + 24 +: 6] = k.rdc;
        end
      end
      S_F_MR: m_rd_en = 32'(sg) < 32'(w_nsge) && w_sge_len[sg[1:0]] != 32'd0;
      S_F_COMMIT: begin
        x_wr_en = k.rp ? SQ_WORDS'(1) << X_REPLAY : (SQ_WORDS'(1) << X_CI) | (SQ_WORDS'(1) << X_NEXT);
        // the engine arms its timer when it hands out a message with none running
        if (!k.dl_v)
          x_wr_en = x_wr_en | (SQ_WORDS'(1) << X_DL_LO) | (SQ_WORDS'(1) << X_DL_HI)
              | (SQ_WORDS'(1) << X_DL_V);
        x_wr_data[32*X_CI +: 32] = k.ci + 32'd1;
        x_wr_data[32*X_NEXT +: 24] = d_after;
        x_wr_data[32*X_DL_LO +: 32] = dl_new[31:0];
        x_wr_data[32*X_DL_HI +: 32] = dl_new[63:32];
        x_wr_data[32*X_DL_V] = k.rto_v;
        x_wr_data[32*X_REPLAY +: 32] = k.replay + 32'd1;
        // a new READ or atomic takes an initiator credit (the rest of the word as read)
        if (!k.rp && d_rd) x_wr_en = x_wr_en | (SQ_WORDS'(1) << X_RETRY);
        x_wr_data[32*X_RETRY +: 32] = ctx[32*X_RETRY +: 32];
        x_wr_data[32*X_RETRY + 24 +: 6] = k.rdc + 6'd1;
        f_wr_en = !k.rp;
      end
      default: ;
    endcase
  end
  assign cfg_rdata_valid = glob_valid_q || st == S_RD;

  assign db_go = HW_NOW && st == S_IDLE && db_valid && !(cfg_wr_valid && (w_cmd || w_db))
      && !(cfg_rd_valid && r_ctx);
  assign db_ready = db_go || !HW_NOW;
  assign ret_go = st == S_IDLE && s_ev_valid && ev_take && !(cfg_wr_valid && (w_cmd || w_db))
      && !(cfg_rd_valid && r_ctx) && !db_go;

  // decoded op (from the WQE bytes)
  // (ibv_wr_opcode: 0 WRITE, 1 WRITE_WITH_IMM, 2 SEND, 3 SEND_WITH_IMM, 4 READ,
  // 5 CMP_AND_SWP, 6 FETCH_AND_ADD; d_ok refuses the rest)
  always_comb begin
    d_remote = w_opcode == 8'd0 || w_opcode == 8'd1 || (w_opcode >= 8'd4 && w_opcode <= 8'd6);
    d_imm = w_opcode == 8'd1 || w_opcode == 8'd3;
    d_rd = w_opcode >= 8'd4 && w_opcode <= 8'd6;
    d_atomic = w_opcode == 8'd5 || w_opcode == 8'd6;
    case (w_opcode)
      8'd0: d_op = OP_WRITE;
      8'd1: d_op = OP_WRITE_IMM;
      8'd3: d_op = OP_SEND_IMM;
      8'd4: d_op = OP_READ;
      8'd5: d_op = OP_CMP_SWAP;
      8'd6: d_op = OP_FETCH_ADD;
      default: d_op = 8'd0;   // SEND
    endcase
  end

  // the read data
  always_comb begin
    cfg_rdata = glob_q;
    if (!rd_glob_q) begin
      case (rd_word_q)
        SQ_R_CI: cfg_rdata = c.ci;
        SQ_R_DONE: cfg_rdata = c.done;
        SQ_R_BASE: cfg_rdata = {8'd0, c.base};
        SQ_R_UNA: cfg_rdata = {8'd0, c.una};
        SQ_R_DL_LO: cfg_rdata = c.dl[31:0];
        SQ_R_DL_HI: cfg_rdata = c.dl[63:32];
        SQ_R_FLAGS: cfg_rdata = {22'd0, rnr_wt[e], c.rnr_spent, c.spent, c.dl_v, stopped[e],
                                 active[e]};
        default: cfg_rdata = '0;
      endcase
    end
  end

  // the read data is this unit's from its request to its last beat
  always_ff @(posedge clk) begin
    if (rd_req_valid && rd_req_ready) rd_own <= 1'b1;
    if (rd_own && rd_tvalid && rd_tlast) rd_own <= 1'b0;
    if (rst) rd_own <= 1'b0;
  end

  /* verilator lint_off UNUSEDSIGNAL */
  logic unused;
  assign unused = ^{c.ring, c.rto, c.log, c.sig_all, c.rto_v, c.mtu, c.pi, c.pd, c.depth,
                    c.next, c.qpn, c.retry_cnt, c.rnr_retry, c.rp, c.replay, c.max_rd, k.retry_cnt, k.pi,
                    wqe, d_first,
                    sc0_wr_data, cfg_rd_word, c.una,
                    st_psn, f_rd_data, c.base, d_len, w_now, cfg_rd_index, m_rd_data};
  /* verilator lint_on UNUSEDSIGNAL */

endmodule

`resetall
