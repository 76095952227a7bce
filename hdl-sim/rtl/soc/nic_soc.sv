// SPDX-License-Identifier: MIT OR Apache-2.0
//
// nic_soc: the NIC as one piece of hardware. A VexRiscv RV32IMAC core
// (`VexRiscv_IMAC.v` of the PyPI package pythondata-cpu-vexriscv; it has
// LR/SC but no AMOs) runs the firmware image from on-chip RAM, next to the
// blocks of firmware/image/src/mmio.rs, memory-mapped at 0xF000_0000:
//
//   0x0_0000  host register window (soc_host_regs): docs/abi.md's registers
//             and doorbells, shared with the host's port; firmware statistics
//             at 0x4000, past the ABI's window
//   0x1_0000  DMA engine (soc_dma): core RAM <-> host memory
//   0x2_0000  datapath (soc_datapath): RX ring and TX buffer around
//             roce_dp_top (RX parser + ICRC check, TX ICRC insertion)
//   0x3_0000  timer (soc_timer): cycle counter, compare interrupt, NIC time
//   0x4_0000  log (soc_log): the firmware's defmt byte stream
//   0x5_0000  DCB (roce_dcb_top, docs/dcb.md §3): the port's PFC and
//             priority block between the datapath and the wire. Writes to
//             0x00..0x7C are its configuration registers (dcb_pkg, word
//             address = offset / 4); reads: 0x80 the priorities the link
//             partner paused, 0x84 those this port paused (XOFF), 0x88 PFC
//             frames received, 0x8C frames its receive buffer dropped, 0x90
//             the link's bit times per clock (Q16.8, LINK_BPC_Q8), 0x94 the
//             receive buffer's bytes (DCB_BUF_BYTES: what PFC thresholds fit)
//   0x6_0000  RC fast path (soc_fp: roce_fp_top, docs/fastpath.md §6 "In the
//             SoC"), only with FASTPATH = 1; its CONFIG register (0x6_0000)
//             reads 0 without it, and bit 31 says whether the strap
//             `fp_strap` put it between the DCB block and the datapath
//
// The core's RAM (RAM_BYTES at address 0, soc_ram) holds code, data and
// stack: port A serves instruction fetches, port B data accesses and the DMA
// engine (which wins a cycle both want). The core caches addresses below
// 0x8000_0000 (4 KiB instruction and data caches; the data cache writes
// through) and not the MMIO block.
//
// Outside the chip: the host's register port and host memory (a PCIe
// endpoint on a board; Rust in the simulation), the wire (64-bit
// AXI-stream, frames without FCS; a MAC on a board), the port's MAC and GID,
// and the log byte stream. One clock; synchronous active-high reset.
//
// Every MMIO block answers a request in one cycle (registered ack), but for
// soc_fp's table port, which holds a store or load on the bus until it can
// take it (soc_fp.sv): the core keeps its request up meanwhile, which the bus
// presents to the block again every cycle until the ack (a held request has
// its effect only in the cycle it is taken).

`resetall
`default_nettype none

module nic_soc #(
    // bytes of on-chip RAM (a multiple of 4 KiB); the image's board must match
    parameter int RAM_BYTES = 524288,
    // $readmemh image of the RAM ("" = the +image= plusarg in simulation)
    parameter string INIT_FILE = "",
    // nanoseconds per clock cycle
    parameter int NS_PER_CYCLE = 10,
    // the link behind the wire port, in bit times per clock (Q16.8): 5 Gb/s
    // at 100 MHz (the 64-bit bus carries at most 6.4 Gb/s); the DCB block
    // counts pause quanta in these
    parameter int LINK_BPC_Q8 = 50 * 256,
    // the DCB block's receive buffer (docs/dcb.md §3: 8 block RAMs)
    parameter int DCB_BUF_BYTES = 16384,
    // build the RC fast path in (soc_fp). Off in the ECP5-85 build, whose block
    // RAMs the SoC already nearly fills (docs/fastpath.md §6 "In the SoC"); on
    // in the simulation's model
    parameter int FASTPATH = 0,
    // the fast path's context entries (a power of two)
    parameter int FP_NQP = 64
) (
    input  wire logic         clk,
    input  wire logic         rst,
    // with FASTPATH: use the fast path (a strap, fixed after reset: the frames
    // from the wire go through it); without: unused
    input  wire logic         fp_strap,

    // the host's register window (byte offsets, 32-bit accesses; the ABI's
    // 16 KiB, then the firmware's statistics at 0x4000)
    input  wire logic         host_req_valid,
    input  wire logic         host_req_we,
    input  wire logic [14:0]  host_req_addr,
    input  wire logic [31:0]  host_req_wdata,
    output logic              host_rsp_valid,
    output logic [31:0]       host_rsp_rdata,

    // host memory, for the DMA engine
    output logic              dma_req_valid,
    input  wire logic         dma_req_ready,
    output logic              dma_req_write,
    output logic [63:0]       dma_req_addr,
    output logic [2:0]        dma_req_len,
    output logic [31:0]       dma_req_wdata,
    input  wire logic         dma_rsp_valid,
    input  wire logic         dma_rsp_error,
    input  wire logic [31:0]  dma_rsp_rdata,

    // the wire
    input  wire logic [63:0]  rx_axis_tdata,
    input  wire logic [7:0]   rx_axis_tkeep,
    input  wire logic         rx_axis_tvalid,
    output logic              rx_axis_tready,
    input  wire logic         rx_axis_tlast,
    output logic [63:0]       tx_axis_tdata,
    output logic [7:0]        tx_axis_tkeep,
    output logic              tx_axis_tvalid,
    input  wire logic         tx_axis_tready,
    output logic              tx_axis_tlast,

    // the port's addresses (network order: byte 0 in the top bits)
    input  wire logic [47:0]  port_mac,
    input  wire logic [127:0] port_gid,

    // the firmware's log stream
    output logic [7:0]        log_data,
    output logic              log_valid,
    input  wire logic         log_ready,

    // what the DCB block shows each cycle (roce_dcb_top's observation ports,
    // under their names there): for the simulation's check against the model;
    // a board leaves them open
    output logic [7:0]        tx_room,
    output logic [7:0]        paused,
    output logic [7:0]        xoff,
    output logic [7:0]        announce,
    output logic              pfc_take,
    output logic              refresh_fire,
    output logic              pause_req_valid,
    output logic [7:0]        pause_req_enable,
    output logic [127:0]      pause_req_quanta,
    output logic              add_valid,
    output logic [2:0]        add_prio,
    output logic [15:0]       add_len,
    output logic              sub_valid,
    output logic [2:0]        sub_prio,
    output logic [15:0]       sub_len,
    output logic              dec_valid,
    output logic [7:0]        dec_eligible,
    output logic [2:0]        dec_prio,
    output logic [31:0]       rx_pfc_frames,
    output logic [31:0]       rx_bad_mac_ctl,
    output logic [31:0]       rx_drops
);

  localparam int AW = $clog2(RAM_BYTES / 4);

  initial begin
    if (RAM_BYTES < 4096 || RAM_BYTES % 4096 != 0) begin
      $error("nic_soc: RAM_BYTES must be a multiple of 4096 (got %0d)", RAM_BYTES);
      $finish;
    end
  end

  // ------------------------------------------------------------------ core
  // (the instruction bus only reads; the burst type is always linear; the
  // address bits above the RAM and the MMIO offsets are not decoded)
  /* verilator lint_off UNUSEDSIGNAL */
  logic        ibus_cyc, ibus_stb, ibus_ack, ibus_we, ibus_err;
  logic [29:0] ibus_adr;
  logic [31:0] ibus_miso, ibus_mosi;
  logic [3:0]  ibus_sel;
  logic [2:0]  ibus_cti;
  logic [1:0]  ibus_bte;
  logic        dbus_cyc, dbus_stb, dbus_ack, dbus_we, dbus_err;
  logic [29:0] dbus_adr;
  logic [31:0] dbus_miso, dbus_mosi;
  logic [3:0]  dbus_sel;
  logic [2:0]  dbus_cti;
  logic [1:0]  dbus_bte;
  /* verilator lint_on UNUSEDSIGNAL */
  logic        timer_irq;
  logic [31:0] ext_irq;

  VexRiscv cpu_inst (
    .clk(clk),
    .reset(rst),
    .externalResetVector(32'h0000_0000),
    .timerInterrupt(timer_irq),
    .softwareInterrupt(1'b0),
    .externalInterruptArray(ext_irq),
    .iBusWishbone_CYC(ibus_cyc),
    .iBusWishbone_STB(ibus_stb),
    .iBusWishbone_ACK(ibus_ack),
    .iBusWishbone_WE(ibus_we),
    .iBusWishbone_ADR(ibus_adr),
    .iBusWishbone_DAT_MISO(ibus_miso),
    .iBusWishbone_DAT_MOSI(ibus_mosi),
    .iBusWishbone_SEL(ibus_sel),
    .iBusWishbone_ERR(ibus_err),
    .iBusWishbone_CTI(ibus_cti),
    .iBusWishbone_BTE(ibus_bte),
    .dBusWishbone_CYC(dbus_cyc),
    .dBusWishbone_STB(dbus_stb),
    .dBusWishbone_ACK(dbus_ack),
    .dBusWishbone_WE(dbus_we),
    .dBusWishbone_ADR(dbus_adr),
    .dBusWishbone_DAT_MISO(dbus_miso),
    .dBusWishbone_DAT_MOSI(dbus_mosi),
    .dBusWishbone_SEL(dbus_sel),
    .dBusWishbone_ERR(dbus_err),
    .dBusWishbone_CTI(dbus_cti),
    .dBusWishbone_BTE(dbus_bte)
  );
  assign ibus_err = 1'b0;
  assign dbus_err = 1'b0;

  // ------------------------------------------------------------------ RAM
  logic          ibus_more;
  logic [AW-1:0] ibus_raddr;
  logic          b_en;
  logic [3:0]    b_we;
  logic [AW-1:0] b_addr;
  logic [31:0]   b_wdata, b_rdata, a_rdata;
  logic          dma_ram_en;
  logic [3:0]    dma_ram_we;
  logic [AW-1:0] dma_ram_addr;
  logic [31:0]   dma_ram_wdata;

  soc_ram #(
    .WORDS(RAM_BYTES / 4),
    .INIT_FILE(INIT_FILE)
  ) ram_inst (
    .clk(clk),
    .a_addr(ibus_raddr),
    .a_rdata(a_rdata),
    .b_en(b_en),
    .b_we(b_we),
    .b_addr(b_addr),
    .b_wdata(b_wdata),
    .b_rdata(b_rdata)
  );

  // instruction fetch: registered feedback. The first word of a cycle takes
  // two clocks; within an incrementing burst (CTI 010, the cache's line
  // refills) the RAM already reads the next word while the current one is
  // acknowledged, so the rest come one a clock. A burst ends at CTI 111.
  assign ibus_more = ibus_ack && ibus_cti == 3'b010;
  assign ibus_raddr = ibus_adr[AW-1:0] + AW'(ibus_more);
  always_ff @(posedge clk) begin
    ibus_ack <= ibus_cyc && ibus_stb && (!ibus_ack || ibus_more);
    if (rst) ibus_ack <= 1'b0;
  end
  assign ibus_miso = a_rdata;

  // data bus: the RAM below 0xF000_0000, the MMIO block above. RAM reads in
  // an incrementing burst (the data cache's line refills) run a word a clock
  // as on the instruction bus, unless the DMA engine takes the port for a
  // cycle (the burst then waits a clock).
  logic is_mmio, dbus_req, dram_go, dram_ack, mmio_go, dbus_more;
  assign is_mmio = dbus_adr[29:26] == 4'hF;
  assign dbus_req = dbus_cyc && dbus_stb && !dbus_ack;
  assign dbus_more = dram_ack && dbus_cti == 3'b010 && !dbus_we;
  assign dram_go = dbus_cyc && dbus_stb && !is_mmio && !dma_ram_en && (!dbus_ack || dbus_more);
  assign mmio_go = dbus_req && is_mmio;

  always_comb begin
    if (dma_ram_en) begin
      b_en = 1'b1;
      b_we = dma_ram_we;
      b_addr = dma_ram_addr;
      b_wdata = dma_ram_wdata;
    end else begin
      b_en = dram_go;
      b_we = dbus_we ? dbus_sel : 4'b0000;
      b_addr = dbus_adr[AW-1:0] + AW'(dbus_more);
      b_wdata = dbus_mosi;
    end
  end

  always_ff @(posedge clk) begin
    dram_ack <= dram_go;
    if (rst) dram_ack <= 1'b0;
  end

  // ------------------------------------------------------------------ MMIO
  logic [18:0] moff;
  assign moff = {dbus_adr[16:0], 2'b00};
  logic [2:0] mblk;
  assign mblk = moff[18:16];
  logic sel_host, sel_dma, sel_dp, sel_timer, sel_log, sel_dcb, sel_fp, sel_none;
  assign sel_host = mmio_go && mblk == 3'd0 && moff[15] == 1'b0;
  assign sel_dma = mmio_go && mblk == 3'd1 && moff[15:5] == '0;
  assign sel_dp = mmio_go && mblk == 3'd2 && moff[15] == 1'b0;
  assign sel_timer = mmio_go && mblk == 3'd3 && moff[15:4] == '0;
  assign sel_log = mmio_go && mblk == 3'd4 && moff[15:3] == '0;
  assign sel_dcb = mmio_go && mblk == 3'd5 && moff[15:8] == '0;
  assign sel_fp = FASTPATH != 0 && mmio_go && mblk == 3'd6 && moff[15:12] == '0;
  assign sel_none = mmio_go && !(sel_host || sel_dma || sel_dp || sel_timer || sel_log || sel_dcb ||
                                 sel_fp);

  logic        ack_host, ack_dma, ack_dp, ack_timer, ack_log, ack_dcb, ack_fp, ack_none;
  logic [31:0] rd_host, rd_dma, rd_dp, rd_timer, rd_log, rd_dcb, rd_fp;
  logic        db_pending, db_clear, rx_waiting, dma_busy;
  logic [63:0] ns;
  // host send doorbells: the fast path's WQE fetch takes those of its queues;
  // receive doorbells, the firmware's reads of them and QP_DB writes tell its
  // receive check which receive queues may hold WQEs the firmware has not seen
  logic        hdb_valid, hdb_rq, hdb_taken, fdb_rq_read, hqpdb;
  logic [9:0]  hdb_index, fdb_index;
  logic [31:0] hdb_pi;

  soc_host_regs host_regs_inst (
    .clk(clk),
    .rst(rst),
    .host_req_valid(host_req_valid),
    .host_req_we(host_req_we),
    .host_req_addr(host_req_addr),
    .host_req_wdata(host_req_wdata),
    .host_rsp_valid(host_rsp_valid),
    .host_rsp_rdata(host_rsp_rdata),
    .req(sel_host),
    .we(dbus_we),
    .addr(moff[14:0]),
    .wdata(dbus_mosi),
    .ack(ack_host),
    .rdata(rd_host),
    .ns(ns),
    .db_pending(db_pending),
    .db_clear(db_clear),
    .hdb_valid(hdb_valid),
    .hdb_rq(hdb_rq),
    .hdb_index(hdb_index),
    .hdb_pi(hdb_pi),
    .hdb_taken(hdb_taken),
    .fdb_rq_read(fdb_rq_read),
    .fdb_index(fdb_index),
    .hqpdb(hqpdb)
  );

  // the DMA engine's host requests (e_*): to the pins directly, or shared with
  // the fast path's (below)
  logic        e_req_valid, e_req_ready, e_req_write, e_rsp_valid, e_rsp_error;
  logic [63:0] e_req_addr;
  logic [2:0]  e_req_len;
  logic [31:0] e_req_wdata, e_rsp_rdata;

  soc_dma #(
    .RAM_BYTES(RAM_BYTES)
  ) dma_inst (
    .clk(clk),
    .rst(rst),
    .req(sel_dma),
    .we(dbus_we),
    .addr(moff[4:0]),
    .wdata(dbus_mosi),
    .ack(ack_dma),
    .rdata(rd_dma),
    .ram_en(dma_ram_en),
    .ram_we(dma_ram_we),
    .ram_addr(dma_ram_addr),
    .ram_wdata(dma_ram_wdata),
    .ram_rdata(b_rdata),
    .host_req_valid(e_req_valid),
    .host_req_ready(e_req_ready),
    .host_req_write(e_req_write),
    .host_req_addr(e_req_addr),
    .host_req_len(e_req_len),
    .host_req_wdata(e_req_wdata),
    .host_rsp_valid(e_rsp_valid),
    .host_rsp_error(e_rsp_error),
    .host_rsp_rdata(e_rsp_rdata),
    .busy(dma_busy)
  );

  // the datapath's frames (dp_*) and the DCB block's datapath side (w_*): joined
  // directly, or through the fast path (below)
  logic [63:0] dp_rx_data, dp_tx_data, w_rx_data, w_tx_data;
  logic [7:0]  dp_rx_keep, dp_tx_keep, w_rx_keep, w_tx_keep;
  logic        dp_rx_valid, dp_rx_ready, dp_rx_last, w_rx_valid, w_rx_ready, w_rx_last;
  logic        dp_tx_valid, dp_tx_ready, dp_tx_last, w_tx_valid, w_tx_ready, w_tx_last;

  soc_datapath datapath_inst (
    .clk(clk),
    .rst(rst),
    .req(sel_dp),
    .we(dbus_we),
    .addr(moff[14:0]),
    .wdata(dbus_mosi),
    .sel(dbus_sel),
    .ack(ack_dp),
    .rdata(rd_dp),
    .port_mac(port_mac),
    .port_gid(port_gid),
    .db_pending(db_pending),
    .db_clear(db_clear),
    .rx_waiting(rx_waiting),
    .rx_axis_tdata(dp_rx_data),
    .rx_axis_tkeep(dp_rx_keep),
    .rx_axis_tvalid(dp_rx_valid),
    .rx_axis_tready(dp_rx_ready),
    .rx_axis_tlast(dp_rx_last),
    .tx_axis_tdata(dp_tx_data),
    .tx_axis_tkeep(dp_tx_keep),
    .tx_axis_tvalid(dp_tx_valid),
    .tx_axis_tready(dp_tx_ready),
    .tx_axis_tlast(dp_tx_last)
  );

  // ------------------------------------------------------------------ DCB
  // Between the datapath and the wire, without transmit queues (the engine
  // builds frames only for unpaused priorities, docs/dcb.md §3). A frame its
  // receive buffer has no room for holds the wire back, as soc_datapath's
  // ring did before the block was there (this SoC's wire is a simulation's or
  // a loopback that can wait; behind a real MAC, HOLD_WIRE 0 drops and counts).
  logic        dcb_wr;
  assign dcb_wr = sel_dcb && dbus_we && moff[7] == 1'b0;

  roce_dcb_top #(
    .DATA_WIDTH(64),
    .QUEUE_BYTES(0),
    .BUF_BYTES(DCB_BUF_BYTES),
    .HOLD_WIRE(1'b1)
  ) dcb_inst (
    .clk(clk),
    .rst(rst),
    .cfg_wr_valid(dcb_wr),
    .cfg_wr_addr(moff[7:2]),
    .cfg_wr_data(dbus_mosi),
    .rx_s_axis_tdata(rx_axis_tdata),
    .rx_s_axis_tkeep(rx_axis_tkeep),
    .rx_s_axis_tvalid(rx_axis_tvalid),
    .rx_s_axis_tready(rx_axis_tready),
    .rx_s_axis_tlast(rx_axis_tlast),
    .tx_m_axis_tdata(tx_axis_tdata),
    .tx_m_axis_tkeep(tx_axis_tkeep),
    .tx_m_axis_tvalid(tx_axis_tvalid),
    .tx_m_axis_tready(tx_axis_tready),
    .tx_m_axis_tlast(tx_axis_tlast),
    .rx_m_axis_tdata(w_rx_data),
    .rx_m_axis_tkeep(w_rx_keep),
    .rx_m_axis_tvalid(w_rx_valid),
    .rx_m_axis_tready(w_rx_ready),
    .rx_m_axis_tlast(w_rx_last),
    .tx_s_axis_tdata(w_tx_data),
    .tx_s_axis_tkeep(w_tx_keep),
    .tx_s_axis_tvalid(w_tx_valid),
    .tx_s_axis_tready(w_tx_ready),
    .tx_s_axis_tlast(w_tx_last),
    .tx_room(tx_room),
    .paused(paused),
    .xoff(xoff),
    .announce(announce),
    .pfc_take(pfc_take),
    .refresh_fire(refresh_fire),
    .pause_req_valid(pause_req_valid),
    .pause_req_enable(pause_req_enable),
    .pause_req_quanta(pause_req_quanta),
    .add_valid(add_valid),
    .add_prio(add_prio),
    .add_len(add_len),
    .sub_valid(sub_valid),
    .sub_prio(sub_prio),
    .sub_len(sub_len),
    .dec_valid(dec_valid),
    .dec_eligible(dec_eligible),
    .dec_prio(dec_prio),
    .rx_pfc_frames(rx_pfc_frames),
    .rx_bad_mac_ctl(rx_bad_mac_ctl),
    .rx_drops(rx_drops)
  );

  // the block's status for the firmware (registered: one-cycle answers)
  always_ff @(posedge clk) begin
    ack_dcb <= sel_dcb;
    rd_dcb <= '0;
    if (sel_dcb && !dbus_we) begin
      case (moff[7:0])
        8'h80: rd_dcb <= {24'd0, paused};
        8'h84: rd_dcb <= {24'd0, xoff};
        8'h88: rd_dcb <= rx_pfc_frames;
        8'h8C: rd_dcb <= rx_drops;
        8'h90: rd_dcb <= 32'(LINK_BPC_Q8);
        8'h94: rd_dcb <= 32'(DCB_BUF_BYTES);
        default: rd_dcb <= '0;
      endcase
    end
    if (rst) ack_dcb <= 1'b0;
  end

  // ------------------------------------------------------------------ fast path
  if (FASTPATH != 0) begin : g_fp
    soc_fp #(
      .NQP(FP_NQP)
    ) fp_inst (
      .clk(clk),
      .rst(rst),
      .on(fp_strap),
      .req(sel_fp),
      .we(dbus_we),
      .addr(moff[11:0]),
      .wdata(dbus_mosi),
      .ack(ack_fp),
      .rdata(rd_fp),
      .w_rx_tdata(w_rx_data),
      .w_rx_tkeep(w_rx_keep),
      .w_rx_tvalid(w_rx_valid),
      .w_rx_tready(w_rx_ready),
      .w_rx_tlast(w_rx_last),
      .w_tx_tdata(w_tx_data),
      .w_tx_tkeep(w_tx_keep),
      .w_tx_tvalid(w_tx_valid),
      .w_tx_tready(w_tx_ready),
      .w_tx_tlast(w_tx_last),
      .d_rx_tdata(dp_rx_data),
      .d_rx_tkeep(dp_rx_keep),
      .d_rx_tvalid(dp_rx_valid),
      .d_rx_tready(dp_rx_ready),
      .d_rx_tlast(dp_rx_last),
      .d_tx_tdata(dp_tx_data),
      .d_tx_tkeep(dp_tx_keep),
      .d_tx_tvalid(dp_tx_valid),
      .d_tx_tready(dp_tx_ready),
      .d_tx_tlast(dp_tx_last),
      .e_req_valid(e_req_valid),
      .e_req_ready(e_req_ready),
      .e_req_write(e_req_write),
      .e_req_addr(e_req_addr),
      .e_req_len(e_req_len),
      .e_req_wdata(e_req_wdata),
      .e_rsp_valid(e_rsp_valid),
      .e_rsp_error(e_rsp_error),
      .e_rsp_rdata(e_rsp_rdata),
      .h_req_valid(dma_req_valid),
      .h_req_ready(dma_req_ready),
      .h_req_write(dma_req_write),
      .h_req_addr(dma_req_addr),
      .h_req_len(dma_req_len),
      .h_req_wdata(dma_req_wdata),
      .h_rsp_valid(dma_rsp_valid),
      .h_rsp_error(dma_rsp_error),
      .h_rsp_rdata(dma_rsp_rdata),
      .now_ns(ns),
      .hdb_valid(hdb_valid),
      .hdb_rq(hdb_rq),
      .hdb_index(hdb_index),
      .hdb_pi(hdb_pi),
      .hdb_taken(hdb_taken),
      .fdb_rq_read(fdb_rq_read),
      .fdb_index(fdb_index),
      .hqpdb(hqpdb)
    );
  end else begin : g_no_fp
    assign dp_rx_data = w_rx_data;
    assign dp_rx_keep = w_rx_keep;
    assign dp_rx_valid = w_rx_valid;
    assign dp_rx_last = w_rx_last;
    assign w_rx_ready = dp_rx_ready;
    assign w_tx_data = dp_tx_data;
    assign w_tx_keep = dp_tx_keep;
    assign w_tx_valid = dp_tx_valid;
    assign w_tx_last = dp_tx_last;
    assign dp_tx_ready = w_tx_ready;
    assign dma_req_valid = e_req_valid;
    assign e_req_ready = dma_req_ready;
    assign dma_req_write = e_req_write;
    assign dma_req_addr = e_req_addr;
    assign dma_req_len = e_req_len;
    assign dma_req_wdata = e_req_wdata;
    assign e_rsp_valid = dma_rsp_valid;
    assign e_rsp_error = dma_rsp_error;
    assign e_rsp_rdata = dma_rsp_rdata;
    assign ack_fp = 1'b0;
    assign rd_fp = '0;
    assign hdb_taken = 1'b0;
    /* verilator lint_off UNUSEDSIGNAL */
    logic unused_strap;
    assign unused_strap = ^{fp_strap, hdb_valid, hdb_rq, hdb_index, hdb_pi, fdb_rq_read, fdb_index,
                            hqpdb};
    /* verilator lint_on UNUSEDSIGNAL */
  end

  soc_timer #(
    .NS_PER_CYCLE(NS_PER_CYCLE)
  ) timer_inst (
    .clk(clk),
    .rst(rst),
    .req(sel_timer),
    .we(dbus_we),
    .addr(moff[3:0]),
    .wdata(dbus_mosi),
    .ack(ack_timer),
    .rdata(rd_timer),
    .ns(ns),
    .irq(timer_irq)
  );

  soc_log log_inst (
    .clk(clk),
    .rst(rst),
    .req(sel_log),
    .we(dbus_we),
    .addr(moff[2:0]),
    .wdata(dbus_mosi),
    .ack(ack_log),
    .rdata(rd_log),
    .log_data(log_data),
    .log_valid(log_valid),
    .log_ready(log_ready)
  );

  // nothing there: answer anyway (reads 0), so a stray access cannot hang the core
  always_ff @(posedge clk) begin
    ack_none <= sel_none;
    if (rst) ack_none <= 1'b0;
  end

  // interrupt lines (the firmware polls; they are there for a firmware that sleeps)
  assign ext_irq = {29'd0, !dma_busy, db_pending, rx_waiting};

  // blocks drive rdata = 0 when they do not answer
  logic mmio_ack;
  assign mmio_ack = ack_host || ack_dma || ack_dp || ack_timer || ack_log || ack_dcb || ack_fp ||
                    ack_none;
  assign dbus_ack = dram_ack || mmio_ack;
  assign dbus_miso = dram_ack ? b_rdata : (rd_host | rd_dma | rd_dp | rd_timer | rd_log | rd_dcb |
                                           rd_fp);

endmodule

`resetall
