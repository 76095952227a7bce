// SPDX-License-Identifier: MIT OR Apache-2.0
// The clock of ./tb.sv; exits 1 when a check failed.

#include "Vtb.h"
#include "verilated.h"
#include <cstdio>
extern "C" int check_writes();
int main(int argc, char** argv) {
  Verilated::commandArgs(argc, argv);
  Vtb* m = new Vtb;
  m->rst = 1; m->clk = 0;
  for (int i = 0; i < 10; i++) { m->clk = 0; m->eval(); m->clk = 1; m->eval(); }
  m->rst = 0;
  long c = 0;
  for (; c < 200000 && !m->done; c++) { m->clk = 0; m->eval(); m->clk = 1; m->eval(); }
  for (int i = 0; i < 20; i++) { m->clk = 0; m->eval(); m->clk = 1; m->eval(); }
  svSetScope(svGetScopeFromName("TOP.tb"));
  int bad = check_writes();
  const bool done = m->done;
  printf("cycles %ld done %d engine reads %u bad write bytes %d\n", c, m->done, m->e_reads, bad);
  delete m;
  return (done && bad == 0 && !Verilated::gotError()) ? 0 : 1;
}
