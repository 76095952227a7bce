// SPDX-License-Identifier: MIT OR Apache-2.0
//
// dcb_ets: transmission selection (IEEE 802.1Qaz ETS) over the eight
// priority queues of a port, decision for decision the model's
// (roce_core::dcb::Ets): among the eligible classes (a whole frame queued,
// not paused) the highest strict-priority one; else the ETS class with the
// smallest service tag relative to the virtual time (ties: the higher
// priority). Sending `len` bytes of ETS class p sets the virtual time to p's
// tag and adds len x cost[p] to it (cost = COST_ONE / share); every class
// that was not eligible is brought up to the virtual time (no credit for
// idle or paused time). Strict grants leave the tags alone.
//
// One decision per `req`: the eligible set is taken in the request's cycle
// (D0: tags relative to the virtual time, the strict winner), a three-level
// minimum tree runs over D1..D3 and `grant_valid` pulses in D3; the charge
// (multiply, then add and catch-up) takes two more cycles, during which
// `busy` stays high. Every stage is one comparison or one adder deep.

`resetall
`default_nettype none

module dcb_ets
  import dcb_pkg::*;
(
    input  wire logic                       clk,
    input  wire logic                       rst,

    input  wire logic [NPRIO-1:0]           strict,
    input  wire logic [NPRIO-1:0][COST_W-1:0] cost,

    input  wire logic                       req,
    input  wire logic [NPRIO-1:0]           eligible,
    // length of the frame at the head of each queue (read at the grant)
    input  wire logic [NPRIO-1:0][15:0]     head_len,

    output logic                            busy,
    output logic                            grant_valid,
    output logic [2:0]                      grant_prio,
    output logic [15:0]                     grant_len
);

  typedef struct packed {
    logic             valid;
    logic [TAG_W-1:0] key;
    logic [2:0]       prio;
  } cand_t;

  // a beats b: valid, and a smaller key, or an equal key and a higher priority
  function automatic cand_t best(input cand_t a, input cand_t b);
    if (!b.valid) return a;
    if (!a.valid) return b;
    if (a.key < b.key || (a.key == b.key && a.prio > b.prio)) return a;
    return b;
  endfunction

  logic [NPRIO-1:0][TAG_W-1:0] tag;
  logic [TAG_W-1:0]            vtime;

  logic [4:0]          stage;      // D1, D2, D3 (grant), C0, C1
  logic [NPRIO-1:0]    elig_q;
  logic                strict_hit;
  logic [2:0]          strict_prio;
  cand_t               l0 [NPRIO];
  cand_t               l1 [4];
  cand_t               l2 [2];
  logic [2:0]          win;
  logic                win_ets;
  logic [15:0]         win_len;
  logic [TAG_W-1:0]    charge;
  /* verilator lint_off UNUSEDSIGNAL */
  cand_t               w3;          // the ETS winner of D3 (its key is spent)
  /* verilator lint_on UNUSEDSIGNAL */
  logic [2:0]          pick;
  assign w3 = best(l2[1], l2[0]);
  assign pick = strict_hit ? strict_prio : w3.prio;

  assign busy = stage != '0;

  always_ff @(posedge clk) begin
    stage <= {stage[3:0], req && !busy};
    grant_valid <= 1'b0;
    // D0: the eligible set, each ETS class's tag relative to the virtual time,
    // the strict winner
    if (req && !busy) begin
      elig_q <= eligible;
      strict_hit <= (eligible & strict) != '0;
      for (int p = 0; p < NPRIO; p++) begin
        if (eligible[p] && strict[p]) strict_prio <= 3'(p);
        l0[p] <= '{valid: eligible[p] && !strict[p], key: tag[p] - vtime, prio: 3'(p)};
      end
    end
    // D1, D2: minimum tree
    if (stage[0]) for (int i = 0; i < 4; i++) l1[i] <= best(l0[2*i+1], l0[2*i]);
    if (stage[1]) for (int i = 0; i < 2; i++) l2[i] <= best(l1[2*i+1], l1[2*i]);
    // D3: the grant
    if (stage[2]) begin
      win <= pick;
      win_ets <= !strict_hit;
      win_len <= head_len[pick];
      grant_valid <= 1'b1;
      grant_prio <= pick;
      grant_len <= head_len[pick];
    end
    // charge: the product, then the tags
    if (stage[3]) charge <= TAG_W'(win_len * cost[win]);
    if (stage[4] && win_ets) begin
      vtime <= tag[win];
      for (int q = 0; q < NPRIO; q++) begin
        if (3'(q) == win) tag[q] <= tag[q] + charge;
        else if (!elig_q[q] && $signed(tag[q] - tag[win]) < 0) tag[q] <= tag[win];
      end
    end
    if (rst) begin
      stage <= '0;
      grant_valid <= 1'b0;
      tag <= '0;
      vtime <= '0;
    end
  end

endmodule

`resetall
