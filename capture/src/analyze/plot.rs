//! The PNG time line of one connection (`roce analyze --plot`): request PSNs with the
//! resends, NAKs, RNR NAKs and timeouts; payload rate each way; CNPs and ECN-CE marks.

use super::bins::Merge;
use super::stream::{Cause, ResponseKind, Sent};
use super::{Analyzer, Flow};
use anyhow::{bail, Result};
use roce_plot::plotters::prelude::*;
use roce_plot::{color, err, fonts, legend, panel, swatch, FONT};
use std::path::Path;

/// What one bin of a flow's time line holds.
#[derive(Debug, Clone, Default)]
pub struct Slot {
    /// Payload bytes the flow carried.
    pub bytes: u64,
    /// The highest request PSN sent for the first time (offset from the first).
    pub high: Option<i64>,
    /// The lowest request PSN sent again.
    pub resend_low: Option<i64>,
    pub resent: u64,
    /// PSN sequence error NAKs for the flow's requests, and the lowest PSN they named.
    pub naks: u64,
    pub nak_low: Option<i64>,
    pub rnr_naks: u64,
    /// Go-Back-N episodes the local ACK timer started.
    pub timeouts: u64,
    /// Packets of the flow marked ECN-CE, and CNPs on it.
    pub ecn_ce: u64,
    pub cnps: u64,
}

impl Slot {
    pub fn request(&mut self, s: &Sent) {
        if s.resent {
            self.resent += 1;
            self.resend_low = Some(self.resend_low.map_or(s.offset, |l| l.min(s.offset)));
        } else {
            self.high = Some(self.high.map_or(s.offset, |h| h.max(s.offset)));
        }
        if matches!(s.episode, Some(Cause::Timeout { .. })) {
            self.timeouts += 1;
        }
    }

    /// A response for the flow's requests; `offset` is the PSN it names.
    pub fn response(&mut self, k: ResponseKind, offset: i64) {
        match k {
            ResponseKind::Nak(0) => {
                self.naks += 1;
                self.nak_low = Some(self.nak_low.map_or(offset, |l| l.min(offset)));
            }
            ResponseKind::RnrNak { .. } => self.rnr_naks += 1,
            _ => {}
        }
    }
}

impl Merge for Slot {
    fn merge(&mut self, o: &Self) {
        let max = |a: Option<i64>, b: Option<i64>| a.max(b);
        let min = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        self.bytes += o.bytes;
        self.high = max(self.high, o.high);
        self.resend_low = min(self.resend_low, o.resend_low);
        self.resent += o.resent;
        self.naks += o.naks;
        self.nak_low = min(self.nak_low, o.nak_low);
        self.rnr_naks += o.rnr_naks;
        self.timeouts += o.timeouts;
        self.ecn_ce += o.ecn_ce;
        self.cnps += o.cnps;
    }
}

impl Analyzer {
    /// Draws connection `id` (numbered as in the report) into a PNG. Needs
    /// `Options::timelines`.
    pub fn plot(&self, id: usize, path: &Path) -> Result<()> {
        let conns = self.connections();
        let Some(&(a, b)) = id.checked_sub(1).and_then(|i| conns.get(i)) else {
            bail!(
                "there is no connection {id} (the capture has {})",
                conns.len()
            );
        };
        let flows: Vec<&Flow> = std::iter::once(a)
            .chain(b)
            .map(|i| &self.flows[i])
            .collect();
        let Some(lines) = flows
            .iter()
            .map(|f| f.timeline.as_ref())
            .collect::<Option<Vec<_>>>()
        else {
            bail!("the analysis kept no time lines");
        };
        let name = |f: &Flow| format!("{} -> {} {:#x}", f.src, f.dst, f.qpn);
        let ms = |ns: u64| ns as f64 / 1e6;
        let t_end = ms(self.last_ns).max(1e-3);
        fonts();
        let root = BitMapBackend::new(path, (1100, 1000)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root
            .titled(&format!("connection {id}"), (FONT, 22))
            .map_err(err)?;
        let panels = root.split_evenly((3, 1));

        // Request PSNs.
        let psn_max = lines
            .iter()
            .flat_map(|l| l.iter().filter_map(|(_, s)| s.high))
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        let whole = |v: &f64| format!("{v:.0}");
        let mut chart = panel(
            &panels[0],
            "request PSNs (from each side's first) with what disturbed them",
            t_end,
            (0.0, psn_max * 1.05),
            "PSN",
            Some(&whole),
        )?;
        type Mark = (&'static str, RGBColor, fn(&Slot) -> Option<i64>);
        let marks: [Mark; 5] = [
            ("sent", color(0), |s| s.high),
            ("resent (lowest PSN)", color(3), |s| s.resend_low),
            ("NAK (PSN it names)", color(4), |s| s.nak_low),
            ("RNR NAK", color(1), |s| {
                (s.rnr_naks > 0).then_some(s.high.or(s.resend_low)?)
            }),
            ("timeout", BLACK, |s| {
                (s.timeouts > 0).then_some(s.resend_low?)
            }),
        ];
        for (i, (f, line)) in flows.iter().zip(&lines).enumerate() {
            let w = line.width_ns();
            for (k, (label, c, get)) in marks.into_iter().enumerate() {
                // The second side's sends in its own colour.
                let c = if k == 0 { color(i) } else { c };
                let pts: Vec<(f64, f64)> = line
                    .iter()
                    .filter_map(|(t, s)| Some((ms(t + w / 2), get(s)? as f64)))
                    .collect();
                if pts.is_empty() {
                    continue;
                }
                let label = if k == 0 {
                    format!("sent: {}", name(f))
                } else {
                    label.to_string()
                };
                let series = match k {
                    0 => chart.draw_series(pts.iter().map(|&p| Circle::new(p, 2, c.filled()))),
                    1 => chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled()))),
                    4 => {
                        chart.draw_series(pts.iter().map(|&p| Cross::new(p, 7, c.stroke_width(2))))
                    }
                    _ => chart
                        .draw_series(pts.iter().map(|&p| TriangleMarker::new(p, 7, c.filled()))),
                };
                series
                    .map_err(err)?
                    .label(label)
                    .legend(move |(x, y)| Circle::new((x + 10, y), 4, c.filled()));
            }
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft, 12)?;

        // Payload rate.
        let gbps = |bytes: u64, w: u64| bytes as f64 * 8.0 / w as f64;
        let rmax = lines
            .iter()
            .flat_map(|l| l.iter().map(|(_, s)| gbps(s.bytes, l.width_ns())))
            .fold(0.1f64, f64::max)
            * 1.1;
        let mut chart = panel(&panels[1], "payload rate", t_end, (0.0, rmax), "Gb/s", None)?;
        for (i, (f, line)) in flows.iter().zip(&lines).enumerate() {
            let w = line.width_ns();
            let c = color(i);
            let pts = line.iter().map(|(t, s)| (ms(t + w / 2), gbps(s.bytes, w)));
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                .map_err(err)?
                .label(name(f))
                .legend(swatch(c, 2));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, 12)?;

        // Congestion.
        type Count = fn(&Slot) -> u64;
        let kinds: [(&str, Count); 2] = [("ECN-CE marks/s", |s| s.ecn_ce), ("CNPs/s", |s| s.cnps)];
        let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for (f, line) in flows.iter().zip(&lines) {
            let w = line.width_ns();
            for (what, count) in kinds {
                if line.iter().any(|(_, s)| count(s) > 0) {
                    let pts = line
                        .iter()
                        .map(|(t, s)| (ms(t + w / 2), count(s) as f64 * 1e9 / w as f64))
                        .collect();
                    series.push((format!("{what}: {}", name(f)), pts));
                }
            }
        }
        let cmax = series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|x| x.1))
            .fold(1.0f64, f64::max)
            * 1.1;
        let per_second = |v: &f64| {
            if series.is_empty() {
                String::new()
            } else {
                format!("{v:.0}")
            }
        };
        let caption = if series.is_empty() {
            "congestion signals: no ECN-CE marks or CNPs"
        } else {
            "congestion signals"
        };
        let mut chart = panel(
            &panels[2],
            caption,
            t_end,
            (0.0, cmax),
            "per second",
            Some(&per_second),
        )?;
        let any = !series.is_empty();
        for (i, (label, pts)) in series.into_iter().enumerate() {
            let c = color(i + 5);
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                .map_err(err)?
                .label(label)
                .legend(swatch(c, 2));
        }
        if any {
            legend(&mut chart, SeriesLabelPosition::UpperRight, 12)?;
        }
        root.present().map_err(err)?;
        Ok(())
    }
}
