// SPDX-License-Identifier: MIT OR Apache-2.0
//
// A bench for soc_fp's DMA bridge and host-port sharing (hdl-sim/rtl/soc/soc_fp.sv),
// run by ./run.sh (not part of cargo's build): soc_fp with a stub in place of
// roce_fp_top (stub_fp_top.sv) whose script reads packets of 1 to 3 pieces (odd
// addresses and lengths, an empty packet, one the host refuses) and checks every byte,
// keep, last and error flag of the packed stream, and writes five buffers; a host that
// answers LAT cycles after each request; the DMA engine's reads in between, checked.

`default_nettype none
module tb #(
    // cycles from a host request to its answer (1: the SoC model's host)
    parameter int LAT = 1
) (input wire logic clk, input wire logic rst, output logic done, output logic [31:0] e_reads);
  logic h_req_valid, h_req_write, h_rsp_valid, h_rsp_error;
  logic [63:0] h_req_addr; logic [2:0] h_req_len; logic [31:0] h_req_wdata, h_rsp_rdata;
  logic e_req_valid, e_req_ready, e_rsp_valid, e_rsp_error; logic [31:0] e_rsp_rdata;
  logic [63:0] e_addr;
  logic [7:0] wmem [65536];
  soc_fp #(.NQP(64)) dut (
    .clk(clk), .rst(rst), .on(1'b1),
    .req(1'b0), .we(1'b0), .addr('0), .wdata('0), .ack(), .rdata(),
    .w_rx_tdata('0), .w_rx_tkeep('0), .w_rx_tvalid(1'b0), .w_rx_tready(), .w_rx_tlast(1'b0),
    .w_tx_tdata(), .w_tx_tkeep(), .w_tx_tvalid(), .w_tx_tready(1'b1), .w_tx_tlast(),
    .d_rx_tdata(), .d_rx_tkeep(), .d_rx_tvalid(), .d_rx_tready(1'b1), .d_rx_tlast(),
    .d_tx_tdata('0), .d_tx_tkeep('0), .d_tx_tvalid(1'b0), .d_tx_tready(), .d_tx_tlast(1'b0),
    .e_req_valid(e_req_valid), .e_req_ready(e_req_ready), .e_req_write(1'b0), .e_req_addr(e_addr),
    .e_req_len(3'd4), .e_req_wdata('0), .e_rsp_valid(e_rsp_valid), .e_rsp_error(e_rsp_error), .e_rsp_rdata(e_rsp_rdata),
    .h_req_valid(h_req_valid), .h_req_ready(1'b1), .h_req_write(h_req_write), .h_req_addr(h_req_addr),
    .h_req_len(h_req_len), .h_req_wdata(h_req_wdata), .h_rsp_valid(h_rsp_valid), .h_rsp_error(h_rsp_error),
    .h_rsp_rdata(h_rsp_rdata),
    .now_ns('0), .hdb_valid(1'b0), .hdb_rq(1'b0), .hdb_index('0), .hdb_pi('0), .hdb_taken(),
    .fdb_rq_read(1'b0), .fdb_index('0), .hqpdb(1'b0));
  function automatic logic [7:0] mem_byte(input logic [63:0] a);
    mem_byte = a[7:0] ^ a[15:8] ^ 8'h5A;
  endfunction
  // answers LAT cycles after their request, in order
  logic v_d [LAT]; logic e_d [LAT]; logic [31:0] r_d [LAT];
  assign h_rsp_valid = v_d[LAT-1];
  assign h_rsp_error = e_d[LAT-1];
  assign h_rsp_rdata = r_d[LAT-1];
  always_ff @(posedge clk) begin
    automatic logic [31:0] d = 32'hDEADBEEF;
    for (int i = 0; i < 4; i++) if (i < int'(h_req_len)) d[8*i +: 8] = mem_byte(h_req_addr + 64'(i));
    v_d[0] <= !rst && h_req_valid;
    e_d[0] <= h_req_addr >= 64'hF000_0000;
    r_d[0] <= h_req_write ? 32'hDEADBEEF : d;
    for (int k = 1; k < LAT; k++) begin v_d[k] <= rst ? 1'b0 : v_d[k-1]; e_d[k] <= e_d[k-1]; r_d[k] <= r_d[k-1]; end
    if (h_req_valid && h_req_write) begin
      if (h_req_len == 0 || h_req_len > 4) $error("write of %0d bytes", h_req_len);
      for (int i = 0; i < 4; i++) if (i < int'(h_req_len)) wmem[16'(h_req_addr + 64'(i))] <= h_req_wdata[8*i +: 8];
    end
  end
  // the engine: one read at a time, every so often
  logic e_wait; int e_t;
  assign e_req_valid = !rst && !e_wait && e_t == 0;
  assign e_addr = 64'h7000 + 64'(e_reads * 4);
  always_ff @(posedge clk) begin
    if (rst) begin e_wait <= 0; e_t <= 10; e_reads <= 0; end
    else begin
      if (e_t != 0) e_t <= e_t - 1;
      if (e_req_valid && e_req_ready) e_wait <= 1;
      if (e_rsp_valid) begin
        if (!e_wait) $error("engine: answer without a request");
        for (int i = 0; i < 4; i++) if (e_rsp_rdata[8*i +: 8] != mem_byte(e_addr + 64'(i))) $error("engine: read %h", e_rsp_rdata);
        e_wait <= 0; e_t <= 37; e_reads <= e_reads + 1;
      end
    end
  end
  assign done = dut.fp_inst.done;
  // check the writes at the end (from C++ by calling)
  function automatic int check_writes();
    int bad = 0;
    int lens [5] = '{4096, 1, 4, 5, 8};
    longint addrs [5] = '{64'h8003, 64'hA001, 64'hA101, 64'hA201, 64'hA301};
    for (int w = 0; w < 5; w++) for (int o = 0; o < lens[w]; o++)
      if (wmem[16'(addrs[w] + 64'(o))] != 8'(w * 37 + o)) begin bad++; $display("bad write %0d off %0d: %h", w, o, wmem[16'(addrs[w] + 64'(o))]); end
    return bad;
  endfunction
  export "DPI-C" function check_writes;
endmodule
