//! The PNG figures of `roce sim`, in the look of `roce-plot`.

use super::fabric::FabricResult;
use super::fct::{bytes, FctResult};
use super::sweep::{loss_label, SweepResult};
use anyhow::Result;
use plotters::prelude::*;
use roce_plot::{color, err, fonts, legend, panel, swatch, FONT};
use roce_sim::stats;
use std::path::Path;

/// Goodput against loss rate, one line per (recovery, timeout) that ran.
pub fn sweep(path: &Path, title: &str, r: &SweepResult) -> Result<()> {
    fonts();
    let s = &r.sweep;
    let n = s.loss.len() as i32;
    let ymax = r.rows.iter().map(|x| x.goodput_gbps).fold(1.0f64, f64::max) * 1.1;
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0..(n - 1).max(1), 0f64..ymax)
        .map_err(err)?;
    let labels: Vec<String> = s.loss.iter().map(|&l| loss_label(l)).collect();
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_labels(n as usize)
        .x_label_formatter(&|i| labels.get(*i as usize).cloned().unwrap_or_default())
        .x_desc("frame loss probability (each direction)")
        .y_desc("goodput (Gb/s)")
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(err)?;
    let mut k = 0;
    for &rec in &s.recovery {
        for &t in &s.timeout {
            let pts: Vec<(i32, f64)> = s
                .loss
                .iter()
                .enumerate()
                .filter_map(|(i, &l)| Some((i as i32, r.get(rec, t, l)?.goodput_gbps)))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let c = color(k);
            k += 1;
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)).point_size(4))
                .map_err(err)?
                .label(format!("{} t={t}", rec.name()))
                .legend(swatch(c, 2));
            // The 95 % intervals of cells run more than once.
            for (i, &l) in s.loss.iter().enumerate() {
                let Some(cell) = r.get(rec, t, l).filter(|c| c.runs > 1) else {
                    continue;
                };
                let hi = cell.high_gbps.min(ymax);
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(i as i32, cell.low_gbps), (i as i32, hi)],
                        c.stroke_width(2),
                    )))
                    .map_err(err)?;
            }
        }
    }
    legend(&mut chart, SeriesLabelPosition::LowerLeft, 14)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Three panels over time: per-flow rates, the bottleneck queue (with the ECN band), and
/// the running totals of PFC frames and CNPs.
pub fn fabric(path: &Path, title: &str, r: &FabricResult) -> Result<()> {
    fonts();
    let root = BitMapBackend::new(path, (1000, 1050)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, (FONT, 22)).map_err(err)?;
    let panels = root.split_evenly((3, 1));
    let t_end = r.samples.last().map_or(1.0, |s| s.time_ns as f64 / 1e6);
    let ms = |ns: u64| ns as f64 / 1e6;

    // Rates.
    let rmax = r
        .samples
        .iter()
        .flat_map(|s| s.rates_gbps.iter().copied())
        .fold(1.0f64, f64::max)
        * 1.05;
    let mut chart = panel(
        &panels[0],
        "rate per flow",
        t_end,
        (0.0, rmax),
        "Gb/s",
        None,
    )?;
    for (i, name) in r.flows.iter().enumerate() {
        let c = color(i);
        let pts = r.samples.iter().map(|s| (ms(s.time_ns), s.rates_gbps[i]));
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(1)))
            .map_err(err)?
            .label(name.as_str())
            .legend(swatch(c, 2));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight, 12)?;

    // Queue.
    let kb = |b: u64| b as f64 / 1e3;
    let qmax = r
        .samples
        .iter()
        .map(|s| kb(s.queue_bytes))
        .chain(r.ecn.map(|(_, hi)| kb(hi)))
        .fold(1.0f64, f64::max)
        * 1.1;
    let mut chart = panel(
        &panels[1],
        "bottleneck queue",
        t_end,
        (0.0, qmax),
        "KB",
        None,
    )?;
    let pts = r.samples.iter().map(|s| (ms(s.time_ns), kb(s.queue_bytes)));
    chart
        .draw_series(LineSeries::new(pts, color(0).stroke_width(1)))
        .map_err(err)?
        .label("queue")
        .legend(swatch(color(0), 2));
    if let Some((lo, hi)) = r.ecn {
        for (v, name) in [(lo, "Kmin"), (hi, "Kmax")] {
            let c = color(3);
            chart
                .draw_series(LineSeries::new(
                    [(0.0, kb(v)), (t_end, kb(v))],
                    c.mix(0.6).stroke_width(1),
                ))
                .map_err(err)?
                .label(name)
                .legend(swatch(c, 1));
        }
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight, 12)?;

    // Running totals.
    let cmax = r
        .samples
        .iter()
        .map(|s| s.pause_frames.max(s.cnps).max(s.retransmits) as f64)
        .fold(1.0f64, f64::max)
        * 1.1;
    let whole = |v: &f64| format!("{v:.0}");
    let mut chart = panel(
        &panels[2],
        "PFC frames, CNPs and retransmissions so far",
        t_end,
        (0.0, cmax),
        "count",
        Some(&whole),
    )?;
    type Get = fn(&super::fabric::Sample) -> u64;
    let series: [(&str, Get); 3] = [
        ("PFC frames sent", |s| s.pause_frames),
        ("CNPs sent", |s| s.cnps),
        ("retransmitted packets", |s| s.retransmits),
    ];
    for (i, (name, get)) in series.into_iter().enumerate() {
        let c = color(i + 3);
        let pts = r.samples.iter().map(|s| (ms(s.time_ns), get(s) as f64));
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(err)?
            .label(name)
            .legend(swatch(c, 2));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft, 12)?;
    root.present().map_err(err)?;
    Ok(())
}

/// FCT slowdown by flow size: the median and the 99th percentile of each size bin
/// (means over the runs, with their 95 % intervals as error bars), log scale up.
pub fn fct(path: &Path, title: &str, r: &FctResult) -> Result<()> {
    fonts();
    let n = r.bins.len() as i32;
    let top = r
        .bins
        .iter()
        .map(|b| b.p99.mean + b.p99.half_width.min(b.p99.mean))
        .fold(2.0f64, f64::max)
        * 1.3;
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5).max(0.5), (1f64..top).log_scale())
        .map_err(err)?;
    let labels: Vec<String> = r.bins.iter().map(|b| bytes(b.high)).collect();
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_labels(n.max(1) as usize)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() > 0.01 || i < 0.0 {
                return String::new();
            }
            labels.get(i as usize).cloned().unwrap_or_default()
        })
        .x_desc("flow size (upper edge of the bin)")
        .y_desc("FCT slowdown")
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(err)?;
    type Get = fn(&super::fct::BinSummary) -> stats::Interval;
    let series: [(&str, Get); 2] = [("median", |b| b.median), ("99th percentile", |b| b.p99)];
    for (k, (name, get)) in series.into_iter().enumerate() {
        let c = color(k);
        let pts: Vec<(f64, f64)> = r
            .bins
            .iter()
            .enumerate()
            .map(|(i, b)| (i as f64, get(b).mean.max(1.0)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)).point_size(4))
            .map_err(err)?
            .label(name)
            .legend(swatch(c, 2));
        // Error bars: the interval as a vertical line with short caps.
        for (i, b) in r.bins.iter().enumerate() {
            let iv = get(b);
            if !iv.half_width.is_finite() {
                continue;
            }
            let (x, lo, hi) = (i as f64, iv.low().max(1.0), iv.high().max(1.0));
            let lines = [
                vec![(x, lo), (x, hi)],
                vec![(x - 0.08, lo), (x + 0.08, lo)],
                vec![(x - 0.08, hi), (x + 0.08, hi)],
            ];
            chart
                .draw_series(lines.map(|l| PathElement::new(l, c.stroke_width(1))))
                .map_err(err)?;
        }
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft, 14)?;
    root.present().map_err(err)?;
    Ok(())
}
