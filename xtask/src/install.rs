//! Making sure the tools the checks need are here. Every tool is probed first and
//! installed only when the probe fails, then probed again to prove the install worked;
//! each prints one line saying `found` or `installed`.

use std::fmt::Display;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cmd::{self, cmd, Result};

/// Targets without `std` that the core must build for: the firmware's soft core, and a
/// Cortex-M as a second, unrelated bare-metal target.
pub const BARE_METAL_TARGETS: &[&str] = &["riscv32imac-unknown-none-elf", "thumbv7em-none-eabihf"];

/// Debian packages the workspace's tests use: Verilator plus the C++ compiler and zlib
/// its generated model needs (FST tracing includes `zlib.h`); tshark as the external
/// decoder oracle; python3 for scripts, with `venv` for the project's virtualenv
/// ([`python_packages`]). (flex's `libfl-dev` is only needed to build Verilator itself,
/// which the Debian package spares us.)
const APT_PACKAGES: &[&str] = &[
    "verilator",
    "g++",
    "zlib1g-dev",
    "tshark",
    "python3",
    "python3-venv",
];

/// Components of the active toolchain the `fmt` and `clippy` steps run.
const RUST_COMPONENTS: &[&str] = &["rustfmt", "clippy"];

/// Everything but `defmt-print`, which only the firmware step needs (it takes minutes
/// to build, so it waits until there is firmware).
pub fn all(root: &Path) -> Result {
    let mut apt = Apt::new();
    apt_packages(&mut apt)?;
    rust_components()?;
    rust_targets()?;
    nightly()?;
    cargo_fuzz()?;
    qemu_with(root, &mut apt)?;
    python_packages(root, &[VEXRISCV])?;
    Ok(())
}

pub fn rust_targets() -> Result {
    let installed = || cmd::probe(&mut cmd("rustup", &["target", "list", "--installed"]));
    for &target in BARE_METAL_TARGETS {
        ensure(
            target,
            || has_line(installed()?, target),
            || cmd::run(&mut cmd("rustup", &["target", "add", target])),
        )?;
    }
    Ok(())
}

fn rust_components() -> Result {
    let installed = || cmd::probe(&mut cmd("rustup", &["component", "list", "--installed"]));
    for &component in RUST_COMPONENTS {
        // Installed components are listed with their host triple: "clippy-x86_64-...".
        let listed = |line: &str| line.starts_with(&format!("{component}-"));
        ensure(
            component,
            || installed()?.lines().find(|l| listed(l)).map(str::to_string),
            || cmd::run(&mut cmd("rustup", &["component", "add", component])),
        )?;
    }
    Ok(())
}

/// The nightly toolchain, for cargo-fuzz's sanitizer flags.
pub fn nightly() -> Result {
    let listed = || {
        let toolchains = cmd::probe(&mut cmd("rustup", &["toolchain", "list"]))?;
        let line = toolchains.lines().find(|l| l.starts_with("nightly-"))?;
        Some(line.split_whitespace().next()?.to_string())
    };
    let install = || {
        let args = ["toolchain", "install", "nightly", "--profile", "minimal"];
        cmd::run(&mut cmd("rustup", &args))
    };
    ensure("nightly", listed, install).map(drop)
}

/// A tool from crates.io; `probe` is how it is called (`["cargo", "fuzz"]`), and it
/// counts as found when `probe --version` succeeds.
fn cargo_tool(krate: &str, probe: &[&str]) -> Result {
    let version = || {
        let (program, args) = probe.split_first()?;
        let out = cmd::probe(&mut cmd(program, &[args, &["--version"]].concat()))?;
        out.lines().next().map(str::to_string)
    };
    let install = || cmd::run(&mut cmd("cargo", &["install", krate, "--locked"]));
    ensure(krate, version, install).map(drop)
}

pub fn cargo_fuzz() -> Result {
    cargo_tool("cargo-fuzz", &["cargo", "fuzz"])
}

pub fn defmt_print() -> Result {
    cargo_tool("defmt-print", &["defmt-print"])
}

/// A PyPI package at an exact version, so every machine runs the same tool.
#[derive(Clone, Copy)]
pub struct PyPackage {
    pub name: &'static str,
    pub version: &'static str,
}

/// The soft core of the SoC model: `hdl-sim/build.rs` finds `VexRiscv_IMAC.v` through
/// this package in the virtualenv.
pub const VEXRISCV: PyPackage = PyPackage {
    name: "pythondata-cpu-vexriscv",
    version: "1.0.1.post407",
};

/// The project's Python virtualenv, relative to the root. Under `target/`, so `cargo
/// clean` removes it and git ignores it.
const VENV: &str = "target/tools/venv";

/// Makes sure the project's virtualenv (`target/tools/venv`) exists and holds `packages`
/// at their versions (installing or re-pinning those that do not match), and returns its
/// `bin` directory, where the packages' commands are. Each caller names the packages it
/// needs: the synthesis flow its yowasp tools, the SoC its soft core's Verilog.
pub fn python_packages(root: &Path, packages: &[PyPackage]) -> Result<PathBuf> {
    let venv = root.join(VENV);
    let bin = venv.join("bin");
    let python = bin.join("python");
    ensure(
        "python venv",
        || {
            let version = cmd::version(&python)?;
            Some(format!("{version} ({})", venv.display()))
        },
        || cmd::run(&mut cmd("python3", &["-m", "venv", path_str(&venv)?])),
    )?;
    for package in packages {
        let probe = || {
            let query = format!(
                "import importlib.metadata as m; print(m.version({:?}))",
                package.name
            );
            let version = cmd::probe(&mut cmd(path_str(&python).ok()?, &["-c", &query]))?;
            (version.trim() == package.version).then(|| version.trim().to_string())
        };
        let install = || {
            let spec = format!("{}=={}", package.name, package.version);
            let args = [
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ];
            cmd::run(&mut cmd(
                path_str(&python)?,
                &[&args[..], &[&spec]].concat(),
            ))
        };
        ensure(package.name, probe, install)?;
    }
    Ok(bin)
}

/// The QEMU binary the firmware runner boots.
const QEMU: &str = "qemu-system-riscv32";

/// Debian's package holding it.
const QEMU_PACKAGE: &str = "qemu-system-misc";

/// A usable QEMU: the binary and its `--version` line.
struct Qemu {
    bin: PathBuf,
    version: String,
}

impl Display for Qemu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.version, self.bin.display())
    }
}

/// Finds or installs `qemu-system-riscv32` and returns the directory holding it, for the
/// caller to put on `PATH` (it may be our cache rather than a system directory).
pub fn qemu(root: &Path) -> Result<PathBuf> {
    qemu_with(root, &mut Apt::new())
}

fn qemu_with(root: &Path, apt: &mut Apt) -> Result<PathBuf> {
    let cache = root.join("target/tools/qemu");
    let cached_bin = cache.join("usr/bin").join(QEMU);
    let probe = || {
        let candidates = [find_on_path(QEMU), Some(cached_bin.clone())];
        candidates.into_iter().flatten().find_map(|bin| {
            let version = cmd::version(&bin)?;
            Some(Qemu { bin, version })
        })
    };
    let found = ensure(QEMU, probe, || unpack_debian_qemu(&cache, apt))?;
    let dir = found
        .bin
        .parent()
        .ok_or("QEMU binary has no parent directory")?;
    Ok(dir.to_path_buf())
}

/// Unpacks Debian's QEMU into `cache` instead of installing the package: this image
/// carries a backported qemu-utils 10, which declares Breaks on Debian 12's QEMU 7.2
/// system packages, so `apt-get install qemu-system-misc` would remove it. The binary
/// alone runs fine once its shared libraries are installed, and those conflict with
/// nothing.
fn unpack_debian_qemu(cache: &Path, apt: &mut Apt) -> Result {
    let download = cache.join("download");
    // A previous run may have died half way: start from an empty download directory.
    let _ = fs::remove_dir_all(&download);
    fs::create_dir_all(&download).map_err(|e| format!("{}: {e}", download.display()))?;
    apt.download(QEMU_PACKAGE, &download)?;
    let deb = find_deb(&download, QEMU_PACKAGE)?;
    extract(&deb, &format!("./usr/bin/{QEMU}"), cache)?;
    let depends = cmd::stdout(&mut cmd(
        "dpkg-deb",
        &["--field", path_str(&deb)?, "Depends"],
    ))?;
    // The qemu-* dependencies (common files, firmware blobs) are the packages that
    // conflict, and a `-bios none` boot needs none of them.
    let libraries: Vec<String> = dependency_names(&depends)
        .into_iter()
        .filter(|name| !name.starts_with("qemu-"))
        .collect();
    apt.install_missing(&libraries)?;
    fs::remove_dir_all(&download).map_err(|e| format!("{}: {e}", download.display()))
}

/// The `.deb` that `apt-get download PACKAGE` left in `dir`.
fn find_deb(dir: &Path, package: &str) -> Result<PathBuf> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    entries
        .filter_map(|entry| Some(entry.ok()?.path()))
        .find(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with(&format!("{package}_")) && name.ends_with(".deb")
        })
        .ok_or_else(|| format!("no {package}_*.deb in {}", dir.display()))
}

/// Extracts one file of a `.deb` into `dest` (like `dpkg -x`, but only the file we
/// need: the whole package unpacks to 200 MB of emulators).
fn extract(deb: &Path, member: &str, dest: &Path) -> Result {
    let mut unpack = cmd("dpkg-deb", &["--fsys-tarfile", path_str(deb)?]);
    println!(
        "$ {} | tar -x -C {} {member}",
        cmd::display(&unpack),
        dest.display()
    );
    let mut tarfile = unpack
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start dpkg-deb: {e}"))?;
    let pipe = tarfile.stdout.take().ok_or("dpkg-deb has no stdout")?;
    let tar_status = Command::new("tar")
        .args(["-x", "-C", path_str(dest)?, member])
        .stdin(pipe)
        .status();
    let deb_status = tarfile.wait();
    match (deb_status, tar_status) {
        (Ok(d), Ok(t)) if d.success() && t.success() => Ok(()),
        (d, t) => Err(format!(
            "extracting {member} from {}: dpkg-deb {d:?}, tar {t:?}",
            deb.display()
        )),
    }
}

/// The package names of a Debian `Depends` field, taking the first of any alternatives:
/// `"libc6 (>= 2.34), libfoo:any | libbar"` gives `["libc6", "libfoo"]`.
fn dependency_names(field: &str) -> Vec<String> {
    field
        .split(',')
        .filter_map(|dependency| dependency.split(['|', '(', ':']).next())
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .collect()
}

/// The `apt` packages of [`APT_PACKAGES`], installed in one `apt-get install`.
fn apt_packages(apt: &mut Apt) -> Result {
    if !apt.available() {
        println!(
            "  apt packages: not a Debian system, not checked (want: {})",
            APT_PACKAGES.join(" ")
        );
        return Ok(());
    }
    let missing = apt.install_missing(APT_PACKAGES)?;
    for &package in APT_PACKAGES {
        let version = installed_version(package)
            .ok_or_else(|| format!("{package}: installed, but dpkg does not list it"))?;
        let state = if missing.contains(&package) {
            "installed"
        } else {
            "found"
        };
        report(package, state, &version);
    }
    Ok(())
}

/// The package's version if dpkg says it is installed (not merely known or removed).
fn installed_version(package: &str) -> Option<String> {
    let out = cmd::probe(&mut cmd(
        "dpkg-query",
        &["-W", "-f=${Status} ${Version}", package],
    ))?;
    out.strip_prefix("install ok installed ")
        .map(str::to_string)
}

/// `apt-get`, run at most one `update` per xtask run, and only once something must be
/// fetched.
struct Apt {
    root: bool,
    updated: bool,
}

impl Apt {
    fn new() -> Self {
        let uid = cmd::probe(&mut cmd("id", &["-u"])).unwrap_or_default();
        Apt {
            root: uid.trim() == "0",
            updated: false,
        }
    }

    fn available(&self) -> bool {
        cmd::probe(&mut cmd("dpkg-query", &["--version"])).is_some()
    }

    /// Installs those of `packages` that are not installed; returns them.
    fn install_missing<'a, S: AsRef<str>>(&mut self, packages: &'a [S]) -> Result<Vec<&'a str>> {
        let missing: Vec<&str> = packages
            .iter()
            .map(AsRef::as_ref)
            .filter(|package| installed_version(package).is_none())
            .collect();
        if !missing.is_empty() {
            self.update_once()?;
            let args = [&["install", "-y", "--no-install-recommends"][..], &missing].concat();
            cmd::run(&mut self.privileged(&args))?;
        }
        Ok(missing)
    }

    /// Fetches a package's `.deb` into `dir` without installing it (no root needed).
    fn download(&mut self, package: &str, dir: &Path) -> Result {
        self.update_once()?;
        let mut download = cmd("apt-get", &["download", package]);
        if self.root {
            // Root's downloads are otherwise handed to the `_apt` user, who cannot write
            // into our cache: apt warns and falls back to root anyway.
            download.args(["-o", "APT::Sandbox::User=root"]);
        }
        cmd::run(download.current_dir(dir))
    }

    fn update_once(&mut self) -> Result {
        if !self.updated {
            cmd::run(&mut self.privileged(&["update"]))?;
            self.updated = true;
        }
        Ok(())
    }

    /// `apt-get ARGS` as root. Without root, through `sudo -n`, which fails rather than
    /// asking for a password. Debconf must not ask questions either (tshark has one), and
    /// the dpkg lock is waited for, since another apt may be running on a shared machine.
    fn privileged(&self, args: &[&str]) -> Command {
        let mut command = if self.root {
            cmd("apt-get", &[])
        } else {
            cmd("sudo", &["-n", "DEBIAN_FRONTEND=noninteractive", "apt-get"])
        };
        command.env("DEBIAN_FRONTEND", "noninteractive");
        // -q: no progress bars in CI logs.
        command
            .args(["-q", "-o", "DPkg::Lock::Timeout=300"])
            .args(args);
        command
    }
}

/// Probes; installs only if the probe finds nothing; probes again to prove the install.
fn ensure<T: Display>(
    name: &str,
    probe: impl Fn() -> Option<T>,
    install: impl FnOnce() -> Result,
) -> Result<T> {
    if let Some(found) = probe() {
        report(name, "found", &found);
        return Ok(found);
    }
    install().map_err(|e| format!("installing {name}: {e}"))?;
    let installed = probe().ok_or_else(|| format!("{name}: installed, but still not usable"))?;
    report(name, "installed", &installed);
    Ok(installed)
}

fn report(tool: &str, state: &str, detail: &dyn Display) {
    let line = format!("  {tool:<30} {state:<9} {detail}");
    println!("{}", line.trim_end());
}

fn has_line(text: String, line: &str) -> Option<String> {
    text.lines().any(|l| l.trim() == line).then(String::new)
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

fn path_str(path: &Path) -> Result<&str> {
    path.to_str()
        .ok_or_else(|| format!("not UTF-8: {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::dependency_names;

    #[test]
    fn dependency_names_drop_versions_architectures_and_alternatives() {
        let field = "libaio1 (>= 0.3.93), libc6 (>= 2.34), perl:any, libfoo | libbar, \
                     qemu-system-common (= 1:7.2+dfsg-7+deb12u18+b3)";
        assert_eq!(
            dependency_names(field),
            ["libaio1", "libc6", "perl", "libfoo", "qemu-system-common"]
        );
    }

    #[test]
    fn empty_depends_field_has_no_names() {
        assert!(dependency_names("").is_empty());
    }
}
