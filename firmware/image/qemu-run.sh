#!/usr/bin/env bash
# Cargo runner: boots a riscv32 ELF in QEMU `virt` and decodes its defmt log.
#
#   qemu-run.sh ELF [ARGS...]        (ARGS are ignored: the image takes none)
#
# QEMU: `qemu-system-riscv32` from PATH, else `<repo root>/target/tools/qemu/usr/bin/`
# (where `cargo xtask install` puts it). defmt-print: PATH, else ~/.cargo/bin.
# `-icount shift=0` makes the run deterministic (1 instruction = 1 ns of virtual time)
# and makes `minstret` count instructions (without it QEMU 7.2 returns host ticks).
# The image exits through semihosting; this script exits with QEMU's status (the
# image's exit code), or 124 when QEMU_TIMEOUT (seconds, default 60) runs out.
set -u -o pipefail

elf=${1:?usage: qemu-run.sh ELF}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

qemu=$(command -v qemu-system-riscv32 || true)
if [ -z "$qemu" ] && [ -x "$repo/target/tools/qemu/usr/bin/qemu-system-riscv32" ]; then
    qemu="$repo/target/tools/qemu/usr/bin/qemu-system-riscv32"
fi
if [ -z "$qemu" ]; then
    echo "qemu-run.sh: qemu-system-riscv32 not on PATH nor in $repo/target/tools/qemu/usr/bin (run: cargo xtask install)" >&2
    exit 127
fi

decoder=$(command -v defmt-print || true)
if [ -z "$decoder" ] && [ -x "$HOME/.cargo/bin/defmt-print" ]; then
    decoder="$HOME/.cargo/bin/defmt-print"
fi

qemu_cmd=(timeout "${QEMU_TIMEOUT:-60}" "$qemu" -machine virt -cpu rv32 -bios none
    -display none -monitor none -serial none -icount shift=0
    -semihosting-config enable=on,target=native -kernel "$elf")

if grep -q _defmt_acquire "$elf"; then
    if [ -z "$decoder" ]; then
        echo "qemu-run.sh: defmt-print not found (cargo install defmt-print --locked)" >&2
        exit 127
    fi
    "${qemu_cmd[@]}" | "$decoder" -e "$elf"
    status=("${PIPESTATUS[@]}")
    if [ "${status[1]}" -ne 0 ] && [ "${status[0]}" -eq 0 ]; then
        echo "qemu-run.sh: defmt-print failed (status ${status[1]})" >&2
        exit "${status[1]}"
    fi
    exit "${status[0]}"
else
    exec "${qemu_cmd[@]}"
fi
