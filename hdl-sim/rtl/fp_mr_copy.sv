// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_mr_copy: a copy of the fast path's MR table (docs/fastpath.md §3.3) for a
// block that checks keys away from fp_rx: the WQE fetch's L_Keys (fp_sqf), the
// READ responder's recheck before each response (fp_tx). It takes the table
// port's MR writes as fp_rx's table does, so it holds the same entries; its
// own read port (roce_ram's: data one cycle after rd_en) spares the receive
// check a second reader. One block RAM row of MR_BYTES per MR.

`resetall
`default_nettype none

module fp_mr_copy
  import fp_pkg::*;
#(
    parameter int NMR = 256,
    parameter int MR_W = $clog2(NMR)
) (
    input  wire logic                    clk,

    // the table port's MR writes: word `mr_wr_word` of entry `mr_wr_index`
    input  wire logic                    mr_wr_en,
    input  wire logic [MR_W-1:0]         mr_wr_index,
    input  wire logic [4:0]              mr_wr_word,
    input  wire logic [31:0]             mr_wr_data,

    input  wire logic [MR_W-1:0]         rd_addr,
    input  wire logic                    rd_en,
    output logic      [MR_BYTES*8-1:0]   rd_data
);

  // a word past the entry (the port's word index is wider) writes nothing
  logic [MR_BYTES/4-1:0] we;
  always_comb begin
    we = '0;
    if (mr_wr_en && 32'(mr_wr_word) < MR_BYTES / 4) we[mr_wr_word[2:0]] = 1'b1;
  end

  roce_ram #(
    .WORDS(MR_BYTES / 4),
    .DEPTH(NMR)
  ) ram_inst (
    .clk(clk),
    .wr_addr(mr_wr_index),
    .wr_en(we),
    .wr_data({(MR_BYTES / 4){mr_wr_data}}),
    .rd_addr(rd_addr),
    .rd_en(rd_en),
    .rd_data(rd_data)
  );

endmodule

`resetall
