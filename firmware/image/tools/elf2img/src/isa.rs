//! What the soft core can execute: VexRiscv's RV32IMAC build in pythondata-cpu-vexriscv
//! has LR/SC but no AMOs (see `hdl-sim/rtl/soc/nic_soc.sv`), so a `riscv32imac` build
//! that uses an atomic read-modify-write (an `amo*.w`) would trap there. [`check`]
//! walks the code and names every instruction outside RV32IM + C + Zicsr + Zifencei +
//! LR/SC (and VexRiscv's data-cache flush), so an image that would trap is refused
//! when it is built, not found by a hang on the board.

/// Why the 32-bit instruction `insn` cannot run on the core, or `None` if it can.
fn unsupported32(insn: u32) -> Option<&'static str> {
    let funct3 = (insn >> 12) & 7;
    let funct7 = insn >> 25;
    let rs2 = (insn >> 20) & 0x1F;
    let ok = |c: bool, why| if c { None } else { Some(why) };
    match insn & 0x7F {
        0x37 | 0x17 | 0x6F => None, // LUI, AUIPC, JAL
        0x67 => ok(funct3 == 0, "JALR with funct3 != 0"),
        0x63 => ok(funct3 != 2 && funct3 != 3, "branch with a reserved funct3"),
        0x03 => ok(matches!(funct3, 0 | 1 | 2 | 4 | 5), "load not in RV32I"),
        0x23 => ok(funct3 <= 2, "store not in RV32I"),
        0x13 => match funct3 {
            1 => ok(funct7 == 0, "shift-immediate not in RV32I (Zbb?)"),
            5 => ok(
                funct7 == 0 || funct7 == 0x20,
                "shift-immediate not in RV32I (Zbb?)",
            ),
            _ => None,
        },
        0x33 => match funct7 {
            0x00 | 0x01 => None, // RV32I, M
            0x20 => ok(funct3 == 0 || funct3 == 5, "OP not in RV32IM (Zbb?)"),
            _ => Some("OP not in RV32IM (Zba/Zbb?)"),
        },
        // FENCE, FENCE.I, and VexRiscv's data-cache flush (funct3 5, rs2 0)
        0x0F => ok(
            funct3 == 0 || funct3 == 1 || (funct3 == 5 && rs2 == 0),
            "MISC-MEM not in RV32I/Zifencei",
        ),
        0x73 => match funct3 {
            0 => ok(
                matches!(insn, 0x0000_0073 | 0x0010_0073 | 0x3020_0073 | 0x1050_0073),
                "SYSTEM instruction the core lacks (only ECALL, EBREAK, MRET, WFI)",
            ),
            4 => Some("SYSTEM funct3 4 (hypervisor?)"),
            _ => None, // CSR access
        },
        0x2F => {
            let funct5 = insn >> 27;
            if funct3 != 2 {
                Some("atomic that is not 32-bit")
            } else if funct5 == 0b00010 && rs2 == 0 || funct5 == 0b00011 {
                None // LR.W, SC.W
            } else {
                Some("AMO (the core has LR/SC but no AMOs)")
            }
        }
        _ => Some("opcode outside RV32IMAC (floating point, vector, custom?)"),
    }
}

/// Why the 16-bit instruction `insn` cannot run on the core, or `None` if it can.
fn unsupported16(insn: u16) -> Option<&'static str> {
    let funct3 = insn >> 13;
    match (insn & 3, funct3) {
        // all zeros: alignment padding between functions (riscv-rt's assembly pads
        // with zeros); illegal on every core alike, and never reached
        (_, _) if insn == 0 => None,
        (0, 1 | 3 | 5 | 7) | (2, 1 | 3 | 5 | 7) => {
            Some("compressed floating-point load/store (RV32FC/DC)")
        }
        (0, 4) => Some("reserved compressed encoding"),
        _ => None,
    }
}

/// One instruction the core lacks.
#[derive(Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// Its address.
    pub addr: u32,
    /// Its encoding (16 or 32 bits).
    pub insn: u32,
    /// What it is.
    pub why: &'static str,
}

/// Every instruction in `code` (placed at `addr`) that the core cannot execute.
/// The code is decoded from its start, 16 or 32 bits at a time by the length bits,
/// as the core fetches it (LLVM puts no data in executable sections).
pub fn check(addr: u32, code: &[u8]) -> Vec<Unsupported> {
    let mut bad = Vec::new();
    let mut at = 0usize;
    while let Some(half) = code.get(at..at + 2) {
        let low = u16::from_le_bytes([half[0], half[1]]);
        let here = addr.wrapping_add(at as u32);
        if low & 3 == 3 {
            let Some(high) = code.get(at + 2..at + 4) else {
                bad.push(Unsupported {
                    addr: here,
                    insn: u32::from(low),
                    why: "32-bit instruction cut off at the end of the section",
                });
                break;
            };
            let insn = u32::from(low) | u32::from(u16::from_le_bytes([high[0], high[1]])) << 16;
            if let Some(why) = unsupported32(insn) {
                bad.push(Unsupported {
                    addr: here,
                    insn,
                    why,
                });
            }
            at += 4;
        } else {
            if let Some(why) = unsupported16(low) {
                bad.push(Unsupported {
                    addr: here,
                    insn: u32::from(low),
                    why,
                });
            }
            at += 2;
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(ws: &[u32]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn amos_are_refused_lr_sc_are_not() {
        // From `llvm-objdump -d --mattr=+a`: the amoor.w.aq the firmware had, an
        // amoswap.w, lr.w a0,(a1), sc.w a2,a3,(a1)
        let code = words(&[0x4535_252F, 0x08B5_262F, 0x1005_A52F, 0x18D5_A62F]);
        let bad = check(0x9360, &code);
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert_eq!((bad[0].addr, bad[0].insn), (0x9360, 0x4535_252F));
        assert!(bad[0].why.starts_with("AMO"));
        assert_eq!(bad[1].addr, 0x9364);
    }

    #[test]
    fn rv32imc_and_system_instructions_pass() {
        // addi a0,a0,1; mul a0,a0,a1; divu; csrr a0,mcycle; fence; fence.i; mret; wfi;
        // VexRiscv's dcache flush; c.addi a0,1 + c.nop
        let mut code = words(&[
            0x0015_0513,
            0x02B5_0533,
            0x02B5_5533,
            0xB000_2573,
            0x0FF0_000F,
            0x0000_100F,
            0x3020_0073,
            0x1050_0073,
            0x0000_500F,
        ]);
        code.extend([0x05, 0x05, 0x01, 0x00]);
        assert_eq!(check(0, &code), []);
    }

    #[test]
    fn floating_point_and_bitmanip_are_refused() {
        // flw fa0,0(a0); fadd.s; c.fld; andn (Zbb)
        let mut code = words(&[0x0005_2507, 0x00B5_7553, 0x40B5_7533]);
        code.extend(0x2108u16.to_le_bytes());
        let bad = check(0, &code);
        assert_eq!(bad.len(), 4, "{bad:?}");
    }
}
