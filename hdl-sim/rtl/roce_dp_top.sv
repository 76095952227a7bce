// SPDX-License-Identifier: MIT OR Apache-2.0
//
// roce_dp_top: the Verilator top level of roce-hdl-sim. The RX parser and the
// TX ICRC inserter side by side at one bus width, no logic of its own.

`resetall
`default_nettype none

module roce_dp_top
  import roce_rx_pkg::*;
#(
    // bus width, bits: 64, 128, 256 or 512
    parameter int DATA_WIDTH = 64,
    // bytes per beat (derived)
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    // metadata record width (derived)
    parameter int META_WIDTH = $bits(rx_meta_t)
) (
    input  wire logic                  clk,
    input  wire logic                  rst,

    // RX
    input  wire logic [DATA_WIDTH-1:0] rx_s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0] rx_s_axis_tkeep,
    input  wire logic                  rx_s_axis_tvalid,
    output logic                       rx_s_axis_tready,
    input  wire logic                  rx_s_axis_tlast,

    output logic [DATA_WIDTH-1:0]      rx_m_axis_payload_tdata,
    output logic [KEEP_WIDTH-1:0]      rx_m_axis_payload_tkeep,
    output logic                       rx_m_axis_payload_tvalid,
    input  wire logic                  rx_m_axis_payload_tready,
    output logic                       rx_m_axis_payload_tlast,

    output logic [META_WIDTH-1:0]      rx_m_axis_meta_tdata,
    output logic                       rx_m_axis_meta_tvalid,
    input  wire logic                  rx_m_axis_meta_tready,

    // TX
    input  wire logic [DATA_WIDTH-1:0] tx_s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0] tx_s_axis_tkeep,
    input  wire logic                  tx_s_axis_tvalid,
    output logic                       tx_s_axis_tready,
    input  wire logic                  tx_s_axis_tlast,

    output logic [DATA_WIDTH-1:0]      tx_m_axis_tdata,
    output logic [KEEP_WIDTH-1:0]      tx_m_axis_tkeep,
    output logic                       tx_m_axis_tvalid,
    input  wire logic                  tx_m_axis_tready,
    output logic                       tx_m_axis_tlast
);

  rx_parser #(
    .DATA_WIDTH(DATA_WIDTH)
  ) rx_parser_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(rx_s_axis_tdata),
    .s_axis_tkeep(rx_s_axis_tkeep),
    .s_axis_tvalid(rx_s_axis_tvalid),
    .s_axis_tready(rx_s_axis_tready),
    .s_axis_tlast(rx_s_axis_tlast),
    .m_axis_payload_tdata(rx_m_axis_payload_tdata),
    .m_axis_payload_tkeep(rx_m_axis_payload_tkeep),
    .m_axis_payload_tvalid(rx_m_axis_payload_tvalid),
    .m_axis_payload_tready(rx_m_axis_payload_tready),
    .m_axis_payload_tlast(rx_m_axis_payload_tlast),
    .m_axis_meta_tdata(rx_m_axis_meta_tdata),
    .m_axis_meta_tvalid(rx_m_axis_meta_tvalid),
    .m_axis_meta_tready(rx_m_axis_meta_tready)
  );

  tx_icrc_insert #(
    .DATA_WIDTH(DATA_WIDTH)
  ) tx_icrc_insert_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_tdata(tx_s_axis_tdata),
    .s_axis_tkeep(tx_s_axis_tkeep),
    .s_axis_tvalid(tx_s_axis_tvalid),
    .s_axis_tready(tx_s_axis_tready),
    .s_axis_tlast(tx_s_axis_tlast),
    .m_axis_tdata(tx_m_axis_tdata),
    .m_axis_tkeep(tx_m_axis_tkeep),
    .m_axis_tvalid(tx_m_axis_tvalid),
    .m_axis_tready(tx_m_axis_tready),
    .m_axis_tlast(tx_m_axis_tlast)
  );

endmodule

`resetall
