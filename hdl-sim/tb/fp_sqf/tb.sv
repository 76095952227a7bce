// Bench of the WQE fetch alone (fp_sqf.sv, docs/fastpath.md §3.8): a hand-over, a
// doorbell of three WQEs (a WRITE of two SGEs, one of them empty with a foreign key; a
// SEND_WITH_IMM, solicited and unsignaled; a SEND whose L_Key is another generation's),
// the host's answers, two ACKED retirements and an ACKED without its CQE bit, a
// take-back. Checks every field of the two descriptors and the context read back at
// each step. Run by run.sh (iverilog); not in CI: hdl-sim/tests/wqe_fetch.rs holds
// the whole fast path to the model.
`timescale 1ns/1ps
module tb;
  import fp_pkg::*;
  logic clk = 0, rst = 1;
  always #5 clk = ~clk;
  logic cfg_wr_valid = 0, cfg_wr_ready; logic [23:0] cfg_wr_index; logic [4:0] cfg_wr_word; logic [31:0] cfg_wr_data;
  logic cfg_rd_valid = 0, cfg_rd_ready; logic [23:0] cfg_rd_index; logic [4:0] cfg_rd_word; logic [31:0] cfg_rdata; logic cfg_rdata_valid;
  logic mr_wr_en = 0; logic [7:0] mr_wr_index; logic [4:0] mr_wr_word; logic [31:0] mr_wr_data;
  logic sc0_wr_en = 0; logic [5:0] sc0_wr_index = 0; logic [31:0] sc0_wr_data = 0;
  logic [TXD_BYTES*8-1:0] txd; logic txd_valid; logic txd_ready = 1; logic busy;
  logic [63:0] rd_req_addr; logic rd_req_valid, rd_hold, rd_own;
  logic [63:0] rd_tdata; logic rd_tvalid = 0, rd_tlast = 0, rd_terr = 0;
  logic [EV_BYTES*8-1:0] ev; logic ev_valid = 0, ev_ready, m_ev_valid;
  fp_sqf #(.DATA_WIDTH(64), .NQP(64), .NMR(256)) dut (
    .clk, .rst, .cfg_wr_valid, .cfg_wr_ready, .cfg_wr_index, .cfg_wr_word, .cfg_wr_data,
    .cfg_rd_valid, .cfg_rd_ready, .cfg_rd_index, .cfg_rd_word, .cfg_rdata, .cfg_rdata_valid,
    .mr_wr_en, .mr_wr_index, .mr_wr_word, .mr_wr_data, .sc0_wr_en, .sc0_wr_index, .sc0_wr_data,
    .m_txd_data(txd), .m_txd_valid(txd_valid), .m_txd_ready(txd_ready), .busy, .slots_used(6'd0),
    .tx_req_valid(1'b0), .tx_req_ready(1'b0), .tx_req_last(1'b0), .tx_data_valid(1'b0), .tx_data_ready(1'b0), .tx_data_last(1'b0),
    .rd_req_addr, .rd_req_valid, .rd_req_ready(1'b1), .rd_hold, .rd_own, .rd_tdata, .rd_tvalid, .rd_tlast, .rd_terr,
    .s_ev_data(ev), .s_ev_valid(ev_valid), .s_ev_ready(ev_ready), .m_ev_valid, .m_ev_ready(1'b1), .news_rd(1'b0));

  logic [7:0] host [0:65535];
  localparam int KEY = 32'h53C;
  task automatic put32(input int a, input logic [31:0] v); for (int i=0;i<4;i++) host[a+i] = v[8*i +: 8]; endtask
  task automatic put64(input int a, input logic [63:0] v); for (int i=0;i<8;i++) host[a+i] = v[8*i +: 8]; endtask
  task automatic wqe(input int at, input logic [63:0] id, input logic [7:0] op, flags, nsge, input logic [31:0] imm,
                     input logic [63:0] ra, input logic [31:0] rk);
    for (int i=0;i<160;i++) host[at+i] = 0;
    put64(at, id); host[at+8] = op; host[at+9] = flags; host[at+10] = nsge; put32(at+12, imm); put64(at+16, ra); put32(at+24, rk);
  endtask
  task automatic sge(input int at, input int i, input logic [63:0] a, input logic [31:0] l, k);
    put64(at+96+16*i, a); put32(at+96+16*i+8, l); put32(at+96+16*i+12, k);
  endtask
  task automatic wr(input logic [4:0] w, input logic [23:0] idx, input logic [31:0] d);
    @(negedge clk); cfg_wr_valid = 1; cfg_wr_word = w; cfg_wr_index = idx; cfg_wr_data = d;
    @(posedge clk); while (!cfg_wr_ready) @(posedge clk);
    #1 cfg_wr_valid = 0;
  endtask
  task automatic rd(input logic [4:0] w, input logic [23:0] idx, output logic [31:0] d);
    @(negedge clk); cfg_rd_valid = 1; cfg_rd_word = w; cfg_rd_index = idx;
    @(posedge clk); while (!cfg_rd_ready) @(posedge clk);
    #1 cfg_rd_valid = 0;
    while (!cfg_rdata_valid) @(posedge clk) #1;
    d = cfg_rdata;
  endtask
  task automatic mrw(input int idx, input int w, input logic [31:0] d);
    @(negedge clk); mr_wr_en = 1; mr_wr_index = idx; mr_wr_word = w; mr_wr_data = d; @(negedge clk); mr_wr_en = 0;
  endtask
  logic [63:0] a;
  // DMA responder
  initial begin
    forever begin
      @(posedge clk);
      if (rd_req_valid) begin
        a = rd_req_addr;
        check(rd_hold, "the segmenter's requests held");
        for (int b=0;b<20;b++) begin
          @(negedge clk);
          for (int i=0;i<8;i++) rd_tdata[8*i +: 8] = host[a + 8*b + i];
          rd_tvalid = 1; rd_tlast = b == 19;
          @(posedge clk);
          check(rd_own, "the read data is the fetch's");
        end
        @(negedge clk); rd_tvalid = 0; rd_tlast = 0;
      end
    end
  end
  int ntxd = 0;
  // cycles from the doorbell's write to each descriptor offered and taken
  longint cyc = 0, db_at = 0;
  always @(posedge clk) cyc <= cyc + 1;
  always @(posedge clk) if (cfg_wr_valid && cfg_wr_ready && cfg_wr_word == SQ_W_DB) db_at = cyc;
  logic [TXD_BYTES*8-1:0] d [0:3];
  always @(posedge clk) if (txd_valid && txd_ready) begin
    if (ntxd < 4) d[ntxd] = txd;
    $display("descriptor %0d: %0d cycles after the doorbell", ntxd, cyc - db_at);
    ntxd++;
  end
  logic [31:0] v;
  int errors = 0;
  task automatic check(input logic ok, input string what);
    if (!ok) begin
      errors++;
      $display("FAIL: %s", what);
    end
  endtask
  initial begin
    for (int i=0;i<65536;i++) host[i] = 0;
    wqe(16'h1000, 64'h1111, 0, 8'h02, 2, 0, 64'hABCD0000, 32'h77);
    sge(16'h1000, 0, 64'h2000, 3000, KEY); sge(16'h1000, 1, 64'h3000, 0, 32'hDEADBEEF);
    wqe(16'h10A0, 64'h2222, 3, 8'h04, 1, 32'hA5A55A5A, 0, 0);
    sge(16'h10A0, 0, 64'h2100, 100, KEY);
    wqe(16'h1140, 64'h3333, 2, 8'h02, 1, 0, 0, 0);
    sge(16'h1140, 0, 64'h2100, 100, KEY ^ 1);
    repeat (3) @(posedge clk); rst = 0;
    mrw(5, 0, KEY); mrw(5, 1, 2); mrw(5, 2, 32'h2000); mrw(5, 3, 0); mrw(5, 4, 32'h10000); mrw(5, 5, 0); mrw(5, 6, 32'h0000_0101);
    wr(SQ_W_RING_LO, 0, 32'h1000); wr(SQ_W_RING_HI, 0, 0); wr(SQ_W_CFG, 0, 4 | (1<<9) | (10<<12));
    wr(SQ_W_CI, 0, 0); wr(SQ_W_PSN, 0, 32'hFFFFF0); wr(SQ_W_PD, 0, 2); wr(SQ_W_DEPTH, 0, 64);
    wr(SQ_W_RTO_LO, 0, 1000); wr(SQ_W_RTO_HI, 0, 0); wr(SQ_W_NOW_LO, 0, 5000); wr(SQ_W_NOW_HI, 0, 0);
    wr(SQ_W_CMD, 3, 1);
    rd(SQ_R_FLAGS, 3, v); check(v == 1, "active after the hand-over");
    wr(SQ_W_DB, 3, 3);
    repeat (200) @(posedge clk);
    rd(SQ_R_FLAGS, 3, v); check(v == 7, "deadline, stopped (WQE 2's key), active");
    rd(SQ_R_CI, 3, v); check(v == 2, "ci 2");
    rd(SQ_R_DL_LO, 3, v); check(v == 6000, "deadline now + timeout");
    rd(SQ_R_TAKEN, 0, v); check(v == 2, "2 WQEs taken");
    rd(SQ_R_SENDS, 0, v); check(v == 1, "1 SEND");
    // an ACKED of the WRITE, CQEs written
    wr(SQ_W_NOW_LO, 0, 7000);
    @(negedge clk); ev = '0; ev[7:0] = 3; ev[15:8] = 1; ev[32 +: 24] = 3; ev[8*28 +: 24] = 24'hFFFFF3; ev[8*31 + 2] = 1; ev_valid = 1;
    @(posedge clk); while (!ev_ready) @(posedge clk); check(!m_ev_valid, "the ACKED kept");
    #1 ev_valid = 0;
    repeat (5) @(posedge clk);
    rd(SQ_R_DONE, 3, v); check(v == 1, "done 1");
    rd(SQ_R_BASE, 3, v); check(v == 32'hFFFFF3, "base: WQE 1's first PSN");
    rd(SQ_R_UNA, 3, v); check(v == 32'hFFFFF3, "una");
    rd(SQ_R_DL_LO, 3, v); check(v == 8000, "deadline restarted");
    rd(SQ_R_NEWS, 0, v); check(v == 5, "CQEs written, a queue stopped");
    rd(SQ_R_NEWS, 0, v); check(v == 4, "CQEs read once, the stop stays");
    // an ACKED without bit 2: passes
    @(negedge clk); ev[8*31 + 2] = 0; ev_valid = 1;
    @(posedge clk); #1 check(m_ev_valid && ev_ready, "an ACKED without its CQE bit passes");
    @(negedge clk); ev_valid = 0;
    // the last one
    @(negedge clk); ev[8*31 + 2] = 1; ev[15:8] = 1; ev[8*28 +: 24] = 24'hFFFFF4; ev_valid = 1;
    @(posedge clk); while (!ev_ready) @(posedge clk);
    #1 ev_valid = 0;
    repeat (5) @(posedge clk);
    rd(SQ_R_DONE, 3, v); check(v == 2, "done 2");
    rd(SQ_R_BASE, 3, v); check(v == 32'hFFFFF4, "base: next, none held");
    rd(SQ_R_FLAGS, 3, v); check(v == 3, "no deadline: all acknowledged");
    wr(SQ_W_CMD, 3, 2);
    rd(SQ_R_FLAGS, 3, v); check(v == 2, "taken back");
    rd(SQ_R_NEWS, 0, v); check(v == 1, "the last ACKED's CQEs, no queue held stopped");
    check(ntxd == 2, "two descriptors");
    // WQE 0: WRITE, signaled, two SGEs (the empty one with a foreign key kept)
    check(d[0][0 +: 24] == 3 && d[0][24 +: 8] == 3 && d[0][32 +: 8] == 8'h04 && d[0][40 +: 8] == 2
        && d[0][48 +: 16] == 0 && d[0][64 +: 32] == 3000 && d[0][96 +: 32] == 0
        && d[0][128 +: 64] == 64'hABCD0000 && d[0][192 +: 32] == 32'h77 && d[0][224 +: 24] == 24'hFFFFF0
        && d[0][256 +: 64] == 64'h2000 && d[0][320 +: 32] == 3000 && d[0][352 +: 64] == 64'h3000
        && d[0][416 +: 32] == 0 && d[0][704 +: 64] == 64'h1111, "descriptor 0");
    // WQE 1: SEND_WITH_IMM, solicited, unsignaled, after the WRITE's 3 PSNs
    check(d[1][0 +: 24] == 3 && d[1][24 +: 8] == 1 && d[1][32 +: 8] == 8'h01 && d[1][40 +: 8] == 1
        && d[1][48 +: 16] == 1 && d[1][64 +: 32] == 100 && d[1][96 +: 32] == 32'hA5A55A5A
        && d[1][128 +: 64] == 0 && d[1][192 +: 32] == 0 && d[1][224 +: 24] == 24'hFFFFF3
        && d[1][256 +: 64] == 64'h2100 && d[1][320 +: 32] == 100 && d[1][704 +: 64] == 0, "descriptor 1");
    if (errors == 0) $display("PASS"); else $display("FAILED: %0d checks", errors);
    $finish;
  end
  initial begin #200000; $display("FAILED: timeout"); $finish; end
endmodule
