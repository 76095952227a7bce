//! What of `elf2img` other crates use: [`sources`], the record of the sources a firmware
//! image is built from, which `make-images.sh` writes (through the `elf2img` binary) and
//! the SoC model's loader checks. Only the standard library, like the binary.

#![forbid(unsafe_code)]

pub mod sources;
