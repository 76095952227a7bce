//! Congestion control at the NIC: the DCQCN reaction point (per-QP rate control driven by
//! CNPs), the notification point (CNP generation on ECN-CE), and the pacer that enforces
//! the current rate. Sans-IO: time is passed in as nanoseconds; nothing reads a clock.
//!
//! The algorithm follows the DCQCN authors' simulator as summarised in roce-facts §7.3
//! (ns3-rdma `rpr_cnm_received`, `ResumeAlpha`, `rpr_*`, `AdjustRates`):
//! * on a CNP: `Rt <- Rc`, `alpha <- (1 - g) alpha + g`, `Rc <- max(Rmin, Rc (1 - alpha/2))`,
//!   reset the stage counters T and BC and restart both timers;
//! * every `alpha_timer` without a CNP: `alpha <- (1 - g) alpha`;
//! * a rate-increase event (every `increase_timer`, and every `byte_counter` bytes sent)
//!   bumps T or BC, then: fast recovery while `max(T, BC) < F` (`Rc <- (Rt + Rc)/2`),
//!   additive increase when one of them reached F (`Rt += R_AI`), hyper increase when
//!   both did (`Rt += i R_HAI`, `i = min(T, BC) - F + 1`), and `Rc <- (Rt + Rc)/2`;
//!   both rates are capped at line rate.
//!
//! Arithmetic is integer (rates in bit/s, alpha in Q20 fixed point), so a soft core
//! without an FPU runs it cheaply and every platform computes the same numbers.

/// Fixed-point one for alpha and g (Q20).
pub const ONE: u32 = 1 << 20;

/// Reaction-point parameters. Defaults are the DCQCN paper's set as listed in roce-facts
/// §7.4 (g, K, timer, B, F, R_AI), with the ns3-rdma values where the paper's are not
/// known (R_HAI 200 Mb/s, minimum rate 100 Mb/s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DcqcnConfig {
    /// Line rate in bit/s: the starting rate and the cap.
    pub line_rate: u64,
    /// Gain g in Q20 (1/256 = 4096).
    pub g: u32,
    /// Alpha before the first CNP, Q20.
    pub initial_alpha: u32,
    /// K: alpha decays after this long without a CNP (ns).
    pub alpha_timer_ns: u64,
    /// Rate-increase timer period (ns).
    pub increase_timer_ns: u64,
    /// Byte counter B: a rate-increase event every B bytes sent.
    pub byte_counter: u64,
    /// F: fast-recovery steps.
    pub fast_recovery_steps: u32,
    /// R_AI: additive increase step (bit/s).
    pub rate_ai: u64,
    /// R_HAI: hyper increase step (bit/s).
    pub rate_hai: u64,
    /// Floor of the current rate (bit/s).
    pub min_rate: u64,
}

impl DcqcnConfig {
    /// The default parameter set for a link of `line_rate` bit/s.
    pub const fn new(line_rate: u64) -> Self {
        Self {
            line_rate,
            g: ONE / 256,
            initial_alpha: ONE,
            alpha_timer_ns: 55_000,
            increase_timer_ns: 55_000,
            byte_counter: 10 * 1024 * 1024,
            fast_recovery_steps: 5,
            rate_ai: 40_000_000,
            rate_hai: 200_000_000,
            min_rate: 100_000_000,
        }
    }
}

/// Per-QP reaction point state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReactionPoint {
    /// Current rate Rc (bit/s).
    rc: u64,
    /// Target rate Rt (bit/s).
    rt: u64,
    /// Alpha, Q20.
    alpha: u32,
    /// Timer stage counter T.
    t: u32,
    /// Byte stage counter BC.
    bc: u32,
    /// Bytes sent since the last byte-counter event.
    bytes: u64,
    /// When alpha next decays (None until the first CNP).
    alpha_at: Option<u64>,
    /// When the rate next increases (None while at line rate).
    increase_at: Option<u64>,
}

impl ReactionPoint {
    /// A flow at line rate that has seen no CNP.
    pub const fn new(cfg: &DcqcnConfig) -> Self {
        Self {
            rc: cfg.line_rate,
            rt: cfg.line_rate,
            alpha: cfg.initial_alpha,
            t: 0,
            bc: 0,
            bytes: 0,
            alpha_at: None,
            increase_at: None,
        }
    }

    /// Current rate Rc in bit/s.
    pub const fn rate(&self) -> u64 {
        self.rc
    }
    /// Target rate Rt in bit/s.
    pub const fn target_rate(&self) -> u64 {
        self.rt
    }
    /// Alpha in Q20.
    pub const fn alpha(&self) -> u32 {
        self.alpha
    }

    /// A CNP arrived for this flow.
    pub fn on_cnp(&mut self, cfg: &DcqcnConfig, now: u64) {
        self.rt = self.rc;
        self.alpha = mix(self.alpha, cfg.g, ONE);
        let cut = mul_q20(self.rc, self.alpha) / 2;
        self.rc = self.rc.saturating_sub(cut).max(cfg.min_rate);
        self.t = 0;
        self.bc = 0;
        self.bytes = 0;
        self.alpha_at = Some(now + cfg.alpha_timer_ns);
        self.increase_at = Some(now + cfg.increase_timer_ns);
    }

    /// `n` bytes left the NIC for this flow; may trigger byte-counter increase events.
    pub fn on_sent(&mut self, cfg: &DcqcnConfig, n: u64) {
        if self.increase_at.is_none() || cfg.byte_counter == 0 {
            return; // at line rate: nothing to recover
        }
        self.bytes += n;
        while self.bytes >= cfg.byte_counter && self.increase_at.is_some() {
            self.bytes -= cfg.byte_counter;
            self.bc = self.bc.saturating_add(1);
            self.increase(cfg);
        }
    }

    /// The next instant a timer fires.
    pub fn poll_timeout(&self) -> Option<u64> {
        match (self.alpha_at, self.increase_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs every timer due at `now`.
    pub fn handle_timeout(&mut self, cfg: &DcqcnConfig, now: u64) {
        while let Some(at) = self.alpha_at.filter(|&at| at <= now) {
            self.alpha = mix(self.alpha, cfg.g, 0);
            self.alpha_at = Some(at + cfg.alpha_timer_ns.max(1));
        }
        while let Some(at) = self.increase_at.filter(|&at| at <= now) {
            self.increase_at = Some(at + cfg.increase_timer_ns.max(1));
            self.t = self.t.saturating_add(1);
            self.increase(cfg);
        }
    }

    fn increase(&mut self, cfg: &DcqcnConfig) {
        let f = cfg.fast_recovery_steps;
        if self.t.max(self.bc) < f {
            // fast recovery: Rt unchanged
        } else if self.t.min(self.bc) >= f {
            let i = u64::from(self.t.min(self.bc) - f + 1);
            self.rt = self.rt.saturating_add(i.saturating_mul(cfg.rate_hai));
        } else {
            self.rt = self.rt.saturating_add(cfg.rate_ai);
        }
        self.rt = self.rt.min(cfg.line_rate);
        self.rc = (self.rt + self.rc).div_ceil(2).min(cfg.line_rate);
        if self.rc >= cfg.line_rate {
            // Fully recovered: stop the increase timer (alpha keeps decaying).
            self.increase_at = None;
            self.bytes = 0;
        }
    }
}

/// `(1 - g) x + g target`, all Q20.
fn mix(x: u32, g: u32, target: u32) -> u32 {
    let g = u64::from(g.min(ONE));
    let v = (u64::from(x) * (u64::from(ONE) - g) + u64::from(target) * g) >> 20;
    v as u32
}

/// `rate * q / 2^20` without overflow.
fn mul_q20(rate: u64, q: u32) -> u64 {
    ((u128::from(rate) * u128::from(q)) >> 20) as u64
}

/// Paces transmissions at a rate: a packet may leave when the previous one's
/// serialisation at the paced rate has passed (a token bucket of one packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pacer {
    next_at: u64,
}

impl Pacer {
    /// Earliest instant the next packet may leave.
    pub const fn ready_at(&self) -> u64 {
        self.next_at
    }
    /// Whether a packet may leave at `now`.
    pub const fn ready(&self, now: u64) -> bool {
        now >= self.next_at
    }
    /// Account a packet of `wire_bytes` sent at `now` at `rate` bit/s.
    pub fn on_sent(&mut self, now: u64, wire_bytes: u64, rate: u64) {
        let gap = (wire_bytes * 8 * 1_000_000_000).div_ceil(rate.max(1));
        self.next_at = self.next_at.max(now) + gap;
    }
}

/// Notification point: sends at most one CNP per flow per interval (roce-facts §7.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NotificationPoint {
    last: Option<u64>,
}

/// The DCQCN authors' CNP interval: 50 us.
pub const DEFAULT_CNP_INTERVAL_NS: u64 = 50_000;

impl NotificationPoint {
    /// A CE-marked packet of this flow arrived at `now`: returns true if a CNP should be
    /// sent now.
    pub fn on_ce(&mut self, now: u64, interval_ns: u64) -> bool {
        match self.last {
            Some(t) if now < t.saturating_add(interval_ns) => false,
            _ => {
                self.last = Some(now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G100: u64 = 100_000_000_000;

    #[test]
    fn first_cnp_halves_the_rate_with_alpha_one() {
        // alpha = (1 - 1/256) * 1 + 1/256 = 1; Rc = 100G * (1 - 1/2) = 50G; Rt = 100G.
        let cfg = DcqcnConfig::new(G100);
        let mut rp = ReactionPoint::new(&cfg);
        rp.on_cnp(&cfg, 0);
        assert_eq!(rp.alpha(), ONE);
        assert_eq!(rp.rate(), 50_000_000_000);
        assert_eq!(rp.target_rate(), G100);
        // A second CNP at once: Rt = 50G, Rc = 25G.
        rp.on_cnp(&cfg, 0);
        assert_eq!(
            (rp.rate(), rp.target_rate()),
            (25_000_000_000, 50_000_000_000)
        );
    }

    #[test]
    fn alpha_decays_by_one_minus_g_per_period() {
        let cfg = DcqcnConfig::new(G100);
        let mut rp = ReactionPoint::new(&cfg);
        rp.on_cnp(&cfg, 0);
        rp.handle_timeout(&cfg, 55_000); // also the first increase event
                                         // alpha = 1 * 255/256 = 0.99609375 -> Q20 1044480.
        assert_eq!(rp.alpha(), 1_044_480);
        rp.handle_timeout(&cfg, 110_000);
        // 0.99609375 * 255/256 = 0.992202758..., Q20 floor 1040400.
        assert_eq!(rp.alpha(), 1_040_400);
    }

    #[test]
    fn fast_recovery_then_additive_then_hyper_increase() {
        let mut cfg = DcqcnConfig::new(G100);
        cfg.byte_counter = 0; // timer events only: T grows, BC stays 0
        let mut rp = ReactionPoint::new(&cfg);
        rp.on_cnp(&cfg, 0); // Rc 50G, Rt 100G
                            // Fast recovery (T = 1..4 < F = 5): Rc halves the gap to Rt each time.
        let mut expect_rc = 50_000_000_000u64;
        for k in 1..=4u64 {
            rp.handle_timeout(&cfg, 55_000 * k);
            expect_rc = (G100 + expect_rc).div_ceil(2);
            assert_eq!(rp.rate(), expect_rc, "step {k}");
            assert_eq!(rp.target_rate(), G100);
        }
        // T = 5 >= F, BC = 0 < F: additive increase, Rt capped at line rate.
        rp.handle_timeout(&cfg, 55_000 * 5);
        assert_eq!(rp.target_rate(), G100);

        // Hyper increase needs both counters >= F: from a low rate, with B small.
        let mut cfg = DcqcnConfig::new(G100);
        cfg.byte_counter = 1000;
        let mut rp = ReactionPoint::new(&cfg);
        rp.on_cnp(&cfg, 0);
        rp.on_cnp(&cfg, 0);
        rp.on_cnp(&cfg, 0); // Rc = 12.5G, Rt = 25G
        assert_eq!(
            (rp.rate(), rp.target_rate()),
            (12_500_000_000, 25_000_000_000)
        );
        rp.on_sent(&cfg, 5 * 1000); // BC = 5: one of the counters at F -> additive
                                    // BC=1..4 fast recovery: Rc -> 18.75, 21.875, 23.4375, 24.21875 G; BC=5: Rt += 40M.
        assert_eq!(rp.target_rate(), 25_040_000_000);
        assert_eq!(rp.rate(), (25_040_000_000u64 + 24_218_750_000).div_ceil(2));
        for k in 1..=5u64 {
            rp.handle_timeout(&cfg, 55_000 * k); // T = 1..5; at T = 5 both >= F: hyper
        }
        // T=1..4 with BC=5: additive (+40M each): Rt = 25.2G; T=5: i = 1 -> +200M.
        assert_eq!(rp.target_rate(), 25_400_000_000);
    }

    #[test]
    fn rate_never_falls_below_the_floor() {
        let cfg = DcqcnConfig::new(G100);
        let mut rp = ReactionPoint::new(&cfg);
        for _ in 0..100 {
            rp.on_cnp(&cfg, 0);
        }
        assert_eq!(rp.rate(), cfg.min_rate);
    }

    #[test]
    fn recovery_returns_to_line_rate_and_stops_the_timer() {
        let cfg = DcqcnConfig::new(G100);
        let mut rp = ReactionPoint::new(&cfg);
        rp.on_cnp(&cfg, 0);
        let mut now = 0;
        while rp.rate() < G100 {
            now = rp.poll_timeout().unwrap();
            rp.handle_timeout(&cfg, now);
            assert!(now < 10_000_000_000, "no recovery");
        }
        assert_eq!(rp.target_rate(), G100);
        // Only the alpha timer remains, still on its 55 us grid.
        let next = rp.poll_timeout().unwrap();
        assert!(next > now && next % 55_000 == 0);
    }

    #[test]
    fn pacer_spaces_packets_at_the_rate() {
        let mut p = Pacer::default();
        p.on_sent(0, 1250, 10_000_000_000); // 10 000 bits at 10 Gb/s = 1 us
        assert_eq!(p.ready_at(), 1000);
        assert!(!p.ready(999) && p.ready(1000));
        p.on_sent(5000, 1250, 10_000_000_000); // idle gap: no credit is banked
        assert_eq!(p.ready_at(), 6000);
    }

    #[test]
    fn notification_point_sends_one_cnp_per_interval() {
        let mut np = NotificationPoint::default();
        assert!(np.on_ce(0, DEFAULT_CNP_INTERVAL_NS));
        assert!(!np.on_ce(49_999, DEFAULT_CNP_INTERVAL_NS));
        assert!(np.on_ce(50_000, DEFAULT_CNP_INTERVAL_NS));
        assert!(!np.on_ce(60_000, DEFAULT_CNP_INTERVAL_NS));
    }
}
