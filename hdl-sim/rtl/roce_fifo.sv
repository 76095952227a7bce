// SPDX-License-Identifier: MIT OR Apache-2.0
//
// roce_fifo: synchronous first-word-fall-through FIFO, register storage.
// Push and pop in the same cycle are allowed (also when full, if popping).
// The caller must not push when full or pop when empty (asserted in
// simulation). `count` is registered.

`resetall
`default_nettype none

module roce_fifo #(
    // entry width, bits
    parameter int WIDTH = 8,
    // entries; a power of two, at least 2
    parameter int DEPTH = 4,
    // count width (derived)
    parameter int CNT_W = $clog2(DEPTH + 1)
) (
    input  wire logic             clk,
    input  wire logic             rst,

    input  wire logic [WIDTH-1:0] wr_data,
    input  wire logic             wr_en,

    output logic [WIDTH-1:0]      rd_data,
    input  wire logic             rd_en,

    output logic [CNT_W-1:0]      count
);

  localparam int PTR_W = $clog2(DEPTH);

  initial begin
    if (DEPTH < 2 || (DEPTH & (DEPTH - 1)) != 0) begin
      $error("roce_fifo: DEPTH must be a power of two >= 2 (got %0d)", DEPTH);
      $finish;
    end
  end

  logic [WIDTH-1:0] mem [DEPTH];
  logic [PTR_W-1:0] wr_ptr;
  logic [PTR_W-1:0] rd_ptr;

  assign rd_data = mem[rd_ptr];

  always_ff @(posedge clk) begin
    if (wr_en) begin
      mem[wr_ptr] <= wr_data;
      wr_ptr <= wr_ptr + 1'b1;
    end
    if (rd_en) rd_ptr <= rd_ptr + 1'b1;
    count <= count + CNT_W'(wr_en) - CNT_W'(rd_en);
    if (rst) begin
      wr_ptr <= '0;
      rd_ptr <= '0;
      count <= '0;
    end
  end

`ifndef SYNTHESIS
  always_ff @(posedge clk) begin
    if (!rst && wr_en && !rd_en && count == CNT_W'(DEPTH)) $error("roce_fifo: push when full");
    if (!rst && rd_en && count == '0) $error("roce_fifo: pop when empty");
  end
`endif

endmodule

`resetall
