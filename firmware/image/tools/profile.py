#!/usr/bin/env python3
"""Where the self-test's per-packet instructions go: an inline-aware call tree.

    tools/profile.py [PHASE [FUNCTION]]
                                  (PHASE 1 = the 16 x 1 KiB WRITE budget, 2 = 16 x 64 B,
                                   3 = one 64 KiB WRITE firmware only, 4 = 8 idle polls
                                   after it, 5 = the 64 KiB WRITE with the fast path,
                                   6 = 8 idle polls after that, 7 = one of each packet
                                   the fast path hands to the firmware; FUNCTION: only
                                   what runs under it, e.g. `Nic::fp_events`)

Boots the release self-test in QEMU with one instruction per translation block and an
execution trace (`-singlestep -d exec,nochain`) read through a FIFO as it is written,
and stops QEMU once PHASE is over (the whole self-test's trace, with its 4,096-QP
phase, is about 20 GB: never write it to a file), keeps the
instructions between the two calls of `probe::enable` that bracket PHASE, rebuilds the
call stack (calls push, a jump to a recent call's return address pops), expands every
frame into its inlined functions (llvm-symbolizer), and prints the tree under
`Engine::handle_packet` or `handle_verified_packet` (RX), `Engine::poll_transmit` (TX) and the rest, with nodes of
at least 1.5 %. Needs python3, llvm-nm, llvm-objdump, llvm-objcopy, llvm-symbolizer (Debian `llvm`)
and the QEMU the runner uses. Build first: `cargo build --release`.
"""
import bisect
import collections
import functools
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGE = os.path.dirname(HERE)
ELF = os.path.join(IMAGE, "target/riscv32imac-unknown-none-elf/release/selftest")
TRACE = "/tmp/roce-selftest-trace.%d.fifo" % os.getpid()
phase = int(sys.argv[1]) if len(sys.argv) > 1 else 2
# `tools/profile.py PHASE FUNCTION`: only the instructions under FUNCTION (a name's
# end, e.g. `Nic::fp_events`), its tree 20 frames deep, nodes of at least 0.5 %.
focus = sys.argv[2] if len(sys.argv) > 2 else None


def qemu():
    q = shutil.which("qemu-system-riscv32")
    local = os.path.join(IMAGE, "../../target/tools/qemu/usr/bin/qemu-system-riscv32")
    return q or local


os.mkfifo(TRACE)
# QEMU opens the FIFO at start-up and blocks until the reader below opens it.
vm = subprocess.Popen(
    [qemu(), "-machine", "virt", "-cpu", "rv32", "-bios", "none", "-display", "none",
     "-monitor", "none", "-serial", "none", "-icount", "shift=0",
     "-semihosting-config", "enable=on,target=native", "-kernel", ELF,
     "-singlestep", "-d", "exec,nochain", "-D", TRACE],
    stdout=subprocess.DEVNULL)

# Function symbols (for the phase marker) and instruction lengths and kinds.
nm = subprocess.run(["llvm-nm", "-C", ELF], capture_output=True, text=True).stdout
enable = next(int(l.split()[0], 16) for l in nm.splitlines() if "probe::enable" in l)
insn = {}
line_re = re.compile(r"^([0-9a-f]{8}):\s+((?:[0-9a-f]{2} )+)\s*(\S+)\s*(.*)$")
for line in subprocess.run(["llvm-objdump", "-d", ELF], capture_output=True,
                           text=True).stdout.splitlines():
    m = line_re.match(line)
    if m:
        insn[int(m.group(1), 16)] = (m.group(3), m.group(4), len(m.group(2).split()))


def is_call(pc):
    mn, ops, _ = insn.get(pc, ("", "", 4))
    if mn == "jal":  # `jal target` is jal ra; `j` is jal zero
        return "," not in ops or ops.startswith("ra,")
    if mn == "jalr":  # `jalr a0` / `jalr 16(ra)` are jalr ra, ...
        return "," not in ops or ops.startswith("ra,")
    return False


# The phase's instructions.
hits, win = 0, []
with open(TRACE) as f:
    os.unlink(TRACE)
    for line in f:
        if not line.startswith("Trace"):
            continue
        i = line.find("[")
        pc = int(line[i + 10:i + 18], 16)
        if pc == enable:
            hits += 1
            if hits == 2 * phase:
                break
            continue
        if hits == 2 * phase - 1:
            # icount restarts a block after I/O (a `time` CSR read): a logged repeat.
            if win and win[-1] == pc and insn.get(pc, ("",))[0] not in ("j", "beqz", "bnez"):
                continue
            win.append(pc)
vm.kill()
vm.wait()
if hits < 2 * phase:
    sys.exit("the self-test ended before phase %d was over (%d probe::enable calls)" % (phase, hits))

chains = {}
# llvm-symbolizer (14) names a frame's outermost function from the symbol table, where
# the assembler's local labels (`.L0`, inside every function) hide the function's own
# symbol: the tree showed "(out-of-line call)" for most calls. A copy of the ELF without
# them names every frame.
SYMS = "/tmp/roce-selftest-syms.%d.elf" % os.getpid()
named = subprocess.run(["llvm-objcopy", "--wildcard", "--strip-symbol=.L*", ELF, SYMS]).returncode == 0


def symbolize(pcs):
    need = sorted(p for p in set(pcs) if p not in chains)
    if not need:
        return
    out = subprocess.run(["llvm-symbolizer", "--inlining", "--obj=" + (SYMS if named else ELF)],
                         input="\n".join(hex(p) for p in need) + "\n",
                         capture_output=True, text=True).stdout
    for p, block in zip(need, out.strip("\n").split("\n\n")):
        lines = block.splitlines()
        chains[p] = tuple(reversed([lines[i] for i in range(0, len(lines), 2)]))


@functools.lru_cache(maxsize=None)
def short(name):
    if name.startswith(".L"):
        return "(out-of-line call)"
    for esc, ch in (("$LT$", "<"), ("$GT$", ">"), ("$u7b$", "{"), ("$u7d$", "}"),
                    ("$u20$", " "), ("$C$", ","), ("$u5b$", "["), ("$u5d$", "]"),
                    ("$u3b$", ";"), ("$BP$", "*"), ("$RF$", "&"), ("..", "::")):
        name = name.replace(esc, ch)
    name = re.sub(r"::h[0-9a-f]{16}$", "", name)
    for _ in range(4):
        name = re.sub(r"<[^<>]*>", "", name)
    parts = [p for p in name.split("::") if p]
    return "::".join(parts[-2:]) if parts else name


symbolize(win)
trees = {k: collections.Counter() for k in ("rx", "tx", "other", "hw", "focus")}
# What stands in for hardware (the fast path's model, the loopback, the DMA copies):
# counted apart, not shown.
HARDWARE = ("FpProbe::call", "probe::hw", "FpProbe::post_tx", "FpProbe::tx_room")
totals = collections.Counter()
stack, memo, prev = [], {}, None
for pc in win:
    if prev is not None:
        if is_call(prev) and pc != prev + insn[prev][2]:
            stack.append(prev)
        else:
            for k in range(1, min(len(stack), 8) + 1):
                if pc == stack[-k] + insn[stack[-k]][2]:
                    del stack[-k:]
                    break
    prev = pc
    key = (tuple(stack), pc)
    if key not in memo:
        symbolize(stack + [pc])
        names = [short(n) for cs in stack + [pc] for n in chains[cs]]
        kind, at = "other", 0
        hit = [i for i, n in enumerate(names) if focus and n.endswith(focus)]
        for i, n in enumerate([] if focus else names):
            if n.endswith(("::handle_packet", "::handle_verified_packet")) or n == "Engine::receive":
                kind, at = "rx", i
                break
            if n.endswith("::poll_transmit"):
                kind, at = "tx", i
                break
        else:
            outer = [i for i, n in enumerate(names) if n.endswith(("::run_until", "::budget_write"))]
            at = outer[-1] + 1 if outer else 0
        if focus:
            kind, at = ("focus", hit[0]) if hit else ("other", 0)
        memo[key] = (kind, tuple(names[at:at + (20 if focus else 12)]))
    kind, path = memo[key]
    if any(n in HARDWARE or n.startswith("DmaProbe") for n in path):
        kind = "hw"
    totals[kind] += 1
    for d in range(1, len(path) + 1):
        trees[kind][path[:d]] += 1

if named:
    os.unlink(SYMS)
print(f"phase {phase}: {len(win)} instructions: {totals['rx']} in handle_packet, "
      f"{totals['tx']} in poll_transmit, {totals['hw']} in hardware models and DMA, "
      f"{totals['other']} elsewhere")
views = (("rx", "RX: Engine::handle_packet / handle_verified_packet"), ("tx", "TX: Engine::poll_transmit"),
         ("other", "everything else (host, poll loop)"))
if focus:
    views = (("focus", f"under {focus} (the model and DMA apart)"),)
    print(f"{totals['focus']} under {focus}")
least = 5 if focus else 15
for kind, title in views:
    root = totals[kind]
    print(f"\n== {title}")
    children = collections.defaultdict(list)
    for p, c in trees[kind].items():
        children[p[:-1]].append((c, p))

    def show(prefix, depth):
        for c, p in sorted(children[prefix], reverse=True):
            if c * 1000 >= root * least:
                print(f"{c:9d} {100 * c / max(root, 1):5.1f}%  {'  ' * depth}{p[-1]}")
                show(p, depth + 1)
    show((), 0)
