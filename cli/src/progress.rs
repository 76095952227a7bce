//! Progress bars for runs that take a while (perftest prints nothing while it runs; a
//! simulation of a long test can take minutes). indicatif draws them on stderr when it
//! is a terminal and stays silent otherwise.

pub use indicatif::ProgressBar;
use indicatif::ProgressStyle;

/// A bar named `label`: `label [=====>    ]  45% 2250/5000`. Its length is set by the
/// run that drives it.
pub fn bar(label: &str) -> ProgressBar {
    let pb = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {percent:>3}% {pos}/{len}") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(label.to_string());
    pb
}
