//! `elf2img`: memory images of a little-endian ELF32 executable, for FPGA flows.
//!
//! ```text
//! elf2img ELF [--bin OUT.bin] [--hex OUT.hex] [--size] [--check-isa]
//! elf2img --sources ROOT
//! ```
//!
//! The image is every `PT_LOAD` segment's file bytes placed at its physical (load)
//! address, from the lowest such address to the end of the highest, gaps zero-filled.
//! Zero-initialised data (`.bss`, the stack) is not in it: the start-up code clears it.
//! * `--bin`: the raw bytes.
//! * `--hex`: `$readmemh` text, one 32-bit little-endian word per line (8 hex digits),
//!   the first line being the word at the image base; padded with zeros to a whole word.
//! * `--size`: the image base and length, and the allocated sections by kind (code,
//!   read-only data, initialised data, zero-initialised data).
//! * `--check-isa`: fail, naming each one, if the code holds an instruction the soft
//!   core lacks (an AMO, floating point, ...; see [`isa`]), before writing anything.
//! * `--sources ROOT`: print the record of the sources an image of the checkout at ROOT
//!   is built from (`elf2img::sources`; `make-images.sh` writes it beside each image).
//!
//! Only the standard library: it builds on any machine with a Rust toolchain.

mod isa;

use elf2img::sources;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

const PT_LOAD: u32 = 1;
const SHT_NOBITS: u32 = 8;
const SHF_WRITE: u32 = 0x1;
const SHF_ALLOC: u32 = 0x2;
const SHF_EXECINSTR: u32 = 0x4;

/// A field reader over the file with bounds checks.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u16(&self, at: usize) -> Result<u16, String> {
        self.0
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .ok_or_else(|| format!("truncated ELF (offset {at:#x})"))
    }
    fn u32(&self, at: usize) -> Result<u32, String> {
        self.0
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| format!("truncated ELF (offset {at:#x})"))
    }
}

struct Segment {
    paddr: u32,
    offset: u32,
    filesz: u32,
}

struct Section {
    name: String,
    kind: u32,
    flags: u32,
    addr: u32,
    offset: u32,
    size: u32,
}

struct Elf {
    segments: Vec<Segment>,
    sections: Vec<Section>,
}

fn parse(data: &[u8]) -> Result<Elf, String> {
    if data.get(..4) != Some(b"\x7fELF") {
        return Err("not an ELF file".into());
    }
    if data.get(4) != Some(&1) || data.get(5) != Some(&1) {
        return Err("not a little-endian ELF32 file".into());
    }
    let b = Bytes(data);
    let phoff = b.u32(28)? as usize;
    let shoff = b.u32(32)? as usize;
    let phentsize = usize::from(b.u16(42)?);
    let phnum = usize::from(b.u16(44)?);
    let shentsize = usize::from(b.u16(46)?);
    let shnum = usize::from(b.u16(48)?);
    let shstrndx = usize::from(b.u16(50)?);

    let mut segments = Vec::new();
    for i in 0..phnum {
        let p = phoff + i * phentsize;
        if b.u32(p)? == PT_LOAD && b.u32(p + 16)? > 0 {
            segments.push(Segment {
                offset: b.u32(p + 4)?,
                paddr: b.u32(p + 12)?,
                filesz: b.u32(p + 16)?,
            });
        }
    }

    let mut sections = Vec::new();
    if shnum > 0 {
        let strtab = shoff + shstrndx * shentsize;
        let (str_off, str_size) = (b.u32(strtab + 16)? as usize, b.u32(strtab + 20)? as usize);
        let names = data
            .get(str_off..str_off + str_size)
            .ok_or("section names outside the file")?;
        for i in 0..shnum {
            let s = shoff + i * shentsize;
            let name_at = b.u32(s)? as usize;
            let name = names
                .get(name_at..)
                .and_then(|n| n.split(|&c| c == 0).next())
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .unwrap_or_default();
            sections.push(Section {
                name,
                kind: b.u32(s + 4)?,
                flags: b.u32(s + 8)?,
                addr: b.u32(s + 12)?,
                offset: b.u32(s + 16)?,
                size: b.u32(s + 20)?,
            });
        }
    }
    Ok(Elf { segments, sections })
}

/// The memory image: base address and bytes.
fn image(elf: &Elf, data: &[u8]) -> Result<(u32, Vec<u8>), String> {
    let base = elf
        .segments
        .iter()
        .map(|s| s.paddr)
        .min()
        .ok_or("no loadable segment")?;
    let end = elf
        .segments
        .iter()
        .map(|s| u64::from(s.paddr) + u64::from(s.filesz))
        .max()
        .unwrap_or(u64::from(base));
    let len = usize::try_from(end - u64::from(base)).map_err(|_| "image too large")?;
    if len > 256 << 20 {
        return Err(format!("image of {len} bytes: segments far apart?"));
    }
    let mut img = vec![0u8; len];
    for s in &elf.segments {
        let src = data
            .get(s.offset as usize..(s.offset + s.filesz) as usize)
            .ok_or("segment outside the file")?;
        let at = (s.paddr - base) as usize;
        img[at..at + src.len()].copy_from_slice(src);
    }
    Ok((base, img))
}

fn readmemh(img: &[u8]) -> String {
    let mut out = String::with_capacity(img.len() / 4 * 9 + 9);
    for w in img.chunks(4) {
        let mut word = [0u8; 4];
        word[..w.len()].copy_from_slice(w);
        let _ = writeln!(out, "{:08x}", u32::from_le_bytes(word));
    }
    out
}

fn size_report(elf: &Elf, base: u32, img: &[u8]) -> String {
    let mut out = String::new();
    let (mut text, mut rodata, mut data, mut bss) = (0u64, 0u64, 0u64, 0u64);
    let _ = writeln!(out, "{:<14} {:>10} {:>10}  kind", "section", "size", "addr");
    for s in &elf.sections {
        if s.flags & SHF_ALLOC == 0 || s.size == 0 {
            continue;
        }
        // riscv-rt's `.stack` and `.heap` are the RAM left over, not data.
        let kind = if s.name == ".stack" || s.name == ".heap" {
            "free RAM (stack/heap)"
        } else if s.flags & SHF_EXECINSTR != 0 {
            text += u64::from(s.size);
            "code"
        } else if s.kind == SHT_NOBITS {
            bss += u64::from(s.size);
            "zero-initialised RAM"
        } else if s.flags & SHF_WRITE != 0 {
            data += u64::from(s.size);
            "initialised RAM"
        } else {
            rodata += u64::from(s.size);
            "read-only data"
        };
        let _ = writeln!(
            out,
            "{:<14} {:>10} {:>#10x}  {}",
            s.name, s.size, s.addr, kind
        );
    }
    let _ = writeln!(
        out,
        "image: {} bytes at {:#010x}; code {} B, read-only {} B, data {} B, bss {} B (static RAM {} B)",
        img.len(),
        base,
        text,
        rodata,
        data,
        bss,
        data + bss
    );
    out
}

/// Every instruction of the executable sections the soft core cannot run, one line
/// each; empty if there is none.
fn isa_report(elf: &Elf, data: &[u8]) -> Result<String, String> {
    let mut out = String::new();
    for s in &elf.sections {
        if s.flags & SHF_EXECINSTR == 0 || s.flags & SHF_ALLOC == 0 || s.kind == SHT_NOBITS {
            continue;
        }
        let code = data
            .get(s.offset as usize..(s.offset as usize).saturating_add(s.size as usize))
            .ok_or_else(|| format!("section {} outside the file", s.name))?;
        for bad in isa::check(s.addr, code) {
            let _ = writeln!(
                out,
                "{:#010x} ({}): {:#010x}: {}",
                bad.addr, s.name, bad.insn, bad.why
            );
        }
    }
    Ok(out)
}

fn run(args: &[String]) -> Result<(), String> {
    let usage = "usage: elf2img ELF [--bin OUT.bin] [--hex OUT.hex] [--size] [--check-isa]\n   \
                 or: elf2img --sources ROOT";
    if let [mode, root] = args {
        if mode == "--sources" {
            print!("{}", sources::Sources::of(Path::new(root))?.to_text());
            return Ok(());
        }
    }
    let mut it = args.iter();
    let elf_path = it.next().ok_or(usage)?;
    let (mut bin, mut hex, mut size, mut check_isa) = (None, None, false, false);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bin" => bin = Some(it.next().ok_or(usage)?),
            "--hex" => hex = Some(it.next().ok_or(usage)?),
            "--size" => size = true,
            "--check-isa" => check_isa = true,
            _ => return Err(usage.into()),
        }
    }
    let data = std::fs::read(elf_path).map_err(|e| format!("{elf_path}: {e}"))?;
    let elf = parse(&data).map_err(|e| format!("{elf_path}: {e}"))?;
    if check_isa {
        let bad = isa_report(&elf, &data).map_err(|e| format!("{elf_path}: {e}"))?;
        if !bad.is_empty() {
            return Err(format!(
                "{elf_path}: instructions the soft core (VexRiscv RV32IMAC, LR/SC without AMOs) \
                 cannot execute:\n{bad}"
            ));
        }
    }
    let (base, img) = image(&elf, &data).map_err(|e| format!("{elf_path}: {e}"))?;
    if let Some(p) = bin {
        std::fs::write(p, &img).map_err(|e| format!("{p}: {e}"))?;
    }
    if let Some(p) = hex {
        std::fs::write(p, readmemh(&img)).map_err(|e| format!("{p}: {e}"))?;
    }
    if size {
        print!("{}", size_report(&elf, base, &img));
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("elf2img: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readmemh_words_are_little_endian_and_padded() {
        assert_eq!(
            readmemh(&[0x13, 0x05, 0x00, 0x00, 0xAA]),
            "00000513\n000000aa\n"
        );
    }

    #[test]
    fn image_places_segments_at_load_addresses() {
        let elf = Elf {
            segments: vec![
                Segment {
                    paddr: 0x100,
                    offset: 0,
                    filesz: 2,
                },
                Segment {
                    paddr: 0x104,
                    offset: 2,
                    filesz: 2,
                },
            ],
            sections: vec![],
        };
        let (base, img) = image(&elf, &[1, 2, 3, 4]).unwrap();
        assert_eq!(base, 0x100);
        assert_eq!(img, [1, 2, 0, 0, 3, 4]);
    }

    #[test]
    fn rejects_non_elf() {
        assert!(parse(b"hello").is_err());
    }
}
