// SPDX-License-Identifier: MIT OR Apache-2.0
//
// soc_ram: the soft core's on-chip RAM (code, data, stack), one block RAM with
// two ports: A reads instructions, B reads and writes data with byte enables.
// Both reads are registered (one cycle). The contents start as the firmware
// image `make-images.sh` writes (`$readmemh`, one 32-bit little-endian word
// per line, the first line at address 0): INIT_FILE when given (synthesis,
// FPGA), else in simulation the file named by the plusarg `+image=FILE`.

`resetall
`default_nettype none

module soc_ram #(
    // 32-bit words
    parameter int WORDS = 131072,
    // $readmemh image ("" = none, or the +image= plusarg in simulation)
    parameter string INIT_FILE = "",
    // address width (derived)
    parameter int AW = $clog2(WORDS)
) (
    input  wire logic          clk,

    input  wire logic [AW-1:0] a_addr,
    output logic [31:0]        a_rdata,

    input  wire logic          b_en,
    input  wire logic [3:0]    b_we,
    input  wire logic [AW-1:0] b_addr,
    input  wire logic [31:0]   b_wdata,
    output logic [31:0]        b_rdata
);

  // no_rw_check: what port A reads while port B writes the same word is left open (the
  // core never fetches an instruction it is storing in the same cycle). Without it
  // yosys keeps Verilog's read-old-data order across the ports, which ECP5 block RAM
  // does not promise, by storing the memory twice (twice the DP16KD).
  (* no_rw_check *) logic [31:0] mem [WORDS];

`ifdef SYNTHESIS
  initial if (INIT_FILE != "") $readmemh(INIT_FILE, mem);
`else
  string image;
  initial begin
    if (INIT_FILE != "") $readmemh(INIT_FILE, mem);
    else if ($value$plusargs("image=%s", image)) $readmemh(image, mem);
  end
`endif

  always_ff @(posedge clk) a_rdata <= mem[a_addr];

  always_ff @(posedge clk) begin
    if (b_en) begin
      for (int i = 0; i < 4; i++) begin
        if (b_we[i]) mem[b_addr][8*i +: 8] <= b_wdata[8*i +: 8];
      end
      b_rdata <= mem[b_addr];
    end
  end

endmodule

`resetall
