//! The congestion point of DCQCN: RED-style ECN marking on an egress queue
//! (roce-facts §7.1, ns3-rdma `BroadcomNode::ShouldSendCN`).
//!
//! With the queue length q in bytes: q <= Kmin never marks; Kmin < q <= Kmax marks with
//! probability `Pmax * (q - Kmin) / (Kmax - Kmin)`; q > Kmax always marks. q is either
//! the instantaneous length or classic RED's exponentially weighted average, updated on
//! every arrival. Only ECN-capable packets (ECT(0), ECT(1)) are marked; Not-ECT packets
//! pass unmarked (a DCQCN switch does not drop them early), CE stays CE.

use crate::rng::Rng;

/// Which queue length RED compares with its thresholds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueueMeasure {
    /// The bytes in the queue when the packet arrives (DCQCN switches mark on this).
    Instantaneous,
    /// avg <- (1 - weight) * avg + weight * q on every arrival (RED, Floyd and Jacobson).
    Ewma { weight: f64 },
}

/// RED marking parameters of one switch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RedConfig {
    /// Lower threshold in bytes.
    pub kmin: u64,
    /// Upper threshold in bytes (> kmin).
    pub kmax: u64,
    /// Marking probability at q = Kmax (0..=1).
    pub pmax: f64,
    pub measure: QueueMeasure,
    /// Priorities whose queues mark (bit n = priority n).
    pub priorities: u8,
}

impl RedConfig {
    /// Instantaneous marking on every priority.
    pub fn new(kmin: u64, kmax: u64, pmax: f64) -> Self {
        assert!(kmax > kmin, "RED needs Kmax > Kmin");
        assert!((0.0..=1.0).contains(&pmax), "Pmax is a probability");
        Self {
            kmin,
            kmax,
            pmax,
            measure: QueueMeasure::Instantaneous,
            priorities: 0xFF,
        }
    }

    /// Marking probability for a queue of `q` bytes.
    pub fn probability(&self, q: f64) -> f64 {
        if q <= self.kmin as f64 {
            0.0
        } else if q > self.kmax as f64 {
            1.0
        } else {
            self.pmax * (q - self.kmin as f64) / (self.kmax - self.kmin) as f64
        }
    }
}

/// RED state of one egress queue.
#[derive(Debug, Clone, Copy, Default)]
pub struct RedQueue {
    avg: f64,
}

impl RedQueue {
    /// A packet arrives at a queue holding `q` bytes: updates the average (on every
    /// arrival, as RED does) and decides whether to mark it, which only an ECN-capable
    /// packet (`ect`) can be.
    pub fn should_mark(&mut self, cfg: &RedConfig, q: u64, ect: bool, rng: &mut Rng) -> bool {
        let measured = match cfg.measure {
            QueueMeasure::Instantaneous => q as f64,
            QueueMeasure::Ewma { weight } => {
                self.avg += weight * (q as f64 - self.avg);
                self.avg
            }
        };
        ect && rng.chance(cfg.probability(measured))
    }

    /// The current EWMA average (0 for instantaneous marking).
    pub fn average(&self) -> f64 {
        self.avg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ramp_is_linear_between_the_thresholds() {
        let red = RedConfig::new(1000, 3000, 0.2);
        assert_eq!(red.probability(1000.0), 0.0);
        assert!((red.probability(2000.0) - 0.1).abs() < 1e-12);
        assert!((red.probability(3000.0) - 0.2).abs() < 1e-12);
        assert_eq!(red.probability(3000.5), 1.0);
    }

    #[test]
    fn the_average_follows_the_queue_with_its_weight() {
        let cfg = RedConfig {
            measure: QueueMeasure::Ewma { weight: 0.5 },
            ..RedConfig::new(20_000, 25_000, 0.0)
        };
        let mut q = RedQueue::default();
        let mut rng = Rng::new(1);
        // Samples of 40_000 bytes: the average goes 20_000 (= Kmin), then 30_000 (> Kmax).
        assert!(!q.should_mark(&cfg, 40_000, true, &mut rng));
        assert_eq!(q.average(), 20_000.0);
        // A Not-ECT arrival still moves the average, but is never marked.
        assert!(!q.should_mark(&cfg, 40_000, false, &mut rng));
        assert_eq!(q.average(), 30_000.0);
        assert!(q.should_mark(&cfg, 40_000, true, &mut rng));
        assert_eq!(q.average(), 35_000.0);
    }
}
