// SPDX-License-Identifier: MIT OR Apache-2.0
//
// rx_hdr_decode: decodes the first 128 bytes of a frame (every RoCE header
// fits: at most 14 + 4 + 60 + 8 + 12 + 28 = 126 bytes, IPv4 options included)
// into what rx_parser needs: every header field of the metadata record
// (m_meta), and the checks and offsets the streaming stage works with
// (m_ctl: payload, pad, ICRC, end of the IP datagram).
//
// Five register stages, fully pipelined (one header per cycle), none with more
// than two carry chains in a row (125 MHz on an ECP5 at 64 bits, see
// BENCHMARKS.md):
//   H1: Ethernet/VLAN, EtherType class, the bytes from the IP header on; the
//       UDP and BTH word offsets; the IPv4 header words the checksum sums,
//       those past the IHL zeroed, in registers of their own (not a tap of
//       the 880-bit h1_net), so that H2's selects and sums hang off registers;
//   H2: UDP and BTH+ext bytes at their (IHL-dependent) offsets; the IPv4
//       header words summed in groups of four, as two pairs (no gating);
//   H3: opcode table, every field but the extended headers' (registered);
//       the extended-header bytes and the opcode's EXT_* mask raw; offsets
//       and lengths, each one adder from H2's registers; the checks that need
//       no sum; the checksum groups summed in two halves;
//   H4: the extended-header fields, each zeroed by its mask bit straight from
//       a register, and the rest of the record -> m_meta (registered); the
//       checks that compare sums; the checksum verified (the two halves
//       added, no end-around folds: see below); the payload length;
//   H5: the two priority encoders -> m_ctl (registered).
// m_meta leaves one cycle before m_ctl of the same frame. (With the fields
// zeroed in H3, the opcode table sat in front of the synchronous reset of
// ~700 flip-flops spread over the chip: the critical path at 123.44 MHz.)
//
// Checks, in the order of roce-core's wire::parse ("first fault met in header
// order"; the numbers are those of README.md):
//   pre_err (all decidable from the header window):
//    1 frame < 14, or < 18 with a VLAN tag         truncated_frame
//    2 no byte after the EtherType (known type)     truncated_frame
//    3 EtherType not IPv4/IPv6/RoCEv1               unsupported_ethertype
//    4 version nibble wrong for the EtherType       bad_ip_version
//    5 IPv4 IHL < 5                                 bad_ip_header
//    6 frame ends inside the IP header / GRH        truncated_frame
//    7 IPv4 header checksum                         bad_ipv4_checksum
//    8 IPv4 MF or fragment offset                   ip_fragment
//    9 protocol/next header not UDP                 not_udp
//      GRH next header not 0x1B                     bad_ip_header
//   10 IPv4 total length < IHL*4                    length_mismatch
//   11 frame ends inside the UDP header             length_mismatch if the IP
//                                                   length has no room for it,
//                                                   else truncated_frame
//   12 UDP destination port not 4791                not_roce_udp_port
//   13 UDP length != IP payload length (or < 8)     length_mismatch
//   [14 frame ends before the IP datagram: truncated_frame, in rx_parser]
//   post_err:
//   15 BTH..ICRC length < 16                        truncated_bth
//   16 TVer != 0                                    unsupported_tver
//   17 opcode not RC/UC/UD/CNP                      unknown_opcode
//   18 extended headers + ICRC do not fit           truncated_ext_header
//   19 BTH..ICRC length not a multiple of 4         unaligned_length
//   20 PadCnt > payload+pad bytes                   pad_exceeds_payload
//   21 payload on an opcode that carries none       length_mismatch
//   [22 ICRC: icrc_mismatch, in rx_parser]

`resetall
`default_nettype none

module rx_hdr_decode
  import roce_rx_pkg::*;
#(
    // header window, bytes (>= 128)
    parameter int HDR_BYTES = 128
) (
    input  wire logic                   clk,
    input  wire logic                   rst,

    input  wire logic [HDR_BYTES*8-1:0] s_hdr,        // byte i in bits 8i+7..8i; zero past the frame end
    input  wire logic                   s_valid,
    input  wire logic                   s_len_known,  // the frame ended inside the window
    input  wire logic [OFS_W-1:0]       s_len,        // its length, when known

    // header fields; error, frame_len, payload_len and the trailer fields are
    // zero (rx_parser fills them in at the end of the frame)
    output rx_meta_t                    m_meta,
    output logic                        m_meta_valid,

    output rx_ctl_t                     m_ctl,
    output logic                        m_valid
);

  initial begin
    if (HDR_BYTES < 128) begin
      $error("rx_hdr_decode: HDR_BYTES must be >= 128 (got %0d)", HDR_BYTES);
      $finish;
    end
  end

  localparam logic [15:0] ETH_P_IPV4 = 16'h0800;
  localparam logic [15:0] ETH_P_IPV6 = 16'h86DD;
  localparam logic [15:0] ETH_P_IBOE = 16'h8915;
  localparam logic [15:0] ETH_P_8021Q = 16'h8100;
  localparam logic [15:0] ROCE_UDP_PORT = 16'd4791;
  localparam int NET = 110;       // bytes kept from the IP header on (128 - 18)
  localparam int IPB = 40;        // IP header bytes the fields come from (IPv6 / GRH: all 40)
  localparam int BTHX = 40;       // BTH + the longest extended headers
  localparam int CSUM_WORDS = 30; // IPv4 header words, IHL 15
  localparam int CSUM_GROUPS = 8; // summed four at a time in H2

  function automatic logic [7:0] hb(input logic [HDR_BYTES*8-1:0] h, input int i);
    return h[i*8 +: 8];
  endfunction

  // big-endian field of n bytes at byte i of a little-endian byte array
  function automatic logic [127:0] be(input logic [IPB*8-1:0] a, input int i, input int n);
    logic [127:0] r;
    r = '0;
    for (int k = 0; k < n; k++) r = {r[119:0], a[(i+k)*8 +: 8]};
    return r;
  endfunction

  function automatic logic [1:0] l3_of(input logic [15:0] ethertype);
    case (ethertype)
      ETH_P_IPV4: return L3_IPV4;
      ETH_P_IPV6: return L3_IPV6;
      ETH_P_IBOE: return L3_GRH;
      default:    return L3_NONE;
    endcase
  endfunction

  // ------------------------------------------------------------------ H1
  logic                 h1_valid;
  logic                 h1_len_known;
  logic [OFS_W-1:0]     h1_len;
  logic [47:0]          h1_dst;
  logic [47:0]          h1_src;
  logic                 h1_vlan;
  logic [15:0]          h1_tci;
  logic [15:0]          h1_ethertype;
  logic [1:0]           h1_kind;
  logic [NET*8-1:0]     h1_net;      // bytes from the IP header / GRH on
  logic [4*CSUM_GROUPS-1:0][15:0] h1_csw;  // IPv4 header word w if w < IHL * 2, else 0
  logic [4:0]           h1_udp_w;    // UDP offset from the IP header, 32-bit words
  logic [4:0]           h1_bth_w;    // BTH offset from the IP header, 32-bit words

  always_ff @(posedge clk) begin
    logic vlan;
    logic [15:0] tpid;
    logic [15:0] et;
    logic [3:0] ihl;
    logic [1:0] kind;
    logic [4:0] udp_w;
    logic [15:0] csw_plain, csw_vlan;
    tpid = {hb(s_hdr, 12), hb(s_hdr, 13)};
    vlan = tpid == ETH_P_8021Q;
    et = vlan ? {hb(s_hdr, 16), hb(s_hdr, 17)} : tpid;
    ihl = vlan ? s_hdr[18*8 +: 4] : s_hdr[14*8 +: 4];
    kind = vlan ? l3_of({hb(s_hdr, 16), hb(s_hdr, 17)}) : l3_of(tpid);
    udp_w = (kind == L3_IPV4) ? {1'b0, ihl} : 5'd10;
    // both EtherType positions classified at once, then the tag picks one
    h1_valid <= s_valid;
    if (s_valid) begin
      h1_len_known <= s_len_known;
      h1_len <= s_len;
      for (int i = 0; i < 6; i++) begin
        h1_dst[(5-i)*8 +: 8] <= hb(s_hdr, i);
        h1_src[(5-i)*8 +: 8] <= hb(s_hdr, 6 + i);
      end
      h1_vlan <= vlan;
      h1_tci <= {hb(s_hdr, 14), hb(s_hdr, 15)};
      h1_ethertype <= et;
      h1_kind <= kind;
      h1_udp_w <= udp_w;
      h1_bth_w <= (kind == L3_GRH) ? 5'd10 : udp_w + 5'd2;
      h1_net <= vlan ? s_hdr[18*8 +: NET*8] : s_hdr[14*8 +: NET*8];
      // each word masked by the IHL at both header positions, then the tag picks
      for (int w = 0; w < 4 * CSUM_GROUPS; w++) begin
        csw_plain = {hb(s_hdr, 14 + 2 * w), hb(s_hdr, 15 + 2 * w)};
        csw_vlan = {hb(s_hdr, 18 + 2 * w), hb(s_hdr, 19 + 2 * w)};
        if (w >= CSUM_WORDS || 5'(w) >= {s_hdr[14*8 +: 4], 1'b0}) csw_plain = '0;
        if (w >= CSUM_WORDS || 5'(w) >= {s_hdr[18*8 +: 4], 1'b0}) csw_vlan = '0;
        h1_csw[w] <= vlan ? csw_vlan : csw_plain;
      end
    end
    if (rst) h1_valid <= 1'b0;
  end

  // ------------------------------------------------------------------ H2
  logic                 h2_valid;
  logic                 h2_len_known;
  logic [OFS_W-1:0]     h2_len;
  logic [47:0]          h2_dst;
  logic [47:0]          h2_src;
  logic                 h2_vlan;
  logic [15:0]          h2_tci;
  logic [15:0]          h2_ethertype;
  logic [1:0]           h2_kind;
  logic [IPB*8-1:0]     h2_ip;       // the first 40 bytes of h1_net
  logic [63:0]          h2_udp;
  logic [BTHX*8-1:0]    h2_bth;
  logic [CSUM_GROUPS-1:0][17:0] h2_csum;  // group g: words 4g..4g+3 of those < IHL*2

  always_ff @(posedge clk) begin
    h2_valid <= h1_valid;
    if (h1_valid) begin
      for (int g = 0; g < CSUM_GROUPS; g++)
        h2_csum[g] <= (18'(h1_csw[4*g]) + 18'(h1_csw[4*g+1]))
            + (18'(h1_csw[4*g+2]) + 18'(h1_csw[4*g+3]));
      h2_len_known <= h1_len_known;
      h2_len <= h1_len;
      h2_dst <= h1_dst;
      h2_src <= h1_src;
      h2_vlan <= h1_vlan;
      h2_tci <= h1_tci;
      h2_ethertype <= h1_ethertype;
      h2_kind <= h1_kind;
      h2_ip <= h1_net[IPB*8-1:0];
      h2_udp <= 64'(h1_net >> {h1_udp_w, 5'd0});
      h2_bth <= (BTHX*8)'(h1_net >> {h1_bth_w, 5'd0});
    end
    if (rst) h2_valid <= 1'b0;
  end

  // ------------------------------------------------------------------ H3
  // Opcode table (roce-facts.md section 3 = roce-core wire::opcode).
  typedef struct packed {
    logic       known;
    logic       payload;   // the opcode carries a payload
    logic [5:0] ext_len;   // bytes after the BTH
    logic [7:0] ext_mask;  // EXT_* bits
    logic [4:0] imm_ofs;   // ImmDt offset after the BTH, when present
  } op_info_t;

  function automatic op_info_t op_info(input logic [7:0] op);
    op_info_t r;
    logic [4:0] o;
    r = '0;
    o = op[4:0];
    if (op[7:5] == 3'b000 || (op[7:5] == 3'b001 && o <= 5'h0B)) begin
      // RC (0x00..0x17 without 0x15) and UC (0x20..0x2B)
      r.known = 1'b1;
      r.payload = 1'b1;
      case (o)
        5'h00, 5'h01, 5'h02, 5'h04, 5'h07, 5'h08, 5'h0E: ;
        5'h03, 5'h05, 5'h09: begin r.ext_len = 6'd4;  r.ext_mask[EXT_IMMDT] = 1'b1; end
        5'h06, 5'h0A: begin r.ext_len = 6'd16; r.ext_mask[EXT_RETH] = 1'b1; end
        5'h0C: begin r.ext_len = 6'd16; r.ext_mask[EXT_RETH] = 1'b1; r.payload = 1'b0; end
        5'h0B: begin
          r.ext_len = 6'd20;
          r.ext_mask[EXT_RETH] = 1'b1;
          r.ext_mask[EXT_IMMDT] = 1'b1;
          r.imm_ofs = 5'd16;
        end
        5'h0D, 5'h0F, 5'h10: begin r.ext_len = 6'd4; r.ext_mask[EXT_AETH] = 1'b1; end
        5'h11: begin r.ext_len = 6'd4; r.ext_mask[EXT_AETH] = 1'b1; r.payload = 1'b0; end
        5'h12: begin
          r.ext_len = 6'd12;
          r.ext_mask[EXT_AETH] = 1'b1;
          r.ext_mask[EXT_ATOMICACK] = 1'b1;
          r.payload = 1'b0;
        end
        5'h13, 5'h14: begin r.ext_len = 6'd28; r.ext_mask[EXT_ATOMICETH] = 1'b1; r.payload = 1'b0; end
        5'h16, 5'h17: begin r.ext_len = 6'd4; r.ext_mask[EXT_IETH] = 1'b1; end
        default: begin r.known = 1'b0; r.payload = 1'b0; end  // 0x15, 0x18..0x1F
      endcase
    end else if (op == 8'h64) begin
      r.known = 1'b1; r.payload = 1'b1; r.ext_len = 6'd8; r.ext_mask[EXT_DETH] = 1'b1;
    end else if (op == 8'h65) begin
      r.known = 1'b1; r.payload = 1'b1; r.ext_len = 6'd12; r.imm_ofs = 5'd8;
      r.ext_mask[EXT_DETH] = 1'b1; r.ext_mask[EXT_IMMDT] = 1'b1;
    end else if (op == 8'h81) begin
      r.known = 1'b1; r.ext_len = 6'd16; r.ext_mask[EXT_CNP] = 1'b1;
    end
    return r;
  endfunction

  // The length arithmetic of roce-core (all modulo 2^OFS_W, as it was when it
  // ran in one stage), rearranged so that every H3 value is one adder from
  // registers, with the constants folded:
  //   l3 = 14 or 18 (VLAN), hdr = IHL*4 or 40, l4 = l3 + hdr,
  //   ip_len_end = total length (IPv4) or 40 + payload length,
  //   ip_end = l3 + ip_len_end, icrc_ofs = ip_end - 4, pay_end = icrc_ofs - pad,
  //   pay_start = l4 (+ 8 for UDP) + 12 + ext_len,
  //   tl = BTH..ICRC bytes = payload length (GRH) or UDP length - 8,
  //   body = tl - 16 - ext_len (payload + pad; negative: ext headers do not fit),
  //   in H4, where the checks on it are written without a second adder:
  //   "pad > body" as "body < 4 and its low bits < pad", "body != 0" as
  //   "tl != 16 + ext_len".
  // Check 13 "udp_len != ip_len_end - hdr" is tested as
  // "udp_len + hdr != ip_len_end", the same equation modulo 2^OFS_W.
  logic                 h3_valid;
  logic                 h3_v4, h3_grh, h3_vlan, h3_len_known, h3_payload;
  logic [1:0]           h3_kind;
  logic [3:0]           h3_ihl;
  logic [1:0]           h3_pad;
  logic [OFS_W-1:0]     h3_len, h3_l4, h3_l4_8, h3_hdr8, h3_ip_len_end, h3_ip_end, h3_icrc_ofs;
  logic [OFS_W-1:0]     h3_pay_start, h3_pay_end, h3_udp_hdr, h3_tl;
  logic [6:0]           h3_ext16;       // 16 + ext_len: BTH + ICRC + extended headers
  logic                 h3_udp_short;   // UDP length < 8
  logic [15:0]          h3_pre_f;       // the checks of H3; H4 adds 5, 6, 11, 12, 14
  logic [15:0]          h3_post_f;      // the checks of H3; H4 adds 0, 3, 4, 5, 6
  logic [1:0][19:0]     h3_csum;
  rx_meta_t             h3_meta;        // m_meta without the extended-header fields
  logic [IPB*8-1:0]     h3_ext;         // the bytes after the 12-byte BTH
  logic [4:0]           h3_imm_ofs;

  always_ff @(posedge clk) begin
    rx_meta_t c;
    op_info_t oi;
    logic v4, v6, grh, known;
    logic [3:0] ihl;
    logic [OFS_W-1:0] l3, hdr, pay_start;
    logic [15:0] total_len, plen, udp_len;
    logic [7:0] opcode;
    logic [1:0] pad;
    logic [19:0] sum;

    h3_valid <= h2_valid;
    if (h2_valid) begin
      c = '0;
      v4 = h2_kind == L3_IPV4;
      v6 = h2_kind == L3_IPV6;
      grh = h2_kind == L3_GRH;
      known = h2_kind != L3_NONE;
      ihl = h2_ip[3:0];
      l3 = h2_vlan ? OFS_W'(18) : OFS_W'(14);
      hdr = v4 ? OFS_W'({ihl, 2'b00}) : OFS_W'(40);   // IP header / GRH bytes

      // ---- Ethernet / VLAN
      c.eth_dst = h2_dst;
      c.eth_src = h2_src;
      c.ethertype = h2_ethertype;
      c.vlan_present = h2_vlan;
      if (h2_vlan) begin
        c.vlan_pcp = h2_tci[15:13];
        c.vlan_dei = h2_tci[12];
        c.vlan_vid = h2_tci[11:0];
      end
      c.l3_kind = h2_kind;

      // ---- IP
      total_len = 16'(be(h2_ip, 2, 2));
      plen = 16'(be(h2_ip, 4, 2));
      c.ip_version = h2_ip[7:4];
      if (v4) begin
        c.ip_ihl = ihl;
        c.ip_dscp = h2_ip[15:10];
        c.ip_ecn = h2_ip[9:8];
        c.ip_length = total_len;
        c.ip_id = 16'(be(h2_ip, 4, 2));
        c.ip_flags = h2_ip[6*8+5 +: 3];
        c.ip_frag_offset = {h2_ip[6*8 +: 5], h2_ip[7*8 +: 8]};
        c.ip_ttl = h2_ip[8*8 +: 8];
        c.ip_protocol = h2_ip[9*8 +: 8];
        c.ip_checksum = 16'(be(h2_ip, 10, 2));
        c.ip_src = 128'(be(h2_ip, 12, 4));
        c.ip_dst = 128'(be(h2_ip, 16, 4));
      end else begin
        // IPv6 and GRH: version(4) tclass(8) flow label(20)
        c.ip_dscp = {h2_ip[3:0], h2_ip[15:14]};
        c.ip_ecn = h2_ip[13:12];
        c.ip_flow_label = {h2_ip[11:8], h2_ip[23:16], h2_ip[31:24]};
        c.ip_length = plen;
        c.ip_protocol = h2_ip[6*8 +: 8];
        c.ip_ttl = h2_ip[7*8 +: 8];
        c.ip_src = be(h2_ip, 8, 16);
        c.ip_dst = be(h2_ip, 24, 16);
      end

      // ---- UDP
      udp_len = {h2_udp[39:32], h2_udp[47:40]};
      if (!grh) begin
        c.udp_sport = {h2_udp[7:0], h2_udp[15:8]};
        c.udp_dport = {h2_udp[23:16], h2_udp[31:24]};
        c.udp_length = udp_len;
        c.udp_checksum = {h2_udp[55:48], h2_udp[63:56]};
      end

      // ---- BTH
      opcode = h2_bth[7:0];
      pad = h2_bth[13:12];
      oi = op_info(opcode);
      c.bth_opcode = opcode;
      c.bth_se = h2_bth[15];
      c.bth_migreq = h2_bth[14];
      c.bth_padcnt = pad;
      c.bth_tver = h2_bth[11:8];
      c.bth_pkey = {h2_bth[23:16], h2_bth[31:24]};
      c.bth_fecn = h2_bth[4*8+7];
      c.bth_becn = h2_bth[4*8+6];
      c.bth_resv6 = h2_bth[4*8 +: 6];
      c.bth_destqp = {h2_bth[5*8 +: 8], h2_bth[6*8 +: 8], h2_bth[7*8 +: 8]};
      c.bth_ackreq = h2_bth[8*8+7];
      c.bth_resv7 = h2_bth[8*8 +: 7];
      c.bth_psn = {h2_bth[9*8 +: 8], h2_bth[10*8 +: 8], h2_bth[11*8 +: 8]};

      // ---- extended headers: raw here, their fields in H4
      c.ext_mask = oi.ext_mask;
      h3_ext <= (IPB*8)'(h2_bth[BTHX*8-1:12*8]);
      h3_imm_ofs <= oi.imm_ofs;

      // ---- offsets (see above)
      pay_start = (grh ? l3 + OFS_W'(12) : l3 + OFS_W'(20)) + hdr + OFS_W'(oi.ext_len);
      c.hdr_len = 6'd12 + oi.ext_len;
      c.payload_offset = pay_start;
      h3_pay_start <= pay_start;
      h3_l4 <= l3 + hdr;
      h3_l4_8 <= (h2_vlan ? OFS_W'(26) : OFS_W'(22)) + hdr;
      h3_hdr8 <= hdr + OFS_W'(8);
      if (v4) begin
        h3_ip_len_end <= OFS_W'(total_len);
        h3_ip_end <= l3 + OFS_W'(total_len);
        h3_icrc_ofs <= (h2_vlan ? OFS_W'(14) : OFS_W'(10)) + OFS_W'(total_len);
        h3_pay_end <= ((h2_vlan ? OFS_W'(14) : OFS_W'(10)) - OFS_W'(pad)) + OFS_W'(total_len);
      end else begin
        h3_ip_len_end <= OFS_W'(40) + OFS_W'(plen);
        h3_ip_end <= (h2_vlan ? OFS_W'(58) : OFS_W'(54)) + OFS_W'(plen);
        h3_icrc_ofs <= (h2_vlan ? OFS_W'(54) : OFS_W'(50)) + OFS_W'(plen);
        h3_pay_end <= ((h2_vlan ? OFS_W'(54) : OFS_W'(50)) - OFS_W'(pad)) + OFS_W'(plen);
      end
      h3_udp_hdr <= OFS_W'(udp_len) + hdr;
      h3_tl <= grh ? OFS_W'(plen) : OFS_W'(udp_len) - OFS_W'(8);
      h3_ext16 <= 7'd16 + 7'(oi.ext_len);
      h3_udp_short <= udp_len < 16'd8;

      // ---- checks that need no sum (numbers: the bit in pre_f / post_f)
      h3_pre_f <= '0;
      h3_pre_f[0] <= h2_len_known && (h2_len < OFS_W'(14) || (h2_vlan && h2_len < OFS_W'(18)));
      h3_pre_f[1] <= known && h2_len_known && h2_len <= l3;
      h3_pre_f[2] <= !known;
      h3_pre_f[3] <= v4 ? c.ip_version != 4'd4 : c.ip_version != 4'd6;
      h3_pre_f[4] <= v4 && ihl < 4'd5;
      h3_pre_f[7] <= v4 && (h2_ip[6*8+5] || c.ip_frag_offset != '0);
      h3_pre_f[8] <= (v4 || v6) && c.ip_protocol != 8'd17;
      h3_pre_f[9] <= grh && c.ip_protocol != 8'h1B;
      h3_pre_f[10] <= v4 && OFS_W'(total_len) < hdr;
      h3_pre_f[13] <= !grh && c.udp_dport != ROCE_UDP_PORT;
      h3_post_f <= '0;
      h3_post_f[1] <= c.bth_tver != 4'd0;
      h3_post_f[2] <= !oi.known;

      sum = '0;
      for (int g = 0; g < CSUM_GROUPS / 2; g++) sum = sum + 20'(h2_csum[g]);
      h3_csum[0] <= sum;
      sum = '0;
      for (int g = CSUM_GROUPS / 2; g < CSUM_GROUPS; g++) sum = sum + 20'(h2_csum[g]);
      h3_csum[1] <= sum;

      h3_v4 <= v4;
      h3_grh <= grh;
      h3_vlan <= h2_vlan;
      h3_kind <= h2_kind;
      h3_ihl <= ihl;
      h3_pad <= pad;
      h3_payload <= oi.payload;
      h3_len_known <= h2_len_known;
      h3_len <= h2_len;
      h3_meta <= c;
    end
    if (rst) h3_valid <= 1'b0;
  end

  // ------------------------------------------------------------------ H4
  // The record, completed with the extended-header fields. No enable: the H3
  // registers hold between frames, so m_meta does too.
  always_ff @(posedge clk) begin
    rx_meta_t c;
    logic [IPB*8-1:0] e;
    c = h3_meta;
    e = h3_ext;
    if (c.ext_mask[EXT_RETH]) begin
      c.reth_va = 64'(be(e, 0, 8));
      c.reth_rkey = 32'(be(e, 8, 4));
      c.reth_dmalen = 32'(be(e, 12, 4));
    end
    if (c.ext_mask[EXT_AETH]) begin
      c.aeth_syndrome = e[7:0];
      c.aeth_msn = 24'(be(e, 1, 3));
    end
    if (c.ext_mask[EXT_ATOMICETH]) begin
      c.atomic_va = 64'(be(e, 0, 8));
      c.atomic_rkey = 32'(be(e, 8, 4));
      c.atomic_swap_add = 64'(be(e, 12, 8));
      c.atomic_compare = 64'(be(e, 20, 8));
    end
    if (c.ext_mask[EXT_ATOMICACK]) c.atomicack_orig = 64'(be(e, 4, 8));
    if (c.ext_mask[EXT_IMMDT]) c.immdt = 32'(be(e, int'(h3_imm_ofs), 4));
    if (c.ext_mask[EXT_IETH]) c.ieth_rkey = 32'(be(e, 0, 4));
    if (c.ext_mask[EXT_DETH]) begin
      c.deth_qkey = 32'(be(e, 0, 4));
      c.deth_srcqp = 24'(be(e, 5, 3));
    end
    if (c.ext_mask[EXT_CNP]) c.cnp_reserved = be(e, 0, 16);
    m_meta <= c;
    m_meta_valid <= h3_valid;
    if (rst) m_meta_valid <= 1'b0;
  end

  // IPv4 checksum: the header words sum to s (< 2^21); the check of roce-core
  // folds s twice with end-around carries and wants 0xFFFF. That holds exactly
  // when lo + hi = 0xFFFF (lo = s[15:0], hi = s[20:16]; one fold of a larger
  // sum leaves at most 31), i.e. when lo is the 16-bit complement of hi: an
  // equality instead of two more adders.
  logic                 h4_valid;
  logic                 h4_vlan, h4_trunc, h4_pay_gt;
  logic [1:0]           h4_kind;
  logic [3:0]           h4_ihl;
  logic [OFS_W-1:0]     h4_ip_end, h4_icrc_ofs, h4_pay_start, h4_pay_end;
  logic [15:0]          h4_payload_len;
  logic [15:0]          h4_pre_f, h4_post_f;

  always_ff @(posedge clk) begin
    logic [20:0] s;
    logic [OFS_W-1:0] body;
    logic [15:0] pre_f, post_f;
    h4_valid <= h3_valid;
    if (h3_valid) begin
      s = 21'(h3_csum[0]) + 21'(h3_csum[1]);
      pre_f = h3_pre_f;
      pre_f[5] = h3_len_known && h3_len < h3_l4;
      pre_f[6] = h3_v4 && s[15:0] != ~{11'b0, s[20:16]};
      pre_f[11] = !h3_grh && h3_len_known && h3_len < h3_l4_8 && h3_ip_len_end < h3_hdr8;
      pre_f[12] = !h3_grh && h3_len_known && h3_len < h3_l4_8;
      pre_f[14] = !h3_grh && (h3_udp_hdr != h3_ip_len_end || h3_udp_short);
      post_f = h3_post_f;
      post_f[0] = h3_tl < OFS_W'(16);
      body = h3_tl - OFS_W'(h3_ext16);
      post_f[3] = body[OFS_W-1];
      post_f[4] = h3_tl[1:0] != 2'b00;
      post_f[5] = body[OFS_W-1:2] == '0 && body[1:0] < h3_pad;
      post_f[6] = !h3_payload && h3_tl != OFS_W'(h3_ext16);
      h4_pre_f <= pre_f;
      h4_post_f <= post_f;
      h4_trunc <= h3_len_known && h3_len < h3_ip_end;
      h4_pay_gt <= h3_pay_end > h3_pay_start;
      h4_payload_len <= 16'(h3_pay_end - h3_pay_start);
      h4_ip_end <= h3_ip_end;
      h4_icrc_ofs <= h3_icrc_ofs;
      h4_pay_start <= h3_pay_start;
      h4_pay_end <= h3_pay_end;
      h4_vlan <= h3_vlan;
      h4_kind <= h3_kind;
      h4_ihl <= h3_ihl;
    end
    if (rst) h4_valid <= 1'b0;
  end

  // ------------------------------------------------------------------ H5
  function automatic rx_err_e first_err(input logic [15:0] flags, input rx_err_e codes [16]);
    for (int i = 0; i < 16; i++) if (flags[i]) return codes[i];
    return ERR_NONE;
  endfunction

  always_ff @(posedge clk) begin
    m_valid <= h4_valid;
    if (h4_valid) begin
      m_ctl.pre_err <= first_err(h4_pre_f, '{ERR_TRUNCATED_FRAME, ERR_TRUNCATED_FRAME,
          ERR_UNSUPPORTED_ETHERTYPE, ERR_BAD_IP_VERSION, ERR_BAD_IP_HEADER, ERR_TRUNCATED_FRAME,
          ERR_BAD_IPV4_CHECKSUM, ERR_IP_FRAGMENT, ERR_NOT_UDP, ERR_BAD_IP_HEADER,
          ERR_LENGTH_MISMATCH, ERR_LENGTH_MISMATCH, ERR_TRUNCATED_FRAME, ERR_NOT_ROCE_UDP_PORT,
          ERR_LENGTH_MISMATCH, ERR_NONE});
      m_ctl.post_err <= first_err(h4_post_f, '{ERR_TRUNCATED_BTH, ERR_UNSUPPORTED_TVER,
          ERR_UNKNOWN_OPCODE, ERR_TRUNCATED_EXT_HEADER, ERR_UNALIGNED_LENGTH,
          ERR_PAD_EXCEEDS_PAYLOAD, ERR_LENGTH_MISMATCH, ERR_NONE, ERR_NONE, ERR_NONE, ERR_NONE,
          ERR_NONE, ERR_NONE, ERR_NONE, ERR_NONE, ERR_NONE});
      // no pre or post flag is exactly "pre_err and post_err are ERR_NONE"
      m_ctl.stream_en <= h4_pre_f == '0 && h4_post_f == '0 && !h4_trunc && h4_pay_gt;
      m_ctl.ip_end <= h4_ip_end;
      m_ctl.icrc_ofs <= h4_icrc_ofs;
      m_ctl.pay_start <= h4_pay_start;
      m_ctl.pay_end <= h4_pay_end;
      m_ctl.payload_len <= h4_payload_len;
      m_ctl.vlan <= h4_vlan;
      m_ctl.kind <= h4_kind;
      m_ctl.ihl <= h4_ihl;
    end
    if (rst) m_valid <= 1'b0;
  end

endmodule

`resetall
