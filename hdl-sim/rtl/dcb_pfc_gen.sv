// SPDX-License-Identifier: MIT OR Apache-2.0
//
// dcb_pfc_gen: PFC generation from a receive buffer's occupancy per
// priority (roce_core::dcb::PfcGen). The buffer reports the bytes of each
// frame that enters (`add`) and leaves (`sub`); after each change the
// priority's state follows its new count: a lossless priority (PFC on) above
// `xoff` becomes XOFF, an XOFF one at or below `xon` becomes XON, and either
// change is to be announced. The transmitter takes the announcement (`take`:
// it latches `announce` and `xoff` into a PFC frame and starts sending it),
// which clears the announced bits and, while some priority is XOFF, arms the
// refresh: after half the pause time (q x 256 bit times) every XOFF priority
// is announced again, so the link partner never resumes while the buffer
// stays full even if one frame is lost.
//
// The compare is registered: a count changes in one cycle (`bytes`, and
// `changed` marks the priority) and the new count is compared with the
// thresholds in the next, so XOFF/XON and the announcement follow a frame's
// accounting one cycle later than the count. Adding, saturating, removing
// and comparing in one cycle was the DCB block's slowest path (11.84 ns,
// 84.5 MHz in the SoC, BENCHMARKS.md); the cycle's delay is nothing next to
// the headroom (a 4 KiB frame takes 512 cycles at 64 bits).
//
// Order within a cycle (the model's, for the differential test: DcbLockstep
// feeds roce_core::dcb::PfcGen the count changes a cycle late): the take,
// then the refresh timer (a take reloads it, so it does not also fire), then
// the compare of the counts changed in the cycle before.

`resetall
`default_nettype none

module dcb_pfc_gen
  import dcb_pkg::*;
(
    input  wire logic                      clk,
    input  wire logic                      rst,

    input  wire logic [NPRIO-1:0]          lossless,
    input  wire logic [BYTES_W-1:0]        xoff_thr,
    input  wire logic [BYTES_W-1:0]        xon_thr,
    input  wire logic [15:0]               quanta,
    input  wire logic [23:0]               bpc,

    input  wire logic                      add_valid,
    input  wire logic [2:0]                add_prio,
    input  wire logic [15:0]               add_len,
    input  wire logic                      sub_valid,
    input  wire logic [2:0]                sub_prio,
    input  wire logic [15:0]               sub_len,

    input  wire logic                      take,
    output logic [NPRIO-1:0]               announce,
    output logic [NPRIO-1:0]               xoff,
    output logic                           refresh_fire
);

  logic [NPRIO-1:0][BYTES_W-1:0] bytes;
  logic [NPRIO-1:0]              changed;  // bytes[p] changed last cycle: compare it
  logic [BT_W-1:0]               refresh;
  logic [BT_W-1:0]               step;
  assign step = BT_W'(bpc);
  assign refresh_fire = !take && refresh != '0 && refresh <= step;

  always_ff @(posedge clk) begin
    logic [NPRIO-1:0] ann, xo;
    logic [BYTES_W:0] b;
    logic [BYTES_W+1:0] d;
    ann = announce;
    xo = xoff;
    // the take
    if (take) begin
      ann = '0;
      // q x 256 bit times (half the pause), Q.8
      refresh <= xoff != '0 ? {1'b0, quanta, 8'b0, 8'b0} : '0;
    end else if (refresh_fire) begin
      refresh <= '0;
      ann = ann | xoff;
    end else if (refresh != '0) begin
      refresh <= refresh - step;
    end
    // the compare of the counts changed in the cycle before
    for (int p = 0; p < NPRIO; p++) begin
      if (changed[p]) begin
        if (xo[p]) begin
          if (bytes[p] <= xon_thr) begin
            xo[p] = 1'b0;
            ann[p] = 1'b1;
          end
        end else if (lossless[p] && bytes[p] > xoff_thr) begin
          xo[p] = 1'b1;
          ann[p] = 1'b1;
        end
      end
    end
    // the count changes
    for (int p = 0; p < NPRIO; p++) begin
      logic up, down;
      up = add_valid && add_prio == 3'(p);
      down = sub_valid && sub_prio == 3'(p);
      changed[p] <= up || down;
      if (up || down) begin
        // saturating add, then a subtraction whose borrow clamps at zero (two
        // carry chains; the model's saturating_add / saturating_sub)
        b = {1'b0, bytes[p]} + (up ? (BYTES_W+1)'(add_len) : '0);
        if (b[BYTES_W]) b = (BYTES_W+1)'({BYTES_W{1'b1}});
        d = {1'b0, b} - (down ? (BYTES_W+2)'(sub_len) : '0);
        bytes[p] <= d[BYTES_W+1] ? '0 : d[BYTES_W-1:0];
      end
    end
    announce <= ann;
    xoff <= xo;
    if (rst) begin
      bytes <= '0;
      changed <= '0;
      refresh <= '0;
      announce <= '0;
      xoff <= '0;
    end
  end

endmodule

`resetall
