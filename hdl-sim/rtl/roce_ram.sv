// SPDX-License-Identifier: MIT OR Apache-2.0
//
// roce_ram: simple dual-port RAM for the fast path's per-QP tables (block RAM
// on an FPGA): one write port with a write enable per 32-bit word, one read
// port with a registered output (rd_data holds the entry read one cycle after
// rd_en). A read of the entry being written in the same cycle returns the old
// contents (read-first); callers that need the new value read a cycle later.
//
// The tables are arrays of little-endian byte records (docs/fastpath.md), so a
// firmware write of one 32-bit word of a record is one word-enable bit: the
// memory is WORDS narrow memories side by side with a shared address, which
// is how block RAMs with byte/word write enables are built.

`resetall
`default_nettype none

module roce_ram #(
    // 32-bit words per entry
    parameter int WORDS = 4,
    // entries; a power of two
    parameter int DEPTH = 256,
    // start out zero (1), or undefined (0: for a table whose entries are always
    // written before they are read, and too deep for the synthesis frontend to
    // unroll a loop over it: slang's limit is 4000)
    parameter bit INIT = 1'b1,
    // address width (derived)
    parameter int ADDR_W = $clog2(DEPTH)
) (
    input  wire logic                  clk,

    input  wire logic [ADDR_W-1:0]     wr_addr,
    input  wire logic [WORDS-1:0]      wr_en,     // one bit per 32-bit word
    input  wire logic [WORDS*32-1:0]   wr_data,

    input  wire logic [ADDR_W-1:0]     rd_addr,
    input  wire logic                  rd_en,
    output logic      [WORDS*32-1:0]   rd_data
);

  initial begin
    if (DEPTH < 2 || (DEPTH & (DEPTH - 1)) != 0) begin
      $error("roce_ram: DEPTH must be a power of two >= 2 (got %0d)", DEPTH);
      $finish;
    end
    if (WORDS < 1) begin
      $error("roce_ram: WORDS must be at least 1");
      $finish;
    end
  end

  // one memory per word column: each maps to its own block RAM slice
  for (genvar w = 0; w < WORDS; w++) begin : g_col
    logic [31:0] mem [DEPTH];

    // the tables start out zero (QP contexts off, MRs invalid); on an FPGA
    // this is the block RAM's configured initial value
    if (INIT) begin : g_init
      initial begin
        for (int i = 0; i < DEPTH; i++) mem[i] = '0;
      end
    end

    always_ff @(posedge clk) begin
      if (wr_en[w]) mem[wr_addr] <= wr_data[w*32 +: 32];
      if (rd_en) rd_data[w*32 +: 32] <= mem[rd_addr];
    end
  end

endmodule

`resetall
