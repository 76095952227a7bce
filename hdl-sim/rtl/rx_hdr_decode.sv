// SPDX-License-Identifier: MIT OR Apache-2.0
//
// rx_hdr_decode: decodes the first 128 bytes of a frame (all RoCE headers fit:
// at most 14 + 4 + 40 + 8 + 12 + 28 = 106 bytes) into the per-frame context of
// rx_parser: every header field of the metadata record, the header-phase
// checks in packet-json.md priority order, and the offsets the streaming
// stage needs (payload, pad, ICRC, end of the IP datagram).
//
// Two register stages, fully pipelined (one header per cycle):
//   H1: select the IP / UDP / BTH+ext bytes (6 layouts: {VLAN} x {IPv4, IPv6,
//       RoCEv1 GRH}), sum the IPv4 header words;
//   H2: opcode table, field decode, lengths and checks -> m_ctx (registered).
//
// Check order ("first fault met in header order"), see README.md:
//   truncated_frame (Ethernet/VLAN) > unsupported_ethertype >
//   truncated_frame (IP header) > bad_ip_version > bad_ip_header >
//   bad_ipv4_checksum > ip_fragment > not_udp > truncated_frame (UDP header) >
//   not_roce_udp_port > length_mismatch >            ... = pre_err
//   [truncated_frame: frame ends before the IP datagram; checked by rx_parser]
//   truncated_bth > unaligned_length > unknown_opcode > unsupported_tver >
//   truncated_ext_header > pad_exceeds_payload       ... = post_err
//   [icrc_mismatch; checked by rx_parser]

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

  function automatic logic [7:0] hb(input logic [HDR_BYTES*8-1:0] h, input int i);
    return h[i*8 +: 8];
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
  logic [40*8-1:0]      h1_ip;       // IP header / GRH bytes
  logic [8*8-1:0]       h1_udp;
  logic [40*8-1:0]      h1_bth;      // BTH + up to 28 extended header bytes
  logic [19:0]          h1_csum;     // sum of the ten IPv4 header words

  always_ff @(posedge clk) begin
    logic vlan;
    logic [15:0] tpid;
    logic [15:0] et;
    logic [1:0] kind;
    logic [40*8-1:0] ip;
    logic [19:0] sum;
    tpid = {hb(s_hdr, 12), hb(s_hdr, 13)};
    vlan = tpid == ETH_P_8021Q;
    et = vlan ? {hb(s_hdr, 16), hb(s_hdr, 17)} : tpid;
    case (et)
      ETH_P_IPV4: kind = L3_IPV4;
      ETH_P_IPV6: kind = L3_IPV6;
      ETH_P_IBOE: kind = L3_GRH;
      default:    kind = L3_NONE;
    endcase
    ip = vlan ? s_hdr[18*8 +: 320] : s_hdr[14*8 +: 320];
    sum = '0;
    for (int i = 0; i < 10; i++) sum = sum + 20'({ip[(2*i)*8 +: 8], ip[(2*i+1)*8 +: 8]});

    h1_valid <= s_valid;
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
    h1_ip <= ip;
    h1_csum <= sum;
    case ({vlan, kind})
      {1'b0, L3_IPV6}: h1_udp <= s_hdr[(14+40)*8 +: 64];
      {1'b1, L3_IPV4}: h1_udp <= s_hdr[(18+20)*8 +: 64];
      {1'b1, L3_IPV6}: h1_udp <= s_hdr[(18+40)*8 +: 64];
      default:         h1_udp <= s_hdr[(14+20)*8 +: 64];
    endcase
    case ({vlan, kind})
      {1'b0, L3_IPV6}: h1_bth <= s_hdr[(14+48)*8 +: 320];
      {1'b0, L3_GRH}:  h1_bth <= s_hdr[(14+40)*8 +: 320];
      {1'b1, L3_IPV4}: h1_bth <= s_hdr[(18+28)*8 +: 320];
      {1'b1, L3_IPV6}: h1_bth <= s_hdr[(18+48)*8 +: 320];
      {1'b1, L3_GRH}:  h1_bth <= s_hdr[(18+40)*8 +: 320];
      default:         h1_bth <= s_hdr[(14+28)*8 +: 320];
    endcase
    if (rst) h1_valid <= 1'b0;
  end

  // ------------------------------------------------------------------ H2
  // Opcode table (roce-facts.md section 3): extended headers and their order.
  typedef struct packed {
    logic       known;
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
      case (o)
        5'h00, 5'h01, 5'h02, 5'h04, 5'h07, 5'h08, 5'h0E: ;
        5'h03, 5'h05, 5'h09: begin r.ext_len = 6'd4;  r.ext_mask[EXT_IMMDT] = 1'b1; end
        5'h06, 5'h0A, 5'h0C: begin r.ext_len = 6'd16; r.ext_mask[EXT_RETH] = 1'b1; end
        5'h0B: begin
          r.ext_len = 6'd20;
          r.ext_mask[EXT_RETH] = 1'b1;
          r.ext_mask[EXT_IMMDT] = 1'b1;
          r.imm_ofs = 5'd16;
        end
        5'h0D, 5'h0F, 5'h10, 5'h11: begin r.ext_len = 6'd4; r.ext_mask[EXT_AETH] = 1'b1; end
        5'h12: begin
          r.ext_len = 6'd12;
          r.ext_mask[EXT_AETH] = 1'b1;
          r.ext_mask[EXT_ATOMICACK] = 1'b1;
        end
        5'h13, 5'h14: begin r.ext_len = 6'd28; r.ext_mask[EXT_ATOMICETH] = 1'b1; end
        5'h16, 5'h17: begin r.ext_len = 6'd4; r.ext_mask[EXT_IETH] = 1'b1; end
        default: r.known = 1'b0;   // 0x15, 0x18..0x1F (FLUSH/ATOMIC_WRITE not decoded)
      endcase
    end else if (op == 8'h64) begin
      r.known = 1'b1; r.ext_len = 6'd8; r.ext_mask[EXT_DETH] = 1'b1;
    end else if (op == 8'h65) begin
      r.known = 1'b1; r.ext_len = 6'd12; r.imm_ofs = 5'd8;
      r.ext_mask[EXT_DETH] = 1'b1; r.ext_mask[EXT_IMMDT] = 1'b1;
    end else if (op == 8'h81) begin
      r.known = 1'b1; r.ext_len = 6'd16; r.ext_mask[EXT_CNP] = 1'b1;
    end
    return r;
  endfunction

  // big-endian field of n bytes starting at byte i of a little-endian byte array
  function automatic logic [127:0] be(input logic [40*8-1:0] a, input int i, input int n);
    logic [127:0] r;
    r = '0;
    for (int k = 0; k < n; k++) r = {r[119:0], a[(i+k)*8 +: 8]};
    return r;
  endfunction

  function automatic rx_err_e first_err(input logic [15:0] flags, input rx_err_e codes [16]);
    for (int i = 0; i < 16; i++) if (flags[i]) return codes[i];
    return ERR_NONE;
  endfunction

  always_ff @(posedge clk) begin
    rx_ctx_t c;
    op_info_t oi;
    logic v4, v6, grh;
    logic [OFS_W-1:0] l3, l4, bth, ip_end, e_end, pay_start, pay_end, tl;
    logic [15:0] total_len, plen, udp_len, csum_fold;
    logic [16:0] csum1;
    logic [15:0] ip_payload;
    logic [OFS_W-1:0] need;
    logic short_l2, short_ip, short_udp;
    logic [15:0] pre_f, post_f;
    logic [7:0] opcode;
    logic [1:0] pad;
    logic [39*8+7:0] e;   // extended header bytes follow the 12-byte BTH
    logic [16:0] ext_room;   // transport length minus BTH, ext headers and ICRC

    c = '0;
    v4 = h1_kind == L3_IPV4;
    v6 = h1_kind == L3_IPV6;
    grh = h1_kind == L3_GRH;
    l3 = h1_vlan ? OFS_W'(18) : OFS_W'(14);
    l4 = l3 + (v4 ? OFS_W'(20) : OFS_W'(40));
    bth = grh ? l4 : l4 + OFS_W'(8);

    // ---- Ethernet / VLAN
    c.meta.eth_dst = h1_dst;
    c.meta.eth_src = h1_src;
    c.meta.ethertype = h1_ethertype;
    c.meta.vlan_present = h1_vlan;
    if (h1_vlan) begin
      c.meta.vlan_pcp = h1_tci[15:13];
      c.meta.vlan_dei = h1_tci[12];
      c.meta.vlan_vid = h1_tci[11:0];
    end
    c.meta.l3_kind = h1_kind;

    // ---- IP
    total_len = 16'(be(h1_ip, 2, 2));
    plen = 16'(be(h1_ip, 4, 2));
    c.meta.ip_version = h1_ip[7:4];
    if (v4) begin
      c.meta.ip_dscp = h1_ip[15:10];
      c.meta.ip_ecn = h1_ip[9:8];
      c.meta.ip_length = total_len;
      c.meta.ip_id = 16'(be(h1_ip, 4, 2));
      c.meta.ip_flags = h1_ip[6*8+5 +: 3];
      c.meta.ip_frag_offset = {h1_ip[6*8 +: 5], h1_ip[7*8 +: 8]};
      c.meta.ip_ttl = h1_ip[8*8 +: 8];
      c.meta.ip_protocol = h1_ip[9*8 +: 8];
      c.meta.ip_checksum = 16'(be(h1_ip, 10, 2));
      c.meta.ip_src = 128'(be(h1_ip, 12, 4));
      c.meta.ip_dst = 128'(be(h1_ip, 16, 4));
      ip_end = l3 + OFS_W'(total_len);
    end else begin
      // IPv6 and GRH: version(4) tclass(8) flow label(20)
      c.meta.ip_dscp = {h1_ip[3:0], h1_ip[15:14]};
      c.meta.ip_ecn = h1_ip[13:12];
      c.meta.ip_flow_label = {h1_ip[11:8], h1_ip[23:16], h1_ip[31:24]};
      c.meta.ip_length = plen;
      c.meta.ip_protocol = h1_ip[6*8 +: 8];
      c.meta.ip_ttl = h1_ip[7*8 +: 8];
      c.meta.ip_src = be(h1_ip, 8, 16);
      c.meta.ip_dst = be(h1_ip, 24, 16);
      ip_end = l3 + OFS_W'(40) + OFS_W'(plen);
    end
    csum1 = {1'b0, h1_csum[15:0]} + 17'(h1_csum[19:16]);
    csum_fold = csum1[15:0] + 16'(csum1[16]);

    // ---- UDP
    udp_len = 16'(be({256'h0, h1_udp}, 4, 2));
    if (!grh) begin
      c.meta.udp_sport = 16'(be({256'h0, h1_udp}, 0, 2));
      c.meta.udp_dport = 16'(be({256'h0, h1_udp}, 2, 2));
      c.meta.udp_length = udp_len;
      c.meta.udp_checksum = 16'(be({256'h0, h1_udp}, 6, 2));
    end
    ip_payload = v4 ? total_len - 16'd20 : plen;
    // transport length: BTH .. ICRC inclusive
    tl = grh ? OFS_W'(plen) : OFS_W'(udp_len) - OFS_W'(8);

    // ---- BTH
    opcode = h1_bth[7:0];
    pad = h1_bth[13:12];
    oi = op_info(opcode);
    c.meta.bth_opcode = opcode;
    c.meta.bth_se = h1_bth[15];
    c.meta.bth_migreq = h1_bth[14];
    c.meta.bth_padcnt = pad;
    c.meta.bth_tver = h1_bth[11:8];
    c.meta.bth_pkey = 16'(be(h1_bth, 2, 2));
    c.meta.bth_fecn = h1_bth[4*8+7];
    c.meta.bth_becn = h1_bth[4*8+6];
    c.meta.bth_resv6 = h1_bth[4*8 +: 6];
    c.meta.bth_destqp = 24'(be(h1_bth, 5, 3));
    c.meta.bth_ackreq = h1_bth[8*8+7];
    c.meta.bth_resv7 = h1_bth[8*8 +: 7];
    c.meta.bth_psn = 24'(be(h1_bth, 9, 3));

    // ---- extended headers
    e = {96'h0, h1_bth[40*8-1:12*8]};
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
    ext_room = 17'(tl) - 17'd16 - 17'(oi.ext_len);
    c.meta.hdr_len = 6'd12 + oi.ext_len;
    c.meta.payload_offset = pay_start;
    c.meta.payload_len = 16'(pay_end - pay_start);

    // ---- checks, in header order
    short_l2 = h1_len_known && (h1_len < OFS_W'(14) || (h1_vlan && h1_len < OFS_W'(18)));
    need = l3 + (v4 ? OFS_W'(20) : OFS_W'(40));
    short_ip = h1_len_known && h1_len < need;
    short_udp = h1_len_known && !grh && h1_len < l4 + OFS_W'(8);

    pre_f = '0;
    pre_f[0] = short_l2;
    pre_f[1] = h1_kind == L3_NONE;
    pre_f[2] = short_ip;
    pre_f[3] = v4 ? c.meta.ip_version != 4'd4 : c.meta.ip_version != 4'd6;
    pre_f[4] = v4 && (h1_ip[3:0] != 4'd5 || total_len < 16'd20);
    pre_f[5] = v4 && csum_fold != 16'hFFFF;
    pre_f[6] = v4 && (h1_ip[6*8+5] || c.meta.ip_frag_offset != '0);
    pre_f[7] = v4 ? c.meta.ip_protocol != 8'd17 :
               v6 ? c.meta.ip_protocol != 8'd17 : c.meta.ip_protocol != 8'h1B;
    pre_f[8] = short_udp;
    pre_f[9] = !grh && c.meta.udp_dport != ROCE_UDP_PORT;
    pre_f[10] = !grh && (udp_len != ip_payload || udp_len < 16'd8);
    c.pre_err = first_err(pre_f, '{ERR_TRUNCATED_FRAME, ERR_UNSUPPORTED_ETHERTYPE,
        ERR_TRUNCATED_FRAME, ERR_BAD_IP_VERSION, ERR_BAD_IP_HEADER, ERR_BAD_IPV4_CHECKSUM,
        ERR_IP_FRAGMENT, ERR_NOT_UDP, ERR_TRUNCATED_FRAME, ERR_NOT_ROCE_UDP_PORT,
        ERR_LENGTH_MISMATCH, ERR_NONE, ERR_NONE, ERR_NONE, ERR_NONE, ERR_NONE});

    post_f = '0;
    post_f[0] = tl < OFS_W'(16);
    post_f[1] = tl[1:0] != 2'b00;
    post_f[2] = !oi.known;
    post_f[3] = c.meta.bth_tver != 4'd0;
    post_f[4] = ext_room[16];                      // negative: ext headers + ICRC do not fit
    post_f[5] = 17'(pad) > ext_room;
    c.post_err = first_err(post_f, '{ERR_TRUNCATED_BTH, ERR_UNALIGNED_LENGTH,
        ERR_UNKNOWN_OPCODE, ERR_UNSUPPORTED_TVER, ERR_TRUNCATED_EXT_HEADER,
        ERR_PAD_EXCEEDS_PAYLOAD, ERR_NONE, ERR_NONE, ERR_NONE, ERR_NONE, ERR_NONE,
        ERR_NONE, ERR_NONE, ERR_NONE, ERR_NONE, ERR_NONE});

    c.ip_end = ip_end;
    c.icrc_ofs = e_end;
    c.pay_start = pay_start;
    c.pay_end = pay_end;
    c.stream_en = c.pre_err == ERR_NONE && c.post_err == ERR_NONE &&
                  !(h1_len_known && h1_len < ip_end) && pay_end > pay_start;
    c.vlan = h1_vlan;
    c.kind = h1_kind;

    m_valid <= h1_valid;
    if (h1_valid) m_ctx <= c;
    if (rst) m_valid <= 1'b0;
  end

endmodule

`resetall
