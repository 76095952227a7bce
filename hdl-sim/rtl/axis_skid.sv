// SPDX-License-Identifier: MIT OR Apache-2.0
//
// axis_skid: AXI-stream register slice with a skid register (Corundum's
// axis_register, REG_TYPE 2). Every output is a register; s_ready is a
// register too, so no combinational path runs from m_ready to s_ready.
// Full throughput: one transfer per cycle in steady state.

`resetall
`default_nettype none

module axis_skid #(
    // payload width, bits (tdata, tkeep, tlast, tuser... packed by the caller)
    parameter int WIDTH = 8
) (
    input  wire logic             clk,
    input  wire logic             rst,

    input  wire logic [WIDTH-1:0] s_data,
    input  wire logic             s_valid,
    output logic                  s_ready,

    output logic [WIDTH-1:0]      m_data,
    output logic                  m_valid,
    input  wire logic             m_ready
);

  logic [WIDTH-1:0] temp_data;
  logic             temp_valid;

  // accept next cycle if the output moves now, or nothing is parked and the
  // output register would not fill up
  logic s_ready_early;
  assign s_ready_early = m_ready || (!temp_valid && (!m_valid || !s_valid));

  always_ff @(posedge clk) begin
    s_ready <= s_ready_early;
    if (s_ready) begin
      // data registers load only with valid data (less switching)
      if (m_ready || !m_valid) begin
        if (s_valid) m_data <= s_data;
        m_valid <= s_valid;
      end else begin
        if (s_valid) temp_data <= s_data;
        temp_valid <= s_valid;
      end
    end else if (m_ready) begin
      m_data <= temp_data;
      m_valid <= temp_valid;
      temp_valid <= 1'b0;
    end
    if (rst) begin
      s_ready <= 1'b0;
      m_valid <= 1'b0;
      temp_valid <= 1'b0;
    end
  end

endmodule

`resetall
