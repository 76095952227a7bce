// SPDX-License-Identifier: MIT OR Apache-2.0
//
// dcb_pkg: Data Center Bridging at the port (IEEE 802.1Qbb PFC, 802.1Qaz
// ETS): the configuration record, its register map, and the frame
// classifier. The software model is roce_core::dcb; the rules below are its
// rules, and hdl-sim/tests/dcb.rs holds the two together.
//
// Byte order: a frame's byte i is bits [8i+7:8i] of a byte vector (as on
// the AXI-stream buses), so the big-endian EtherType at bytes 12..13 is
// {b[12], b[13]}.

`resetall
`default_nettype none

package dcb_pkg;

  localparam int NPRIO = 8;

  localparam logic [15:0] ETHERTYPE_VLAN = 16'h8100;
  localparam logic [15:0] ETHERTYPE_IPV4 = 16'h0800;
  localparam logic [15:0] ETHERTYPE_IPV6 = 16'h86DD;
  localparam logic [15:0] ETHERTYPE_MAC_CTL = 16'h8808;
  localparam logic [15:0] OPCODE_PFC = 16'h0101;
  // a PFC frame without FCS: 14 header + 2 opcode + 2 vector + 16 times + pad
  localparam int PFC_FRAME_BYTES = 60;
  // bytes a classifier needs (EtherType, then the PCP or the TOS / traffic class)
  localparam int CLASS_BYTES = 16;
  // bytes of a PFC request (through the eighth pause time)
  localparam int PFC_BYTES = 34;

  // ETS service tags: a byte of a class of b percent costs COST_ONE / b
  localparam int COST_W = 17;
  localparam int TAG_W = 32;
  // pause and refresh timers count bit times in Q.8 fixed point: 65535 quanta
  // x 512 bits < 2^25, so 25 integer bits
  localparam int BT_W = 25 + 8;
  // bytes per priority held in the receive buffer
  localparam int BYTES_W = 24;

  // The configuration the firmware writes (registers below).
  typedef struct packed {
    logic [NPRIO-1:0]              pfc_enable;  // priorities with PFC on
    logic [NPRIO-1:0]              strict;      // strict-priority classes
    logic [NPRIO-1:0][COST_W-1:0]  cost;        // ETS cost per byte (COST_ONE / share)
    logic [BYTES_W-1:0]            xoff;        // receive buffer XOFF threshold, bytes
    logic [BYTES_W-1:0]            xon;         // XON threshold, bytes
    logic [15:0]                   quanta;      // pause time of an XOFF
    logic [23:0]                   bpc;         // link bit times per clock, Q16.8
    logic [47:0]                   mac;         // source of PFC frames, byte 0 in [7:0]
    logic [63:0][2:0]              dscp_map;    // priority of each DSCP
    logic [NPRIO-1:0][2:0]         pcp_map;     // priority of each PCP
  } dcb_cfg_t;

  // Register word addresses (32-bit writes).
  localparam logic [5:0] R_PFC_ENABLE = 6'd0;   // [7:0]
  localparam logic [5:0] R_STRICT = 6'd1;       // [7:0]
  localparam logic [5:0] R_COST0 = 6'd2;        // 2..9: cost of priority 0..7, [16:0]
  localparam logic [5:0] R_XOFF = 6'd10;        // [23:0]
  localparam logic [5:0] R_XON = 6'd11;         // [23:0]
  localparam logic [5:0] R_QUANTA = 6'd12;      // [15:0]
  localparam logic [5:0] R_BPC = 6'd13;         // [23:0], Q16.8
  localparam logic [5:0] R_MAC_LO = 6'd14;      // MAC bytes 0..3, byte 0 in [7:0]
  localparam logic [5:0] R_MAC_HI = 6'd15;      // MAC bytes 4..5
  localparam logic [5:0] R_DSCP0 = 6'd16;       // 16..23: DSCP 8k..8k+7, 4 bits each
  localparam logic [5:0] R_PCP = 6'd24;         // PCP 0..7, 4 bits each

  // After reset: no PFC, every class strict, the maps' defaults (DSCP d is
  // priority d >> 3, PCP p priority p), thresholds at their maximum, the
  // longest pause; `bpc` must be written before PFC is used.
  function automatic dcb_cfg_t cfg_reset();
    dcb_cfg_t c;
    c = '0;
    c.strict = '1;
    c.xoff = '1;
    c.xon = '1;
    c.quanta = 16'hFFFF;
    for (int d = 0; d < 64; d++) c.dscp_map[d] = 3'(d >> 3);
    for (int p = 0; p < NPRIO; p++) c.pcp_map[p] = 3'(p);
    return c;
  endfunction

  // The priority of a frame from its bytes 12..15 (`b`, byte 12 in [7:0];
  // `have` = the frame has CLASS_BYTES bytes): the PCP of an 802.1Q tag
  // through the PCP map; else the DSCP of IPv4's TOS or IPv6's traffic class
  // through the DSCP map; else 0. roce_core::dcb::PriorityMap::of_frame.
  function automatic logic [2:0] frame_prio(
      input logic [31:0]              b,
      input logic                     have,
      input logic [63:0][2:0]         dscp_map,
      input logic [NPRIO-1:0][2:0]    pcp_map
  );
    logic [15:0] ethertype;
    /* verilator lint_off UNUSEDSIGNAL */
    logic [7:0]  b14, b15;   // the PCP, TOS and traffic-class bits are read
    /* verilator lint_on UNUSEDSIGNAL */
    ethertype = {b[7:0], b[15:8]};
    b14 = b[23:16];
    b15 = b[31:24];
    if (!have) return 3'd0;
    case (ethertype)
      ETHERTYPE_VLAN: return pcp_map[b14[7:5]];
      ETHERTYPE_IPV4: return dscp_map[b15[7:2]];
      ETHERTYPE_IPV6: return dscp_map[{b14[3:0], b15[7:6]}];
      default: return 3'd0;
    endcase
  endfunction

  // Bytes of a beat whose tkeep is contiguous from bit 0.
  function automatic int keep_bytes(input logic [63:0] keep, input int kw);
    int n;
    n = 0;
    for (int i = 0; i < kw; i++) if (keep[i]) n = i + 1;
    return n;
  endfunction

endpackage

`resetall
