// SPDX-License-Identifier: MIT OR Apache-2.0
//
// fp_resp_q: the fast path's response queue (docs/fastpath.md §3.4, "The
// order of the responses"; roce_firmware::fastpath::FastPathPort's ackq):
// the ACK and NAK descriptors and READ response descriptors the receive
// path queues (and the firmware's ACK descriptors), in order, for the
// planner (fp_tx_plan), which serves a READ's responses before the next
// entry. The receive path keeps taking frames while READ responses wait, so
// this queue does what the model's does with what it takes meanwhile:
//
// * an ACK or NAK of the receive path (AD_F_MERGE) queued while a READ
//   response descriptor waits (here, or held by the planner: rd_busy)
//   merges with the last entry still queued when that is an ACK or NAK of
//   the receive path of the same QP, as the model's push_ack and the
//   engine's one pending ACK (set_pending, ack_supersedes: the later PSN
//   wins, at equal PSNs a NAK replaces an ACK); else it goes behind;
// * a duplicate READ (drop_en, from fp_rx_check once every READ descriptor
//   it sent is here) drops the QP's READ response descriptors whose next PSN
//   is after the duplicate's (the model's drop_reads_after; the planner
//   drops the one it holds itself): a dropped entry stays in its place,
//   dead, and is skipped at the head;
// * an ATOMIC ACKNOWLEDGE of an atomic the receive path executed (AD_F_READ
//   and AD_F_ATOMIC) is ordered as a READ response descriptor (the model's
//   AtomicResp in its ackq): ACKs behind it queue behind, exceptions wait for
//   it, but a duplicate READ's drop leaves it;
// * reads_wait says a READ response descriptor is queued or held (the
//   receive path holds an exception frame while it is), rd_in that one came
//   in this cycle (the receive path counts those in flight to here);
// * rd_count is how many of QP cnt_qpn's READ response descriptors and ATOMIC
//   ACKNOWLEDGEs are queued (live) or held by the planner (rd_busy, its
//   rd_busy_qpn), as of the cycle before: what the engine's responder counts
//   in its `out` queue against max_dest_rd_atomic (check_op; the model's
//   own_responses), for the receive path's drop of a READ or atomic request
//   beyond it (docs/fastpath.md §3.4, "The responder's resources"). A
//   register: the receive path reads it in C4 of a packet whose QPN it set in
//   C1, and waits while a descriptor it sent may be missing from it.
//
// DEPTH entries of registers (a power of two); the entry at the head goes
// to the planner as an AXI stream, not in a cycle that drops (a READ the
// planner takes is then never missed by the drop).

`resetall
`default_nettype none

module fp_resp_q
  import fp_pkg::*;
#(
    parameter int DEPTH = 4
) (
    input  wire logic                      clk,
    input  wire logic                      rst,

    input  wire logic [RESPD_BYTES*8-1:0]  s_data,
    input  wire logic                      s_valid,
    output logic                           s_ready,

    output logic [RESPD_BYTES*8-1:0]       m_data,
    output logic                           m_valid,
    input  wire logic                      m_ready,

    // drop the READ response descriptors of QP drop_qpn whose next PSN is after drop_psn
    input  wire logic                      drop_en,
    input  wire logic [23:0]               drop_qpn,
    input  wire logic [23:0]               drop_psn,
    // the planner holds a READ response descriptor with responses to plan
    input  wire logic                      rd_busy,
    input  wire logic [23:0]               rd_busy_qpn,
    output logic                           reads_wait,
    output logic                           rd_in,
    input  wire logic [23:0]               cnt_qpn,
    output logic [7:0]                     rd_count
);

  localparam int P_W = $clog2(DEPTH);

  initial begin
    if (DEPTH < 2 || (DEPTH & (DEPTH - 1)) != 0) begin
      $error("fp_resp_q: DEPTH must be a power of two, at least 2 (got %0d)", DEPTH);
      $finish;
    end
  end

  logic [RESPD_BYTES*8-1:0] q [DEPTH];
  logic [DEPTH-1:0] live;
  logic [P_W-1:0] rp, wp;
  logic [P_W:0] cnt;

  // a READ response descriptor or an ATOMIC ACKNOWLEDGE (ordered as one), and the
  // READs alone (a duplicate READ drops no atomic's: the engine's `duplicate` drops
  // only READ items)
  logic [DEPTH-1:0] is_read, is_rd_only;
  always_comb for (int i = 0; i < DEPTH; i++) begin
    is_read[i] = q[i][8*AD_FLAGS + AD_F_READ];
    is_rd_only[i] = is_read[i] && !q[i][8*AD_FLAGS + AD_F_ATOMIC];
  end

  assign reads_wait = (live & is_read) != '0 || rd_busy;

  // QP cnt_qpn's READ response descriptors and ATOMIC ACKNOWLEDGEs
  logic [7:0] n_of;
  always_comb begin
    n_of = 8'(rd_busy && rd_busy_qpn == cnt_qpn);
    for (int i = 0; i < DEPTH; i++)
      n_of = n_of + 8'(live[i] && is_read[i] && q[i][8*AD_QPN +: 24] == cnt_qpn);
  end

  logic pop, skip, push;
  assign m_data = q[rp];
  assign m_valid = cnt != '0 && live[rp] && !drop_en;
  assign pop = m_valid && m_ready;
  // a dropped entry at the head goes without a transfer
  assign skip = cnt != '0 && !live[rp];
  assign s_ready = cnt != (P_W + 1)'(DEPTH);

  // the last entry still queued (live), scanning back from the tail
  logic found;
  logic [P_W-1:0] back;
  always_comb begin
    found = 1'b0;
    back = '0;
    for (int j = 0; j < DEPTH; j++) begin
      logic [P_W-1:0] ix;
      ix = wp - P_W'(j + 1);
      if (!found && (P_W + 1)'(j) < cnt && live[ix]) begin
        found = 1'b1;
        back = ix;
      end
    end
  end

  // an ACK or NAK of the receive path behind a READ: merged with the last entry
  // when that is one of the same QP's (not the one leaving in this cycle)
  logic s_merge, merge, supersedes;
  logic [RESPD_BYTES*8-1:0] b;
  assign b = q[back];
  assign s_merge = s_data[8*AD_FLAGS + AD_F_MERGE] && !s_data[8*AD_FLAGS + AD_F_READ];
  assign merge = s_merge && reads_wait && found && !(pop && back == rp)
      && b[8*AD_FLAGS + AD_F_MERGE] && !b[8*AD_FLAGS + AD_F_READ]
      && b[8*AD_QPN +: 24] == s_data[8*AD_QPN +: 24];
  // responder::ack_supersedes: a later PSN, or the same PSN over an ACK (syndrome 000xxxxx)
  assign supersedes = psn_diff(s_data[8*AD_PSN +: 24], b[8*AD_PSN +: 24]) > 0
      || (s_data[8*AD_PSN +: 24] == b[8*AD_PSN +: 24] && b[8*AD_SYNDROME + 5 +: 3] == 3'd0);
  assign push = s_valid && s_ready && !merge;
  assign rd_in = push && s_data[8*AD_FLAGS + AD_F_READ];

  always_ff @(posedge clk) begin
    if (drop_en) begin
      for (int i = 0; i < DEPTH; i++)
        if (live[i] && is_rd_only[i] && q[i][8*AD_QPN +: 24] == drop_qpn
            && psn_diff(q[i][8*AD_PSN +: 24], drop_psn) > 0)
          live[i] <= 1'b0;
    end
    if (pop || skip) begin
      live[rp] <= 1'b0;
      rp <= rp + 1'b1;
    end
    if (s_valid && s_ready && merge && supersedes) q[back] <= s_data;
    if (push) begin
      q[wp] <= s_data;
      live[wp] <= 1'b1;
      wp <= wp + 1'b1;
    end
    cnt <= cnt + (P_W + 1)'(push) - (P_W + 1)'(pop || skip);
    rd_count <= n_of;
    if (rst) begin
      live <= '0;
      rp <= '0;
      wp <= '0;
      cnt <= '0;
      rd_count <= '0;
    end
  end

endmodule

`resetall
