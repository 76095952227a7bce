//! Running child processes the same way everywhere: stdin is never a terminal (CI has
//! none, and a prompt would hang the job until its timeout), and every command that does
//! work is echoed first, so a failing log can be replayed by hand.

use std::path::Path;
use std::process::{Command, Stdio};

/// xtask's errors are messages for a human reading a CI log; nothing matches on them.
pub type Result<T = ()> = std::result::Result<T, String>;

/// `program args...`, with stdin closed.
pub fn cmd(program: &str, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null());
    command
}

/// `nice -n N program args...`: the long jobs (fuzz campaigns, chaos runs) on a shared
/// machine. N is `XTASK_NICE`, 10 by default: at 19 they got almost no CPU beside the
/// other agents' builds (a campaign starved for hours), at 10 they still yield to
/// interactive work and builds at 0.
pub fn niced(program: &str, args: &[&str]) -> Result<Command> {
    let level = std::env::var("XTASK_NICE").unwrap_or_else(|_| "10".to_string());
    if !level.parse::<i8>().is_ok_and(|n| (0..=19).contains(&n)) {
        return Err(format!("XTASK_NICE must be 0..=19, not `{level}`"));
    }
    Ok(cmd("nice", &[&["-n", &level, program], args].concat()))
}

/// The command as a shell line, prefixed by its directory when it has one.
pub fn display(command: &Command) -> String {
    let mut line = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    match command.get_current_dir() {
        Some(dir) => format!("(cd {} && {line})", dir.display()),
        None => line,
    }
}

/// Runs `command` with its output going straight to ours; an error names the command and
/// how it ended.
pub fn run(command: &mut Command) -> Result {
    println!("$ {}", display(command));
    let status = command
        .status()
        .map_err(|e| format!("cannot start `{}`: {e}", display(command)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed ({status})", display(command)))
    }
}

/// Runs `command` silently and returns its stdout if it exits 0. `None` covers "not
/// installed" and "installed but broken" alike: for a probe, both mean "not usable".
pub fn probe(command: &mut Command) -> Option<String> {
    let output = command.stderr(Stdio::null()).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Like [`probe`], but a failure is an error carrying the command's stderr.
pub fn stdout(command: &mut Command) -> Result<String> {
    let output = command
        .output()
        .map_err(|e| format!("cannot start `{}`: {e}", display(command)))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "`{}` failed ({}): {}",
            display(command),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// The first line of `--version` output, e.g. "cargo-fuzz 0.13.2".
pub fn version(program: &Path) -> Option<String> {
    let mut command = Command::new(program);
    command.arg("--version").stdin(Stdio::null());
    probe(&mut command).map(|out| out.lines().next().unwrap_or_default().trim().to_string())
}
