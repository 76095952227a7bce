#!/usr/bin/env bash
# Builds and runs the bench of soc_fp's DMA bridge (tb.sv) with Verilator, with the host
# answering 1 and 3 cycles after each request. Prints the cycles taken; exits non-zero
# when a check failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rtl="$here/../../rtl"
out=${TMPDIR:-/tmp}/soc_fp_dma_tb
for lat in 1 3; do
    rm -rf "$out/$lat"
    mkdir -p "$out/$lat"
    verilator --cc --exe --build -j 2 --Mdir "$out/$lat" -Wno-fatal -Wno-UNUSEDSIGNAL \
        -Wno-PINCONNECTEMPTY -Wno-WIDTH --top-module tb -GLAT=$lat \
        "$rtl/roce_rx_pkg.sv" "$rtl/fp_pkg.sv" "$here/stub_fp_top.sv" "$rtl/soc/soc_fp.sv" \
        "$here/tb.sv" "$here/main.cpp" -CFLAGS -O0 >/dev/null
    echo "host latency $lat: $("$out/$lat/Vtb")"
done
