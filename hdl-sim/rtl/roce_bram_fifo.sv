// SPDX-License-Identifier: MIT OR Apache-2.0
//
// roce_bram_fifo: a deep first-word-fall-through FIFO whose storage is a
// block RAM (registered read port), followed by a small register FIFO that
// hides the read latency: entries move from the RAM to the small FIFO while
// it has room for them and the reads in flight, so rd_data/rd_valid come
// from registers and a pop every cycle is sustained.
//
// `count` (registered) counts every entry held; `wr_ready` is low when
// DEPTH entries are held (the writer must not write then).

`resetall
`default_nettype none

module roce_bram_fifo #(
    parameter int WIDTH = 8,
    // RAM entries; a power of two >= 4
    parameter int DEPTH = 512,
    parameter int CNT_W = $clog2(DEPTH + 4 + 1)
) (
    input  wire logic             clk,
    input  wire logic             rst,

    input  wire logic [WIDTH-1:0] wr_data,
    input  wire logic             wr_en,
    output logic                  wr_ready,

    output logic [WIDTH-1:0]      rd_data,
    output logic                  rd_valid,
    input  wire logic             rd_en,

    output logic [CNT_W-1:0]      count
);

  localparam int PTR_W = $clog2(DEPTH);

  initial begin
    if (DEPTH < 4 || (DEPTH & (DEPTH - 1)) != 0) begin
      $error("roce_bram_fifo: DEPTH must be a power of two >= 4 (got %0d)", DEPTH);
      $finish;
    end
  end

  logic [WIDTH-1:0] mem [DEPTH];
  logic [PTR_W-1:0] wr_ptr, rd_ptr;
  logic [PTR_W:0]   mem_count;
  logic             rd_issue, rd_inflight;
  logic [WIDTH-1:0] rd_q;
  logic [2:0]       sf_count;

  assign rd_issue = mem_count != '0 && (32'(sf_count) + 32'(rd_inflight)) < 3;
  assign wr_ready = mem_count != (PTR_W+1)'(DEPTH);

  always_ff @(posedge clk) begin
    if (wr_en) begin
      mem[wr_ptr] <= wr_data;
      wr_ptr <= wr_ptr + 1'b1;
    end
    if (rd_issue) begin
      rd_q <= mem[rd_ptr];
      rd_ptr <= rd_ptr + 1'b1;
    end
    rd_inflight <= rd_issue;
    mem_count <= mem_count + (PTR_W+1)'(wr_en) - (PTR_W+1)'(rd_issue);
    count <= count + CNT_W'(wr_en) - CNT_W'(rd_en && rd_valid);
    if (rst) begin
      wr_ptr <= '0;
      rd_ptr <= '0;
      mem_count <= '0;
      rd_inflight <= 1'b0;
      count <= '0;
    end
  end

  roce_fifo #(
    .WIDTH(WIDTH),
    .DEPTH(4)
  ) out_fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data(rd_q),
    .wr_en(rd_inflight),
    .rd_data(rd_data),
    .rd_en(rd_en && rd_valid),
    .count(sf_count)
  );
  assign rd_valid = sf_count != '0;

endmodule

`resetall
