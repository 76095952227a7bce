// SPDX-License-Identifier: MIT OR Apache-2.0
//
// soc_tdp_ram: true dual-port block RAM, each port reads and writes whole
// words, reads registered (one cycle). Writes to one word from both ports in
// the same cycle leave it undefined (the users never do that).

`resetall
`default_nettype none

module soc_tdp_ram #(
    parameter int WORDS = 4096,
    parameter int WIDTH = 32,
    // address width (derived)
    parameter int AW = $clog2(WORDS)
) (
    input  wire logic             clk,

    input  wire logic             a_en,
    input  wire logic             a_we,
    input  wire logic [AW-1:0]    a_addr,
    input  wire logic [WIDTH-1:0] a_wdata,
    output logic [WIDTH-1:0]      a_rdata,

    input  wire logic             b_en,
    input  wire logic             b_we,
    input  wire logic [AW-1:0]    b_addr,
    input  wire logic [WIDTH-1:0] b_wdata,
    output logic [WIDTH-1:0]      b_rdata
);

  logic [WIDTH-1:0] mem [WORDS];

  always_ff @(posedge clk) begin
    if (a_en) begin
      if (a_we) mem[a_addr] <= a_wdata;
      a_rdata <= mem[a_addr];
    end
  end

  always_ff @(posedge clk) begin
    if (b_en) begin
      if (b_we) mem[b_addr] <= b_wdata;
      b_rdata <= mem[b_addr];
    end
  end

endmodule

`resetall
