//! Traffic for fabric experiments: who sends how much to whom, and when. The patterns
//! are those of the DCQCN, IRN and HPCC evaluations: a random permutation, incast,
//! all-to-all, and Poisson arrivals of flows whose sizes follow a measured distribution.
//!
//! Flow-size distributions are piecewise-linear CDFs over a few measured points, as
//! published with HPCC's simulator (`traffic_gen/*_distribution.txt` in Li et al., "HPCC:
//! High Precision Congestion Control", SIGCOMM 2019, github.com/alibaba-edu/
//! High-Precision-Congestion-Control), which IRN and HPCC use:
//! * [`FlowSizeCdf::websearch`]: the web search cluster of Alizadeh et al., "Data Center
//!   TCP (DCTCP)", SIGCOMM 2010 (Figure 4): most flows are small, most bytes are in
//!   flows of 1 to 30 MB; mean 1.71 MB.
//! * [`FlowSizeCdf::hadoop`]: Facebook's Hadoop cluster of Roy et al., "Inside the Social
//!   Network's (Datacenter) Network", SIGCOMM 2015; mostly flows under 1 KB.
//!
//! Sizes are drawn by inverting the CDF with linear interpolation between its points.

use crate::queue::Nanos;
use crate::rng::Rng;

/// One transfer: `size` bytes from host `src` to host `dst`, starting at `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// Index in the workload (flows are sorted by start time, then source).
    pub id: usize,
    pub src: usize,
    pub dst: usize,
    pub size: u64,
    pub start: Nanos,
}

/// A flow-size distribution: a piecewise-linear CDF through `(bytes, fraction)` points.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSizeCdf {
    name: &'static str,
    points: Vec<(u64, f64)>,
}

impl FlowSizeCdf {
    /// A CDF through `points`: bytes strictly increasing, fractions strictly increasing
    /// from 0 to 1.
    pub fn new(name: &'static str, points: &[(u64, f64)]) -> Result<Self, String> {
        let ok = points.len() >= 2
            && points[0].1 == 0.0
            && points[points.len() - 1].1 == 1.0
            && points
                .windows(2)
                .all(|w| w[1].0 > w[0].0 && w[1].1 > w[0].1);
        if !ok {
            return Err(format!(
                "{name}: a CDF needs increasing sizes and fractions from 0 to 1"
            ));
        }
        Ok(Self {
            name,
            points: points.to_vec(),
        })
    }

    /// Web search (DCTCP, SIGCOMM 2010), as tabulated in HPCC's
    /// `WebSearch_distribution.txt`.
    pub fn websearch() -> Self {
        Self::from_percent(
            "websearch",
            &[
                (0, 0.0),
                (10_000, 15.0),
                (20_000, 20.0),
                (30_000, 30.0),
                (50_000, 40.0),
                (80_000, 53.0),
                (200_000, 60.0),
                (1_000_000, 70.0),
                (2_000_000, 80.0),
                (5_000_000, 90.0),
                (10_000_000, 97.0),
                (30_000_000, 100.0),
            ],
        )
    }

    /// Facebook Hadoop (SIGCOMM 2015), as tabulated in HPCC's `FbHdp_distribution.txt`.
    pub fn hadoop() -> Self {
        Self::from_percent(
            "hadoop",
            &[
                (0, 0.0),
                (100, 1.0),
                (200, 2.0),
                (300, 5.0),
                (350, 15.0),
                (400, 20.0),
                (500, 30.0),
                (600, 40.0),
                (700, 50.0),
                (1_000, 60.0),
                (2_000, 67.0),
                (7_000, 70.0),
                (30_000, 72.0),
                (50_000, 82.0),
                (80_000, 87.0),
                (120_000, 90.0),
                (300_000, 95.0),
                (1_000_000, 97.5),
                (2_000_000, 99.0),
                (10_000_000, 100.0),
            ],
        )
    }

    /// The distribution called `name` (`websearch`, `hadoop`).
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "websearch" => Some(Self::websearch()),
            "hadoop" => Some(Self::hadoop()),
            _ => None,
        }
    }

    fn from_percent(name: &'static str, pct: &[(u64, f64)]) -> Self {
        let points: Vec<(u64, f64)> = pct.iter().map(|&(b, p)| (b, p / 100.0)).collect();
        Self::new(name, &points).expect("a published CDF is well formed")
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The `(bytes, fraction)` points.
    pub fn points(&self) -> &[(u64, f64)] {
        &self.points
    }

    /// The size at cumulative fraction `u` in [0, 1]: linear between the points, at
    /// least one byte.
    pub fn quantile(&self, u: f64) -> u64 {
        let u = u.clamp(0.0, 1.0);
        for w in self.points.windows(2) {
            let ((x0, y0), (x1, y1)) = (w[0], w[1]);
            if u <= y1 {
                let x = x0 as f64 + (x1 - x0) as f64 * (u - y0) / (y1 - y0);
                return (x.round() as u64).max(1);
            }
        }
        self.points[self.points.len() - 1].0
    }

    /// A size drawn from the distribution.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        self.quantile(rng.next_f64())
    }

    /// The mean size in bytes (each segment uniform between its points).
    pub fn mean(&self) -> f64 {
        self.points
            .windows(2)
            .map(|w| (w[0].0 + w[1].0) as f64 / 2.0 * (w[1].1 - w[0].1))
            .sum()
    }
}

/// Poisson arrivals at every host for `duration`, each flow to a uniformly drawn other
/// host with a size from `cdf`, at a mean rate that fills `load` of each host's link of
/// `rate_bps` (HPCC's `traffic_gen.py` scheme): inter-arrival times are exponential with
/// mean `cdf.mean() * 8 / (load * rate)`.
pub fn poisson(
    hosts: usize,
    rate_bps: u64,
    load: f64,
    cdf: &FlowSizeCdf,
    duration: Nanos,
    rng: &mut Rng,
) -> Vec<Flow> {
    assert!(hosts >= 2, "traffic needs two hosts");
    assert!(load > 0.0, "a load must be positive");
    let mean_gap_ns = cdf.mean() * 8.0 / (load * rate_bps as f64) * 1e9;
    let mut flows = Vec::new();
    for src in 0..hosts {
        let mut t = 0.0;
        loop {
            // Exponential: -ln(1 - U) with U in [0, 1).
            t += -(1.0 - rng.next_f64()).ln() * mean_gap_ns;
            if t >= duration as f64 {
                break;
            }
            let dst = other_host(src, hosts, rng);
            let size = cdf.sample(rng);
            flows.push(Flow {
                id: 0,
                src,
                dst,
                size,
                start: t as Nanos,
            });
        }
    }
    number(flows)
}

/// A host other than `src`, uniformly.
fn other_host(src: usize, hosts: usize, rng: &mut Rng) -> usize {
    let d = rng.below(hosts as u64 - 1) as usize;
    if d >= src {
        d + 1
    } else {
        d
    }
}

/// Every host sends `size` bytes to one other host and receives from one: a uniformly
/// random permutation without fixed points (drawn by shuffling until none is left).
pub fn permutation(hosts: usize, size: u64, rng: &mut Rng) -> Vec<Flow> {
    assert!(hosts >= 2, "a permutation needs two hosts");
    let mut dst: Vec<usize> = (0..hosts).collect();
    loop {
        for i in (1..hosts).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            dst.swap(i, j);
        }
        if dst.iter().enumerate().all(|(s, &d)| s != d) {
            break;
        }
    }
    number(
        dst.iter()
            .enumerate()
            .map(|(src, &dst)| Flow {
                id: 0,
                src,
                dst,
                size,
                start: 0,
            })
            .collect(),
    )
}

/// Every host of `senders` sends `size` bytes to `receiver` at once.
pub fn incast(senders: &[usize], receiver: usize, size: u64) -> Vec<Flow> {
    assert!(
        !senders.contains(&receiver),
        "a receiver does not send to itself"
    );
    number(
        senders
            .iter()
            .map(|&src| Flow {
                id: 0,
                src,
                dst: receiver,
                size,
                start: 0,
            })
            .collect(),
    )
}

/// Every host sends `size` bytes to every other host at once.
pub fn all_to_all(hosts: usize, size: u64) -> Vec<Flow> {
    let flows = (0..hosts)
        .flat_map(|src| {
            (0..hosts).filter(move |&d| d != src).map(move |dst| Flow {
                id: 0,
                src,
                dst,
                size,
                start: 0,
            })
        })
        .collect();
    number(flows)
}

/// Sorts by start time, then source (then the generation order), and numbers the flows.
fn number(mut flows: Vec<Flow>) -> Vec<Flow> {
    flows.sort_by_key(|f| (f.start, f.src));
    for (i, f) in flows.iter_mut().enumerate() {
        f.id = i;
    }
    flows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_cdfs_have_their_published_means() {
        // By the trapezoids of the tabulated points, summed by hand: 750 + 750 + 2,500
        // + 4,000 + 8,450 + 9,800 + 60,000 + 150,000 + 350,000 + 525,000 + 600,000.
        let w = FlowSizeCdf::websearch();
        assert!((w.mean() - 1_711_250.0).abs() < 1e-6, "{}", w.mean());
        let h = FlowSizeCdf::hadoop();
        assert!(h.mean() > 100_000.0 && h.mean() < 200_000.0, "{}", h.mean());
        // Interpolation: 15 % at 10 KB, halfway to 20 % at 15 KB.
        assert_eq!(w.quantile(0.15), 10_000);
        assert_eq!(w.quantile(0.175), 15_000);
        assert_eq!(w.quantile(1.0), 30_000_000);
        assert_eq!(w.quantile(0.0), 1);
        assert!(FlowSizeCdf::new("bad", &[(0, 0.0), (10, 0.5)]).is_err());
        assert!(FlowSizeCdf::new("bad", &[(0, 0.0), (10, 0.6), (5, 1.0)]).is_err());
    }

    #[test]
    fn samples_follow_the_cdf() {
        let w = FlowSizeCdf::websearch();
        let mut rng = Rng::new(5);
        let n = 200_000;
        let sizes: Vec<u64> = (0..n).map(|_| w.sample(&mut rng)).collect();
        // The empirical CDF at every point within 4 standard deviations.
        for &(x, p) in w.points() {
            let got = sizes.iter().filter(|&&s| s <= x).count() as f64 / n as f64;
            let sd = (p * (1.0 - p) / n as f64).sqrt();
            assert!((got - p).abs() <= 4.0 * sd + 1e-9, "{x}: {got} vs {p}");
        }
        let mean = sizes.iter().sum::<u64>() as f64 / n as f64;
        assert!((mean / w.mean() - 1.0).abs() < 0.03, "{mean}");
    }

    #[test]
    fn poisson_arrivals_offer_the_load() {
        let w = FlowSizeCdf::websearch();
        let mut rng = Rng::new(1);
        let (hosts, rate, duration) = (16, 100_000_000_000, 200_000_000);
        let flows = poisson(hosts, rate, 0.5, &w, duration, &mut rng);
        // Offered bytes against load x capacity x time; heavy-tailed sizes make the sum
        // noisy: about 3,000 flows, within 10 %.
        let offered: u64 = flows.iter().map(|f| f.size).sum();
        let expected = 0.5 * rate as f64 / 8.0 * duration as f64 / 1e9 * hosts as f64;
        assert!(
            (offered as f64 / expected - 1.0).abs() < 0.1,
            "{offered} vs {expected}"
        );
        assert!(flows.iter().all(|f| f.src != f.dst && f.dst < hosts));
        assert!(flows.windows(2).all(|w| w[0].start <= w[1].start));
        assert!(flows.iter().enumerate().all(|(i, f)| f.id == i));
        // Each host's flows go everywhere else.
        let mut to = vec![false; hosts];
        flows
            .iter()
            .filter(|f| f.src == 3)
            .for_each(|f| to[f.dst] = true);
        assert_eq!(to.iter().filter(|&&b| b).count(), hosts - 1);
    }

    #[test]
    fn permutation_incast_and_all_to_all() {
        let mut rng = Rng::new(2);
        for _ in 0..20 {
            let p = permutation(16, 1000, &mut rng);
            let mut dsts: Vec<usize> = p.iter().map(|f| f.dst).collect();
            assert!(p.iter().all(|f| f.src != f.dst));
            dsts.sort();
            assert_eq!(dsts, (0..16).collect::<Vec<_>>());
        }
        let i = incast(&[1, 2, 3], 0, 5);
        assert_eq!(
            i.iter().map(|f| (f.src, f.dst)).collect::<Vec<_>>(),
            [(1, 0), (2, 0), (3, 0)]
        );
        let a = all_to_all(4, 7);
        assert_eq!(a.len(), 12);
        assert!(a.iter().all(|f| f.src != f.dst && f.size == 7));
    }
}
