#!/usr/bin/env bash
# Builds the firmware for every board and writes its memory images for FPGA flows:
#
#   ./make-images.sh [OUT_DIR]          (default: target/images)
#
# For each board (src/boards.rs), OUT_DIR/BOARD/ gets, for the `firmware` binary (and on
# qemu-virt also the `selftest`, whose static host-memory buffer and boot stack do not fit
# the soft-core board's 512 KiB),
#   BIN.elf       the linked ELF (keep it: defmt-print needs it to decode logs)
#   BIN.bin       raw memory image from the board's RAM origin (what a loader writes)
#   BIN.hex       the same as $readmemh text: one 32-bit little-endian word per line
#   BIN.size.txt  sections and sizes (code, read-only data, static RAM)
#   BIN.sources.txt  the sources it was built from, file by file (`elf2img --sources`):
#                 the SoC model refuses an image whose sources differ from the checkout's
# The images do not depend on where the checkout is (source paths are remapped).
# The .bin/.hex cover code, read-only data and initialised data; .bss and the stack
# are cleared by the start-up code. The `firmware` images are for the soft core
# (VexRiscv RV32IMAC without AMOs, hdl-sim/rtl/soc/): the script fails, naming them,
# if their code holds an instruction that core lacks (`elf2img --check-isa`).
# Needs only cargo: the ELF converter is a std-only
# Rust tool in tools/elf2img, built here for the host.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
out=${1:-target/images}
host=$(rustc -vV | sed -n 's/^host: //p')

# The same image from any checkout (byte for byte): with the checkout's absolute path in
# it the image's layout, and so its timing against the RTL, would differ from clone to
# clone. Two places take that path: panic locations (source file names: remapped, as is
# cargo's home), and the symbol names of roce-core and roce-firmware, path dependencies
# outside this workspace whose absolute path cargo hashes into them (rust-lang/cargo
# issue 13586), which orders the code after LTO. So cargo reads the workspace through one
# fixed path, a symbolic link to this checkout, under a lock: other checkouts on the
# machine point it elsewhere. The remap flags go through `--config`, which joins the
# target's rustflags in .cargo/config.toml (RUSTFLAGS would replace them).
root=$(cd "$here/../.." && pwd)
cargo_home=${CARGO_HOME:-$HOME/.cargo}
link=/tmp/roce-firmware-src
exec 9>"$link.lock"
flock 9
ln -sfnT "$root" "$link"
manifest=(--manifest-path "$link/firmware/image/Cargo.toml")
remap=(--config "target.riscv32imac-unknown-none-elf.rustflags=[\"--remap-path-prefix=$link=.\", \"--remap-path-prefix=$root=.\", \"--remap-path-prefix=$cargo_home=cargo-home\"]")

# The image's .cargo/config.toml targets riscv32; the tool is built for the host (a
# member of the root workspace, built into its own directory here).
cargo build --release --quiet --manifest-path tools/elf2img/Cargo.toml --target "$host" \
    --target-dir tools/elf2img/target
elf2img="tools/elf2img/target/$host/release/elf2img"

# The record of the sources, taken before building: an edit made while cargo runs makes
# it differ from the checkout, and the loader asks for a rebuild, rather than the record
# vouching for sources the image may not hold.
sources=$(mktemp)
trap 'rm -f "$sources"' EXIT
"$elf2img" --sources "$root" >"$sources"

# qemu-virt last, so target/.../release/ holds the default board's build afterwards.
for board in softcore ecp5-85f qemu-virt; do
    features=()
    bins=(firmware selftest)
    if [ "$board" != qemu-virt ]; then
        features=(--features "board-$board")
        bins=(firmware)
    fi
    for bin in "${bins[@]}"; do
        cargo build --release "${manifest[@]}" "${remap[@]}" "${features[@]}" --bin "$bin"
    done
    mkdir -p "$out/$board"
    for bin in "${bins[@]}"; do
        elf="target/riscv32imac-unknown-none-elf/release/$bin"
        dst="$out/$board/$bin"
        # No record beside an image being replaced: a failure below leaves an image that
        # the loader refuses, never a new image beside an old record.
        rm -f "$dst.sources.txt"
        cp "$elf" "$dst.elf"
        check=()
        if [ "$bin" = firmware ]; then
            check=(--check-isa)
        fi
        "$elf2img" "$elf" "${check[@]}" --bin "$dst.bin" --hex "$dst.hex" --size >"$dst.size.txt"
        cp "$sources" "$dst.sources.txt"
        echo "== $board/$bin: $(tail -n 1 "$dst.size.txt")"
    done
done
echo "images in $out/"
