// SPDX-License-Identifier: MIT OR Apache-2.0
//
// soc_host_regs: the 16 KiB register window the host sees (docs/abi.md,
// firmware/src/abi.rs `reg`), with two ports: the host's (PCIe BAR, or the
// simulation's host driver) and the firmware's (MMIO block 0x0_0000).
//
// Storage is one true dual-port block RAM for the whole window; the firmware
// writes the identity, status and index registers there, the host the
// command-queue setup and the doorbells. What the ABI gives other rules is
// kept beside it in registers:
// * EVENT_STATUS: the host clears the bits it writes as one (W1C); the
//   firmware sets the bits it writes as one (W1S), so a host clear is never
//   undone by a firmware update in flight (the firmware's HAL writes only the
//   bits it raises). A clear and a set of one bit in the same cycle: set wins.
// * CLOCK_LO / CLOCK_HI: the NIC's time in ns (`ns`); reading LO latches HI.
// * host writes to the read-only registers (DEVICE_ID, VERSION, STATUS,
//   CMDQ_CI, EVENT_CQN, EVENT_QPN, EVENT_SRQN, CLOCK_*) are ignored;
// * a host write to CMDQ_PI, QP_DB or any SRQ/SQ/RQ/CQ doorbell sets
//   `db_pending` until the firmware clears it (`db_clear`, a read of the
//   datapath block's DOORBELL register, in the cycle the read samples the bit);
//   a doorbell in the cycle of the clear wins, pending for the next read.
// * QP_DB (doorbells that reach every QP, docs/scale.md): each host write of a
//   QP index below 65,536 is queued in a 64-entry FIFO (an index beyond every
//   ICM is dropped, as the ABI says); when the FIFO is full the index is not
//   kept and `qpdb_overflow` is set instead. The firmware reads QPDB_POP
//   (0x4100, firmware port only): bit 31 an index was queued (then bits 15..0
//   are it, and the read takes it), bit 30 the FIFO overflowed since the last
//   read (the read clears it: the firmware then treats every QP as rung). So
//   the firmware's cost follows the doorbells written, not the QPs that exist.
// * Send-queue doorbells (SQ_DB + 8 q) also go out on `hdb_*` (index q, the
//   value) the cycle they are written: the fast path's WQE fetch takes those
//   of the queues it holds (`hdb_taken`, soc_fp), and such a write, stored
//   as any other, leaves `db_pending` alone (the firmware is not woken).
// * Receive-queue doorbells (SQ_DB + 8 q + 4) go out on `hdb_*` too, with
//   `hdb_rq` (never taken: the firmware fetches receive WQEs), and so do the
//   firmware's reads of them (`fdb_rq_read`, index `fdb_index`) and the
//   host's QP_DB writes (`hqpdb`): the fast path's receive check (soc_fp)
//   needs to know which QPs' receive queues may hold WQEs the firmware has
//   not seen, where its `rq_empty` flag is stale (docs/fastpath.md §6 "In
//   the SoC", "Receiver not ready").
// Past the window, at 0x4000..0x40FF of both ports, are 64 words of firmware
// statistics (the firmware writes them, the host reads them; vendor registers
// beyond the ABI's 16 KiB, like a NIC's BAR has): firmware/image/src/mmio.rs
// `stat_reg`; QPDB_POP is at 0x4100. The rest of the 32 KiB reads 0 and ignores
// writes.
// Both ports answer a read one cycle after the request.

`resetall
`default_nettype none

module soc_host_regs (
    input  wire logic        clk,
    input  wire logic        rst,

    // host port
    input  wire logic        host_req_valid,
    input  wire logic        host_req_we,
    input  wire logic [14:0] host_req_addr,
    input  wire logic [31:0] host_req_wdata,
    output logic             host_rsp_valid,
    output logic [31:0]      host_rsp_rdata,

    // firmware port (MMIO)
    input  wire logic        req,
    input  wire logic        we,
    input  wire logic [14:0] addr,
    input  wire logic [31:0] wdata,
    output logic             ack,
    output logic [31:0]      rdata,

    // NIC time, ns
    input  wire logic [63:0] ns,
    output logic             db_pending,
    input  wire logic        db_clear,

    // host writes of send- (and, with hdb_rq, receive-) queue doorbells, and
    // whether the fast path took this one (never a receive doorbell)
    output logic             hdb_valid,
    output logic             hdb_rq,
    output logic [9:0]       hdb_index,
    output logic [31:0]      hdb_pi,
    input  wire logic        hdb_taken,
    // the firmware's reads of receive-queue doorbells; host writes of QP_DB
    output logic             fdb_rq_read,
    output logic [9:0]       fdb_index,
    output logic             hqpdb
);

  localparam logic [14:0] DEVICE_ID    = 15'h000;
  localparam logic [14:0] VERSION      = 15'h004;
  localparam logic [14:0] STATUS       = 15'h008;
  localparam logic [14:0] CMDQ_PI      = 15'h01C;
  localparam logic [14:0] CMDQ_CI      = 15'h020;
  localparam logic [14:0] EVENT_STATUS = 15'h030;
  localparam logic [14:0] EVENT_CQN    = 15'h034;
  localparam logic [14:0] EVENT_QPN    = 15'h038;
  localparam logic [14:0] EVENT_SRQN   = 15'h03C;
  localparam logic [14:0] CLOCK_LO     = 15'h040;
  localparam logic [14:0] CLOCK_HI     = 15'h044;
  localparam logic [14:0] QP_DB        = 15'h050;
  localparam logic [14:0] QPDB_POP     = 15'h4100;
  localparam int          QPDB_DEPTH   = 64;
  localparam int          QPDB_CNT_W   = $clog2(QPDB_DEPTH + 1);
  localparam logic [QPDB_CNT_W-1:0] QPDB_FULL = QPDB_CNT_W'(QPDB_DEPTH);
  localparam logic [14:0] SRQ_DB       = 15'h0800;
  localparam logic [14:0] SQ_DB        = 15'h1000;
  localparam logic [14:0] CQ_DB        = 15'h3000;
  localparam logic [14:0] WINDOW       = 15'h4000;

  // ---- host-side decoding
  logic h_readonly, h_doorbell, h_event, h_clock_lo, h_clock_hi;
  always_comb begin
    h_event    = host_req_addr == EVENT_STATUS;
    h_clock_lo = host_req_addr == CLOCK_LO;
    h_clock_hi = host_req_addr == CLOCK_HI;
    h_readonly = host_req_addr == DEVICE_ID || host_req_addr == VERSION ||
                 host_req_addr == STATUS || host_req_addr == CMDQ_CI ||
                 host_req_addr == EVENT_CQN || host_req_addr == EVENT_QPN ||
                 host_req_addr == EVENT_SRQN ||
                 h_clock_lo || h_clock_hi || h_event;
    // SRQ, SQ, RQ and CQ doorbells (ABI 1.2 put the SRQs' below the QPs').
    h_doorbell = host_req_addr == CMDQ_PI || host_req_addr == QP_DB ||
                 (host_req_addr >= SRQ_DB && host_req_addr < WINDOW);
  end
  assign hdb_valid = host_req_valid && host_req_we && host_req_addr >= SQ_DB &&
                     host_req_addr < CQ_DB && host_req_addr[1:0] == 2'd0;
  assign hdb_rq = host_req_addr[2];
  assign hdb_index = 10'((host_req_addr - SQ_DB) >> 3);
  assign hdb_pi = host_req_wdata;
  assign fdb_rq_read = req && !we && addr >= SQ_DB && addr < CQ_DB && addr[2:0] == 3'd4;
  assign fdb_index = 10'((addr - SQ_DB) >> 3);

  logic h_window, h_stats, f_window, f_stats;
  assign h_window = host_req_addr < WINDOW;
  assign h_stats = host_req_addr[14:8] == 7'h40;
  assign f_window = addr < WINDOW;
  assign f_stats = addr[14:8] == 7'h40;

  logic f_event, f_qpdb;
  assign f_event = addr == EVENT_STATUS;
  assign f_qpdb = addr == QPDB_POP;

  // ---- QP_DB: the queue of rung QP indexes
  logic [15:0] qpdb_head;
  logic [QPDB_CNT_W-1:0] qpdb_count;
  logic qpdb_write, qpdb_push, qpdb_pop, qpdb_overflow;
  assign qpdb_write = host_req_valid && host_req_we && host_req_addr == QP_DB &&
                      host_req_wdata[31:16] == 16'h0;
  assign hqpdb = host_req_valid && host_req_we && host_req_addr == QP_DB;
  assign qpdb_push = qpdb_write && qpdb_count != QPDB_FULL;
  assign qpdb_pop = req && !we && f_qpdb && qpdb_count != '0;
  roce_fifo #(
    .WIDTH(16),
    .DEPTH(QPDB_DEPTH)
  ) qpdb_fifo (
    .clk(clk),
    .rst(rst),
    .wr_data(host_req_wdata[15:0]),
    .wr_en(qpdb_push),
    .rd_data(qpdb_head),
    .rd_en(qpdb_pop),
    .count(qpdb_count)
  );

  // ---- the window RAM
  logic [31:0] ram_a_rdata, ram_b_rdata;
  soc_tdp_ram #(
    .WORDS(4096),
    .WIDTH(32)
  ) ram_inst (
    .clk(clk),
    .a_en(host_req_valid && h_window),
    .a_we(host_req_we && !h_readonly),
    .a_addr(host_req_addr[13:2]),
    .a_wdata(host_req_wdata),
    .a_rdata(ram_a_rdata),
    .b_en(req && f_window),
    .b_we(we && !f_event),
    .b_addr(addr[13:2]),
    .b_wdata(wdata),
    .b_rdata(ram_b_rdata)
  );

  // the statistics: the host reads, the firmware reads and writes
  logic [31:0] stats_a_rdata, stats_b_rdata;
  soc_tdp_ram #(
    .WORDS(64),
    .WIDTH(32)
  ) stats_inst (
    .clk(clk),
    .a_en(host_req_valid && h_stats),
    .a_we(1'b0),
    .a_addr(host_req_addr[7:2]),
    .a_wdata(32'h0),
    .a_rdata(stats_a_rdata),
    .b_en(req && f_stats),
    .b_we(we),
    .b_addr(addr[7:2]),
    .b_wdata(wdata),
    .b_rdata(stats_b_rdata)
  );

  // ---- registers beside the RAM
  logic [31:0] event_status;
  logic [31:0] clock_hi_latch;
  logic [31:0] h_special, f_special;
  logic [1:0]  h_src, f_src;   // 0 window RAM, 1 register, 2 statistics, 3 nothing

  always_ff @(posedge clk) begin
    // EVENT_STATUS: host W1C, firmware W1S
    event_status <= (event_status &
                     ~((host_req_valid && host_req_we && h_event) ? host_req_wdata : 32'h0)) |
                    ((req && we && f_event) ? wdata : 32'h0);
    if (host_req_valid && host_req_we && h_doorbell && !hdb_taken) db_pending <= 1'b1;
    else if (db_clear) db_pending <= 1'b0;

    host_rsp_valid <= host_req_valid && !host_req_we;
    h_src <= (h_event || h_clock_lo || h_clock_hi) ? 2'd1 : h_window ? 2'd0 : h_stats ? 2'd2 : 2'd3;
    if (h_clock_lo) h_special <= ns[31:0];
    else if (h_clock_hi) h_special <= clock_hi_latch;
    else h_special <= event_status;
    if (host_req_valid && !host_req_we && h_clock_lo) clock_hi_latch <= ns[63:32];

    ack <= req;
    f_src <= (f_event || f_qpdb) ? 2'd1 : f_window ? 2'd0 : f_stats ? 2'd2 : 2'd3;
    f_special <= f_qpdb ? {qpdb_count != '0, qpdb_overflow, 14'h0, qpdb_head} : event_status;
    // A full FIFO loses an index: remembered until the firmware reads QPDB_POP (a
    // loss in the very cycle of that read is kept for the next one).
    if (qpdb_write && qpdb_count == QPDB_FULL) qpdb_overflow <= 1'b1;
    else if (req && !we && f_qpdb) qpdb_overflow <= 1'b0;

    if (rst) begin
      event_status <= '0;
      db_pending <= 1'b0;
      qpdb_overflow <= 1'b0;
      host_rsp_valid <= 1'b0;
      ack <= 1'b0;
      clock_hi_latch <= '0;
    end
  end

  assign host_rsp_rdata = h_src == 2'd0 ? ram_a_rdata : h_src == 2'd1 ? h_special :
                          h_src == 2'd2 ? stats_a_rdata : 32'h0;
  assign rdata = !ack ? 32'h0 : f_src == 2'd0 ? ram_b_rdata : f_src == 2'd1 ? f_special :
                 f_src == 2'd2 ? stats_b_rdata : 32'h0;

endmodule

`resetall
