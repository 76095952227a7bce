// SPDX-License-Identifier: MIT OR Apache-2.0
//
// nic_soc_ecp5: nic_soc on an FPGA with three pins, for synthesis, place and
// route and a bitstream (`cargo xtask synth soc-ecp5`). What a real board adds
// is left to it: the host link (a PCIe endpoint on the ECP5-5G SERDES, which
// would drive the host register port and serve the DMA engine's requests) and
// the Ethernet MAC/PHY (which would drive the wire ports). Here the host port
// is idle, every DMA request is answered with an error (no host), the wire's
// TX is looped back into RX (as the QEMU self-test's port is), and the
// firmware's log leaves on a UART (8N1).
//
// Pins: clk (CLK_HZ), rst_n (active low, synchronised here), uart_tx.

`resetall
`default_nettype none

module nic_soc_ecp5 #(
    parameter int RAM_BYTES = 327680,
    parameter string INIT_FILE = "",
    parameter int CLK_HZ = 100_000_000,
    parameter int BAUD = 1_000_000,
    parameter logic [47:0] MAC = 48'h02_00_00_00_00_01,
    parameter logic [127:0] GID = 128'h0000_0000_0000_0000_0000_ffff_0a00_0001
) (
    input  wire logic clk,
    input  wire logic rst_n,
    output logic      uart_tx
);

  // reset: asserted asynchronously by the pin, released on the clock
  logic [2:0] rst_sync;
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) rst_sync <= 3'b111;
    else rst_sync <= {rst_sync[1:0], 1'b0};
  end
  logic rst;
  assign rst = rst_sync[2];

  logic        dma_req_valid, dma_rsp_valid;
  // no host on this board: its answers and the requests' details go nowhere
  /* verilator lint_off UNUSEDSIGNAL */
  logic        dma_req_write;
  logic [63:0] dma_req_addr;
  logic [2:0]  dma_req_len;
  logic [31:0] dma_req_wdata;
  logic        host_rsp_valid;
  logic [31:0] host_rsp_rdata;
  /* verilator lint_on UNUSEDSIGNAL */
  logic [63:0] wire_data;
  logic [7:0]  wire_keep;
  logic        wire_valid, wire_ready, wire_last;
  logic [7:0]  log_data;
  logic        log_valid, log_ready;

  nic_soc #(
    .RAM_BYTES(RAM_BYTES),
    .INIT_FILE(INIT_FILE),
    .NS_PER_CYCLE(1_000_000_000 / CLK_HZ),
    // no fast path: the part's block RAMs are spoken for (docs/fastpath.md §6)
    .FASTPATH(0)
  ) soc_inst (
    .clk(clk),
    .rst(rst),
    .fp_strap(1'b0),
    .host_req_valid(1'b0),
    .host_req_we(1'b0),
    .host_req_addr(15'h0),
    .host_req_wdata(32'h0),
    .host_rsp_valid(host_rsp_valid),
    .host_rsp_rdata(host_rsp_rdata),
    .dma_req_valid(dma_req_valid),
    .dma_req_ready(1'b1),
    .dma_req_write(dma_req_write),
    .dma_req_addr(dma_req_addr),
    .dma_req_len(dma_req_len),
    .dma_req_wdata(dma_req_wdata),
    .dma_rsp_valid(dma_rsp_valid),
    .dma_rsp_error(1'b1),
    .dma_rsp_rdata(32'h0),
    .rx_axis_tdata(wire_data),
    .rx_axis_tkeep(wire_keep),
    .rx_axis_tvalid(wire_valid),
    .rx_axis_tready(wire_ready),
    .rx_axis_tlast(wire_last),
    .tx_axis_tdata(wire_data),
    .tx_axis_tkeep(wire_keep),
    .tx_axis_tvalid(wire_valid),
    .tx_axis_tready(wire_ready),
    .tx_axis_tlast(wire_last),
    .port_mac(MAC),
    .port_gid(GID),
    .log_data(log_data),
    .log_valid(log_valid),
    .log_ready(log_ready)
  );

  // no host: every DMA request is answered, the cycle after it, with an error
  always_ff @(posedge clk) begin
    dma_rsp_valid <= dma_req_valid && !rst;
  end

  // the log on a UART: start bit, 8 data bits LSB first, stop bit
  localparam int DIV = CLK_HZ / BAUD;
  logic [$clog2(DIV)-1:0] baud_cnt;
  logic [3:0]             bit_cnt;
  logic [9:0]             shift;
  assign log_ready = bit_cnt == 4'd0;
  always_ff @(posedge clk) begin
    if (bit_cnt == 4'd0) begin
      uart_tx <= 1'b1;
      if (log_valid) begin
        shift <= {1'b1, log_data, 1'b0};
        bit_cnt <= 4'd10;
        baud_cnt <= '0;
      end
    end else begin
      uart_tx <= shift[0];
      if (baud_cnt == $bits(baud_cnt)'(DIV - 1)) begin
        baud_cnt <= '0;
        shift <= {1'b1, shift[9:1]};
        bit_cnt <= bit_cnt - 4'd1;
      end else begin
        baud_cnt <= baud_cnt + 1'b1;
      end
    end
    if (rst) begin
      bit_cnt <= 4'd0;
      uart_tx <= 1'b1;
    end
  end

endmodule

`resetall
