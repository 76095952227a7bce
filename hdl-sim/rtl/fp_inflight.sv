// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_inflight: the requester's in-flight list per QP (docs/fastpath.md §2.2,
// §3.6), what the response path needs to take an ACKNOWLEDGE in hardware.
//
// One row per QP in block RAM holds E entries (a ring: `head`, `count` per
// QP in registers beside it); an entry is {gap, kind, first PSN, last PSN,
// wqe_index, length} of one new (non-REPLAY) message descriptor, appended as the TX
// intake takes the descriptor (the model's FastPathPort::accept), its last
// PSN from the QP's path MTU (kept here from the firmware's word-0 writes of
// the send context). The response check (fp_rx_check) reads a QP's whole row
// and its pointers in one cycle and later retires `n` entries from the head;
// an append and a retirement of the same QP in one cycle combine.
//
// A READ's SGEs (where its responses' payload goes) are written with its
// entry into a second table, one record per entry ({QP, ring position}), which
// the check reads for the one entry a READ response is for. A message whose
// descriptor asks for a CQE (flags bit 2, docs/fastpath.md §3.7) keeps what
// the CQE needs (wr_id, immediate, CQE opcode) in a third such table, which
// the check reads for each such entry a response retires (the CQE writer,
// fp_cqw); the entry's IF_CQE bit says it has one.
//
// Retirement by the firmware's una_psn writes is lazy: the entries that end
// before the context's una_psn are dead, and the response check drops them
// (it sees una_psn) with the next response of the QP, taken or not. Until
// then they take room; a full row drops the append and marks the next entry
// appended `gap` (a message of unknown kind is missing before it), which the
// response check honours: no ACK is taken across a gap that una_psn has not
// passed (it goes to the firmware). A send context written with `valid`
// clear empties the QP's row.
//
// A retirement is decided on the row as read, some cycles before it is
// applied; meanwhile the row can only grow by appends at its tail (so the
// n entries from the head are still the ones the check saw) or be emptied
// by a `valid` clear. So a retirement of a row cleared since its read
// applies to nothing (the clear came after the response: the row stays
// empty), and one that is applied never retires more than the row holds.
// The check reads one row at a time and retires from it before its next
// read, so one flag for the row last read is enough.
//
// Timing (125 MHz on the ECP5): each QP's ring is a head and a tail pointer
// (one wrap bit more than a lane: count = tail - head), so an append writes
// only tails and a retirement only heads. Nothing is looked up by QP in the
// cycle that writes the pointers: the append's tail, head, gap flag and MTU
// are read as the intake's descriptor is registered (the stage before the
// append, corrected for the writes of that same cycle), and a retirement's
// new head is the head read with the row plus n (only a retirement or a
// `valid` clear moves a head, and a clear makes the retirement void). Before,
// the 256-to-1 selections of head and count by the append's and the
// retirement's QPs fed the 2,048 pointer flip-flops in the same cycle
// (56.8 MHz after placement, BENCHMARKS.md).

`resetall
`default_nettype none

module fp_inflight
  import fp_pkg::*;
#(
    parameter int NQP = 256,
    parameter int QPN_W = $clog2(NQP),
    parameter int E = IF_ENTRIES,
    parameter int E_W = $clog2(E)
) (
    input  wire logic                    clk,
    input  wire logic                    rst,

    // a new message descriptor taken by the TX intake
    input  wire logic                    ap_valid,
    input  wire logic [QPN_W-1:0]        ap_qpn,
    input  wire logic [7:0]              ap_op,
    input  wire logic [23:0]             ap_first,
    input  wire logic [31:0]             ap_len,
    input  wire logic [15:0]             ap_wqe,
    input  wire logic [7:0]              ap_nsge,
    input  wire logic [SG_BITS-1:0]      ap_sge,
    input  wire logic                    ap_cqe,     // the descriptor asks for a CQE
    input  wire logic [63:0]             ap_wrid,
    input  wire logic [31:0]             ap_imm,

    // firmware writes of the send context's word 0: path MTU, `valid`
    input  wire logic                    w0_wr_en,
    input  wire logic [QPN_W-1:0]        w0_wr_addr,
    input  wire logic [31:0]             w0_wr_data,

    // the response check: a row and its pointers (one cycle after rd_en)
    input  wire logic                    rd_en,
    input  wire logic [QPN_W-1:0]        rd_addr,
    output logic [E*IF_BITS-1:0]         rd_row,
    output logic [E_W-1:0]               rd_head,
    output logic [E_W:0]                 rd_count,

    // ... and its retirement of n entries from the head
    input  wire logic                    ret_en,
    input  wire logic [QPN_W-1:0]        ret_addr,
    input  wire logic [E_W:0]            ret_n,

    // a READ's SGEs: the record of entry `sg_rd_lane` of a row (one cycle after)
    input  wire logic                    sg_rd_en,
    input  wire logic [QPN_W-1:0]        sg_rd_addr,
    input  wire logic [E_W-1:0]          sg_rd_lane,
    output logic [SG_BITS-1:0]           sg_rd_data,

    // a CQE's record: that of entry `cq_rd_lane` of a row (one cycle after)
    input  wire logic                    cq_rd_en,
    input  wire logic [QPN_W-1:0]        cq_rd_addr,
    input  wire logic [E_W-1:0]          cq_rd_lane,
    output logic [CQ_INFO_BITS-1:0]      cq_rd_data
);

  initial begin
    if (E < 2 || (E & (E - 1)) != 0) begin
      $error("fp_inflight: E must be a power of two >= 2 (got %0d)", E);
      $finish;
    end
  end

  localparam int WORDS_PER = (IF_BITS + 31) / 32;
  localparam int ROW_WORDS = E * WORDS_PER;

  // the ring pointers, E_W + 1 bits each (count = tail - head, 0..E)
  logic [NQP-1:0][E_W:0] head;
  logic [NQP-1:0][E_W:0] tail;
  logic [NQP-1:0] gapp;          // an append was dropped since the last one
  logic [3:0]     mtu_log2 [NQP];

  // the append, one register stage after the intake: its QP's pointers, gap
  // flag and MTU as they are at the start of its cycle (read a cycle ahead,
  // with that cycle's writes to them applied)
  logic             a_v;
  logic [QPN_W-1:0] a_qpn;
  logic [1:0]       a_kind;
  logic [23:0]      a_first;
  logic [31:0]      a_len;
  logic [31:0]      a_lenm1;     // length - 1
  logic             a_one;       // one PSN: an atomic or an empty message
  logic [15:0]      a_wqe;
  logic [SG_BITS-1:0] a_sge;
  logic             a_cqe;
  logic [CQ_INFO_BITS-1:0] a_info;
  logic [E_W:0]     a_head, a_tail;
  logic             a_gapp;
  // the MTU: the table's word read a cycle ahead, or the firmware's word-0 write
  // of that cycle; chosen after the registers (a choice before them is a
  // transparent read port, which yosys builds from distributed RAM as an address
  // register and a read in this cycle: the read back on the append's path)
  logic [3:0]       a_mtu_rd, a_mtu_wr, a_mtu;
  logic             a_mtu_fw;
  assign a_mtu = a_mtu_fw ? a_mtu_wr : a_mtu_rd;
  logic             a_full, a_ok;
  assign a_full = a_tail - a_head == (E_W + 1)'(E);
  assign a_ok = a_v && !a_full;

  // a retirement (its new head from the head read with the row) and a
  // `valid` clear, defined below; both written at this clock edge
  logic             clr;
  logic             ret_ok;
  logic [E_W:0]     ret_head;
  logic [QPN_W-1:0] rd_qpn;

  always_ff @(posedge clk) begin
    a_v <= ap_valid && ap_op <= OP_FETCH_ADD;
    a_qpn <= ap_qpn;
    a_kind <= (ap_op == OP_READ) ? IFK_READ
        : (ap_op == OP_CMP_SWAP || ap_op == OP_FETCH_ADD) ? IFK_ATOMIC : IFK_MSG;
    a_first <= ap_first;
    a_len <= ap_len;
    a_lenm1 <= ap_len - 32'd1;
    a_one <= ap_len == 0 || ap_op == OP_CMP_SWAP || ap_op == OP_FETCH_ADD;
    a_wqe <= ap_wqe;
    // every message kind completes through the CQE writer (an atomic's once
    // its ATOMIC ACKNOWLEDGE's value is written); the CQE's opcode is
    // IBV_WC_SEND 0, RDMA_WRITE 1, RDMA_READ 2, COMP_SWAP 3, FETCH_ADD 4
    a_cqe <= ap_cqe;
    a_info <= '0;
    a_info[CQ_WRID +: 64] <= ap_wrid;
    a_info[CQ_IMM +: 32] <= ap_imm;
    a_info[CQ_OPC +: 3] <= (ap_op == OP_FETCH_ADD) ? 3'd4
        : (ap_op == OP_CMP_SWAP) ? 3'd3
        : (ap_op == OP_READ) ? 3'd2
        : (ap_op == OP_WRITE || ap_op == OP_WRITE_IMM) ? 3'd1 : 3'd0;
    a_info[CQ_WIMM] <= ap_op == OP_SEND_IMM || ap_op == OP_WRITE_IMM;
    // the SGEs past num_sge have no bytes (a READ's num_sge is 0..4; an
    // atomic's one SGE, its operands in place of SGEs 2 and 3, as the
    // model's decode_txd takes it)
    for (int i = 0; i < SG_N; i++) begin
      a_sge[96*i +: 64] <= ap_sge[96*i +: 64];
      a_sge[96*i + 64 +: 32] <= (8'(i) < ap_nsge && (i == 0 || ap_op == OP_READ))
          ? ap_sge[96*i + 64 +: 32] : 32'd0;
    end
    // ap_qpn's state after this edge: the pointer writes below, by priority
    if (clr && w0_wr_addr == ap_qpn) a_tail <= '0;
    else if (a_ok && a_qpn == ap_qpn) a_tail <= a_tail + 1'b1;
    else a_tail <= tail[ap_qpn];
    if (clr && w0_wr_addr == ap_qpn) a_head <= '0;
    else if (ret_ok && rd_qpn == ap_qpn) a_head <= ret_head;
    else a_head <= head[ap_qpn];
    if (clr && w0_wr_addr == ap_qpn) a_gapp <= 1'b0;
    else if (a_v && a_qpn == ap_qpn) a_gapp <= a_full;
    else a_gapp <= gapp[ap_qpn];
    a_mtu_rd <= mtu_log2[ap_qpn];
    a_mtu_wr <= w0_wr_data[8*SC_FLAGS + 4 +: 4];
    a_mtu_fw <= w0_wr_en && w0_wr_addr == ap_qpn;
    if (rst) a_v <= 1'b0;
  end

  logic [23:0]     a_last;
  logic [E_W-1:0]  a_pos;
  always_comb begin
    // PSNs after the first: ceil(len / MTU) - 1 (none for an atomic or an
    // empty message); a length of up to 2^31 at MTU 256 needs 23 bits
    a_last = a_first + (a_one ? 24'd0 : 24'(a_lenm1 >> a_mtu));
    a_pos = a_tail[E_W-1:0];
  end

  // the rows
  logic [ROW_WORDS-1:0]    row_we;
  logic [ROW_WORDS*32-1:0] row_wd;
  always_comb begin
    logic [IF_BITS-1:0] ent;
    ent = '0;
    ent[IF_GAP] = a_gapp;
    ent[IF_KIND +: 2] = a_kind;
    ent[IF_FIRST +: 24] = a_first;
    ent[IF_LAST +: 24] = a_last;
    ent[IF_WQE +: 16] = a_wqe;
    ent[IF_LEN +: 32] = a_len;
    ent[IF_CQE] = a_cqe;
    row_we = '0;
    row_wd = '0;
    for (int i = 0; i < E; i++) begin
      row_wd[32*WORDS_PER*i +: IF_BITS] = ent;
      if (a_ok && a_pos == E_W'(i)) row_we[WORDS_PER*i +: WORDS_PER] = '1;
    end
  end

  logic [ROW_WORDS*32-1:0] row_rd;
  roce_ram #(
    .WORDS(ROW_WORDS),
    .DEPTH(NQP)
  ) row_ram_inst (
    .clk(clk),
    .wr_addr(a_qpn),
    .wr_en(row_we),
    .wr_data(row_wd),
    .rd_addr(rd_addr),
    .rd_en(rd_en),
    .rd_data(row_rd)
  );
  always_comb begin
    for (int i = 0; i < E; i++) rd_row[IF_BITS*i +: IF_BITS] = row_rd[32*WORDS_PER*i +: IF_BITS];
  end

  // the READs' and atomics' SGEs, by entry
  roce_ram #(
    .WORDS(SG_BITS / 32),
    .DEPTH(NQP * E)
  ) sge_ram_inst (
    .clk(clk),
    .wr_addr({a_qpn, a_pos}),
    .wr_en({(SG_BITS / 32){a_ok && a_kind != IFK_MSG}}),
    .wr_data(a_sge),
    .rd_addr({sg_rd_addr, sg_rd_lane}),
    .rd_en(sg_rd_en),
    .rd_data(sg_rd_data)
  );

  // the CQEs' records, by entry
  roce_ram #(
    .WORDS(CQ_INFO_BITS / 32),
    .DEPTH(NQP * E)
  ) cq_ram_inst (
    .clk(clk),
    .wr_addr({a_qpn, a_pos}),
    .wr_en({(CQ_INFO_BITS / 32){a_ok && a_cqe}}),
    .wr_data(a_info),
    .rd_addr({cq_rd_addr, cq_rd_lane}),
    .rd_en(cq_rd_en),
    .rd_data(cq_rd_data)
  );

  // the pointers: read with the row (a snapshot of the same cycle), written by
  // the append (tails), the retirement (heads) and a `valid` clear (both)
  assign clr = w0_wr_en && !w0_wr_data[8*SC_FLAGS + 2];
  // the row last read, its head (all bits), and whether a `valid` clear
  // emptied it since (the clear in the cycle of the read too: the read saw
  // the row before it)
  logic [E_W:0]     rd_head_w;
  logic             rd_stale;
  assign rd_head = rd_head_w[E_W-1:0];
  // a retirement is of the row last read; its head moved only if a clear
  // came since (then the retirement applies to nothing)
  assign ret_ok = ret_en && ret_addr == rd_qpn && !rd_stale;
  assign ret_head = rd_head_w + ret_n;
  always_ff @(posedge clk) begin
    if (rd_en) begin
      rd_head_w <= head[rd_addr];
      rd_count <= tail[rd_addr] - head[rd_addr];
      rd_qpn <= rd_addr;
      rd_stale <= clr && w0_wr_addr == rd_addr;
    end else if (clr && w0_wr_addr == rd_qpn) begin
      rd_stale <= 1'b1;
    end
    if (w0_wr_en) mtu_log2[w0_wr_addr] <= w0_wr_data[8*SC_FLAGS + 4 +: 4];
    if (a_v) gapp[a_qpn] <= a_full;
    if (a_ok) tail[a_qpn] <= a_tail + 1'b1;
    if (ret_ok) head[rd_qpn] <= ret_head;
    // a clear empties the ring (over an append or a retirement of the QP in
    // the same cycle: the entry appended is dropped)
    if (clr) begin
      head[w0_wr_addr] <= '0;
      tail[w0_wr_addr] <= '0;
      gapp[w0_wr_addr] <= 1'b0;
    end
    if (rst) begin
      // (a_v is the append stage's, reset there: a second driver here made
      // yosys tie it to 0 and drop the whole append)
      gapp <= '0;
      rd_stale <= 1'b0;
      head <= '0;
      tail <= '0;
    end
  end

endmodule

`resetall
