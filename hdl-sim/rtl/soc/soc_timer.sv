// SPDX-License-Identifier: MIT OR Apache-2.0
//
// soc_timer: the SoC's time (MMIO block 0x3_0000): a 64-bit cycle counter
// with a compare register driving the core's timer interrupt (RISC-V
// mtime/mtimecmp style), and the NIC's time in nanoseconds for the host's
// CLOCK_LO/HI registers.
//
// Registers (byte offsets): 0x0 MTIME_LO (reading it latches the high word),
// 0x4 MTIME_HI (as latched), 0x8 MTIMECMP_LO, 0xC MTIMECMP_HI (reset: all
// ones, no interrupt). The interrupt is registered: it rises the cycle after
// mtime reaches mtimecmp.

`resetall
`default_nettype none

module soc_timer #(
    // nanoseconds per clock cycle (10: a 100 MHz clock)
    parameter int NS_PER_CYCLE = 10
) (
    input  wire logic        clk,
    input  wire logic        rst,

    input  wire logic        req,
    input  wire logic        we,
    input  wire logic [3:0]  addr,
    input  wire logic [31:0] wdata,
    output logic             ack,
    output logic [31:0]      rdata,

    output logic [63:0]      ns,
    output logic             irq
);

  logic [63:0] mtime, mtimecmp;
  logic [31:0] hi_latch;

  always_ff @(posedge clk) begin
    mtime <= mtime + 64'd1;
    ns <= ns + 64'(NS_PER_CYCLE);
    irq <= mtime >= mtimecmp;
    ack <= req;
    rdata <= '0;
    if (req && !we) begin
      case (addr)
        4'h0: begin
          rdata <= mtime[31:0];
          hi_latch <= mtime[63:32];
        end
        4'h4: rdata <= hi_latch;
        4'h8: rdata <= mtimecmp[31:0];
        4'hC: rdata <= mtimecmp[63:32];
        default: rdata <= '0;
      endcase
    end
    if (req && we) begin
      if (addr == 4'h8) mtimecmp[31:0] <= wdata;
      if (addr == 4'hC) mtimecmp[63:32] <= wdata;
    end
    if (rst) begin
      mtime <= '0;
      ns <= '0;
      mtimecmp <= '1;
      irq <= 1'b0;
      ack <= 1'b0;
      hi_latch <= '0;
    end
  end

endmodule

`resetall
