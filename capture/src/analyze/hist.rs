//! A latency histogram of fixed relative precision: values below 64 ns exactly, above in
//! 32 steps per power of two (about 3 %), so its size depends on the largest value seen,
//! never on the number of samples.

use serde::Serialize;

const SUB_BITS: u32 = 5;
const LINEAR: u64 = 64;

#[derive(Debug, Clone, Default)]
pub struct Histogram {
    counts: Vec<u64>,
    samples: u64,
    min: u64,
    max: u64,
}

fn bucket(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= 6
    let sub = (v >> (e - SUB_BITS)) & ((1 << SUB_BITS) - 1);
    (LINEAR + u64::from(e - 6) * (1 << SUB_BITS) + sub) as usize
}

/// The smallest value of a bucket.
fn floor(i: usize) -> u64 {
    let i = i as u64;
    if i < LINEAR {
        return i;
    }
    let k = i - LINEAR;
    let e = 6 + k / (1 << SUB_BITS);
    let sub = k % (1 << SUB_BITS);
    (1 << e) | (sub << (e - u64::from(SUB_BITS)))
}

/// Percentiles of a histogram, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub samples: u64,
    pub min_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl Histogram {
    pub fn record(&mut self, ns: u64) {
        let i = bucket(ns);
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        self.min = if self.samples == 0 {
            ns
        } else {
            self.min.min(ns)
        };
        self.max = self.max.max(ns);
        self.samples += 1;
    }

    /// The value below which a fraction `q` of the samples lie: the floor of its bucket,
    /// clamped to the exact minimum and maximum.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.samples == 0 {
            return None;
        }
        let rank = ((q * self.samples as f64).ceil() as u64).clamp(1, self.samples);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(floor(i).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    pub fn percentiles(&self) -> Option<Percentiles> {
        let us = |q: f64| self.quantile(q).unwrap_or(0) as f64 / 1e3;
        (self.samples > 0).then(|| Percentiles {
            samples: self.samples,
            min_us: self.min as f64 / 1e3,
            p50_us: us(0.5),
            p90_us: us(0.9),
            p99_us: us(0.99),
            max_us: self.max as f64 / 1e3,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in (0..1_000_000u64).chain([u64::MAX / 3, u64::MAX]) {
            let b = bucket(v);
            assert!(b >= last);
            last = b;
            let f = floor(b);
            assert!(f <= v, "{v}: floor {f}");
            assert!(v - f <= v / 32 + 1, "{v}: floor {f}");
        }
    }

    #[test]
    fn quantiles_of_a_known_distribution() {
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let p = h.percentiles().unwrap();
        assert_eq!(p.samples, 1000);
        assert_eq!((p.min_us, p.max_us), (1.0, 1000.0));
        for (got, want) in [(p.p50_us, 500.0), (p.p90_us, 900.0), (p.p99_us, 990.0)] {
            assert!(got <= want && got >= want * 0.96, "{got} vs {want}");
        }
    }
}
