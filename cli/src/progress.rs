//! A progress bar on stderr for runs that take more than a second (perftest prints
//! nothing while it runs; a simulation of a long test can take a while).

use std::io::Write;
use std::time::{Duration, Instant};

/// Draws `label [=====>    ]  45% 2250/5000` on stderr, first after one second of wall
/// time, then at most ten times a second; `finish` erases it.
pub struct Progress {
    label: String,
    start: Instant,
    last_draw: Option<Instant>,
    calls: u32,
    enabled: bool,
}

const AFTER: Duration = Duration::from_secs(1);
const EVERY: Duration = Duration::from_millis(100);
const WIDTH: usize = 30;

impl Progress {
    /// A bar for a run named `label`.
    pub fn new(label: &str) -> Self {
        Self {
            label: label.to_string(),
            start: Instant::now(),
            last_draw: None,
            calls: 0,
            enabled: true,
        }
    }

    /// Names the next part of a run (one bar is reused run after run).
    pub fn relabel(&mut self, label: &str) {
        self.label = label.to_string();
    }

    /// No output at all (benchmarks, tests).
    pub fn silent() -> Self {
        Self {
            enabled: false,
            ..Self::new("")
        }
    }

    /// `done` of `total` units are finished. Cheap: it looks at the clock only every
    /// 256th call.
    pub fn update(&mut self, done: usize, total: usize) {
        self.calls = self.calls.wrapping_add(1);
        if !self.enabled || self.calls % 256 != 0 {
            return;
        }
        let now = Instant::now();
        if now.duration_since(self.start) < AFTER
            || self
                .last_draw
                .is_some_and(|t| now.duration_since(t) < EVERY)
        {
            return;
        }
        self.last_draw = Some(now);
        let frac = if total == 0 {
            1.0
        } else {
            (done as f64 / total as f64).min(1.0)
        };
        let filled = (frac * WIDTH as f64) as usize;
        let bar: String = (0..WIDTH)
            .map(|i| match i.cmp(&filled) {
                std::cmp::Ordering::Less => '=',
                std::cmp::Ordering::Equal => '>',
                std::cmp::Ordering::Greater => ' ',
            })
            .collect();
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{} [{bar}] {:3.0}% {done}/{total}",
            self.label,
            frac * 100.0
        );
        let _ = err.flush();
    }

    /// Erases the bar if it was drawn.
    pub fn finish(&mut self) {
        if self.last_draw.take().is_some() {
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "\r{:width$}\r",
                "",
                width = self.label.len() + WIDTH + 30
            );
            let _ = err.flush();
        }
    }
}
