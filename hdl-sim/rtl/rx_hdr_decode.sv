// SPDX-License-Identifier: MIT OR Apache-2.0
//
// rx_hdr_decode: decodes the first 128 bytes of a frame (every RoCE header
// fits: at most 14 + 4 + 60 + 8 + 12 + 28 = 126 bytes, IPv4 options included)
// into the per-frame context of rx_parser: every header field of the
// metadata record, the header checks, and the offsets the streaming stage
// needs (payload, pad, ICRC, end of the IP datagram).
//
// Three register stages, fully pipelined (one header per cycle):
//   H1: Ethernet/VLAN, EtherType class, the bytes from the IP header on;
//   H2: UDP and BTH+ext bytes at their (IHL-dependent) offsets, the IPv4
//       header checksum sum over IHL words;
//   H3: opcode table, field decode, lengths and checks -> m_ctx (registered).
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

    output rx_ctx_t                     m_ctx,
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
  localparam int BTHX = 40;       // BTH + the longest extended headers

  function automatic logic [7:0] hb(input logic [HDR_BYTES*8-1:0] h, input int i);
    return h[i*8 +: 8];
  endfunction

  // big-endian field of n bytes at byte i of a little-endian byte array
  function automatic logic [127:0] be(input logic [NET*8-1:0] a, input int i, input int n);
    logic [127:0] r;
    r = '0;
    for (int k = 0; k < n; k++) r = {r[119:0], a[(i+k)*8 +: 8]};
    return r;
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

  always_ff @(posedge clk) begin
    logic vlan;
    logic [15:0] tpid;
    logic [15:0] et;
    tpid = {hb(s_hdr, 12), hb(s_hdr, 13)};
    vlan = tpid == ETH_P_8021Q;
    et = vlan ? {hb(s_hdr, 16), hb(s_hdr, 17)} : tpid;
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
    case (et)
      ETH_P_IPV4: h1_kind <= L3_IPV4;
      ETH_P_IPV6: h1_kind <= L3_IPV6;
      ETH_P_IBOE: h1_kind <= L3_GRH;
      default:    h1_kind <= L3_NONE;
    endcase
    h1_net <= vlan ? s_hdr[18*8 +: NET*8] : s_hdr[14*8 +: NET*8];
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
  logic [NET*8-1:0]     h2_net;
  logic [63:0]          h2_udp;
  logic [BTHX*8-1:0]    h2_bth;
  logic [20:0]          h2_csum;     // sum of the IHL*2 header words

  always_ff @(posedge clk) begin
    logic [3:0] ihl;
    logic [4:0] udp_w;    // UDP offset from the IP header, 32-bit words
    logic [4:0] bth_w;    // BTH offset from the IP header, 32-bit words
    logic [20:0] sum;
    h2_valid <= h1_valid;
    if (h1_valid) begin
    ihl = h1_net[3:0];
    udp_w = (h1_kind == L3_IPV4) ? {1'b0, ihl} : 5'd10;
    bth_w = (h1_kind == L3_GRH) ? 5'd10 : udp_w + 5'd2;
    sum = '0;
    for (int i = 0; i < 30; i++) begin
      if (i < 2 * int'(ihl)) sum = sum + 21'({h1_net[(2*i)*8 +: 8], h1_net[(2*i+1)*8 +: 8]});
    end
    h2_len_known <= h1_len_known;
    h2_len <= h1_len;
    h2_dst <= h1_dst;
    h2_src <= h1_src;
    h2_vlan <= h1_vlan;
    h2_tci <= h1_tci;
    h2_ethertype <= h1_ethertype;
    h2_kind <= h1_kind;
    h2_net <= h1_net;
    h2_udp <= 64'(h1_net >> (32'(udp_w) * 32));
    h2_bth <= (BTHX*8)'(h1_net >> (32'(bth_w) * 32));
    h2_csum <= sum;
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

  function automatic rx_err_e first_err(input logic [15:0] flags, input rx_err_e codes [16]);
    for (int i = 0; i < 16; i++) if (flags[i]) return codes[i];
    return ERR_NONE;
  endfunction

  always_ff @(posedge clk) begin
    rx_ctx_t c;
    op_info_t oi;
    logic v4, v6, grh, known;
    logic [3:0] ihl;
    logic [OFS_W-1:0] l3, hdr, l4, bth, ip_end, e_end, pay_start, pay_end, ip_len_end;
    logic [15:0] total_len, plen, udp_len, csum_fold;
    logic [17:0] csum1;
    logic [16:0] tl;          // BTH..ICRC bytes, as roce-core's `transport`
    logic [16:0] body;        // payload + pad bytes (negative: ext headers do not fit)
    logic [15:0] pre_f, post_f;
    logic [7:0] opcode;
    logic [1:0] pad;
    logic [NET*8-1:0] e;      // extended header bytes (after the 12-byte BTH)

    m_valid <= h2_valid;
    if (h2_valid) begin
    c = '0;
    v4 = h2_kind == L3_IPV4;
    v6 = h2_kind == L3_IPV6;
    grh = h2_kind == L3_GRH;
    known = h2_kind != L3_NONE;
    ihl = h2_net[3:0];
    l3 = h2_vlan ? OFS_W'(18) : OFS_W'(14);
    hdr = v4 ? OFS_W'({ihl, 2'b00}) : OFS_W'(40);   // IP header / GRH bytes
    l4 = l3 + hdr;
    bth = grh ? l4 : l4 + OFS_W'(8);

    // ---- Ethernet / VLAN
    c.meta.eth_dst = h2_dst;
    c.meta.eth_src = h2_src;
    c.meta.ethertype = h2_ethertype;
    c.meta.vlan_present = h2_vlan;
    if (h2_vlan) begin
      c.meta.vlan_pcp = h2_tci[15:13];
      c.meta.vlan_dei = h2_tci[12];
      c.meta.vlan_vid = h2_tci[11:0];
    end
    c.meta.l3_kind = h2_kind;

    // ---- IP
    total_len = 16'(be(h2_net, 2, 2));
    plen = 16'(be(h2_net, 4, 2));
    c.meta.ip_version = h2_net[7:4];
    if (v4) begin
      c.meta.ip_ihl = ihl;
      c.meta.ip_dscp = h2_net[15:10];
      c.meta.ip_ecn = h2_net[9:8];
      c.meta.ip_length = total_len;
      c.meta.ip_id = 16'(be(h2_net, 4, 2));
      c.meta.ip_flags = h2_net[6*8+5 +: 3];
      c.meta.ip_frag_offset = {h2_net[6*8 +: 5], h2_net[7*8 +: 8]};
      c.meta.ip_ttl = h2_net[8*8 +: 8];
      c.meta.ip_protocol = h2_net[9*8 +: 8];
      c.meta.ip_checksum = 16'(be(h2_net, 10, 2));
      c.meta.ip_src = 128'(be(h2_net, 12, 4));
      c.meta.ip_dst = 128'(be(h2_net, 16, 4));
      ip_len_end = OFS_W'(total_len);
    end else begin
      // IPv6 and GRH: version(4) tclass(8) flow label(20)
      c.meta.ip_dscp = {h2_net[3:0], h2_net[15:14]};
      c.meta.ip_ecn = h2_net[13:12];
      c.meta.ip_flow_label = {h2_net[11:8], h2_net[23:16], h2_net[31:24]};
      c.meta.ip_length = plen;
      c.meta.ip_protocol = h2_net[6*8 +: 8];
      c.meta.ip_ttl = h2_net[7*8 +: 8];
      c.meta.ip_src = be(h2_net, 8, 16);
      c.meta.ip_dst = be(h2_net, 24, 16);
      ip_len_end = OFS_W'(40) + OFS_W'(plen);
    end
    ip_end = l3 + ip_len_end;   // end of the IP datagram in the frame
    csum1 = {2'b0, h2_csum[15:0]} + 18'(h2_csum[20:16]);
    csum_fold = csum1[15:0] + 16'(csum1[17:16]);

    // ---- UDP
    udp_len = {h2_udp[39:32], h2_udp[47:40]};
    if (!grh) begin
      c.meta.udp_sport = {h2_udp[7:0], h2_udp[15:8]};
      c.meta.udp_dport = {h2_udp[23:16], h2_udp[31:24]};
      c.meta.udp_length = udp_len;
      c.meta.udp_checksum = {h2_udp[55:48], h2_udp[63:56]};
    end
    // transport length: BTH .. ICRC inclusive
    tl = grh ? 17'(plen) : 17'(udp_len) - 17'd8;

    // ---- BTH
    opcode = h2_bth[7:0];
    pad = h2_bth[13:12];
    oi = op_info(opcode);
    c.meta.bth_opcode = opcode;
    c.meta.bth_se = h2_bth[15];
    c.meta.bth_migreq = h2_bth[14];
    c.meta.bth_padcnt = pad;
    c.meta.bth_tver = h2_bth[11:8];
    c.meta.bth_pkey = {h2_bth[23:16], h2_bth[31:24]};
    c.meta.bth_fecn = h2_bth[4*8+7];
    c.meta.bth_becn = h2_bth[4*8+6];
    c.meta.bth_resv6 = h2_bth[4*8 +: 6];
    c.meta.bth_destqp = {h2_bth[5*8 +: 8], h2_bth[6*8 +: 8], h2_bth[7*8 +: 8]};
    c.meta.bth_ackreq = h2_bth[8*8+7];
    c.meta.bth_resv7 = h2_bth[8*8 +: 7];
    c.meta.bth_psn = {h2_bth[9*8 +: 8], h2_bth[10*8 +: 8], h2_bth[11*8 +: 8]};

    // ---- extended headers
    e = (NET*8)'(h2_bth[BTHX*8-1:12*8]);
    c.meta.ext_mask = oi.ext_mask;
    if (oi.ext_mask[EXT_RETH]) begin
      c.meta.reth_va = 64'(be(e, 0, 8));
      c.meta.reth_rkey = 32'(be(e, 8, 4));
      c.meta.reth_dmalen = 32'(be(e, 12, 4));
    end
    if (oi.ext_mask[EXT_AETH]) begin
      c.meta.aeth_syndrome = e[7:0];
      c.meta.aeth_msn = 24'(be(e, 1, 3));
    end
    if (oi.ext_mask[EXT_ATOMICETH]) begin
      c.meta.atomic_va = 64'(be(e, 0, 8));
      c.meta.atomic_rkey = 32'(be(e, 8, 4));
      c.meta.atomic_swap_add = 64'(be(e, 12, 8));
      c.meta.atomic_compare = 64'(be(e, 20, 8));
    end
    if (oi.ext_mask[EXT_ATOMICACK]) c.meta.atomicack_orig = 64'(be(e, 4, 8));
    if (oi.ext_mask[EXT_IMMDT]) c.meta.immdt = 32'(be(e, int'(oi.imm_ofs), 4));
    if (oi.ext_mask[EXT_IETH]) c.meta.ieth_rkey = 32'(be(e, 0, 4));
    if (oi.ext_mask[EXT_DETH]) begin
      c.meta.deth_qkey = 32'(be(e, 0, 4));
      c.meta.deth_srcqp = 24'(be(e, 5, 3));
    end
    if (oi.ext_mask[EXT_CNP]) c.meta.cnp_reserved = be(e, 0, 16);

    // ---- offsets
    e_end = ip_end - OFS_W'(4);
    pay_start = bth + OFS_W'(12) + OFS_W'(oi.ext_len);
    pay_end = e_end - OFS_W'(pad);
    body = tl - 17'd16 - 17'(oi.ext_len);
    c.meta.hdr_len = 6'd12 + oi.ext_len;
    c.meta.payload_offset = pay_start;
    c.meta.payload_len = 16'(pay_end - pay_start);

    // ---- checks, in roce-core's order (see the header comment)
    pre_f = '0;
    pre_f[0] = h2_len_known && (h2_len < OFS_W'(14) || (h2_vlan && h2_len < OFS_W'(18)));
    pre_f[1] = known && h2_len_known && h2_len <= l3;
    pre_f[2] = !known;
    pre_f[3] = v4 ? c.meta.ip_version != 4'd4 : c.meta.ip_version != 4'd6;
    pre_f[4] = v4 && ihl < 4'd5;
    pre_f[5] = h2_len_known && h2_len < l3 + hdr;
    pre_f[6] = v4 && csum_fold != 16'hFFFF;
    pre_f[7] = v4 && (h2_net[6*8+5] || c.meta.ip_frag_offset != '0);
    pre_f[8] = (v4 || v6) && c.meta.ip_protocol != 8'd17;
    pre_f[9] = grh && c.meta.ip_protocol != 8'h1B;
    pre_f[10] = v4 && OFS_W'(total_len) < hdr;
    pre_f[11] = !grh && h2_len_known && h2_len < l4 + OFS_W'(8) && ip_len_end < hdr + OFS_W'(8);
    pre_f[12] = !grh && h2_len_known && h2_len < l4 + OFS_W'(8);
    pre_f[13] = !grh && c.meta.udp_dport != ROCE_UDP_PORT;
    pre_f[14] = !grh && (OFS_W'(udp_len) != ip_len_end - hdr || udp_len < 16'd8);
    c.pre_err = first_err(pre_f, '{ERR_TRUNCATED_FRAME, ERR_TRUNCATED_FRAME,
        ERR_UNSUPPORTED_ETHERTYPE, ERR_BAD_IP_VERSION, ERR_BAD_IP_HEADER, ERR_TRUNCATED_FRAME,
        ERR_BAD_IPV4_CHECKSUM, ERR_IP_FRAGMENT, ERR_NOT_UDP, ERR_BAD_IP_HEADER,
        ERR_LENGTH_MISMATCH, ERR_LENGTH_MISMATCH, ERR_TRUNCATED_FRAME, ERR_NOT_ROCE_UDP_PORT,
        ERR_LENGTH_MISMATCH, ERR_NONE});

    post_f = '0;
    post_f[0] = tl < 17'd16;
    post_f[1] = c.meta.bth_tver != 4'd0;
    post_f[2] = !oi.known;
    post_f[3] = body[16];                          // negative: ext headers + ICRC do not fit
    post_f[4] = tl[1:0] != 2'b00;
    post_f[5] = 17'(pad) > body;
    post_f[6] = !oi.payload && body != '0;
    c.post_err = first_err(post_f, '{ERR_TRUNCATED_BTH, ERR_UNSUPPORTED_TVER,
        ERR_UNKNOWN_OPCODE, ERR_TRUNCATED_EXT_HEADER, ERR_UNALIGNED_LENGTH,
        ERR_PAD_EXCEEDS_PAYLOAD, ERR_LENGTH_MISMATCH, ERR_NONE, ERR_NONE, ERR_NONE, ERR_NONE,
        ERR_NONE, ERR_NONE, ERR_NONE, ERR_NONE, ERR_NONE});

    c.ip_end = ip_end;
    c.icrc_ofs = e_end;
    c.pay_start = pay_start;
    c.pay_end = pay_end;
    c.stream_en = c.pre_err == ERR_NONE && c.post_err == ERR_NONE &&
                  !(h2_len_known && h2_len < ip_end) && pay_end > pay_start;
    c.vlan = h2_vlan;
    c.kind = h2_kind;
    c.ihl = ihl;

    m_ctx <= c;
    end
    if (rst) m_valid <= 1'b0;
  end

endmodule

`resetall
