// SPDX-License-Identifier: MIT OR Apache-2.0
//
// soc_dma: copies bytes between host memory and the core's RAM for the
// firmware (MMIO block 0x1_0000; firmware/image/src/mmio.rs `dma_reg`).
//
// Registers (byte offsets): 0x00 HOST_ADDR_LO, 0x04 HOST_ADDR_HI,
// 0x08 LOCAL_ADDR (byte address in the core's RAM), 0x0C LEN (bytes),
// 0x10 CTRL (write: bit 0 start, bit 1 direction core RAM -> host),
// 0x14 STATUS (bit 0 busy, bit 1 the last transfer failed).
//
// Any alignment on either side: the engine walks the RAM side in aligned
// chunks (up to the next word boundary, then whole words, then the rest) and
// asks the host port for the same bytes at the matching host address. The
// host port carries 1 to 4 bytes per request in lanes 0..len-1 and answers
// each request (read data, or an error: no memory there) in a later cycle.
// A host error, or a RAM range outside the RAM, ends the transfer with the
// error bit. One request in flight: a word costs about 4 cycles.
//
// The RAM writes go around the core's data cache: after a transfer into RAM
// the firmware invalidates its data cache before reading the buffer.

`resetall
`default_nettype none

module soc_dma #(
    // bytes of the core's RAM
    parameter int RAM_BYTES = 524288,
    // RAM word address width (derived)
    parameter int AW = $clog2(RAM_BYTES / 4)
) (
    input  wire logic        clk,
    input  wire logic        rst,

    // firmware port (MMIO)
    input  wire logic        req,
    input  wire logic        we,
    input  wire logic [4:0]  addr,
    input  wire logic [31:0] wdata,
    output logic             ack,
    output logic [31:0]      rdata,

    // the core's RAM (takes priority over the data bus for the cycle)
    output logic             ram_en,
    output logic [3:0]       ram_we,
    output logic [AW-1:0]    ram_addr,
    output logic [31:0]      ram_wdata,
    input  wire logic [31:0] ram_rdata,

    // host memory
    output logic             host_req_valid,
    input  wire logic        host_req_ready,
    output logic             host_req_write,
    output logic [63:0]      host_req_addr,
    output logic [2:0]       host_req_len,
    output logic [31:0]      host_req_wdata,
    input  wire logic        host_rsp_valid,
    input  wire logic        host_rsp_error,
    input  wire logic [31:0] host_rsp_rdata,

    output logic             busy
);

  typedef enum logic [2:0] {
    S_IDLE,
    S_RD_LOCAL,
    S_RD_WAIT,
    S_HOST_REQ,
    S_HOST_RSP,
    S_WR_LOCAL
  } state_e;

  state_e      state;
  logic [63:0] host_addr;
  logic [31:0] local_addr;
  logic [31:0] len;
  logic        to_host;
  logic        error;
  logic [31:0] data;

  // the current chunk: from local_addr to the next word boundary, at most len
  logic [1:0] lane;
  logic [2:0] room, n;
  assign lane = local_addr[1:0];
  assign room = 3'd4 - {1'b0, lane};
  assign n = (len < {29'd0, room}) ? len[2:0] : room;

  // byte enables of the chunk within its RAM word
  logic [3:0] chunk_mask;
  always_comb begin
    chunk_mask = 4'b0000;
    for (int i = 0; i < 4; i++) begin
      if (3'(i) >= {1'b0, lane} && 3'(i) < {1'b0, lane} + n) chunk_mask[i] = 1'b1;
    end
  end

  // the RAM range is checked once, at the start
  logic range_ok;
  logic [32:0] local_end;
  assign local_end = {1'b0, local_addr} + {1'b0, len};
  assign range_ok = local_end <= 33'(RAM_BYTES);

  logic ctrl_write;
  assign ctrl_write = req && we && addr == 5'h10;

  always_ff @(posedge clk) begin
    ack <= req;
    rdata <= '0;
    if (req && !we) begin
      case (addr)
        5'h00: rdata <= host_addr[31:0];
        5'h04: rdata <= host_addr[63:32];
        5'h08: rdata <= local_addr;
        5'h0C: rdata <= len;
        5'h14: rdata <= {30'd0, error, state != S_IDLE};
        default: rdata <= '0;
      endcase
    end

    ram_en <= 1'b0;
    ram_we <= 4'b0;
    case (state)
      S_IDLE: begin
        if (req && we) begin
          case (addr)
            5'h00: host_addr[31:0] <= wdata;
            5'h04: host_addr[63:32] <= wdata;
            5'h08: local_addr <= wdata;
            5'h0C: len <= wdata;
            default: ;
          endcase
        end
        if (ctrl_write && wdata[0]) begin
          to_host <= wdata[1];
          error <= 1'b0;
          if (!range_ok) error <= 1'b1;
          else if (len != 0) begin
            if (wdata[1]) begin
              state <= S_RD_LOCAL;
              ram_en <= 1'b1;
              ram_addr <= local_addr[AW+1:2];
            end else begin
              state <= S_HOST_REQ;
            end
          end
        end
      end
      S_RD_LOCAL: state <= S_RD_WAIT;  // the RAM answers in this cycle
      S_RD_WAIT: begin
        data <= ram_rdata >> (8 * lane);
        state <= S_HOST_REQ;
      end
      S_HOST_REQ: begin
        if (host_req_ready) state <= S_HOST_RSP;
      end
      S_HOST_RSP: begin
        if (host_rsp_valid) begin
          if (host_rsp_error) begin
            error <= 1'b1;
            state <= S_IDLE;
          end else if (!to_host) begin
            state <= S_WR_LOCAL;
            ram_en <= 1'b1;
            ram_we <= chunk_mask;
            ram_addr <= local_addr[AW+1:2];
            ram_wdata <= host_rsp_rdata << (8 * lane);
          end else begin
            state <= S_IDLE;  // advanced below
          end
        end
      end
      S_WR_LOCAL: state <= S_IDLE;  // advanced below
      default: state <= S_IDLE;
    endcase

    // a chunk is done: the write to RAM went out, or the host took the bytes
    if (state == S_WR_LOCAL || (state == S_HOST_RSP && host_rsp_valid &&
                                !host_rsp_error && to_host)) begin
      host_addr <= host_addr + 64'(n);
      local_addr <= local_addr + 32'(n);
      len <= len - 32'(n);
      if (len != 32'(n)) begin
        if (to_host) begin
          state <= S_RD_LOCAL;
          ram_en <= 1'b1;
          ram_addr <= local_addr[AW+1:2] + 1'b1;
        end else begin
          state <= S_HOST_REQ;
        end
      end else begin
        state <= S_IDLE;
      end
    end

    if (rst) begin
      state <= S_IDLE;
      error <= 1'b0;
      ack <= 1'b0;
      ram_en <= 1'b0;
      ram_we <= 4'b0;
    end
  end

  assign host_req_valid = state == S_HOST_REQ;
  assign host_req_write = to_host;
  assign host_req_addr = host_addr;
  assign host_req_len = n;
  assign host_req_wdata = data;
  assign busy = state != S_IDLE;

endmodule

`resetall
