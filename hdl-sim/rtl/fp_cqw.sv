// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_cqw: the CQE writer (docs/fastpath.md §3.7). The response path retires
// the messages a response acknowledges; for those whose descriptor asked
// for a CQE (flags bit 2, wr_id in bytes 88..95) this writes the CQE into
// the QP's send CQ in host memory, all of a response's CQEs or none, and
// says so in its ACKED event (byte 31 bit 2), so the firmware builds no
// completion for them. roce_firmware::fastpath::CqWriter is the model.
//
// Its inputs: per response taken, a group from fp_rx_check (the QP and how
// many CQEs it owes), then that many records (wr_id, immediate, CQE opcode,
// byte length); and the event stream of fp_rx. The group waits for its
// ACKED event (which leaves the mover only after a READ response's payload
// is written, so a READ's CQE never precedes its data); then the writer
// looks up the QP's send CQ and the CQ's ring, and when the QP has one and
// the ring has room for every CQE of the group by the host's consumer index
// as the firmware last told it, writes them at the producer index (one DMA
// write of 32 bytes each) and advances it; otherwise it drops the records.
// The event goes on after that, with bit 2 set when the CQEs were written
// (or none were owed and the QP has a CQ with room, as the model's
// write_all of nothing). Other events pass through in order.
//
// The tables (roce_fp_top's table 3, fp_pkg's CQW_* words): per CQ (index =
// CQ number < CQ_N) its ring address, {valid, log2 depth}, producer index
// and the host's consumer index; per context entry the QP's send CQ. The
// firmware writes its own CQEs at this producer index (one producer index per
// ring), in one of two ways:
// * it reads the index, writes the CQE by DMA and writes the index back: safe
//   only while the writer is idle between the read and the write (FpPort
//   clocks the RTL only inside FastPath::run, so it is there);
// * a soft core beside a running writer (the SoC) posts the CQE through the
//   CQE port instead (words 29 and 30, fp_pkg's CQW_FW_*): the writer
//   writes it at the producer index between its groups (before the next
//   one: the firmware waits for it), with the owner bit of the index's pass,
//   if the ring has room for it by the consumer index, and says whether it
//   did and where the producer index is then (words 25 and 26). The writer
//   is then the only one to write a producer index. A post also goes before
//   the event of a group already written (W_EMIT), which waits for the
//   firmware's pop: the firmware, its post's answer held, pops nothing until
//   then, and the two waited for each other until the port's stall limit
//   (the answer then stale: lostcqe).
//
// Receive CQEs (docs/fastpath.md §3.7, "Receive CQEs"): a MSG_DONE event
// with EV_FLAGS bit 2 set (the SEND went into a buffer the firmware loaded
// with its WQE's wr_id, the context's recv_cqe) is held as an ACKED is: the
// writer looks up the entry's receive CQ and wr_id (word 24 with bit 31, and
// words 23 and 31, which the firmware writes before the load) and the CQ's
// ring, writes the CQE the engine's complete_recv would make (wr_id, the
// event's byte length, the QP, opcode RECV, the SEND's SE in bit 1 of byte
// 31) when the ring has room for one, and lets the event go with bit 2 set
// when it did, clear when it did not (the firmware writes it then).
//
// DMA writes share the port with the mover (fp_rx_move): the writer takes it
// only between the mover's transfers (every descriptor it sent matched by
// its data's last beat, nothing offered in that cycle) and gives it back
// after the group, so descriptors and data stay paired in order.

`resetall
`default_nettype none

module fp_cqw
  import fp_pkg::*;
#(
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    parameter int NQP = 256,
    parameter int QPN_W = $clog2(NQP),
    parameter int E_W = $clog2(IF_ENTRIES)
) (
    input  wire logic                    clk,
    input  wire logic                    rst,

    // fp_rx_check: a group per response taken, then its records
    input  wire logic                    grp_valid,
    input  wire logic [23:0]             grp_qpn,
    input  wire logic [E_W:0]            grp_n,
    output logic                         grp_room,
    input  wire logic                    rec_valid,
    input  wire logic [CQ_REC_BITS-1:0]  rec_data,    // {length, CQE record}
    output logic                         rec_room,    // two more fit

    // events: fp_rx's in, the firmware's out
    input  wire logic [EV_BYTES*8-1:0]   s_ev_data,
    input  wire logic                    s_ev_valid,
    output logic                         s_ev_ready,
    output logic [EV_BYTES*8-1:0]        m_ev_data,
    output logic                         m_ev_valid,
    input  wire logic                    m_ev_ready,

    // DMA writes: the mover's in, the host's out
    input  wire logic [63:0]             s_dma_wr_desc_addr,
    input  wire logic [15:0]             s_dma_wr_desc_len,
    input  wire logic                    s_dma_wr_desc_valid,
    output logic                         s_dma_wr_desc_ready,
    input  wire logic [DATA_WIDTH-1:0]   s_dma_wr_tdata,
    input  wire logic [KEEP_WIDTH-1:0]   s_dma_wr_tkeep,
    input  wire logic                    s_dma_wr_tvalid,
    output logic                         s_dma_wr_tready,
    input  wire logic                    s_dma_wr_tlast,

    output logic [63:0]                  m_dma_wr_desc_addr,
    output logic [15:0]                  m_dma_wr_desc_len,
    output logic                         m_dma_wr_desc_valid,
    input  wire logic                    m_dma_wr_desc_ready,
    output logic [DATA_WIDTH-1:0]        m_dma_wr_tdata,
    output logic [KEEP_WIDTH-1:0]        m_dma_wr_tkeep,
    output logic                         m_dma_wr_tvalid,
    input  wire logic                    m_dma_wr_tready,
    output logic                         m_dma_wr_tlast,

    // the firmware's table port, this writer's words of table 3
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

    // CQEs written (a count), and nothing under way
    output logic [31:0]                  cqes,
    output logic                         idle
);

  localparam int CQ_W = $clog2(CQ_N);
  localparam int GRP_DEPTH = 16;
  localparam int REC_DEPTH = 8;
  // beats of one 32-byte CQE
  localparam int BEATS = (32 + KEEP_WIDTH - 1) / KEEP_WIDTH;
  localparam int BEAT_W = BEATS > 1 ? $clog2(BEATS) : 1;

  // ------------------------------------------------ the groups and records
  logic [24 + E_W:0] grp_head;
  logic              grp_pop;
  logic [$clog2(GRP_DEPTH + 1)-1:0] grp_count;
  roce_fifo #(
    .WIDTH(25 + E_W),
    .DEPTH(GRP_DEPTH)
  ) grp_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data({grp_n, grp_qpn}),
    .wr_en(grp_valid),
    .rd_data(grp_head),
    .rd_en(grp_pop),
    .count(grp_count)
  );
  // fp_rx_check asks at a packet's start, for the one group it may push
  assign grp_room = 32'(grp_count) < GRP_DEPTH;

  logic [CQ_REC_BITS-1:0] rec_head;
  logic                   rec_pop;
  logic [$clog2(REC_DEPTH + 1)-1:0] rec_count;
  roce_fifo #(
    .WIDTH(CQ_REC_BITS),
    .DEPTH(REC_DEPTH)
  ) rec_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data(rec_data),
    .wr_en(rec_valid),
    .rd_data(rec_head),
    .rd_en(rec_pop),
    .count(rec_count)
  );
  // a record is read a cycle before it arrives: room for it and the next
  assign rec_room = 32'(rec_count) <= REC_DEPTH - 2;

  // ------------------------------------------------------------ the tables
  typedef enum logic [3:0] {
    W_IDLE, W_MAP, W_CQ, W_DROP, W_REQ, W_DESC, W_DATA, W_PI, W_EMIT, W_FDONE
  } wstate_t;
  wstate_t st;

  // the CQE port: the staged CQE (words 0..6, then the post's word 7), the CQ
  // it goes to, a post waiting, and what the last one came to
  logic [31:0]     fw_cqe [7];
  logic [2:0]      fw_at;     // the next staged word
  logic [31:0]     fw_w7;
  logic [CQ_W-1:0] fw_cq;
  logic            fw_pend;
  logic            fw_take;   // the writer takes the post (before any group)
  logic            e_back;    // ... out of W_EMIT: back there after it
  logic            e_ok;      // ... and the held event's bit 2 meanwhile
  logic            fw_done;   // the last post was written
  logic [31:0]     fw_pi;     // its CQ's producer index after it
  logic            g_fw;      // the writer is on the post, not on a group
  logic            g_rcv;     // ... or on a MSG_DONE's receive CQE
  logic [63:0]     g_wrid;    // its wr_id (the entry's, read at W_MAP)

  // per context entry: send CQ {valid [8], CQ [5:0]}, receive CQ (the same),
  // the loaded receive WQE's wr_id low, high
  logic            sq_rd_en;
  logic [QPN_W-1:0] sq_rd_addr;
  logic [127:0]    sq_rd_data;
  logic [3:0]      sq_wr_en;
  // per CQ: ring low, ring high, {valid [8], log2 depth [4:0]}, pi, ci
  logic            cq_rd_en;
  logic [CQ_W-1:0] cq_rd_addr;
  logic [159:0]    cq_rd_data;
  logic [4:0]      cq_wr_en;
  logic [CQ_W-1:0] cq_wr_addr;
  logic [159:0]    cq_wr_data;

  logic is_acked, is_rcv, rcv_take, fw_rd_sq, fw_rd_cq;
  assign is_acked = s_ev_valid && s_ev_data[8*EV_KIND +: 8] == EVK_ACKED;
  // a MSG_DONE whose buffer came with its wr_id: a receive CQE to write
  assign is_rcv = s_ev_valid && s_ev_data[8*EV_KIND +: 8] == EVK_MSG_DONE
      && s_ev_data[8*EV_FLAGS + EV_F_CQE];
  // a group starts with its ACKED event (its group went in before it); a
  // post of the firmware goes first (the firmware waits for it), also ahead of
  // the event of a group written, which waits for the firmware's pop (W_EMIT)
  assign fw_take = fw_pend && (st == W_IDLE || (st == W_EMIT && !m_ev_ready));
  assign grp_pop = st == W_IDLE && !fw_pend && is_acked && grp_count != '0;
  assign rcv_take = st == W_IDLE && !fw_pend && is_rcv;

  // the writer's reads and its producer-index write first; the firmware's
  // accesses wait (one cycle at most per group step), and while a post of its
  // own is under way they wait for it
  assign cfg_rd_ready = !grp_pop && !rcv_take && st != W_MAP && !fw_pend;
  assign cfg_wr_ready = st != W_PI && !fw_pend;
  assign fw_rd_sq = cfg_rd_valid && cfg_rd_ready && cfg_rd_word == CQW_SEND_CQ;
  assign fw_rd_cq = cfg_rd_valid && cfg_rd_ready && cfg_rd_word != CQW_SEND_CQ;

  // the writer's working state
  logic [23:0]     g_qpn;
  logic [E_W:0]    g_n;
  logic            g_sq;     // the QP has a send CQ
  logic [CQ_W-1:0] g_cq;
  logic            g_ok;     // its CQEs are written (or none owed, with room)
  logic [63:0]     g_ring;
  logic [4:0]      g_log;
  logic [31:0]     g_pi;
  logic [BEAT_W-1:0] beat;
  logic            own;      // the DMA write port is the writer's

  always_comb begin
    sq_rd_en = grp_pop || rcv_take || fw_rd_sq;
    sq_rd_addr = grp_pop ? grp_head[QPN_W-1:0]
        : rcv_take ? s_ev_data[8*EV_QPN +: QPN_W] : cfg_rd_index[QPN_W-1:0];
    cq_rd_en = st == W_MAP || fw_take || fw_rd_cq;
    cq_rd_addr = st == W_MAP ? (g_rcv ? sq_rd_data[32 +: CQ_W] : sq_rd_data[CQ_W-1:0])
        : fw_take ? fw_cq : cfg_rd_index[CQ_W-1:0];
    sq_wr_en = '0;
    if (cfg_wr_valid && cfg_wr_ready) begin
      // word 24: bit 31 says which CQ (receive, else send)
      if (cfg_wr_word == CQW_SEND_CQ) sq_wr_en[cfg_wr_data[31] ? 1 : 0] = 1'b1;
      if (cfg_wr_word == CQW_RECV_WRID_LO) sq_wr_en[2] = 1'b1;
      if (cfg_wr_word == CQW_RECV_WRID_HI) sq_wr_en[3] = 1'b1;
    end
    cq_wr_en = '0;
    cq_wr_addr = cfg_wr_index[CQ_W-1:0];
    cq_wr_data = {5{cfg_wr_data}};
    if (st == W_PI) begin
      cq_wr_en[3] = 1'b1;
      cq_wr_addr = g_cq;
      cq_wr_data[96 +: 32] = g_pi;
    end else if (cfg_wr_valid && cfg_wr_ready && cfg_wr_word >= CQW_RING_LO
        && cfg_wr_word <= CQW_CI && cfg_wr_index < 24'(CQ_N)) begin
      cq_wr_en[3'(cfg_wr_word - CQW_RING_LO)] = 1'b1;
    end
  end

  logic [31:0] sq_wdata;
  assign sq_wdata = cfg_wr_word == CQW_SEND_CQ ? cfg_wr_data & 32'h1FF : cfg_wr_data;
  roce_ram #(
    .WORDS(4),
    .DEPTH(NQP)
  ) sq_ram_inst (
    .clk(clk),
    .wr_addr(cfg_wr_index[QPN_W-1:0]),
    .wr_en(sq_wr_en),
    .wr_data({4{sq_wdata}}),
    .rd_addr(sq_rd_addr),
    .rd_en(sq_rd_en),
    .rd_data(sq_rd_data)
  );

  roce_ram #(
    .WORDS(5),
    .DEPTH(CQ_N)
  ) cq_ram_inst (
    .clk(clk),
    .wr_addr(cq_wr_addr),
    .wr_en(cq_wr_en),
    .wr_data(cq_wr_data),
    .rd_addr(cq_rd_addr),
    .rd_en(cq_rd_en),
    .rd_data(cq_rd_data)
  );

  // (the receive CQ word's bits past {valid, CQ}: never written)
  /* verilator lint_off UNUSEDSIGNAL */
  logic unused_rcq;
  assign unused_rcq = ^{sq_rd_data[63:41], sq_rd_data[39:38]};
  /* verilator lint_on UNUSEDSIGNAL */

  // the firmware's reads: the word, a cycle later (a CQ past the table reads 0)
  logic [4:0] fw_word;
  logic       fw_past;
  always_ff @(posedge clk) begin
    cfg_rdata_valid <= cfg_rd_valid && cfg_rd_ready;
    fw_word <= cfg_rd_word;
    fw_past <= cfg_rd_word != CQW_SEND_CQ && cfg_rd_index >= 24'(CQ_N);
    if (rst) cfg_rdata_valid <= 1'b0;
  end
  always_comb begin
    if (fw_word == CQW_SEND_CQ) cfg_rdata = sq_rd_data[31:0];
    else if (fw_word == CQW_FW_DONE) cfg_rdata = {31'd0, fw_done};
    else if (fw_word == CQW_FW_PI) cfg_rdata = fw_pi;
    else if (fw_past || fw_word < CQW_RING_LO || fw_word > CQW_CI) cfg_rdata = '0;
    else cfg_rdata = cq_rd_data[32 * 3'(fw_word - CQW_RING_LO) +: 32];
  end

  // ----------------------------------------------------------- the CQE
  // Cqe::from_wc of the engine's send completion (fastpath.rs send_wc): wr_id,
  // byte_len, imm_data (WITH_IMM only), qp_num, src_qp 0, invalidated_rkey 0,
  // status SUCCESS, opcode, wc_flags WITH_IMM, owner bit of the ring's pass
  logic [255:0] cqe;
  logic [BEATS*DATA_WIDTH-1:0] cqe_wide;
  logic [31:0]  g_mask;
  always_comb begin
    logic wimm;
    wimm = rec_head[CQ_WIMM];
    cqe = '0;
    if (g_fw) begin
      // the firmware's CQE as it staged it, but for the owner bit
      for (int i = 0; i < 7; i++) cqe[32 * i +: 32] = fw_cqe[i];
      cqe[224 +: 32] = fw_w7;
    end else if (g_rcv) begin
      // the engine's complete_recv of a SEND (fastpath.rs recv_wc): wr_id,
      // byte_len, qp_num, status SUCCESS, opcode RECV, the SE in bit 1 of byte 31
      cqe[0 +: 64] = g_wrid;
      cqe[64 +: 32] = s_ev_data[8*EV_BYTE_LEN +: 32];
      cqe[128 +: 32] = {8'd0, g_qpn};
      cqe[232 +: 8] = WC_RECV;
      cqe[249] = s_ev_data[8*EV_FLAGS + 1];
    end else begin
      cqe[0 +: 64] = rec_head[CQ_WRID +: 64];
      cqe[64 +: 32] = rec_head[CQ_INFO_BITS +: 32];
      cqe[96 +: 32] = wimm ? rec_head[CQ_IMM +: 32] : 32'd0;
      cqe[128 +: 32] = {8'd0, g_qpn};
      cqe[232 +: 8] = {5'd0, rec_head[CQ_OPC +: 3]};
      cqe[240 +: 8] = wimm ? 8'd2 : 8'd0;
    end
    cqe[248] = !g_pi[g_log];
    cqe_wide = '0;
    cqe_wide[255:0] = cqe;
    g_mask = (32'd1 << g_log) - 32'd1;
  end

  // ----------------------------------------------- the DMA write port
  // the mover's transfers under way: descriptors sent minus data ends, and a
  // data stream begun
  logic signed [3:0] mv_open;
  logic              mv_mid;
  logic              mv_clean;
  assign mv_clean = mv_open == 4'sd0 && !mv_mid && !s_dma_wr_desc_valid && !s_dma_wr_tvalid;

  logic            w_desc_valid, w_tvalid, w_tlast;
  logic [KEEP_WIDTH-1:0] w_tkeep;
  always_comb begin
    w_desc_valid = st == W_DESC && (g_fw || g_rcv || rec_count != '0);
    w_tvalid = st == W_DATA;
    w_tlast = beat == BEAT_W'(BEATS - 1);
    for (int i = 0; i < KEEP_WIDTH; i++) w_tkeep[i] = 32'(beat) * KEEP_WIDTH + i < 32;
    m_dma_wr_desc_addr = own ? g_ring + {27'd0, g_pi & g_mask, 5'd0} : s_dma_wr_desc_addr;
    m_dma_wr_desc_len = own ? 16'd32 : s_dma_wr_desc_len;
    m_dma_wr_desc_valid = own ? w_desc_valid : s_dma_wr_desc_valid;
    s_dma_wr_desc_ready = !own && m_dma_wr_desc_ready;
    m_dma_wr_tdata = own ? cqe_wide[32'(beat) * DATA_WIDTH +: DATA_WIDTH] : s_dma_wr_tdata;
    m_dma_wr_tkeep = own ? w_tkeep : s_dma_wr_tkeep;
    m_dma_wr_tvalid = own ? w_tvalid : s_dma_wr_tvalid;
    m_dma_wr_tlast = own ? w_tlast : s_dma_wr_tlast;
    s_dma_wr_tready = !own && m_dma_wr_tready;
  end

  // ----------------------------------------------------------- events
  always_comb begin
    m_ev_data = s_ev_data;
    m_ev_valid = 1'b0;
    s_ev_ready = 1'b0;
    if (st == W_IDLE && s_ev_valid && !is_acked && !is_rcv) begin
      m_ev_valid = 1'b1;
      s_ev_ready = m_ev_ready;
    end else if (st == W_EMIT && g_rcv) begin
      m_ev_data[8*EV_FLAGS + EV_F_CQE] = g_ok;
      m_ev_valid = 1'b1;
      s_ev_ready = m_ev_ready;
    end else if (st == W_EMIT) begin
      m_ev_data[8*EV_RFLAGS + 2] = g_ok;
      m_ev_valid = 1'b1;
      s_ev_ready = m_ev_ready;
    end
  end

  assign rec_pop = (st == W_DROP && rec_count != '0)
      || (st == W_DATA && m_dma_wr_tready && w_tlast && !g_fw && !g_rcv);
  assign idle = st == W_IDLE && grp_count == '0 && rec_count == '0 && !fw_pend;

  always_ff @(posedge clk) begin
    // the mover's side of the port
    if (!own) begin
      mv_open <= mv_open
          + ((s_dma_wr_desc_valid && m_dma_wr_desc_ready) ? 4'sd1 : 4'sd0)
          - ((s_dma_wr_tvalid && m_dma_wr_tready && s_dma_wr_tlast) ? 4'sd1 : 4'sd0);
      if (s_dma_wr_tvalid && m_dma_wr_tready) mv_mid <= !s_dma_wr_tlast;
    end
    // the CQE port: staging words, and the post (a CQ past the table is
    // refused at once)
    if (cfg_wr_valid && cfg_wr_ready && cfg_wr_word == CQW_FW_STAGE && fw_at < 3'd7) begin
      fw_cqe[fw_at] <= cfg_wr_data;
      fw_at <= fw_at + 3'd1;
    end
    if (cfg_wr_valid && cfg_wr_ready && cfg_wr_word == CQW_FW_POST) begin
      fw_at <= '0;
      fw_w7 <= cfg_wr_data;
      fw_cq <= cfg_wr_index[CQ_W-1:0];
      if (cfg_wr_index < 24'(CQ_N)) fw_pend <= 1'b1;
      else begin
        fw_done <= 1'b0;
        fw_pi <= '0;
      end
    end
    case (st)
      W_IDLE: if (fw_take) begin
        g_fw <= 1'b1;
        g_sq <= 1'b1;
        g_cq <= fw_cq;
        g_n <= (E_W + 1)'(1);
        st <= W_CQ;
      end else if (grp_pop) begin
        g_fw <= 1'b0;
        g_rcv <= 1'b0;
        g_qpn <= grp_head[23:0];
        g_n <= grp_head[24 +: E_W + 1];
        st <= W_MAP;
      end else if (rcv_take) begin
        g_fw <= 1'b0;
        g_rcv <= 1'b1;
        g_qpn <= s_ev_data[8*EV_QPN +: 24];
        g_n <= (E_W + 1)'(1);
        st <= W_MAP;
      end
      W_MAP: begin
        g_sq <= g_rcv ? sq_rd_data[32 + 8] : sq_rd_data[8];
        g_cq <= g_rcv ? sq_rd_data[32 +: CQ_W] : sq_rd_data[CQ_W-1:0];
        g_wrid <= sq_rd_data[64 +: 64];
        st <= W_CQ;
      end
      W_CQ: begin
        logic ok;
        logic [4:0] lg;
        lg = cq_rd_data[64 +: 5];
        // room for all by the consumer index last seen (the model's write_all)
        ok = g_sq && cq_rd_data[64 + 8]
            && {1'b0, cq_rd_data[96 +: 32] - cq_rd_data[128 +: 32]} + 33'(g_n)
               <= (33'd1 << lg);
        g_ok <= ok;
        g_ring <= cq_rd_data[0 +: 64];
        g_log <= lg;
        g_pi <= cq_rd_data[96 +: 32];
        if (g_fw) st <= ok ? W_REQ : W_FDONE;
        else if (g_rcv) st <= ok ? W_REQ : W_EMIT;
        else st <= (g_n == '0) ? W_EMIT : ok ? W_REQ : W_DROP;
      end
      W_DROP: if (rec_count != '0) begin
        g_n <= g_n - 1'b1;
        if (g_n == (E_W + 1)'(1)) st <= W_EMIT;
      end
      W_REQ: if (mv_clean) begin
        own <= 1'b1;
        st <= W_DESC;
      end
      W_DESC: if (w_desc_valid && m_dma_wr_desc_ready) begin
        beat <= '0;
        st <= W_DATA;
      end
      W_DATA: if (m_dma_wr_tready) begin
        beat <= beat + 1'b1;
        if (w_tlast) begin
          g_pi <= g_pi + 32'd1;
          g_n <= g_n - 1'b1;
          cqes <= cqes + 32'd1;
          st <= (g_n == (E_W + 1)'(1)) ? W_PI : W_DESC;
        end
      end
      W_PI: begin
        own <= 1'b0;
        st <= g_fw ? W_FDONE : W_EMIT;
      end
      W_EMIT: if (m_ev_ready) begin
        g_rcv <= 1'b0;
        st <= W_IDLE;
      end else if (fw_take) begin
        // (g_rcv stays: the post's CQE is g_fw's, and W_EMIT needs it after)
        e_back <= 1'b1;
        e_ok <= g_ok;
        g_fw <= 1'b1;
        g_sq <= 1'b1;
        g_cq <= fw_cq;
        g_n <= (E_W + 1)'(1);
        st <= W_CQ;
      end
      W_FDONE: begin
        fw_done <= g_ok;
        fw_pi <= g_pi;
        fw_pend <= 1'b0;
        g_fw <= 1'b0;
        st <= e_back ? W_EMIT : W_IDLE;
        e_back <= 1'b0;
        if (e_back) g_ok <= e_ok;
      end
      default: st <= W_IDLE;
    endcase
    if (rst) begin
      st <= W_IDLE;
      own <= 1'b0;
      mv_open <= 4'sd0;
      mv_mid <= 1'b0;
      cqes <= '0;
      fw_pend <= 1'b0;
      fw_at <= '0;
      fw_done <= 1'b0;
      fw_pi <= '0;
      g_fw <= 1'b0;
      g_rcv <= 1'b0;
      e_back <= 1'b0;
    end
  end

endmodule

`resetall
