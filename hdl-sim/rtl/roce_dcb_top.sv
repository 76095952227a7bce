// SPDX-License-Identifier: MIT OR Apache-2.0
//
// roce_dcb_top: the port's Data Center Bridging block between the datapath
// and the MAC (IEEE 802.1Qbb PFC, 802.1Qaz ETS), and the Verilator top of
// roce-hdl-sim's DCB model.
//
//   wire RX -> dcb_rx: PFC frames -> dcb_pause_timers -> paused priorities
//                      other frames -> receive buffer -> datapath RX
//                      buffer occupancy -> dcb_pfc_gen -> XOFF/XON
//   datapath TX -> dcb_tx: eight priority queues, dcb_ets, PFC frames first
//                  -> wire TX
//
// Configuration: 32-bit register writes (dcb_pkg's register map), which the
// firmware makes from the port's DCB settings (docs/abi.md, MODIFY_DCB).
// The outputs under "observation" are what the tests compare with the
// model; hardware would expose the counters as registers.

`resetall
`default_nettype none

module roce_dcb_top
  import dcb_pkg::*;
#(
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    parameter int QUEUE_BYTES = 16384,
    parameter int BUF_BYTES = 65536,
    parameter int MAX_FRAME = 4608,
    // dcb_rx: hold the wire back instead of dropping a frame without room
    parameter bit HOLD_WIRE = 1'b0
) (
    input  wire logic                    clk,
    input  wire logic                    rst,

    // configuration
    input  wire logic                    cfg_wr_valid,
    input  wire logic [5:0]              cfg_wr_addr,
    input  wire logic [31:0]             cfg_wr_data,

    // the wire
    input  wire logic [DATA_WIDTH-1:0]   rx_s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0]   rx_s_axis_tkeep,
    input  wire logic                    rx_s_axis_tvalid,
    output logic                         rx_s_axis_tready,
    input  wire logic                    rx_s_axis_tlast,

    output logic [DATA_WIDTH-1:0]        tx_m_axis_tdata,
    output logic [KEEP_WIDTH-1:0]        tx_m_axis_tkeep,
    output logic                         tx_m_axis_tvalid,
    input  wire logic                    tx_m_axis_tready,
    output logic                         tx_m_axis_tlast,

    // the datapath
    output logic [DATA_WIDTH-1:0]        rx_m_axis_tdata,
    output logic [KEEP_WIDTH-1:0]        rx_m_axis_tkeep,
    output logic                         rx_m_axis_tvalid,
    input  wire logic                    rx_m_axis_tready,
    output logic                         rx_m_axis_tlast,

    input  wire logic [DATA_WIDTH-1:0]   tx_s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0]   tx_s_axis_tkeep,
    input  wire logic                    tx_s_axis_tvalid,
    output logic                         tx_s_axis_tready,
    input  wire logic                    tx_s_axis_tlast,

    // TX queues with room for a frame, per priority
    output logic [NPRIO-1:0]             tx_room,

    // observation
    output logic [NPRIO-1:0]             paused,
    output logic [NPRIO-1:0]             xoff,
    output logic [NPRIO-1:0]             announce,
    output logic                         pfc_take,
    output logic                         refresh_fire,
    output logic                         pause_req_valid,
    output logic [NPRIO-1:0]             pause_req_enable,
    output logic [NPRIO*16-1:0]          pause_req_quanta,
    output logic                         add_valid,
    output logic [2:0]                   add_prio,
    output logic [15:0]                  add_len,
    output logic                         sub_valid,
    output logic [2:0]                   sub_prio,
    output logic [15:0]                  sub_len,
    output logic                         dec_valid,
    output logic [NPRIO-1:0]             dec_eligible,
    output logic [2:0]                   dec_prio,
    output logic [31:0]                  rx_pfc_frames,
    output logic [31:0]                  rx_bad_mac_ctl,
    output logic [31:0]                  rx_drops
);

  // ------------------------------------------------------- configuration
  dcb_cfg_t cfg;

  always_ff @(posedge clk) begin
    if (cfg_wr_valid) begin
      case (cfg_wr_addr)
        R_PFC_ENABLE: cfg.pfc_enable <= cfg_wr_data[7:0];
        R_STRICT: cfg.strict <= cfg_wr_data[7:0];
        R_XOFF: cfg.xoff <= cfg_wr_data[BYTES_W-1:0];
        R_XON: cfg.xon <= cfg_wr_data[BYTES_W-1:0];
        R_QUANTA: cfg.quanta <= cfg_wr_data[15:0];
        R_BPC: cfg.bpc <= cfg_wr_data[23:0];
        R_MAC_LO: cfg.mac[31:0] <= cfg_wr_data;
        R_MAC_HI: cfg.mac[47:32] <= cfg_wr_data[15:0];
        R_PCP: for (int p = 0; p < NPRIO; p++) cfg.pcp_map[p] <= cfg_wr_data[4*p +: 3];
        default: begin
          if (cfg_wr_addr >= R_COST0 && cfg_wr_addr < R_COST0 + 6'd8)
            cfg.cost[3'(cfg_wr_addr - R_COST0)] <= cfg_wr_data[COST_W-1:0];
          if (cfg_wr_addr >= R_DSCP0 && cfg_wr_addr < R_DSCP0 + 6'd8)
            for (int i = 0; i < 8; i++)
              cfg.dscp_map[{3'(cfg_wr_addr - R_DSCP0), 3'(i)}] <= cfg_wr_data[4*i +: 3];
        end
      endcase
    end
    if (rst) cfg <= cfg_reset();
  end

  // ------------------------------------------------------------- receive
  logic [NPRIO-1:0][15:0] req_quanta;

  dcb_rx #(
    .DATA_WIDTH(DATA_WIDTH),
    .BUF_BYTES(BUF_BYTES),
    .MAX_FRAME(MAX_FRAME),
    .HOLD_WIRE(HOLD_WIRE)
  ) rx_inst (
    .clk(clk),
    .rst(rst),
    .dscp_map(cfg.dscp_map),
    .pcp_map(cfg.pcp_map),
    .s_axis_tdata(rx_s_axis_tdata),
    .s_axis_tkeep(rx_s_axis_tkeep),
    .s_axis_tvalid(rx_s_axis_tvalid),
    .s_axis_tready(rx_s_axis_tready),
    .s_axis_tlast(rx_s_axis_tlast),
    .m_axis_tdata(rx_m_axis_tdata),
    .m_axis_tkeep(rx_m_axis_tkeep),
    .m_axis_tvalid(rx_m_axis_tvalid),
    .m_axis_tready(rx_m_axis_tready),
    .m_axis_tlast(rx_m_axis_tlast),
    .req_valid(pause_req_valid),
    .req_enable(pause_req_enable),
    .req_quanta(req_quanta),
    .add_valid(add_valid),
    .add_prio(add_prio),
    .add_len(add_len),
    .sub_valid(sub_valid),
    .sub_prio(sub_prio),
    .sub_len(sub_len),
    .pfc_frames(rx_pfc_frames),
    .bad_mac_ctl(rx_bad_mac_ctl),
    .drops(rx_drops)
  );
  assign pause_req_quanta = req_quanta;

  dcb_pause_timers timers_inst (
    .clk(clk),
    .rst(rst),
    .pfc_enable(cfg.pfc_enable),
    .bpc(cfg.bpc),
    .req_valid(pause_req_valid),
    .req_enable(pause_req_enable),
    .req_quanta(req_quanta),
    .paused(paused)
  );

  dcb_pfc_gen pfc_gen_inst (
    .clk(clk),
    .rst(rst),
    .lossless(cfg.pfc_enable),
    .xoff_thr(cfg.xoff),
    .xon_thr(cfg.xon),
    .quanta(cfg.quanta),
    .bpc(cfg.bpc),
    .add_valid(add_valid),
    .add_prio(add_prio),
    .add_len(add_len),
    .sub_valid(sub_valid),
    .sub_prio(sub_prio),
    .sub_len(sub_len),
    .take(pfc_take),
    .announce(announce),
    .xoff(xoff),
    .refresh_fire(refresh_fire)
  );

  // ------------------------------------------------------------ transmit
  dcb_tx #(
    .DATA_WIDTH(DATA_WIDTH),
    .QUEUE_BYTES(QUEUE_BYTES),
    .MAX_FRAME(MAX_FRAME)
  ) tx_inst (
    .clk(clk),
    .rst(rst),
    .cfg(cfg),
    .paused(paused),
    .pfc_announce(announce),
    .pfc_xoff(xoff),
    .pfc_take(pfc_take),
    .s_axis_tdata(tx_s_axis_tdata),
    .s_axis_tkeep(tx_s_axis_tkeep),
    .s_axis_tvalid(tx_s_axis_tvalid),
    .s_axis_tready(tx_s_axis_tready),
    .s_axis_tlast(tx_s_axis_tlast),
    .m_axis_tdata(tx_m_axis_tdata),
    .m_axis_tkeep(tx_m_axis_tkeep),
    .m_axis_tvalid(tx_m_axis_tvalid),
    .m_axis_tready(tx_m_axis_tready),
    .m_axis_tlast(tx_m_axis_tlast),
    .room(tx_room),
    .dec_valid(dec_valid),
    .dec_eligible(dec_eligible),
    .dec_prio(dec_prio)
  );

endmodule

`resetall
