//! What the project's PNG figures share (`roce sim`'s and `roce analyze`'s): `plotters` on
//! its bitmap backend with the font compiled in (DejaVu Sans, `assets/`, Bitstream Vera
//! licence, rasterised by `ab_glyph`, so plotting needs no fontconfig, FreeType or system
//! fonts), one palette, time panels and legends.

use anyhow::{anyhow, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use std::sync::Once;

pub use plotters;

/// The font family every figure uses.
pub const FONT: &str = "sans-serif";

/// Registers the compiled-in font (once); call before drawing text.
pub fn fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let ttf: &'static [u8] = include_bytes!("../assets/DejaVuSans.ttf");
        // The bytes are a valid TrueType font; a failure would show as missing text.
        let _ = register_font(FONT, FontStyle::Normal, ttf);
    });
}

/// A plotting error as an `anyhow` one.
pub fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e:?}")
}

/// The `i`-th colour of the palette.
pub fn color(i: usize) -> RGBColor {
    // Tableau 10: distinct, and readable on white.
    const C: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    let (r, g, b) = C[i % C.len()];
    RGBColor(r, g, b)
}

pub type Area<'b> = DrawingArea<BitMapBackend<'b>, Shift>;
pub type Chart<'a, 'b, X, Y> = ChartContext<'a, BitMapBackend<'b>, Cartesian2d<X, Y>>;

/// A line's sample in the legend: a short stroke in its colour.
pub fn swatch(c: RGBColor, width: u32) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(width))
}

/// The legend box, at `at`, in labels of `size` points.
pub fn legend<'b: 'a, 'a, X: Ranged, Y: Ranged>(
    chart: &mut Chart<'a, 'b, X, Y>,
    at: SeriesLabelPosition,
    size: u32,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(at)
        .label_font((FONT, size))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// A panel with time in ms across, `y_desc` from `ymin` to `ymax` up, the y labels
/// written by `y_fmt` where given.
pub fn panel<'a, 'b>(
    area: &'a Area<'b>,
    caption: &str,
    t_end: f64,
    (ymin, ymax): (f64, f64),
    y_desc: &str,
    y_fmt: Option<&dyn Fn(&f64) -> String>,
) -> Result<Chart<'a, 'b, RangedCoordf64, RangedCoordf64>> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 16))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..t_end, ymin..ymax)
        .map_err(err)?;
    let mut mesh = chart.configure_mesh();
    mesh.light_line_style(TRANSPARENT)
        .x_desc("time (ms)")
        .y_desc(y_desc)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14));
    if let Some(f) = y_fmt {
        mesh.y_label_formatter(f);
    }
    mesh.draw().map_err(err)?;
    Ok(chart)
}
