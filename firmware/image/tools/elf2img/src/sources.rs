//! The sources a firmware image is built from, and the record of them that
//! `make-images.sh` writes beside each image (`BIN.sources.txt`) and the loaders compare
//! with the checkout before they take the image ([`check_image`]: the SoC model's
//! `Soc::new`, `cargo xtask synth soc-ecp5`). One file list and one hash for both sides:
//! this module.
//!
//! Why: the SoC tests run whatever image `make-images.sh` last wrote. After an edit to
//! the firmware or the core they would silently run the old code, and a failure (or a
//! pass) would say nothing about the code under test.
//!
//! The inputs ([`files`]): the root manifest (workspace package fields and dependency
//! versions the crates inherit), the cargo configurations the build reads (the root's
//! and the image workspace's), the image workspace's `Cargo.lock` (every registry crate's
//! version), `make-images.sh` (flags, features per board), and for each crate of
//! [`IMAGE_CRATES`] and [`TOOL_CRATES`] its `Cargo.toml`, `build.rs` and every file under
//! `src/`. [`Sources::of`] fails when the image's `Cargo.lock` names a path dependency
//! that [`IMAGE_CRATES`] lacks, so a new in-tree dependency cannot slip out of the
//! record. What is left out can only change the image through the toolchain (a
//! different `rustc`) or cargo's home (registry sources, immutable per version).
//!
//! The hash is 64-bit FNV-1a of each file's bytes: not against an adversary, against
//! edits. Each step of FNV-1a is a bijection of the state given the byte, so two files
//! of equal length that differ in one byte always hash differently; other differences
//! collide with odds of about 2^-64. An edit that leaves a file's bytes as they were
//! (a touch, a checkout of the same commit) is no change: the check never asks for a
//! rebuild that would produce the same image.

use std::fmt::{self, Write as _};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The crates compiled into the image, as directories from the checkout's root: the
/// image's own package and its path dependencies (those without a `source` in
/// `firmware/image/Cargo.lock`, which [`Sources::of`] checks against this list).
pub const IMAGE_CRATES: &[&str] = &["firmware/image", "firmware", "core", "crc32", "abi"];

/// The converter, whose output the images are.
pub const TOOL_CRATES: &[&str] = &["firmware/image/tools/elf2img"];

/// Files the build reads besides the crates' own (from the checkout's root).
pub const FILES: &[&str] = &[
    "Cargo.toml",
    ".cargo/config.toml",
    "firmware/image/Cargo.lock",
    "firmware/image/.cargo/config.toml",
    "firmware/image/make-images.sh",
];

/// The lock file naming the image's dependencies.
const IMAGE_LOCK: &str = "firmware/image/Cargo.lock";

/// The record's file name beside an image `BIN.hex`: `BIN.sources.txt`.
pub fn record_path(image: &Path) -> PathBuf {
    image.with_extension("sources.txt")
}

/// 64-bit FNV-1a.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_extend(FNV1A64_BASIS, bytes)
}

/// FNV-1a 64's starting state (its offset basis), for [`fnv1a64_extend`].
pub const FNV1A64_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a 64 continued over `bytes` from the state `hash`: a hash of several pieces
/// without joining them first. `fnv1a64_extend(fnv1a64(a), b) == fnv1a64(a ++ b)`.
pub fn fnv1a64_extend(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The input files under `root`, as `/`-separated paths from it, sorted. Missing files of
/// [`FILES`] and missing `build.rs` are left out (a removed file shows as removed).
pub fn files(root: &Path) -> io::Result<Vec<String>> {
    let mut out: Vec<String> = FILES
        .iter()
        .filter(|f| root.join(f).is_file())
        .map(|f| f.to_string())
        .collect();
    for krate in IMAGE_CRATES.iter().chain(TOOL_CRATES) {
        for f in ["Cargo.toml", "build.rs"] {
            let rel = format!("{krate}/{f}");
            if root.join(&rel).is_file() {
                out.push(rel);
            }
        }
        walk(root, &format!("{krate}/src"), &mut out)?;
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Every file under `root/rel`, recursively (nothing when `rel` is not a directory).
fn walk(root: &Path, rel: &str, out: &mut Vec<String>) -> io::Result<()> {
    let dir = root.join(rel);
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in fs::read_dir(&dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name
            .to_str()
            .ok_or_else(|| io::Error::other(format!("{}: a name not UTF-8", dir.display())))?;
        let child = format!("{rel}/{name}");
        if entry.file_type()?.is_dir() {
            walk(root, &child, out)?;
        } else {
            out.push(child);
        }
    }
    Ok(())
}

/// The packages of a `Cargo.lock` without a `source`: the path dependencies.
fn path_packages(lock: &str) -> Vec<String> {
    let mut out = Vec::new();
    for block in lock.split("[[package]]").skip(1) {
        let value = |key: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
            })
        };
        if value("source").is_none() {
            if let Some(name) = value("name") {
                out.push(name);
            }
        }
    }
    out
}

/// The `name` of a manifest's `[package]`.
fn package_name(manifest: &str) -> Option<String> {
    let package = manifest.split("[package]").nth(1)?;
    package
        .lines()
        .take_while(|l| !l.trim_start().starts_with('['))
        .find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == "name").then(|| v.trim().trim_matches('"').to_string())
        })
}

/// Fails when the image depends on an in-tree crate [`IMAGE_CRATES`] does not name.
fn check_crates(root: &Path) -> Result<(), String> {
    let read = |rel: &str| {
        fs::read_to_string(root.join(rel)).map_err(|e| format!("{}: {e}", root.join(rel).display()))
    };
    let mut listed = Vec::new();
    for krate in IMAGE_CRATES {
        let manifest = format!("{krate}/Cargo.toml");
        listed.push(package_name(&read(&manifest)?).ok_or(format!("{manifest}: no package name"))?);
    }
    let missing: Vec<String> = path_packages(&read(IMAGE_LOCK)?)
        .into_iter()
        .filter(|p| !listed.contains(p))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{IMAGE_LOCK} has path dependencies whose sources the image record leaves out: {}; \
             add their directories to IMAGE_CRATES in firmware/image/tools/elf2img/src/sources.rs",
            missing.join(", ")
        ))
    }
}

/// The input files and their hashes, sorted by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources {
    files: Vec<(String, u64)>,
}

/// How the checkout differs from a record, one file each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// In both, with other bytes now.
    Changed(String),
    /// In the checkout, not in the record.
    Added(String),
    /// In the record, not in the checkout.
    Removed(String),
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Changed(p) => write!(f, "{p} changed"),
            Change::Added(p) => write!(f, "{p} added"),
            Change::Removed(p) => write!(f, "{p} removed"),
        }
    }
}

const HEADER: &str = "\
# The sources this image was built from (firmware/image/make-images.sh): FNV-1a 64, path.
# Loaders refuse the image when the checkout's differ (firmware/image/tools/elf2img/src/sources.rs).
";

impl Sources {
    /// The sources of the checkout at `root` as they are now.
    pub fn of(root: &Path) -> Result<Self, String> {
        check_crates(root)?;
        let mut files = Vec::new();
        for rel in files_of(root)? {
            let path = root.join(&rel);
            let bytes = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            files.push((rel, fnv1a64(&bytes)));
        }
        Ok(Self { files })
    }

    /// The record's text: a header, then one `HASH PATH` line per file.
    pub fn to_text(&self) -> String {
        let mut out = String::from(HEADER);
        for (path, hash) in &self.files {
            let _ = writeln!(out, "{hash:016x} {path}");
        }
        out
    }

    /// Reads a record [`Sources::to_text`] wrote.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut files = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let bad = || format!("line {}: not `HASH PATH`: {line:?}", n + 1);
            let (hash, path) = line.split_once(' ').ok_or_else(bad)?;
            let hash = u64::from_str_radix(hash, 16).map_err(|_| bad())?;
            files.push((path.to_string(), hash));
        }
        files.sort();
        Ok(Self { files })
    }

    /// What differs in `now` from `self`, in path order; empty when nothing does.
    pub fn changes(&self, now: &Sources) -> Vec<Change> {
        let (mut a, mut b) = (self.files.iter().peekable(), now.files.iter().peekable());
        let mut out = Vec::new();
        loop {
            match (a.peek(), b.peek()) {
                (None, None) => return out,
                (Some((p, _)), None) => {
                    out.push(Change::Removed(p.clone()));
                    a.next();
                }
                (None, Some((p, _))) => {
                    out.push(Change::Added(p.clone()));
                    b.next();
                }
                (Some((pa, ha)), Some((pb, hb))) => match pa.cmp(pb) {
                    std::cmp::Ordering::Less => {
                        out.push(Change::Removed(pa.clone()));
                        a.next();
                    }
                    std::cmp::Ordering::Greater => {
                        out.push(Change::Added(pb.clone()));
                        b.next();
                    }
                    std::cmp::Ordering::Equal => {
                        if ha != hb {
                            out.push(Change::Changed(pa.clone()));
                        }
                        a.next();
                        b.next();
                    }
                },
            }
        }
    }
}

/// Environment variable that, set to `1`, makes [`check_image`] accept any image: for a
/// baseline image of another commit in a comparison, or one built elsewhere.
pub const UNCHECKED_ENV: &str = "ROCE_SOC_IMAGE_UNCHECKED";

/// Why an image is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageError {
    /// The image was built from other sources than the checkout's: these files differ.
    Stale {
        image: PathBuf,
        changes: Vec<Change>,
    },
    /// Which sources the image was built from cannot be told (no record beside it), or
    /// the checkout's cannot be read.
    Unknown { image: PathBuf, why: String },
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 6;
        match self {
            ImageError::Stale { image, changes } => {
                write!(
                    f,
                    "firmware image {} was built from other sources than this checkout's (",
                    image.display()
                )?;
                for (i, c) in changes.iter().take(SHOWN).enumerate() {
                    write!(f, "{}{c}", if i > 0 { ", " } else { "" })?;
                }
                if changes.len() > SHOWN {
                    write!(f, " and {} more", changes.len() - SHOWN)?;
                }
                write!(f, ")")?;
            }
            ImageError::Unknown { image, why } => write!(
                f,
                "firmware image {}: cannot tell whether it was built from this checkout's \
                 sources ({why})",
                image.display()
            )?,
        }
        write!(
            f,
            ": run firmware/image/make-images.sh ({UNCHECKED_ENV}=1 takes it anyway)"
        )
    }
}

impl std::error::Error for ImageError {}

/// Whether `image` was built from the sources of the checkout at `root` as they are now:
/// its record (`BIN.sources.txt` beside it) against the files. What a loader asks before
/// it takes an image, so that nothing runs the image of older sources without saying so.
pub fn compare(root: &Path, image: &Path) -> Result<(), ImageError> {
    let record = record_path(image);
    let unknown = |why: String| ImageError::Unknown {
        image: image.to_path_buf(),
        why,
    };
    let text =
        fs::read_to_string(&record).map_err(|e| unknown(format!("{}: {e}", record.display())))?;
    let built = Sources::parse(&text).map_err(|e| unknown(format!("{}: {e}", record.display())))?;
    let changes = built.changes(&Sources::of(root).map_err(unknown)?);
    if changes.is_empty() {
        Ok(())
    } else {
        Err(ImageError::Stale {
            image: image.to_path_buf(),
            changes,
        })
    }
}

/// [`compare`], unless [`UNCHECKED_ENV`] is `1`.
pub fn check_image(root: &Path, image: &Path) -> Result<(), ImageError> {
    if std::env::var_os(UNCHECKED_ENV).is_some_and(|v| v == "1") {
        return Ok(());
    }
    compare(root, image)
}

/// [`files`] with its error as text.
fn files_of(root: &Path) -> Result<Vec<String>, String> {
    files(root).map_err(|e| format!("{}: {e}", root.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_published_vectors() {
        // From the FNV reference (isthe.com/chongo/tech/comp/fnv): "", "a", "foobar".
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
        assert_eq!(fnv1a64_extend(fnv1a64(b"foo"), b"bar"), 0x85944171f73967e8);
    }

    #[test]
    fn lock_path_packages_are_those_without_a_source() {
        let lock = "version = 4\n\n[[package]]\nname = \"heapless\"\nversion = \"0.9.1\"\n\
                    source = \"registry+https://github.com/rust-lang/crates.io-index\"\n\n\
                    [[package]]\nname = \"roce-core\"\nversion = \"0.1.0\"\n";
        assert_eq!(path_packages(lock), ["roce-core"]);
    }

    #[test]
    fn manifest_name_is_the_package_s() {
        let m = "[package]\nname = \"roce-abi\"\n\n[dependencies]\nname = \"x\"\n";
        assert_eq!(package_name(m).as_deref(), Some("roce-abi"));
        assert_eq!(package_name("[workspace]\n"), None);
    }

    #[test]
    fn a_record_reads_back_and_changes_are_per_file() {
        let old = Sources {
            files: vec![("a".into(), 1), ("b".into(), 2), ("c".into(), 3)],
        };
        assert_eq!(Sources::parse(&old.to_text()), Ok(old.clone()));
        let now = Sources {
            files: vec![("b".into(), 2), ("c".into(), 4), ("d".into(), 5)],
        };
        assert_eq!(
            old.changes(&now),
            [
                Change::Removed("a".into()),
                Change::Changed("c".into()),
                Change::Added("d".into())
            ]
        );
        assert!(now.changes(&now).is_empty());
    }
}
