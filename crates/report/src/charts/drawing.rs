//! The charts drawn with `plotters`: SVG text for the page, an RGB buffer for
//! `--png`. The SVG draws axes and labels in black and the page maps black to
//! `currentColor` ([`svg_for_page`]), so the charts follow the reader's light or dark
//! scheme; colours come from [`crate::theme`], so a series keeps its colour on every
//! chart, legend and table of a report.

use super::axes::{log_bounds, nines, LogAxis, LogCountAxis, NinesAxis};
use super::data::{
    merge_marks, Body, Chart, LatencyPanel, Line, Mark, RateLine, ScalePanel, SizingPanel, Stack,
    Throughput, MARK_GAP_PX, THROUGHPUT_PANEL,
};
use crate::fmt::{fmt_count_tick, fmt_num};
use crate::markup::escape;
use crate::theme::{self, Rgb};
use plotters::coord::ranged1d::Ranged;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::HashSet;

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("chart {id}: {msg}")]
    Draw { id: String, msg: String },
    /// The font built into the binary did not parse: a defect of the build, not of
    /// the machine (no font is read from it).
    #[error("the chart font built into ingressbench is not a font plotters can read")]
    Font,
    #[error("chart {id}: png: {msg}")]
    Png { id: String, msg: String },
}

/// The colour of series `i`: fixed for the whole report.
pub fn series_color(i: usize) -> RGBColor {
    rgb(theme::series_rgb(i))
}

fn rgb((r, g, b): Rgb) -> RGBColor {
    RGBColor(r, g, b)
}

/// Axes, labels and grid: black in the SVG, `currentColor` on the page.
const FG: RGBColor = BLACK;
/// The page background (a legend's box): near-white, mapped by the page's CSS.
const BG: RGBColor = RGBColor(theme::BG_RGB.0, theme::BG_RGB.1, theme::BG_RGB.2);
const FONT: &str = "sans-serif";
/// Width of every chart, in pixels (the page scales it down to fit).
pub const WIDTH: u32 = 1000;

/// Keeps one point per `cell`-pixel square (the others are drawn over it anyway),
/// so a scatter of a million requests stays a small SVG. `points` are pixels.
pub fn thin_by_pixel(points: &[(i32, i32)], cell: i32) -> Vec<usize> {
    let cell = cell.max(1);
    let mut seen = HashSet::new();
    let mut keep = Vec::new();
    for (i, (x, y)) in points.iter().enumerate() {
        if seen.insert((x.div_euclid(cell), y.div_euclid(cell))) {
            keep.push(i);
        }
    }
    keep
}

/// [`thin_by_pixel`] over layers drawn one over the other: a cell taken by a later
/// layer (drawn on top) is left out of the earlier ones, which it would hide anyway.
pub fn thin_layers(layers: &[Vec<(i32, i32)>], cell: i32) -> Vec<Vec<usize>> {
    let cell = cell.max(1);
    let mut seen = HashSet::new();
    let mut keep = vec![Vec::new(); layers.len()];
    for (l, points) in layers.iter().enumerate().rev() {
        for (i, (x, y)) in points.iter().enumerate() {
            if seen.insert((x.div_euclid(cell), y.div_euclid(cell))) {
                keep[l].push(i);
            }
        }
    }
    keep
}

fn font(size: u32) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font()).color(&FG)
}

type Draw<T = ()> = Result<T, String>;

/// The builder of a chart with lines on two axes: the same margins and label areas
/// for every such chart, so their plots line up on the page.
fn line_chart<'a, 'b, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
) -> ChartBuilder<'a, 'b, DB> {
    let mut b = ChartBuilder::on(root);
    b.margin(14)
        .margin_right(28)
        .x_label_area_size(48)
        .y_label_area_size(80);
    b
}

/// A line chart's mesh in the house style: faint rules, a grey axis, 15 px labels.
fn house_mesh<'m, 'a, 'b, X: Ranged, Y: Ranged, DB: DrawingBackend>(
    mesh: &'m mut plotters::chart::MeshStyle<'a, 'b, X, Y, DB>,
) -> &'m mut plotters::chart::MeshStyle<'a, 'b, X, Y, DB> {
    mesh.bold_line_style(FG.mix(0.18))
        .light_line_style(FG.mix(0.06))
        .axis_style(FG.mix(0.6))
        .label_style(font(15))
        .axis_desc_style(font(15))
}

fn de<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

impl Chart {
    /// The chart as an SVG document (black axes and text, transparent background).
    ///
    /// # Errors
    /// [`ChartError`] when plotters fails to draw.
    pub fn svg(&self) -> Result<String, ChartError> {
        ensure_font()?;
        let mut s = String::new();
        {
            let root = SVGBackend::with_string(&mut s, (WIDTH, self.height)).into_drawing_area();
            self.draw(&root).map_err(|msg| self.err(msg))?;
            root.present().map_err(|e| self.err(de(e)))?;
        }
        Ok(s)
    }

    /// The chart as a PNG image on white, its title drawn in.
    ///
    /// # Errors
    /// [`ChartError`] when drawing or encoding fails.
    pub fn png(&self) -> Result<Vec<u8>, ChartError> {
        ensure_font()?;
        let (w, h) = (WIDTH, self.height + 34);
        let mut buf = vec![255u8; (w * h * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| self.err(de(e)))?;
            let root = root
                .titled(&self.title, font(20))
                .map_err(|e| self.err(de(e)))?;
            self.draw(&root).map_err(|msg| self.err(msg))?;
            root.present().map_err(|e| self.err(de(e)))?;
        }
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, w, h);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            let mut wr = enc.write_header().map_err(|e| ChartError::Png {
                id: self.id.clone(),
                msg: e.to_string(),
            })?;
            wr.write_image_data(&buf).map_err(|e| ChartError::Png {
                id: self.id.clone(),
                msg: e.to_string(),
            })?;
        }
        Ok(out)
    }

    fn err(&self, msg: String) -> ChartError {
        ChartError::Draw {
            id: self.id.clone(),
            msg,
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Draw {
        match &self.body {
            Body::Percentiles { lines, max_nines } => draw_percentiles(root, lines, *max_nines),
            Body::Latency(p) => draw_latency(root, p),
            Body::Throughput(t) => draw_throughput(root, t),
            Body::Rates(lines, x_desc) => draw_rates(root, lines, x_desc),
            Body::Sizing(p) => draw_sizing(root, p),
            Body::Scale(p) => draw_scale(root, p),
            Body::Stacks(stacks) => {
                let areas = root.split_evenly((stacks.len().max(1), 1));
                for (area, st) in areas.iter().zip(stacks) {
                    draw_stack(area, st)?;
                }
                Ok(())
            }
            Body::Note(text) => {
                let (w, h) = root.dim_in_pixel();
                root.draw(&Text::new(
                    text.clone(),
                    (w as i32 / 2, h as i32 / 2),
                    font(16).pos(Pos::new(HPos::Center, VPos::Center)),
                ))
                .map_err(de)
            }
        }
    }
}

/// The page's inline copy of a chart's SVG: its id, no XML namespace (inline SVG
/// needs none, and the page then holds no URL), black drawn as `currentColor`, and
/// without the stroke attributes of filled shapes (SVG's default: the scatter of a
/// long run is thousands of dots).
pub fn svg_for_page(svg: &str, id: &str, title: &str) -> String {
    let body = svg
        .replace(" xmlns=\"http://www.w3.org/2000/svg\"", "")
        .replace("\"#000000\"", "\"currentColor\"")
        .replace(" stroke=\"none\" stroke-width=\"1\"/>", "/>");
    let esc = escape(title);
    body.replacen(
        "<svg ",
        &format!("<svg id=\"{id}\" class=\"chart\" role=\"img\" aria-label=\"{esc}\" "),
        1,
    )
}

fn draw_percentiles<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lines: &[Line],
    max_nines: f64,
) -> Draw {
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    for l in lines {
        for (_, v) in &l.points {
            if *v > 0.0 {
                lo = lo.min(*v);
            }
            hi = hi.max(*v);
        }
    }
    let (lo, hi) = log_bounds(lo / 1.1, hi * 1.1);
    let mut chart = line_chart(root)
        .build_cartesian_2d(
            NinesAxis {
                lo: nines(0.5),
                hi: max_nines,
            },
            LogAxis { lo, hi },
        )
        .map_err(de)?;
    house_mesh(
        chart
            .configure_mesh()
            .x_desc("percentile (%)")
            .y_desc("latency"),
    )
    .draw()
    .map_err(de)?;
    for l in lines {
        let c = series_color(l.series);
        labelled_line(&mut chart, &l.points, c, l.name.clone())?;
    }
    draw_legend(&mut chart)
}

fn draw_rates<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lines: &[RateLine],
    x_desc: &str,
) -> Draw {
    let (mut lo, mut hi, mut x_max) = (f64::MAX, 0f64, 1f64);
    for l in lines {
        for (x, v) in l.p50.iter().chain(&l.p99) {
            lo = lo.min(*v);
            hi = hi.max(*v);
            x_max = x_max.max(*x);
        }
    }
    let (lo, hi) = log_bounds(lo / 1.1, hi * 1.1);
    let mut chart = line_chart(root)
        .build_cartesian_2d(0f64..x_max * 1.05, LogAxis { lo, hi })
        .map_err(de)?;
    house_mesh(
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc("latency")
            .x_label_formatter(&|v| fmt_count_tick(*v)),
    )
    .draw()
    .map_err(de)?;
    for l in lines {
        let c = series_color(l.series);
        labelled_line(&mut chart, &l.p99, c, format!("{} p99", l.name))?;
        chart
            .draw_series(LineSeries::new(
                l.p50.iter().copied(),
                c.mix(0.6).stroke_width(1),
            ))
            .map_err(de)?;
        chart
            .draw_series(l.p99.iter().map(|p| Circle::new(*p, 3, c.filled())))
            .map_err(de)?;
        // The maximum: the step at that rate, ringed.
        if let Some(m) = l.max {
            let at = l
                .p99
                .iter()
                .filter(|(x, _)| (*x - m).abs() <= m * 0.01)
                .min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some(p) = at {
                chart
                    .draw_series(std::iter::once(Circle::new(*p, 7, c.stroke_width(2))))
                    .map_err(de)?;
            }
        }
    }
    draw_legend(&mut chart)
}

fn draw_sizing<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, p: &SizingPanel) -> Draw {
    let pts = p.lines.iter().flat_map(|l| l.2.iter());
    let x_max = pts.clone().map(|q| q.0).fold(1f64, f64::max);
    let y_max = pts.map(|q| q.1).fold(1f64, f64::max);
    let mut chart = line_chart(root)
        .build_cartesian_2d(0f64..x_max * 1.1, 0f64..y_max * 1.15)
        .map_err(de)?;
    house_mesh(
        chart
            .configure_mesh()
            .x_desc("cores")
            .y_desc(p.y_desc.as_str())
            .y_label_formatter(&|v| fmt_count_tick(*v)),
    )
    .draw()
    .map_err(de)?;
    // One colour per line: a system has a line per measure, each named in the legend.
    for (k, (_, name, points)) in p.lines.iter().enumerate() {
        let c = series_color(k);
        labelled_line(&mut chart, points, c, name.clone())?;
        chart
            .draw_series(points.iter().map(|q| Circle::new(*q, 4, c.filled())))
            .map_err(de)?;
    }
    draw_legend(&mut chart)
}

/// A measure against the route count, both axes log: milliseconds on a latency
/// axis, a count (MiB) on a count axis.
fn draw_scale<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, p: &ScalePanel) -> Draw {
    let pts: Vec<(f64, f64)> = p.lines.iter().flat_map(|l| l.2.iter().copied()).collect();
    let lo_hi = |f: fn(&(f64, f64)) -> f64| {
        let lo = pts.iter().map(f).fold(f64::MAX, f64::min).max(1e-3);
        let hi = pts.iter().map(f).fold(0f64, f64::max).max(lo);
        log_bounds(lo, hi)
    };
    let (xl, xh) = lo_hi(|q| q.0);
    let (yl, yh) = lo_hi(|q| q.1);
    let x = LogCountAxis(LogAxis { lo: xl, hi: xh });
    if p.y_ms {
        let mut chart = line_chart(root)
            .build_cartesian_2d(x, LogAxis { lo: yl, hi: yh })
            .map_err(de)?;
        scale_lines(&mut chart, p)
    } else {
        let mut chart = line_chart(root)
            .build_cartesian_2d(x, LogCountAxis(LogAxis { lo: yl, hi: yh }))
            .map_err(de)?;
        scale_lines(&mut chart, p)
    }
}

/// [`draw_scale`]'s mesh, lines, points and legend on either y axis.
fn scale_lines<'a, DB: DrawingBackend + 'a, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<LogCountAxis, Y>>,
    p: &ScalePanel,
) -> Draw
where
    Y: Ranged<ValueType = f64, FormatOption = plotters::coord::ranged1d::NoDefaultFormatting>
        + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    house_mesh(
        chart
            .configure_mesh()
            .x_desc("routes")
            .y_desc(p.y_desc.as_str()),
    )
    .draw()
    .map_err(de)?;
    for (k, (_, name, points)) in p.lines.iter().enumerate() {
        let c = series_color(k);
        labelled_line(chart, points, c, name.clone())?;
        chart
            .draw_series(points.iter().map(|q| Circle::new(*q, 4, c.filled())))
            .map_err(de)?;
    }
    draw_legend(chart)
}

/// A series line with its legend entry (a short stroke of its colour).
fn labelled_line<'a, DB: DrawingBackend + 'a, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    points: &[(f64, f64)],
    c: RGBColor,
    name: String,
) -> Draw
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)))
        .map_err(de)?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(3)));
    Ok(())
}

/// The series legend, upper left, as the line charts draw it.
fn draw_legend<'a, DB: DrawingBackend + 'a, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
) -> Draw
where
    X: Ranged,
    Y: Ranged,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(BG.mix(0.9))
        .border_style(FG.mix(0.3))
        .label_font(font(15))
        .draw()
        .map_err(de)?;
    Ok(())
}

/// Draws vertical markers, behind the data.
fn draw_mark_lines<DB: DrawingBackend, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    marks: &[Mark],
    y_top: Y::ValueType,
    y_bottom: Y::ValueType,
) -> Draw
where
    X: Ranged<ValueType = f64>,
    Y: Ranged,
    Y::ValueType: Clone + 'static,
{
    for m in marks {
        let color = if m.alarm { rgb(theme::ERROR_RGB) } else { FG };
        let alpha = if m.alarm { 0.9 } else { 0.45 };
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(m.t_s, y_bottom.clone()), (m.t_s, y_top.clone())],
                color.mix(alpha).stroke_width(1),
            )))
            .map_err(de)?;
    }
    Ok(())
}

/// Draws markers' labels along their top, reading upwards, over the data on a box
/// of the page's background so they stay legible.
fn draw_mark_labels<DB: DrawingBackend, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    marks: &[Mark],
    y_top: Y::ValueType,
) -> Draw
where
    X: Ranged<ValueType = f64>,
    Y: Ranged,
    Y::ValueType: Clone + 'static,
{
    let (_, plot_h) = chart.plotting_area().dim_in_pixel();
    for m in marks {
        let style = TextStyle::from((FONT, 13).into_font())
            .color(if m.alarm { &ERROR_COLOR } else { &FG })
            .transform(FontTransform::Rotate270)
            .pos(Pos::new(HPos::Left, VPos::Top));
        // As long as the plot is high: a longer label is cut, its end marked.
        let room = plot_h.saturating_sub(12).max(20) as f64;
        let mut label = clip_label(&m.label, 48);
        let (mut w, mut h) = chart
            .plotting_area()
            .estimate_text_size(&label, &style)
            .map_err(de)?;
        if w as f64 > room {
            let keep = (label.chars().count() as f64 * room / w as f64).floor() as usize;
            label = clip_label(&label, keep.max(2));
            (w, h) = chart
                .plotting_area()
                .estimate_text_size(&label, &style)
                .map_err(de)?;
        }
        // Rotated, the text runs up from its anchor, its glyphs to the right.
        let (w, h) = (w as i32, h as i32);
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((m.t_s, y_top.clone()))
                    + Rectangle::new([(2, 3), (4 + h + 2, 6 + w)], BG.mix(0.8).filled())
                    + Text::new(label, (3, 4 + w), style),
            ))
            .map_err(de)?;
    }
    Ok(())
}

const ERROR_COLOR: RGBColor = RGBColor(theme::ERROR_RGB.0, theme::ERROR_RGB.1, theme::ERROR_RGB.2);

fn clip_label(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

fn draw_latency<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, p: &LatencyPanel) -> Draw {
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    for s in &p.series {
        for (_, v) in s
            .p50
            .iter()
            .chain(&s.p99)
            .chain(&s.max)
            .chain(&s.ok)
            .chain(&s.failed)
        {
            if *v > 0.0 {
                lo = lo.min(*v);
            }
            hi = hi.max(*v);
        }
    }
    let empty = lo > hi;
    let (lo, hi) = log_bounds(lo / 1.1, hi * 1.1);
    let mut builder = ChartBuilder::on(root);
    builder
        .margin(12)
        .margin_right(24)
        .x_label_area_size(44)
        .y_label_area_size(80);
    let mut chart = builder
        .build_cartesian_2d(0f64..p.x_max, LogAxis { lo, hi })
        .map_err(de)?;
    chart
        .configure_mesh()
        .x_desc("seconds from the start of the measured window")
        .y_desc("latency")
        .x_label_formatter(&|v| fmt_num(*v))
        .x_max_light_lines(1)
        .bold_line_style(FG.mix(0.15))
        .light_line_style(FG.mix(0.05))
        .axis_style(FG.mix(0.6))
        .label_style(font(15))
        .axis_desc_style(font(15))
        .draw()
        .map_err(de)?;
    let (w, _) = chart.plotting_area().dim_in_pixel();
    if empty {
        chart
            .draw_series(std::iter::once(Text::new(
                "no latency to draw: no responses, and no sampled requests",
                (p.x_max / 2.0, (lo * hi).sqrt()),
                font(15).pos(Pos::new(HPos::Center, VPos::Center)),
            )))
            .map_err(de)?;
    }
    let gap = p.merge_px * p.x_max / w.max(1) as f64;
    let marks = merge_marks(p.marks.clone(), gap);
    draw_mark_lines(&mut chart, &marks, hi, lo)?;
    // Samples first, lines over them.
    let layers: Vec<Vec<(i32, i32)>> = p
        .series
        .iter()
        .map(|s| s.ok.iter().map(|pt| chart.backend_coord(pt)).collect())
        .collect();
    for (s, keep) in p.series.iter().zip(thin_layers(&layers, 3)) {
        let c = series_color(s.series);
        chart
            .draw_series(
                keep.iter()
                    .map(|k| Circle::new(s.ok[*k], 2, c.mix(0.45).filled())),
            )
            .map_err(de)?;
    }
    for s in &p.series {
        let c = series_color(s.series);
        let dark = darker(c);
        chart
            .draw_series(LineSeries::new(
                s.p50.iter().copied(),
                c.mix(0.9).stroke_width(1),
            ))
            .map_err(de)?;
        chart
            .draw_series(DashedLineSeries::new(
                s.max.iter().copied(),
                6,
                4,
                dark.stroke_width(1),
            ))
            .map_err(de)?;
        chart
            .draw_series(LineSeries::new(s.p99.iter().copied(), dark.stroke_width(2)))
            .map_err(de)?;
    }
    for s in &p.series {
        let c = if p.series.len() == 1 {
            rgb(theme::ERROR_RGB)
        } else {
            darker(series_color(s.series))
        };
        let px: Vec<(i32, i32)> = s.failed.iter().map(|pt| chart.backend_coord(pt)).collect();
        let keep = thin_by_pixel(&px, 3);
        chart
            .draw_series(
                keep.iter()
                    .map(|k| Cross::new(s.failed[*k], 4, c.stroke_width(2))),
            )
            .map_err(de)?;
    }
    draw_mark_labels(&mut chart, &marks, hi)
}

/// A darker shade of a series colour, for its lines over its own dots.
fn darker(c: RGBColor) -> RGBColor {
    let f = |v: u8| (v as f64 * 0.78) as u8;
    RGBColor(f(c.0), f(c.1), f(c.2))
}

fn draw_throughput<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, t: &Throughput) -> Draw {
    let mut top: f64 = 1.0;
    for (_, _, sent, done) in &t.series {
        for (_, v) in sent.iter().chain(done) {
            top = top.max(*v);
        }
    }
    for x in &t.targets {
        top = top.max(*x);
    }
    let top = top * 1.15;
    if t.series.len() <= 1 {
        return draw_throughput_panel(root, t, &t.series, top, None, true);
    }
    // Small multiples on one scale: a panel per series, the time axis under the last.
    let (_, h) = root.dim_in_pixel();
    let mut rest = root.clone();
    let last = t.series.len() - 1;
    for (k, s) in t.series.iter().enumerate() {
        let panel_h = if k == last {
            h as i32
        } else {
            THROUGHPUT_PANEL as i32
        };
        let (area, below) = rest.split_vertically(panel_h);
        draw_throughput_panel(
            &area,
            t,
            std::slice::from_ref(s),
            top,
            Some((&s.1, s.0)),
            k == last,
        )?;
        rest = below;
    }
    Ok(())
}

/// One panel of the throughput chart: `series` over the targets, titled with a
/// series' name in its colour when there are several, the time axis labelled only
/// under the last panel.
fn draw_throughput_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    t: &Throughput,
    series: &[(usize, String, super::data::Points, super::data::Points)],
    top: f64,
    title: Option<(&str, usize)>,
    time_axis: bool,
) -> Draw {
    let mut builder = ChartBuilder::on(area);
    builder
        .margin(12)
        .margin_right(24)
        .x_label_area_size(if time_axis { 44 } else { 0 })
        .y_label_area_size(80);
    let title_color = title.map(|(_, i)| series_color(i)).unwrap_or(FG);
    if let Some((name, _)) = title {
        builder.margin_top(4).caption(
            name,
            TextStyle::from((FONT, 15).into_font()).color(&title_color),
        );
    }
    let mut chart = builder
        .build_cartesian_2d(0f64..t.x_max, 0f64..top)
        .map_err(de)?;
    let mut mesh = chart.configure_mesh();
    mesh.y_desc("requests / s")
        .max_light_lines(1)
        .y_label_formatter(&|v| fmt_count_tick(*v))
        .bold_line_style(FG.mix(0.15))
        .light_line_style(FG.mix(0.05))
        .axis_style(FG.mix(0.6))
        .label_style(font(15))
        .axis_desc_style(font(15));
    if time_axis {
        mesh.x_desc("seconds from the start of the measured window")
            .x_label_formatter(&|v| fmt_num(*v));
    } else {
        mesh.x_label_formatter(&|_| String::new());
    }
    if title.is_some() {
        mesh.y_labels(4);
    }
    mesh.draw().map_err(de)?;
    for target in &t.targets {
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, *target), (t.x_max, *target)],
                8,
                5,
                FG.mix(0.5).stroke_width(2),
            ))
            .map_err(de)?;
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((0.0, *target))
                    + Text::new(
                        format!("target {}/s", fmt_num(*target)),
                        (6, -4),
                        font(14).pos(Pos::new(HPos::Left, VPos::Bottom)),
                    ),
            ))
            .map_err(de)?;
    }
    for (i, _, sent, done) in series {
        let c = series_color(*i);
        chart
            .draw_series(DashedLineSeries::new(
                sent.iter().copied(),
                5,
                4,
                c.stroke_width(1),
            ))
            .map_err(de)?;
        chart
            .draw_series(LineSeries::new(done.iter().copied(), c.stroke_width(2)))
            .map_err(de)?;
    }
    Ok(())
}

fn draw_stack<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, st: &Stack) -> Draw {
    let (name, i) = &st.title;
    let top = if st.percent {
        100.0
    } else {
        st.bars
            .iter()
            .map(|(_, v)| v.iter().sum::<f64>())
            .fold(1.0, f64::max)
            * 1.1
    };
    // The same width with or without keys, so panels' time axes line up.
    let legend_w = 130;
    let title_color = series_color(*i);
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .margin_right(legend_w)
        .caption(
            name,
            TextStyle::from((FONT, 16).into_font()).color(&title_color),
        )
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..st.x_max, 0f64..top)
        .map_err(de)?;
    let percent = st.percent;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| fmt_num(*v))
        .y_label_formatter(&|v| {
            if percent {
                format!("{}%", fmt_num(*v))
            } else if v.fract() != 0.0 {
                String::new()
            } else {
                fmt_count_tick(*v)
            }
        })
        .y_desc(if st.percent {
            "share of responses"
        } else {
            "errors / s"
        })
        .y_labels(5)
        .bold_line_style(FG.mix(0.12))
        .light_line_style(FG.mix(0.0))
        .axis_style(FG.mix(0.6))
        .label_style(font(14))
        .axis_desc_style(font(14))
        .draw()
        .map_err(de)?;
    if st.bars.is_empty() {
        chart
            .draw_series(std::iter::once(Text::new(
                st.empty_note.clone(),
                (st.x_max / 2.0, top / 2.0),
                font(15).pos(Pos::new(HPos::Center, VPos::Center)),
            )))
            .map_err(de)?;
    }
    for (t, values) in &st.bars {
        let mut base = 0.0;
        let mut rects = Vec::new();
        for (k, v) in values.iter().enumerate() {
            if *v <= 0.0 {
                continue;
            }
            rects.push(Rectangle::new(
                [(*t, base), (*t + 1.0, base + v)],
                rgb(st.keys[k].1).filled(),
            ));
            base += v;
        }
        chart.draw_series(rects).map_err(de)?;
    }
    for (a, b) in &st.spans {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(*a, 0.0), (*b, top)],
                FG.mix(0.25).filled(),
            )))
            .map_err(de)?;
    }
    let (w, _) = chart.plotting_area().dim_in_pixel();
    let gap = MARK_GAP_PX * st.x_max / w.max(1) as f64;
    let marks = merge_marks(st.marks.clone(), gap);
    draw_mark_lines(&mut chart, &marks, top, 0.0)?;
    draw_mark_labels(&mut chart, &marks, top)?;
    // The legend: one swatch per key, right of the plot, as many as fit.
    let (aw, ah) = area.dim_in_pixel();
    let x0 = aw as i32 - legend_w + 14;
    let rows = ((ah as i32 - 40) / 16).max(1) as usize;
    for (k, (key, color)) in st.keys.iter().enumerate().take(rows) {
        let y = 34 + k as i32 * 16;
        let label = if k + 1 == rows && st.keys.len() > rows {
            format!("+{} more", st.keys.len() - k)
        } else {
            key.clone()
        };
        area.draw(&Rectangle::new(
            [(x0, y - 5), (x0 + 10, y + 5)],
            rgb(*color).filled(),
        ))
        .map_err(de)?;
        area.draw(&Text::new(
            label,
            (x0 + 16, y),
            font(14).pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(de)?;
    }
    Ok(())
}

/// The font plotters sizes every label with, on both backends, and draws the PNG's
/// text with: DejaVu Sans 2.37 (Bitstream Vera license, `crates/report/fonts/LICENSE`),
/// carried in the binary. A report must never depend on the fonts of the machine that
/// measured: a minimal container or a fresh cloud image has none, and the run that
/// measured everything then wrote no report. Carried, the font also lays the charts
/// out the same on every machine (label areas, the boxes behind marker labels). The
/// browser still draws the SVG's text in the reader's `sans-serif`.
static LABEL_FONT: &[u8] = include_bytes!("../../fonts/DejaVuSans.ttf");

/// Registers [`LABEL_FONT`] with plotters, once per process: plotters looks fonts up
/// by family name, and [`FONT`] is the only family the charts use.
fn ensure_font() -> Result<(), ChartError> {
    static FONT_READY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ready = *FONT_READY.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, LABEL_FONT).is_ok()
    });
    if ready {
        Ok(())
    } else {
        Err(ChartError::Font)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charts::build;
    use crate::charts::fixtures::{histogram_b64, sample_input};

    #[test]
    fn thinning_keeps_one_point_per_cell() {
        let pts = [(0, 0), (1, 1), (2, 0), (5, 5), (-1, 0)];
        assert_eq!(thin_by_pixel(&pts, 2), [0, 2, 3, 4]);
        assert_eq!(thin_by_pixel(&pts, 1).len(), 5);
        let layers = vec![vec![(0, 0), (9, 9)], vec![(1, 1), (4, 4)]];
        assert_eq!(thin_layers(&layers, 2), [vec![1], vec![0, 1]]);
    }

    /// Set in the child of [`charts_draw_on_a_machine_without_fonts`].
    const FONTS_HIDDEN: &str = "INGRESSBENCH_TEST_FONTS_HIDDEN";

    /// A machine with no font (a minimal container, a fresh cloud image) still gets
    /// its report: the test runs itself again through `unshare`, in a mount namespace
    /// of its own where an empty tmpfs hides each of the machine's font folders, and
    /// there draws every chart as SVG, labels in it, and one as PNG, its title drawn.
    #[test]
    fn charts_draw_on_a_machine_without_fonts() {
        if std::env::var_os(FONTS_HIDDEN).is_some() {
            return draw_with_fonts_hidden();
        }
        let name = "charts::drawing::tests::charts_draw_on_a_machine_without_fonts";
        let hide = r#"for d in /usr/share/fonts /usr/local/share/fonts "$HOME/.fonts" "$HOME/.local/share/fonts"; do [ ! -d "$d" ] || mount -t tmpfs -o ro none "$d" || exit 1; done; exec "$@""#;
        let out = std::process::Command::new("unshare")
            .args([
                "--user",
                "--map-root-user",
                "--mount",
                "sh",
                "-c",
                hide,
                "sh",
            ])
            .arg(std::env::current_exe().unwrap())
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(FONTS_HIDDEN, "1")
            .env_remove("INGRESSBENCH_FONT")
            .output()
            .expect("unshare (util-linux) runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "with the fonts hidden: {}\n{stdout}\n{stderr}",
            out.status
        );
        assert!(stdout.contains("1 passed"), "the test ran again: {stdout}");
    }

    /// The child of [`charts_draw_on_a_machine_without_fonts`].
    fn draw_with_fonts_hidden() {
        let hidden = std::fs::read_dir("/usr/share/fonts").map_or(0, |d| d.count());
        assert_eq!(hidden, 0, "/usr/share/fonts is hidden");
        let charts = build(&sample_input());
        for c in &charts {
            let svg = c.svg().unwrap_or_else(|e| panic!("{}: {e}", c.id));
            assert!(svg.trim_end().ends_with("</svg>"), "{}", c.id);
        }
        let percentiles = charts[0].svg().unwrap();
        for label in ["percentile (%)", "latency", "99.9999", "nginx-reload"] {
            assert!(percentiles.contains(label), "{label}");
        }
        let png = charts[0].png().unwrap();
        let mut reader = png::Decoder::new(png.as_slice()).read_info().unwrap();
        let mut rgb = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut rgb).unwrap();
        assert_eq!(info.color_type, png::ColorType::Rgb);
        // The title strip above the chart: white but for the title's glyphs.
        let strip = &rgb[..info.line_size * 30];
        let inked = strip
            .chunks(3)
            .filter(|p| p.iter().all(|v| *v < 128))
            .count();
        assert!(inked > 100, "the title is drawn: {inked} dark pixels");
    }

    #[test]
    fn every_chart_draws_as_svg_and_png() {
        let input = sample_input();
        let charts = build(&input);
        let ids: Vec<&str> = charts.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "chart-percentiles",
                "chart-percentiles-uncorrected",
                "chart-latency",
                "chart-latency-1",
                "chart-latency-2",
                "chart-throughput",
                "chart-errors",
                "chart-backends"
            ]
        );
        for c in &charts {
            let svg = c.svg().unwrap();
            assert!(svg.starts_with("<svg"), "{}", c.id);
            assert!(svg.trim_end().ends_with("</svg>"), "{}", c.id);
            let page = svg_for_page(&svg, &c.id, &c.title);
            assert!(page.starts_with(&format!("<svg id=\"{}\"", c.id)));
            assert!(!page.contains("http://") && !page.contains("#000000"));
        }
        let png = charts[0].png().unwrap();
        assert_eq!(&png[1..4], b"PNG");
        // The scatter: one failed sample drawn as a cross (two lines), in the panel.
        let latency = charts[3].svg().unwrap();
        assert!(latency.contains("<circle"), "sampled requests drawn");
        assert!(latency.contains("scale 5 → 7"), "the change is labelled");
        let percentiles = charts[0].svg().unwrap();
        for l in ["99.9999", "nginx-reload", "caddy-api"] {
            assert!(percentiles.contains(l), "{l}");
        }
    }

    #[test]
    fn a_sizing_scan_draws_rate_against_cores_per_kind() {
        use results::sizing::{Allocation, Measure, SizingResult, SizingRow};
        let row = |cores: f64, m: Measure, max: Option<f64>| SizingRow {
            allocation: Allocation {
                cores,
                ..Allocation::default()
            },
            measure: Some(m),
            max_rate: max,
            ..SizingRow::default()
        };
        let rps = Measure::Rps { body_size: 1024 };
        let tps = Measure::Tps {
            key: results::tls::KeyType::Rsa2048,
            version: results::tls::TlsVersion::V13,
            resumption: false,
        };
        let mut input = sample_input();
        input.sizings.push(crate::input::Sized {
            name: "nginx-reload".into(),
            run: 0,
            sizing: SizingResult {
                rows: vec![
                    row(0.5, rps.clone(), Some(9000.0)),
                    row(0.5, tps.clone(), Some(150.0)),
                    row(1.0, rps, Some(17000.0)),
                    row(1.0, tps, None),
                ],
                ..SizingResult::default()
            },
        });
        let charts = build(&input);
        let rps = charts.iter().find(|c| c.id == "chart-sizing-rps").unwrap();
        let tps = charts.iter().find(|c| c.id == "chart-sizing-tps").unwrap();
        let svg = rps.svg().unwrap();
        assert!(svg.contains("nginx-reload rps 1024 B"), "the line is named");
        assert_eq!(
            svg.matches("<circle").count(),
            2,
            "one point per allocation"
        );
        // The 1-core TPS row held no rate: one point, not a point at zero.
        assert_eq!(tps.svg().unwrap().matches("<circle").count(), 1);
    }

    #[test]
    fn a_route_scale_sweep_draws_time_to_serve_and_memory_against_routes() {
        let mut input = sample_input();
        let base = input.series[0].clone();
        input.series.clear();
        for (n, served, rss) in [
            (10u32, Some(5.0), 20.0),
            (1000, Some(170.0), 75.0),
            (5000, None, 110.0),
        ] {
            let mut s = base.clone();
            s.name = format!("envoy-xds-{n}routes");
            let lab = s.result.lab.as_mut().unwrap();
            lab.route_set = Some(results::RouteSetResult {
                count: n,
                hosts: 10,
                all_served_ms: served,
                ..Default::default()
            });
            lab.resources = Some(results::Resources {
                rss_max_mib: rss,
                ..Default::default()
            });
            input.series.push(s);
        }
        let charts = build(&input);
        let served = charts
            .iter()
            .find(|c| c.id == "chart-route-scale-served")
            .unwrap();
        let rss = charts
            .iter()
            .find(|c| c.id == "chart-route-scale-rss")
            .unwrap();
        let svg = served.svg().unwrap();
        assert!(
            svg.contains("\nenvoy-xds\n"),
            "one line, named by the system without its size: {svg}"
        );
        // The size where some route never served has no point.
        assert_eq!(svg.matches("<circle").count(), 2);
        let svg = rss.svg().unwrap();
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(
            ["\n1000\n", "\n1,000\n", "\n1k\n"]
                .iter()
                .any(|t| svg.contains(t)),
            "a routes tick at 1000: {svg}"
        );
        // One size only: no sweep, no chart.
        input.series.truncate(1);
        assert!(!build(&input)
            .iter()
            .any(|c| c.id.starts_with("chart-route-scale")));
    }

    #[test]
    fn results_with_nothing_in_them_still_draw() {
        let mut input = sample_input();
        for s in &mut input.series {
            let r = &mut s.result;
            r.timeline.iter_mut().for_each(|e| {
                e.completed = 0;
                e.p50 = 0.0;
                e.p99 = 0.0;
                e.max = 0.0;
                e.backends.clear();
            });
            r.histogram = histogram_b64(&[]);
            r.samples = None;
            r.lab = None;
        }
        let t = std::time::Instant::now();
        for c in build(&input) {
            let svg = c.svg().unwrap();
            assert!(svg.starts_with("<svg"), "{}", c.id);
            if c.id.starts_with("chart-latency") {
                assert!(svg.contains("no latency to draw"), "{}", c.id);
            }
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn no_errors_is_said_not_drawn() {
        let mut input = sample_input();
        input.series.truncate(1);
        input.series[0].result.timeline.iter_mut().for_each(|e| {
            e.errors = 0;
            e.errors_by_kind.clear();
        });
        input.series[0].result.errors.read = 0;
        let errors = build(&input)
            .into_iter()
            .find(|c| c.id == "chart-errors")
            .unwrap();
        assert!(errors.svg().unwrap().contains("no errors in any series"));
    }

    #[test]
    fn a_run_with_sessions_has_their_ends_drawn_by_how() {
        let mut input = sample_input();
        assert!(build(&input).iter().all(|c| c.id != "chart-sessions"));
        let mut s = results::sessions::Sessions::default();
        s.ends.insert("eof".into(), 5);
        s.ends.insert("close 1001".into(), 3);
        s.timeline = vec![results::sessions::SessionSecond {
            second: 1,
            ended: 8,
            closed: 3,
            ..Default::default()
        }];
        input.series[0].result.sessions = Some(s);
        let chart = build(&input)
            .into_iter()
            .find(|c| c.id == "chart-sessions")
            .expect("the sessions chart");
        let svg = chart.svg().unwrap();
        assert!(svg.contains("close frame") && svg.contains("cut"), "{svg}");
        assert!(chart.png().is_ok());
    }
}
