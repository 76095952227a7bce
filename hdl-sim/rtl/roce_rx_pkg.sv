// SPDX-License-Identifier: MIT OR Apache-2.0
//
// Types shared by the RoCE RX datapath: the error codes of packet-json.md and
// the layout of the metadata record that rx_parser emits on m_axis_meta.
//
// The Rust side (roce-hdl-sim, src/meta.rs) decodes the record with a field
// table that a unit test checks against the `rx_meta_t` declaration below,
// field by field (name, width, order), so the two cannot drift apart.
//
// Layout rule: a SystemVerilog packed struct puts its FIRST member in the MOST
// significant bits. Multi-byte header fields hold their network (big-endian)
// value, e.g. `bth_psn` is the 24-bit PSN as a number.

`resetall
`default_nettype none

package roce_rx_pkg;

  // Error codes: exactly the names of packet-json.md, in its table order.
  // 0 means the frame is a well-formed RoCE packet whose ICRC verifies.
  typedef enum logic [4:0] {
    ERR_NONE                  = 5'd0,
    ERR_TRUNCATED_FRAME       = 5'd1,
    ERR_TRUNCATED_BTH         = 5'd2,
    ERR_TRUNCATED_EXT_HEADER  = 5'd3,
    ERR_NOT_ROCE_UDP_PORT     = 5'd4,
    ERR_UNSUPPORTED_ETHERTYPE = 5'd5,
    ERR_NOT_UDP               = 5'd6,
    ERR_BAD_IP_VERSION        = 5'd7,
    ERR_BAD_IP_HEADER         = 5'd8,
    ERR_BAD_IPV4_CHECKSUM     = 5'd9,
    ERR_IP_FRAGMENT           = 5'd10,
    ERR_LENGTH_MISMATCH       = 5'd11,
    ERR_UNALIGNED_LENGTH      = 5'd12,
    ERR_UNSUPPORTED_TVER      = 5'd13,
    ERR_PAD_EXCEEDS_PAYLOAD   = 5'd14,
    ERR_UNKNOWN_OPCODE        = 5'd15,
    ERR_ICRC_MISMATCH         = 5'd16
  } rx_err_e;

  // Network layer found behind the EtherType.
  localparam logic [1:0] L3_NONE = 2'd0;  // unsupported EtherType
  localparam logic [1:0] L3_IPV4 = 2'd1;  // 0x0800, RoCEv2
  localparam logic [1:0] L3_IPV6 = 2'd2;  // 0x86DD, RoCEv2
  localparam logic [1:0] L3_GRH  = 2'd3;  // 0x8915, RoCEv1 (IB GRH, no UDP)

  // Bits of rx_meta_t.ext_mask: the extended headers the opcode carries
  // (roce-facts.md section 3).
  localparam int EXT_RETH      = 0;
  localparam int EXT_AETH      = 1;
  localparam int EXT_ATOMICETH = 2;
  localparam int EXT_ATOMICACK = 3;
  localparam int EXT_IMMDT     = 4;
  localparam int EXT_IETH      = 5;
  localparam int EXT_DETH      = 6;
  localparam int EXT_CNP       = 7;

  // The metadata record: one per received frame, in frame order.
  // Fields of headers the frame does not carry are zero. When `error` is not
  // ERR_NONE the header fields hold whatever was parsed and must not be used.
  typedef struct packed {
    logic [4:0]   error;            // rx_err_e: first fault met in header order
    logic [16:0]  frame_len;        // bytes of the frame as received (saturates)
    logic [1:0]   l3_kind;          // L3_*
    // Ethernet / 802.1Q
    logic [47:0]  eth_dst;
    logic [47:0]  eth_src;
    logic [15:0]  ethertype;        // inner EtherType when a VLAN tag is present
    logic         vlan_present;
    logic [2:0]   vlan_pcp;
    logic         vlan_dei;
    logic [11:0]  vlan_vid;
    // IPv4, IPv6 or RoCEv1 GRH
    logic [3:0]   ip_version;
    logic [3:0]   ip_ihl;           // IPv4 only: header length in 32-bit words (options when > 5)
    logic [5:0]   ip_dscp;          // IPv4 TOS[7:2] / IPv6 traffic class[7:2]
    logic [1:0]   ip_ecn;           // low two bits of TOS / traffic class
    logic [19:0]  ip_flow_label;    // IPv6 / GRH only
    logic [15:0]  ip_length;        // IPv4 total length / IPv6 payload length / GRH PayLen
    logic [15:0]  ip_id;            // IPv4 only
    logic [2:0]   ip_flags;         // IPv4 only: {reserved, DF, MF}
    logic [12:0]  ip_frag_offset;   // IPv4 only
    logic [7:0]   ip_ttl;           // TTL / hop limit
    logic [7:0]   ip_protocol;      // protocol / next header
    logic [15:0]  ip_checksum;      // IPv4 only
    logic [127:0] ip_src;           // IPv4 addresses in bits 31:0
    logic [127:0] ip_dst;
    // UDP (zero for RoCEv1)
    logic [15:0]  udp_sport;
    logic [15:0]  udp_dport;
    logic [15:0]  udp_length;
    logic [15:0]  udp_checksum;
    // BTH (roce-facts.md section 2)
    logic [7:0]   bth_opcode;
    logic         bth_se;
    logic         bth_migreq;
    logic [1:0]   bth_padcnt;
    logic [3:0]   bth_tver;
    logic [15:0]  bth_pkey;
    logic         bth_fecn;
    logic         bth_becn;
    logic [5:0]   bth_resv6;
    logic [23:0]  bth_destqp;
    logic         bth_ackreq;
    logic [6:0]   bth_resv7;
    logic [23:0]  bth_psn;
    // Extended transport headers (roce-facts.md section 4)
    logic [7:0]   ext_mask;         // EXT_* bits
    logic [63:0]  reth_va;
    logic [31:0]  reth_rkey;
    logic [31:0]  reth_dmalen;
    logic [7:0]   aeth_syndrome;
    logic [23:0]  aeth_msn;
    logic [63:0]  atomic_va;
    logic [31:0]  atomic_rkey;
    logic [63:0]  atomic_swap_add;
    logic [63:0]  atomic_compare;
    logic [63:0]  atomicack_orig;
    logic [31:0]  immdt;
    logic [31:0]  ieth_rkey;
    logic [31:0]  deth_qkey;
    logic [23:0]  deth_srcqp;
    logic [127:0] cnp_reserved;
    // Payload, pad, ICRC
    logic [5:0]   hdr_len;          // BTH + extended headers, bytes
    logic [16:0]  payload_offset;   // first payload byte, from the frame start
    logic [15:0]  payload_len;      // payload bytes, without pad
    logic [23:0]  pad_bytes;        // the 3 bytes before the ICRC; the pad is the low padcnt of them
    logic [31:0]  icrc;             // ICRC as received (wire bytes read least significant first)
    logic [31:0]  icrc_calc;        // ICRC computed over the received frame
    logic [16:0]  trailer_len;      // Ethernet bytes after the IP datagram
    logic [16:0]  stream_len;       // bytes sent on m_axis_payload for this frame (0: no packet)
  } rx_meta_t;

  // Internal: what rx_hdr_decode hands to the streaming stage of rx_parser for
  // each frame, besides the header fields (rx_meta_t, which go into their own
  // FIFO and are only read back for the frame's record). This is all the
  // stream stage reads per beat, so it is kept small: frame offsets in bytes,
  // from the first byte of the frame.
  localparam int OFS_W = 17;  // frame offsets and lengths (max IP datagram + headers < 2^17)
  typedef struct packed {
    rx_err_e           pre_err;     // first fault found before the "frame ends before IP end" check
    rx_err_e           post_err;    // first fault found after it (BTH and extended headers)
    logic [OFS_W-1:0]  ip_end;      // end of the IP datagram
    logic [OFS_W-1:0]  icrc_ofs;    // first ICRC byte (= end of the ICRC region)
    logic [OFS_W-1:0]  pay_start;   // first payload byte
    logic [OFS_W-1:0]  pay_end;     // end of the payload (first pad byte)
    logic [15:0]       payload_len; // rx_meta_t.payload_len
    logic              stream_en;   // send the payload on m_axis_payload
    logic              vlan;        // for the ICRC masks
    logic [1:0]        kind;
    logic [3:0]        ihl;
  } rx_ctl_t;

  // Bytes in a tkeep that is contiguous from bit 0 (the AXI-stream rule of this
  // datapath): the position of its one 1-to-0 step, found with an OR per result
  // bit instead of the adder tree of $countones (a 64-bit tkeep is 6 adder levels
  // deep). Narrower tkeeps are passed zero-extended.
  function automatic logic [6:0] keep_count(input logic [63:0] k);
    logic [64:0] z;
    logic [6:0] n;
    z = {1'b0, k};
    n = '0;
    for (int i = 0; i < 64; i++) begin
      if (z[i] && !z[i+1]) n = n | 7'(i + 1);
    end
    return n;
  endfunction

  // Cycles from a beat on icrc's inputs to its m_crc (see icrc.sv): mask stage,
  // data fold, state fold, then one stage per bit of the trailing-zero count.
  function automatic int icrc_latency(input int data_width);
    return 3 + $clog2(data_width / 8);
  endfunction

endpackage

`resetall
