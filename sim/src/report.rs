//! Output files of the experiments: JSON summaries, CSV tables and PNG line plots.
//!
//! Plots are drawn with plotters' bitmap backend. Text needs a TrueType font: the first of
//! [`FONT_PATHS`] that exists is loaded once (Debian's `fonts-dejavu-core`); without one, plots
//! are drawn without any text and the CSV next to them carries the labels.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

use crate::SimError;

/// Where a TrueType font is looked for, in order.
pub const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// True when a font was found and registered for plot text.
pub fn fonts_available() -> bool {
    static FONT: OnceLock<bool> = OnceLock::new();
    *FONT.get_or_init(|| {
        for p in FONT_PATHS {
            if let Ok(bytes) = std::fs::read(p) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

/// Writes pretty JSON (with a final newline).
pub fn write_json(path: &Path, value: &serde_json::Value) -> Result<(), SimError> {
    let mut text = serde_json::to_string_pretty(value).expect("json values serialise");
    text.push('\n');
    std::fs::write(path, text).map_err(|source| SimError::Write { path: path.to_owned(), source })
}

/// Writes rows as CSV (the first row is the header).
pub fn write_csv(path: &Path, rows: &[Vec<String>]) -> Result<(), SimError> {
    let err = |e: csv::Error| SimError::Write {
        path: path.to_owned(),
        source: std::io::Error::other(e.to_string()),
    };
    let mut w = csv::Writer::from_path(path).map_err(err)?;
    for r in rows {
        w.write_record(r).map_err(err)?;
    }
    w.flush().map_err(|source| SimError::Write { path: path.to_owned(), source })
}

/// One line of a plot.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// (x, y) points, in x order.
    pub points: Vec<(f64, f64)>,
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Draws `series` as lines into a 900×600 PNG at `path`.
pub fn plot_lines(path: &Path, title: &str, x_label: &str, y_label: &str, series: &[Series]) -> Result<(), SimError> {
    let perr = |e: String| SimError::Plot { path: path.to_owned(), message: e };
    let pts = series.iter().flat_map(|s| s.points.iter()).filter(|p| p.0.is_finite() && p.1.is_finite());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if x1 - x0 < 1e-9 {
        x1 = x0 + 1.0;
    }
    let pad = ((y1 - y0) * 0.05).max(1e-3);
    let (y0, y1) = ((y0 - pad).min(0.0_f64.max(y0 - pad)), y1 + pad);
    let text = fonts_available();
    let root = BitMapBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| perr(e.to_string()))?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(15);
    if text {
        builder
            .caption(title, ("sans-serif", 22))
            .x_label_area_size(45)
            .y_label_area_size(60);
    } else {
        builder.x_label_area_size(5).y_label_area_size(5);
    }
    let mut chart = builder.build_cartesian_2d(x0..x1, y0..y1).map_err(|e| perr(e.to_string()))?;
    let mut mesh = chart.configure_mesh();
    if text {
        mesh.x_desc(x_label).y_desc(y_label).label_style(("sans-serif", 14));
    } else {
        mesh.x_labels(0).y_labels(0);
    }
    mesh.draw().map_err(|e| perr(e.to_string()))?;
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let line = chart
            .draw_series(LineSeries::new(s.points.iter().copied().filter(|p| p.1.is_finite()), color.stroke_width(2)))
            .map_err(|e| perr(e.to_string()))?;
        if text {
            line.label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
    }
    if text {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(|e| perr(e.to_string()))?;
    }
    root.present().map_err(|e| perr(e.to_string()))?;
    Ok(())
}
