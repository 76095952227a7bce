#!/usr/bin/env bash
# Runs the bench of the WQE fetch alone (tb.sv, fp_sqf.sv) with Icarus Verilog (>= 11:
# it compiles in seconds, where a Verilator model of it takes minutes). Not in CI.
# MUTANT=lkey runs it on an fp_sqf whose L_Key check accepts every key, MUTANT=cqe on
# one that keeps every ACKED of a queue it holds, its CQEs written or not (the bench must
# fail both). Prints PASS or the failed checks; exits non-zero on a failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rtl="$here/../../rtl"
out=${TMPDIR:-/tmp}/fp_sqf_tb
mkdir -p "$out"
# (Icarus does not parse `signed'(...)` in fp_pkg's psn_diff; $signed is the same)
sed "s/return signed'(a - b);/return \$signed(a - b);/" "$rtl/fp_pkg.sv" > "$out/fp_pkg.sv"
cp "$rtl/fp_sqf.sv" "$out/fp_sqf.sv"
case "${MUTANT:-}" in
    lkey)
        sed -i 's/    mr_ids = mr_key != 0 \&\& /    mr_ids = 1 || mr_key != 0 \&\& /' "$out/fp_sqf.sv"
        grep -q "mr_ids = 1 ||" "$out/fp_sqf.sv" ;;
    cqe)
        sed -i 's/ \&\& s_ev_data\[8\*EV_RFLAGS + 2\];/;/' "$out/fp_sqf.sv"
        ! grep -q "s_ev_data\[8\*EV_RFLAGS + 2\]" "$out/fp_sqf.sv" ;;
    "") ;;
    *) echo "MUTANT: lkey or cqe" >&2; exit 2 ;;
esac
iverilog -g2012 -o "$out/tb.vvp" -s tb "$out/fp_pkg.sv" "$rtl/roce_ram.sv" "$rtl/roce_first_set.sv" "$rtl/fp_mr_copy.sv" "$out/fp_sqf.sv" \
    "$here/tb.sv" 2> >(grep -v "sorry: constant selects" >&2)
result=$(vvp -n "$out/tb.vvp" | grep -E "PASS|FAIL|cycles")
echo "$result"
[ "$(echo "$result" | tail -1)" = PASS ]
