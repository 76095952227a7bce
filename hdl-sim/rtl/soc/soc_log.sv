// SPDX-License-Identifier: MIT OR Apache-2.0
//
// soc_log: the firmware's defmt log channel (MMIO block 0x4_0000). The
// firmware writes the encoded defmt stream a byte at a time; the bytes leave
// on a byte stream (`log_*`) to whatever carries them off the board (a UART,
// a debug FIFO; the simulation collects them for `defmt-print`).
//
// Registers (byte offsets): 0x0 LOG_DATA (write: bits 7..0 are queued),
// 0x4 LOG_STATUS (bit 0 the queue has room; bit 1 a byte was lost because it
// was full, cleared by reading). The firmware waits for room, so nothing is
// lost while the stream is drained.

`resetall
`default_nettype none

module soc_log #(
    // bytes queued
    parameter int DEPTH = 16
) (
    input  wire logic        clk,
    input  wire logic        rst,

    input  wire logic        req,
    input  wire logic        we,
    input  wire logic [2:0]  addr,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire logic [31:0] wdata,  // bits 7..0 used
    /* verilator lint_on UNUSEDSIGNAL */
    output logic             ack,
    output logic [31:0]      rdata,

    output logic [7:0]       log_data,
    output logic             log_valid,
    input  wire logic        log_ready
);

  localparam int CW = $clog2(DEPTH + 1);
  logic [CW-1:0] count;
  logic full, push, pop, lost;
  assign full = count == CW'(DEPTH);
  assign push = req && we && addr == 3'h0 && !full;
  assign pop = log_valid && log_ready;
  assign log_valid = count != '0;

  roce_fifo #(
    .WIDTH(8),
    .DEPTH(DEPTH)
  ) fifo_inst (
    .clk(clk),
    .rst(rst),
    .wr_data(wdata[7:0]),
    .wr_en(push),
    .rd_data(log_data),
    .rd_en(pop),
    .count(count)
  );

  always_ff @(posedge clk) begin
    ack <= req;
    rdata <= '0;
    if (req && we && addr == 3'h0 && full) lost <= 1'b1;
    if (req && !we && addr == 3'h4) begin
      rdata <= {30'd0, lost, !full};
      lost <= 1'b0;
    end
    if (rst) begin
      ack <= 1'b0;
      lost <= 1'b0;
    end
  end

endmodule

`resetall
