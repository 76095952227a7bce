// SPDX-License-Identifier: MIT OR Apache-2.0
//
// dcb_pause_timers: PFC reception (IEEE 802.1Qbb): one pause timer per
// priority. A request of q quanta loads its priority's timer with q x 512
// bit times (0 ends the pause at once); every clock the timer counts down
// the link's bit times per clock (`bpc`, Q16.8, so any clock/rate ratio);
// the priority is paused while its timer is not zero and PFC is on for it.
// Requests for priorities without PFC are ignored (roce_core::dcb::
// PauseTimers).
//
// Timing: with a request in cycle t, the priority is paused in cycles t+1 to
// t + ceil(512 q / bpc): with an integer number of bit times per clock and a
// clock period of P ns, exactly ceil((512 q ns at the link rate) / P)
// cycles, the model's pause rounded up to the clock.

`resetall
`default_nettype none

module dcb_pause_timers
  import dcb_pkg::*;
(
    input  wire logic                        clk,
    input  wire logic                        rst,

    input  wire logic [NPRIO-1:0]            pfc_enable,
    input  wire logic [23:0]                 bpc,

    input  wire logic                        req_valid,
    input  wire logic [NPRIO-1:0]            req_enable,
    input  wire logic [NPRIO-1:0][15:0]      req_quanta,

    output logic [NPRIO-1:0]                 paused
);

  logic [NPRIO-1:0][BT_W-1:0] cnt;
  logic [BT_W-1:0]            step;
  assign step = BT_W'(bpc);

  always_ff @(posedge clk) begin
    for (int p = 0; p < NPRIO; p++) begin
      if (req_valid && req_enable[p] && pfc_enable[p]) begin
        // q x 512 bit times, Q.8
        cnt[p] <= {req_quanta[p], 9'b0, 8'b0};
      end else if (cnt[p] > step) begin
        cnt[p] <= cnt[p] - step;
      end else begin
        cnt[p] <= '0;
      end
    end
    if (rst) cnt <= '0;
  end

  always_comb begin
    for (int p = 0; p < NPRIO; p++) paused[p] = cnt[p] != '0 && pfc_enable[p];
  end

endmodule

`resetall
