//! Counts over time in a bounded number of bins: when a value falls past the last bin,
//! neighbouring bins are merged and the width doubles, so a capture of any length costs
//! at most [`MAX_BINS`] bins.

pub const MAX_BINS: usize = 512;

/// Something counted per bin that two neighbouring bins can be merged into.
pub trait Merge: Default + Clone {
    fn merge(&mut self, other: &Self);
}

impl Merge for u64 {
    fn merge(&mut self, other: &Self) {
        *self += other;
    }
}

#[derive(Debug, Clone)]
pub struct Bins<T> {
    width_ns: u64,
    bins: Vec<T>,
}

impl<T: Merge> Bins<T> {
    /// Bins of `width_ns` to start with.
    pub fn new(width_ns: u64) -> Self {
        Self {
            width_ns: width_ns.max(1),
            bins: Vec::new(),
        }
    }

    /// The bin of time `t` (ns since the capture's start).
    pub fn at(&mut self, t: u64) -> &mut T {
        while t / self.width_ns >= MAX_BINS as u64 {
            self.coarsen();
        }
        let i = (t / self.width_ns) as usize;
        if self.bins.len() <= i {
            self.bins.resize(i + 1, T::default());
        }
        &mut self.bins[i]
    }

    fn coarsen(&mut self) {
        let merged = self
            .bins
            .chunks(2)
            .map(|pair| {
                let mut m = pair[0].clone();
                if let Some(b) = pair.get(1) {
                    m.merge(b);
                }
                m
            })
            .collect();
        self.bins = merged;
        self.width_ns *= 2;
    }

    pub fn width_ns(&self) -> u64 {
        self.width_ns
    }

    /// (start of the bin in ns, the bin).
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        let w = self.width_ns;
        self.bins
            .iter()
            .enumerate()
            .map(move |(i, b)| (i as u64 * w, b))
    }
}

impl Bins<u64> {
    /// The highest count of one bin, per second.
    pub fn peak_per_second(&self) -> f64 {
        let peak = self.bins.iter().copied().max().unwrap_or(0);
        peak as f64 * 1e9 / self.width_ns as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarsening_keeps_every_count() {
        let mut b = Bins::<u64>::new(1000);
        for t in (0..10_000_000u64).step_by(777) {
            *b.at(t) += 1;
        }
        assert!(b.iter().count() <= MAX_BINS);
        assert_eq!(
            b.iter().map(|(_, c)| c).sum::<u64>(),
            10_000_000u64.div_ceil(777)
        );
        assert!(b.width_ns() >= 10_000_000 / MAX_BINS as u64);
        // One count every 777 ns is 1.29 M per second; a bin may hold one more.
        let peak = b.peak_per_second();
        assert!((1.28e6..1.32e6).contains(&peak), "{peak}");
    }
}
