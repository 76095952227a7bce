//! Statistics for figures that rest on random draws: means with 95 % confidence
//! intervals over independent runs (seeds), percentiles, and flow-completion-time
//! slowdown by flow size.

/// A sample mean and the half-width of its 95 % confidence interval (Student's t with
/// n - 1 degrees of freedom; infinite for a single run).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub mean: f64,
    pub half_width: f64,
    pub n: usize,
}

impl Interval {
    /// The 95 % interval of the mean of `xs` (independent runs).
    pub fn of(xs: &[f64]) -> Self {
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n.max(1) as f64;
        if n < 2 {
            return Self {
                mean,
                half_width: f64::INFINITY,
                n,
            };
        }
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        Self {
            mean,
            half_width: t975(n - 1) * (var / n as f64).sqrt(),
            n,
        }
    }

    pub fn low(&self) -> f64 {
        self.mean - self.half_width
    }

    pub fn high(&self) -> f64 {
        self.mean + self.half_width
    }

    /// True when `x` lies within the interval.
    pub fn contains(&self, x: f64) -> bool {
        (self.low()..=self.high()).contains(&x)
    }

    /// `mean ± half-width` with `digits` decimals.
    pub fn show(&self, digits: usize) -> String {
        format!("{:.digits$} ± {:.digits$}", self.mean, self.half_width)
    }
}

/// The 97.5 % quantile of Student's t distribution with `dof` degrees of freedom (the
/// two-sided 95 % factor): exact to three decimals from tables up to 30, then the
/// Cornish-Fisher expansion around the normal's 1.960.
pub fn t975(dof: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match dof {
        0 => f64::INFINITY,
        1..=30 => TABLE[dof - 1],
        _ => {
            let (z, n): (f64, f64) = (1.959_964, dof as f64);
            z + (z.powi(3) + z) / (4.0 * n)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * n * n)
        }
    }
}

/// The `p` quantile (0..1) of sorted values by nearest rank: the smallest value with at
/// least a fraction `p` of the values at or below it.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One flow's completion: its size and how much longer it took than alone on an idle
/// network (at least 1 by construction of the ideal, up to rounding).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Completion {
    pub size: u64,
    pub slowdown: f64,
}

/// FCT slowdown of the flows whose size is in `(low, high]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeBin {
    pub low: u64,
    pub high: u64,
    pub flows: usize,
    pub median: f64,
    pub p95: f64,
    pub p99: f64,
}

/// Slowdown by flow size, as the DCQCN, IRN and HPCC papers plot it: flows grouped by
/// size between consecutive `edges` (bytes; a flow of size s falls in the bin with
/// `low < s <= high`), each bin's median, 95th and 99th percentile. Bins without flows
/// are left out.
pub fn slowdown_by_size(flows: &[Completion], edges: &[u64]) -> Vec<SizeBin> {
    edges
        .windows(2)
        .filter_map(|w| {
            let (low, high) = (w[0], w[1]);
            let mut s: Vec<f64> = flows
                .iter()
                .filter(|f| f.size > low && f.size <= high)
                .map(|f| f.slowdown)
                .collect();
            if s.is_empty() {
                return None;
            }
            s.sort_by(f64::total_cmp);
            Some(SizeBin {
                low,
                high,
                flows: s.len(),
                median: percentile(&s, 0.5),
                p95: percentile(&s, 0.95),
                p99: percentile(&s, 0.99),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_by_hand() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sample variance 32/7; t(7) = 2.365.
        let i = Interval::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(i.mean, 5.0);
        let hw = 2.365 * (32.0f64 / 7.0 / 8.0).sqrt();
        assert!((i.half_width - hw).abs() < 1e-12);
        assert!(i.contains(6.7) && !i.contains(6.9));
        assert!(Interval::of(&[3.0]).half_width.is_infinite());
        // The expansion meets the table and tends to the normal.
        assert!((t975(30) - 2.042).abs() < 1e-3);
        assert!((t975(31) - 2.040).abs() < 1e-3);
        assert!((t975(120) - 1.980).abs() < 1e-3);
    }

    #[test]
    fn an_interval_covers_the_true_mean_about_95_times_in_100() {
        // Runs of 5 normal draws (Box-Muller) of mean 3: over 4,000 intervals the
        // coverage is 95 % within 1.2 points (sd 0.34 point).
        let mut rng = crate::rng::Rng::new(77);
        let mut normal = move || {
            let (u1, u2) = (1.0 - rng.next_f64(), rng.next_f64());
            3.0 + (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        };
        let trials = 4000;
        let covered = (0..trials)
            .filter(|_| {
                let xs: Vec<f64> = (0..5).map(|_| normal()).collect();
                Interval::of(&xs).contains(3.0)
            })
            .count();
        let rate = covered as f64 / trials as f64;
        assert!((rate - 0.95).abs() < 0.012, "{rate}");
    }

    #[test]
    fn percentiles_and_bins() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 1.0), 100.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        let flows: Vec<Completion> = (1..=100)
            .map(|i| Completion {
                size: i * 10,
                slowdown: i as f64,
            })
            .collect();
        let bins = slowdown_by_size(&flows, &[0, 100, 500, 2000, 5000]);
        assert_eq!(bins.len(), 3);
        assert_eq!((bins[0].low, bins[0].high, bins[0].flows), (0, 100, 10));
        assert_eq!(bins[0].median, 5.0);
        assert_eq!((bins[1].flows, bins[2].flows), (40, 50));
        assert_eq!(bins[2].p99, 100.0);
    }
}
