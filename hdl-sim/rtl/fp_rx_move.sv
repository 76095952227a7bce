// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_rx_move: carries out fp_rx_check's verdicts, frame by frame in order:
// the payload of a placed packet goes to the DMA write interface as the
// verdict's pieces (one for a request; a READ response's, one per SGE piece:
// each a descriptor and its data, the data realigned so each write starts at
// byte 0 of its first beat; an ATOMIC ACKNOWLEDGE's, the verdict's 8 bytes
// of original value instead of a payload, and so an atomic request's new
// value, fp_rx_check's), the whole frame of an exception goes to the
// firmware's frame stream, and both are dropped from their FIFOs otherwise.
// The verdict's event (EXCEPTION after its frame, MSG_DONE after the payload
// of the SEND's last packet) and ACK descriptor leave when the frame is done,
// so nothing is announced before its data; a READ's response descriptor
// also waits until the DMA writes before it have left (the responder reads
// what a WRITE before the READ wrote).
//
// A frame takes as many cycles as it has beats (the frame and its payload
// leave their FIFOs side by side), plus at most one per piece after the
// first, and the next verdict is taken in the cycle the previous one
// finishes: the mover keeps up with a line-rate input. The realignment holds
// up to two beats of payload (`buf`, `bc` bytes): a beat comes in while it
// holds at most one, and a piece's beat goes out as soon as its bytes are in
// (with a single piece, in the cycle its input beat arrives).
// Every output goes through an axis_skid; `en`, the AND of their registered
// s_ready, moves everything.

`resetall
`default_nettype none

module fp_rx_move
  import fp_pkg::*;
#(
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8
) (
    input  wire logic                    clk,
    input  wire logic                    rst,

    input  fp_rx_verdict_t               s_verdict,
    input  wire logic                    s_verdict_valid,
    output logic                         s_verdict_pop,

    input  wire logic [DATA_WIDTH-1:0]   s_raw_tdata,
    input  wire logic [KEEP_WIDTH-1:0]   s_raw_tkeep,
    input  wire logic                    s_raw_tlast,
    input  wire logic                    s_raw_tvalid,
    output logic                         s_raw_pop,

    input  wire logic [DATA_WIDTH-1:0]   s_pay_tdata,
    input  wire logic [KEEP_WIDTH-1:0]   s_pay_tkeep,
    input  wire logic                    s_pay_tlast,
    input  wire logic                    s_pay_tvalid,
    output logic                         s_pay_pop,

    output logic [63:0]                  m_dma_wr_desc_addr,
    output logic [15:0]                  m_dma_wr_desc_len,
    output logic                         m_dma_wr_desc_valid,
    input  wire logic                    m_dma_wr_desc_ready,

    output logic [DATA_WIDTH-1:0]        m_dma_wr_tdata,
    output logic [KEEP_WIDTH-1:0]        m_dma_wr_tkeep,
    output logic                         m_dma_wr_tvalid,
    input  wire logic                    m_dma_wr_tready,
    output logic                         m_dma_wr_tlast,

    output logic [DATA_WIDTH-1:0]        m_exc_tdata,
    output logic [KEEP_WIDTH-1:0]        m_exc_tkeep,
    output logic                         m_exc_tvalid,
    input  wire logic                    m_exc_tready,
    output logic                         m_exc_tlast,

    output logic [EV_BYTES*8-1:0]        m_ev_data,
    output logic                         m_ev_valid,
    input  wire logic                    m_ev_ready,

    output logic [RESPD_BYTES*8-1:0]     m_ack_data,
    output logic                         m_ack_valid,
    input  wire logic                    m_ack_ready,

    // no verdict in progress and nothing waiting in the output slices
    output logic                         idle
);

  logic desc_ready, wr_ready, exc_ready, ev_ready, ack_ready;
  logic en;
  assign en = desc_ready && wr_ready && exc_ready && ev_ready && ack_ready;

  localparam int W = KEEP_WIDTH;        // bytes per beat
  localparam int BC_W = $clog2(2 * W) + 1;

  logic           active, raw_done, pay_done;
  /* verilator lint_off UNUSEDSIGNAL */
  fp_rx_verdict_t v;      // has_stream is used as the verdict is taken
  /* verilator lint_on UNUSEDSIGNAL */
  logic           place;
  assign place = v.action == ACT_PLACE;

  // the pieces: `pi` the one whose data goes out (`pr` bytes of it left),
  // `dq` descriptors sent
  logic [2:0]            pi, dq;
  logic [15:0]           pr;
  logic [2*DATA_WIDTH-1:0] buf_q;
  logic [BC_W-1:0]       bc;

  function automatic logic [KEEP_WIDTH-1:0] keep_of(input logic [15:0] n);
    logic [KEEP_WIDTH-1:0] k;
    for (int i = 0; i < KEEP_WIDTH; i++) k[i] = 16'(i) < n;
    return k;
  endfunction

  function automatic logic [BC_W-1:0] count_of(input logic [KEEP_WIDTH-1:0] k);
    logic [BC_W-1:0] c;
    c = '0;
    for (int i = 0; i < KEEP_WIDTH; i++) c = c + BC_W'(k[i]);
    return c;
  endfunction

  logic raw_go, pay_go, raw_end, pay_end, finish;
  logic [15:0] want;              // the current piece's next beat: its bytes
  logic [2*DATA_WIDTH-1:0] in_bytes, vb;
  logic [BC_W-1:0] vc;
  logic emit, emit_last, pieces_end, desc_go, descs_end;
  always_comb begin
    raw_go = en && active && !raw_done && s_raw_tvalid;
    // a placed payload comes in while the realignment holds at most a beat
    pay_go = en && active && !pay_done && s_pay_tvalid && (!place || bc <= BC_W'(W));
    for (int i = 0; i < KEEP_WIDTH; i++)
      in_bytes[8*i +: 8] = s_pay_tkeep[i] ? s_pay_tdata[8*i +: 8] : 8'd0;
    in_bytes[2*DATA_WIDTH-1:DATA_WIDTH] = '0;
    vb = buf_q | (pay_go ? in_bytes << (8 * bc) : '0);
    vc = bc + (pay_go ? count_of(s_pay_tkeep) : '0);
    want = pr < 16'(W) ? pr : 16'(W);
    emit = en && active && place && pi < v.np && {{(16 - BC_W){1'b0}}, vc} >= want;
    emit_last = emit && pr == want;
    pieces_end = !place || pi == v.np || (emit_last && pi + 3'd1 == v.np);
    desc_go = en && active && place && dq < v.np;
    descs_end = !place || dq == v.np || (desc_go && dq + 3'd1 == v.np);
    raw_end = raw_done || (raw_go && s_raw_tlast);
    pay_end = pay_done || (pay_go && s_pay_tlast);
    // A READ's response descriptor leaves once the DMA writes before it have left
    // (the host took their descriptors and last beats): the responder reads what
    // a WRITE before the READ wrote, however slowly the host takes writes.
    finish = en && active && raw_end && pay_end && pieces_end && descs_end &&
             !(v.ack_valid && v.ackd[8*AD_FLAGS + AD_F_READ] &&
               (m_dma_wr_desc_valid || m_dma_wr_tvalid));
  end
  assign s_raw_pop = raw_go;
  assign s_pay_pop = pay_go;
  assign s_verdict_pop = s_verdict_valid && en && (!active || finish);
  assign idle = !active && !m_dma_wr_desc_valid && !m_dma_wr_tvalid && !m_exc_tvalid &&
                !m_ev_valid && !m_ack_valid;

  always_ff @(posedge clk) begin
    if (en) begin
      if (raw_go && s_raw_tlast) raw_done <= 1'b1;
      if (pay_go && s_pay_tlast) pay_done <= 1'b1;
      if (desc_go) dq <= dq + 3'd1;
      buf_q <= emit ? vb >> (8 * want) : vb;
      bc <= vc - (emit ? BC_W'(want) : '0);
      if (emit) begin
        pr <= pr - want;
        if (emit_last) begin
          pi <= pi + 3'd1;
          pr <= (pi < 3'(SG_N - 1)) ? v.p_len[2'(pi + 3'd1)] : 16'd0;
        end
      end
      if (finish) active <= 1'b0;
      if (s_verdict_pop) begin
        active <= 1'b1;
        v <= s_verdict;
        raw_done <= 1'b0;
        pay_done <= !s_verdict.has_stream;
        pi <= '0;
        pr <= s_verdict.p_len[0];
        dq <= '0;
        // an ATOMIC ACKNOWLEDGE's pieces carry its original value (it has no
        // payload): its 8 bytes wait in the realignment buffer from the start
        buf_q <= s_verdict.atomic ? {{(2 * DATA_WIDTH - 64){1'b0}}, s_verdict.orig} : '0;
        bc <= s_verdict.atomic ? BC_W'(8) : '0;
      end
    end
    if (rst) active <= 1'b0;
  end

  axis_skid #(
    .WIDTH(64 + 16)
  ) desc_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data({v.p_len[dq[1:0]], v.p_addr[dq[1:0]]}),
    .s_valid(desc_go),
    .s_ready(desc_ready),
    .m_data({m_dma_wr_desc_len, m_dma_wr_desc_addr}),
    .m_valid(m_dma_wr_desc_valid),
    .m_ready(m_dma_wr_desc_ready)
  );

  axis_skid #(
    .WIDTH(DATA_WIDTH + KEEP_WIDTH + 1)
  ) wr_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data({emit_last, keep_of(want), vb[DATA_WIDTH-1:0]}),
    .s_valid(emit),
    .s_ready(wr_ready),
    .m_data({m_dma_wr_tlast, m_dma_wr_tkeep, m_dma_wr_tdata}),
    .m_valid(m_dma_wr_tvalid),
    .m_ready(m_dma_wr_tready)
  );

  axis_skid #(
    .WIDTH(DATA_WIDTH + KEEP_WIDTH + 1)
  ) exc_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data({s_raw_tlast, s_raw_tkeep, s_raw_tdata}),
    .s_valid(raw_go && v.action == ACT_EXC),
    .s_ready(exc_ready),
    .m_data({m_exc_tlast, m_exc_tkeep, m_exc_tdata}),
    .m_valid(m_exc_tvalid),
    .m_ready(m_exc_tready)
  );

  axis_skid #(
    .WIDTH(EV_BYTES * 8)
  ) ev_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data(v.ev),
    .s_valid(finish && v.ev_valid),
    .s_ready(ev_ready),
    .m_data(m_ev_data),
    .m_valid(m_ev_valid),
    .m_ready(m_ev_ready)
  );

  axis_skid #(
    .WIDTH(RESPD_BYTES * 8)
  ) ack_skid_inst (
    .clk(clk),
    .rst(rst),
    .s_data(v.ackd),
    .s_valid(finish && v.ack_valid),
    .s_ready(ack_ready),
    .m_data(m_ack_data),
    .m_valid(m_ack_valid),
    .m_ready(m_ack_ready)
  );

endmodule

`resetall
