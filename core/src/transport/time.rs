//! Time as the caller gives it: a monotonic nanosecond counter (quinn-proto's model).
//!
//! The core never reads a clock. Every entry point that cares about time takes `now`,
//! and the caller promises that successive values never go backwards.

use core::time::Duration;

/// A point in time, in nanoseconds since an arbitrary epoch chosen by the caller.
///
/// `u64` nanoseconds cover 584 years, so additions saturate rather than wrap.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Self = Self(0);

    /// An instant `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Self {
        Self(nanos)
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `self + d`, saturating at the end of time.
    #[must_use]
    pub fn saturating_add(self, d: Duration) -> Self {
        let n = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Self(self.0.saturating_add(n))
    }

    /// `self` plus `nanos` nanoseconds, saturating at the end of time.
    #[must_use]
    pub const fn after_nanos(self, nanos: u64) -> Self {
        Self(self.0.saturating_add(nanos))
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl core::ops::Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addition_saturates() {
        let t = Instant::from_nanos(u64::MAX - 1);
        assert_eq!(t + Duration::from_secs(1), Instant::from_nanos(u64::MAX));
        assert_eq!(
            Instant::from_nanos(5).saturating_duration_since(Instant::from_nanos(9)),
            Duration::ZERO
        );
    }
}
