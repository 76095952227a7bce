// SPDX-License-Identifier: MIT OR Apache-2.0
//
// soc_host_regs: the 16 KiB register window the host sees (docs/abi.md,
// firmware/src/abi.rs `reg`), with two ports: the host's (PCIe BAR, or the
// simulation's host driver) and the firmware's (MMIO block 0x0_0000).
//
// Storage is one true dual-port block RAM for the whole window; the firmware
// writes the identity, status and index registers there, the host the
// command-queue setup and the doorbells. What the ABI gives other rules is
// kept beside it in registers:
// * EVENT_STATUS: the host clears the bits it writes as one (W1C); the
//   firmware sets the bits it writes as one (W1S), so a host clear is never
//   undone by a firmware update in flight (the firmware's HAL writes only the
//   bits it raises). A clear and a set of one bit in the same cycle: set wins.
// * CLOCK_LO / CLOCK_HI: the NIC's time in ns (`ns`); reading LO latches HI.
// * host writes to the read-only registers (DEVICE_ID, VERSION, STATUS,
//   CMDQ_CI, EVENT_CQN, EVENT_QPN, CLOCK_*) are ignored;
// * a host write to CMDQ_PI or any SQ/RQ/CQ doorbell sets `db_pending`
//   until the firmware clears it (`db_clear`, a read of the datapath block's
//   DOORBELL register).
// Both ports answer a read one cycle after the request.

`resetall
`default_nettype none

module soc_host_regs (
    input  wire logic        clk,
    input  wire logic        rst,

    // host port
    input  wire logic        host_req_valid,
    input  wire logic        host_req_we,
    input  wire logic [13:0] host_req_addr,
    input  wire logic [31:0] host_req_wdata,
    output logic             host_rsp_valid,
    output logic [31:0]      host_rsp_rdata,

    // firmware port (MMIO)
    input  wire logic        req,
    input  wire logic        we,
    input  wire logic [13:0] addr,
    input  wire logic [31:0] wdata,
    output logic             ack,
    output logic [31:0]      rdata,

    // NIC time, ns
    input  wire logic [63:0] ns,
    output logic             db_pending,
    input  wire logic        db_clear
);

  localparam logic [13:0] DEVICE_ID    = 14'h000;
  localparam logic [13:0] VERSION      = 14'h004;
  localparam logic [13:0] STATUS       = 14'h008;
  localparam logic [13:0] CMDQ_PI      = 14'h01C;
  localparam logic [13:0] CMDQ_CI      = 14'h020;
  localparam logic [13:0] EVENT_STATUS = 14'h030;
  localparam logic [13:0] EVENT_CQN    = 14'h034;
  localparam logic [13:0] EVENT_QPN    = 14'h038;
  localparam logic [13:0] CLOCK_LO     = 14'h040;
  localparam logic [13:0] CLOCK_HI     = 14'h044;
  localparam logic [13:0] SQ_DB        = 14'h1000;

  // ---- host-side decoding
  logic h_readonly, h_doorbell, h_event, h_clock_lo, h_clock_hi;
  always_comb begin
    h_event    = host_req_addr == EVENT_STATUS;
    h_clock_lo = host_req_addr == CLOCK_LO;
    h_clock_hi = host_req_addr == CLOCK_HI;
    h_readonly = host_req_addr == DEVICE_ID || host_req_addr == VERSION ||
                 host_req_addr == STATUS || host_req_addr == CMDQ_CI ||
                 host_req_addr == EVENT_CQN || host_req_addr == EVENT_QPN ||
                 h_clock_lo || h_clock_hi || h_event;
    h_doorbell = host_req_addr == CMDQ_PI || host_req_addr >= SQ_DB;
  end

  logic f_event;
  assign f_event = addr == EVENT_STATUS;

  // ---- the window RAM
  logic [31:0] ram_a_rdata, ram_b_rdata;
  soc_tdp_ram #(
    .WORDS(4096),
    .WIDTH(32)
  ) ram_inst (
    .clk(clk),
    .a_en(host_req_valid),
    .a_we(host_req_we && !h_readonly),
    .a_addr(host_req_addr[13:2]),
    .a_wdata(host_req_wdata),
    .a_rdata(ram_a_rdata),
    .b_en(req),
    .b_we(we && !f_event),
    .b_addr(addr[13:2]),
    .b_wdata(wdata),
    .b_rdata(ram_b_rdata)
  );

  // ---- registers beside the RAM
  logic [31:0] event_status;
  logic [31:0] clock_hi_latch;
  logic [31:0] h_special, f_special;
  logic        h_use_special, f_use_special;

  always_ff @(posedge clk) begin
    // EVENT_STATUS: host W1C, firmware W1S
    event_status <= (event_status &
                     ~((host_req_valid && host_req_we && h_event) ? host_req_wdata : 32'h0)) |
                    ((req && we && f_event) ? wdata : 32'h0);
    if (host_req_valid && host_req_we && h_doorbell) db_pending <= 1'b1;
    else if (db_clear) db_pending <= 1'b0;

    host_rsp_valid <= host_req_valid && !host_req_we;
    h_use_special <= h_event || h_clock_lo || h_clock_hi;
    if (h_clock_lo) h_special <= ns[31:0];
    else if (h_clock_hi) h_special <= clock_hi_latch;
    else h_special <= event_status;
    if (host_req_valid && !host_req_we && h_clock_lo) clock_hi_latch <= ns[63:32];

    ack <= req;
    f_use_special <= f_event;
    f_special <= event_status;

    if (rst) begin
      event_status <= '0;
      db_pending <= 1'b0;
      host_rsp_valid <= 1'b0;
      ack <= 1'b0;
      clock_hi_latch <= '0;
    end
  end

  assign host_rsp_rdata = h_use_special ? h_special : ram_a_rdata;
  assign rdata = !ack ? 32'h0 : f_use_special ? f_special : ram_b_rdata;

endmodule

`resetall
