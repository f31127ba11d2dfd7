//! A small hand-written SVG line chart for the benchmark's pictures (no dependency): panels
//! stacked one above the other, sharing one x axis on a log scale (e.g. agents: 10, 100, 1,000),
//! each with its own linear y axis from zero and a line per series. The scaling (values → pixels)
//! is pure and unit-tested; the rest writes elements.

use std::fmt::Write as _;

/// One line: a label and its points `(x, y)`; points whose value was not measured are left out.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend's text.
    pub label: String,
    /// Its stroke, any SVG colour.
    pub color: &'static str,
    /// `(x, y)`, x > 0 (the x axis is logarithmic).
    pub points: Vec<(f64, f64)>,
}

/// One panel: a title, the unit of its y axis and its lines.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Above the panel.
    pub title: String,
    /// Beside the y axis (`MiB`, `ms`).
    pub unit: String,
    /// Its lines.
    pub series: Vec<Series>,
}

/// A rectangle of the picture, pixels (y grows downwards, as in SVG).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlotBox {
    /// Left edge.
    pub left: f64,
    /// Top edge.
    pub top: f64,
    /// Width.
    pub width: f64,
    /// Height.
    pub height: f64,
}

impl PlotBox {
    /// Whether a point lies within the box (edges included, with a hair of slack for rounding).
    pub fn contains(&self, (x, y): (f64, f64)) -> bool {
        const SLACK: f64 = 1e-6;
        x >= self.left - SLACK
            && x <= self.left + self.width + SLACK
            && y >= self.top - SLACK
            && y <= self.top + self.height + SLACK
    }

    fn bottom(&self) -> f64 {
        self.top + self.height
    }
}

/// A logarithmic axis: `[low, high]` (both > 0) onto the pixels `[from, to]`.
#[derive(Debug, Clone, Copy)]
pub struct LogAxis {
    low: f64,
    high: f64,
    from: f64,
    to: f64,
}

impl LogAxis {
    /// The axis over the values `[low, high]`; a degenerate or non-positive range is widened to
    /// one decade around what is there (a single level still plots).
    pub fn new(low: f64, high: f64, from: f64, to: f64) -> Self {
        let low = if low.is_finite() && low > 0.0 { low } else { 1.0 };
        let high = if high.is_finite() && high > low { high } else { low * 10.0 };
        Self { low, high, from, to }
    }

    /// The pixel of `value` (clamped into the axis' range).
    pub fn map(&self, value: f64) -> f64 {
        let value = if value.is_finite() { value.clamp(self.low, self.high) } else { self.low };
        let share = (value.log10() - self.low.log10()) / (self.high.log10() - self.low.log10());
        self.from + share * (self.to - self.from)
    }
}

/// A linear axis: `[low, high]` onto the pixels `[from, to]`.
#[derive(Debug, Clone, Copy)]
pub struct LinearAxis {
    low: f64,
    high: f64,
    from: f64,
    to: f64,
}

impl LinearAxis {
    /// The axis over `[low, high]`; an empty range becomes `[low, low + 1]`.
    pub fn new(low: f64, high: f64, from: f64, to: f64) -> Self {
        let low = if low.is_finite() { low } else { 0.0 };
        let high = if high.is_finite() && high > low { high } else { low + 1.0 };
        Self { low, high, from, to }
    }

    /// The pixel of `value` (clamped into the axis' range).
    pub fn map(&self, value: f64) -> f64 {
        let value = if value.is_finite() { value.clamp(self.low, self.high) } else { self.low };
        self.from + (value - self.low) / (self.high - self.low) * (self.to - self.from)
    }
}

/// The smallest 1, 2 or 5 × 10ⁿ at or above `value` (1 for nothing positive): a y axis' top.
pub fn nice_ceiling(value: f64) -> f64 {
    if !value.is_finite() || value <= 0.0 {
        return 1.0;
    }
    let decade = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|step| step * decade).find(|top| *top >= value * (1.0 - 1e-9)).unwrap_or(value)
}

/// The range of the x values of every panel's points (positive ones only).
fn x_range(panels: &[Panel]) -> (f64, f64) {
    let xs = || panels.iter().flat_map(|p| &p.series).flat_map(|s| &s.points).map(|p| p.0).filter(|x| *x > 0.0);
    (xs().fold(f64::INFINITY, f64::min), xs().fold(0.0, f64::max))
}

/// The y axis of a panel: from the lowest value (or zero) to a nice ceiling of the highest.
fn y_range(panel: &Panel) -> (f64, f64) {
    let ys = || panel.series.iter().flat_map(|s| &s.points).map(|p| p.1).filter(|y| y.is_finite());
    let low = ys().fold(0.0, f64::min);
    let high = nice_ceiling(ys().fold(0.0, f64::max));
    (if low < 0.0 { -nice_ceiling(-low) } else { 0.0 }, high)
}

/// Each series' points of `panel` in pixels, within `plot`, the x axis shared over `x_range`.
pub fn panel_pixels(panel: &Panel, plot: PlotBox, x_range: (f64, f64)) -> Vec<Vec<(f64, f64)>> {
    let (x, y) = axes(panel, plot, x_range);
    panel
        .series
        .iter()
        .map(|s| s.points.iter().filter(|p| p.0 > 0.0 && p.1.is_finite()).map(|p| (x.map(p.0), y.map(p.1))).collect())
        .collect()
}

fn axes(panel: &Panel, plot: PlotBox, (low, high): (f64, f64)) -> (LogAxis, LinearAxis) {
    // A little room either side so the first and last points do not sit on the frame.
    let x = LogAxis::new(low / 1.25, high * 1.25, plot.left, plot.left + plot.width);
    let (y_low, y_high) = y_range(panel);
    (x, LinearAxis::new(y_low, y_high, plot.bottom(), plot.top))
}

/// Pixel layout of the picture.
const WIDTH: f64 = 800.0;
const PANEL_HEIGHT: f64 = 190.0;
const MARGIN_LEFT: f64 = 70.0;
const MARGIN_RIGHT: f64 = 240.0;
const MARGIN_TOP: f64 = 60.0;
const MARGIN_BOTTOM: f64 = 45.0;

/// Where panel `index` is drawn.
pub fn panel_box(index: usize) -> PlotBox {
    let slot = PANEL_HEIGHT + MARGIN_TOP + MARGIN_BOTTOM;
    PlotBox {
        left: MARGIN_LEFT,
        top: index as f64 * slot + MARGIN_TOP,
        width: WIDTH - MARGIN_LEFT - MARGIN_RIGHT,
        height: PANEL_HEIGHT,
    }
}

/// The picture: `title` on top, then each panel with its axes, grid, lines and legend; the x
/// ticks are the x values the points have (the measured levels).
pub fn line_chart(title: &str, x_label: &str, panels: &[Panel]) -> String {
    let height = panels.len() as f64 * (PANEL_HEIGHT + MARGIN_TOP + MARGIN_BOTTOM) + 10.0;
    let x_range = x_range(panels);
    let mut ticks: Vec<f64> =
        panels.iter().flat_map(|p| &p.series).flat_map(|s| &s.points).map(|p| p.0).filter(|x| *x > 0.0).collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ =
        writeln!(svg, r#"<text x="{MARGIN_LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"#, escape(title));
    for (index, panel) in panels.iter().enumerate() {
        let plot = panel_box(index);
        let (x_axis, y_axis) = axes(panel, plot, x_range);
        let (y_low, y_high) = y_range(panel);
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" font-weight="bold">{}</text>"#,
            plot.left,
            plot.top - 12.0,
            escape(&panel.title)
        );
        // The y grid: five steps.
        for step in 0..=5 {
            let value = y_low + (y_high - y_low) * f64::from(step) / 5.0;
            let y = y_axis.map(value);
            let _ = writeln!(
                svg,
                r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                plot.left,
                plot.left + plot.width,
                plot.left - 6.0,
                y + 4.0,
                tick_label(value)
            );
        }
        let _ = writeln!(
            svg,
            r#"<text transform="translate({:.1},{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            plot.left - 50.0,
            plot.top + plot.height / 2.0,
            escape(&panel.unit)
        );
        // The x ticks: the levels, on the log axis.
        for tick in &ticks {
            let x = x_axis.map(*tick);
            let _ = writeln!(
                svg,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                plot.top,
                plot.bottom(),
                plot.bottom() + 16.0,
                tick_label(*tick)
            );
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{} (log scale)</text>"#,
            plot.left + plot.width / 2.0,
            plot.bottom() + 34.0,
            escape(x_label)
        );
        let _ = writeln!(
            svg,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="black"/>"#,
            plot.left, plot.top, plot.width, plot.height
        );
        for (n, (series, pixels)) in panel.series.iter().zip(panel_pixels(panel, plot, x_range)).enumerate() {
            let points: Vec<String> = pixels.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let _ = writeln!(
                svg,
                r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>"#,
                points.join(" "),
                series.color
            );
            let values = series.points.iter().filter(|p| p.0 > 0.0 && p.1.is_finite()).map(|p| p.1);
            for ((x, y), value) in pixels.iter().zip(values) {
                let _ = writeln!(
                    svg,
                    r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{color}"/><text x="{:.1}" y="{:.1}" font-size="10" fill="{color}">{}</text>"#,
                    x + 5.0,
                    y - 6.0,
                    value_label(value),
                    color = series.color,
                );
            }
            let legend_y = plot.top + 10.0 + n as f64 * 20.0;
            let legend_x = plot.left + plot.width + 15.0;
            let _ = writeln!(
                svg,
                r#"<line x1="{legend_x:.1}" y1="{legend_y:.1}" x2="{:.1}" y2="{legend_y:.1}" stroke="{}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{}</text>"#,
                legend_x + 20.0,
                series.color,
                legend_x + 26.0,
                legend_y + 4.0,
                escape(&series.label)
            );
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// A tick's text: whole numbers with thousands separators, else one decimal.
fn tick_label(value: f64) -> String {
    if (value - value.round()).abs() < 1e-9 {
        let digits = format!("{}", value.round().abs() as u64);
        let mut grouped = String::new();
        for (n, c) in digits.chars().enumerate() {
            if n > 0 && (digits.len() - n) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(c);
        }
        if value < 0.0 { format!("-{grouped}") } else { grouped }
    } else {
        format!("{value:.1}")
    }
}

/// A point's value: whole above 100 (with separators), else one decimal.
fn value_label(value: f64) -> String {
    if value.abs() >= 100.0 { tick_label(value.round()) } else { format!("{value:.1}") }
}

/// Text made safe inside an SVG element.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panel(points: Vec<Vec<(f64, f64)>>) -> Panel {
        Panel {
            title: "t".to_owned(),
            unit: "MiB".to_owned(),
            series: points
                .into_iter()
                .enumerate()
                .map(|(n, points)| Series { label: format!("s{n}"), color: "red", points })
                .collect(),
        }
    }

    #[test]
    fn the_log_axis_is_monotone_and_spans_its_pixels() {
        let axis = LogAxis::new(10.0, 1000.0, 70.0, 560.0);
        assert!((axis.map(10.0) - 70.0).abs() < 1e-9);
        assert!((axis.map(1000.0) - 560.0).abs() < 1e-9);
        // 100 is halfway between 10 and 1,000 on a log scale.
        assert!((axis.map(100.0) - 315.0).abs() < 1e-9);
        let values = [10.0, 11.0, 20.0, 99.0, 100.0, 101.0, 500.0, 999.0, 1000.0];
        let pixels: Vec<f64> = values.iter().map(|v| axis.map(*v)).collect();
        assert!(pixels.windows(2).all(|w| w[0] < w[1]), "{pixels:?}");
        // Outside the range: clamped, never off the axis.
        assert_eq!(axis.map(1.0), axis.map(10.0));
        assert_eq!(axis.map(1e6), axis.map(1000.0));
        assert_eq!(axis.map(0.0), axis.map(10.0));
    }

    #[test]
    fn a_single_level_still_gets_an_axis() {
        let axis = LogAxis::new(100.0, 100.0, 0.0, 100.0);
        assert!(axis.map(100.0).is_finite());
        let axis = LogAxis::new(0.0, -1.0, 0.0, 100.0);
        assert!(axis.map(5.0).is_finite());
    }

    #[test]
    fn the_linear_axis_turns_upside_down_for_svg() {
        let axis = LinearAxis::new(0.0, 200.0, 310.0, 60.0);
        assert_eq!(axis.map(0.0), 310.0);
        assert_eq!(axis.map(200.0), 60.0);
        assert_eq!(axis.map(100.0), 185.0);
        assert!(axis.map(150.0) < axis.map(50.0));
        assert!(LinearAxis::new(3.0, 3.0, 0.0, 1.0).map(3.0).is_finite());
    }

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(-3.0), 1.0);
        assert_eq!(nice_ceiling(7.0), 10.0);
        assert_eq!(nice_ceiling(10.0), 10.0);
        assert_eq!(nice_ceiling(13.0), 20.0);
        assert_eq!(nice_ceiling(201.0), 500.0);
        assert!((nice_ceiling(0.03) - 0.05).abs() < 1e-12);
    }

    #[test]
    fn every_point_lands_in_its_panel() {
        let panels = [
            panel(vec![vec![(10.0, 40.0), (100.0, 45.0), (1000.0, 120.0)], vec![(10.0, 9.0), (1000.0, 300.0)]]),
            panel(vec![vec![(10.0, 2.0), (100.0, -1.5), (1000.0, 0.3)], vec![(100.0, f64::NAN)]]),
        ];
        let range = x_range(&panels);
        assert_eq!(range, (10.0, 1000.0));
        for (index, panel) in panels.iter().enumerate() {
            let plot = panel_box(index);
            for (series, pixels) in panel.series.iter().zip(panel_pixels(panel, plot, range)) {
                let finite = series.points.iter().filter(|p| p.1.is_finite()).count();
                assert_eq!(pixels.len(), finite, "a non-finite value is left out");
                for pixel in &pixels {
                    assert!(plot.contains(*pixel), "{pixel:?} outside {plot:?}");
                }
                // More agents: further right.
                assert!(pixels.windows(2).all(|w| w[0].0 < w[1].0));
            }
        }
        // Panels do not overlap.
        assert!(panel_box(0).bottom() < panel_box(1).top);
    }

    #[test]
    fn the_picture_has_a_line_per_series_and_escapes_text() {
        let panels = [panel(vec![vec![(10.0, 1.0), (100.0, 2.0)], vec![(10.0, 3.0)]])];
        let svg = line_chart("a <b> & c", "agents", &panels);
        assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt;b&gt; &amp; c"));
        assert_eq!(tick_label(1000.0), "1,000");
        assert_eq!(tick_label(100.0), "100");
        assert_eq!(tick_label(2.5), "2.5");
        assert_eq!(value_label(2968.4), "2,968");
        assert_eq!(value_label(12.34), "12.3");
    }
}
