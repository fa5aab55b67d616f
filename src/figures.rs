//! Figures as plain data, rendered for publication with plotters to SVG or PNG (the explorer's
//! export; the live panels draw the same data with egui).

use crate::error::{AecmError, Result};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{BoldPoints, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters_backend::{BackendCoord, DrawingErrorKind};
use std::sync::Once;

/// One curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// RGB colour.
    pub color: [u8; 3],
    /// Points (x, y).
    pub points: Vec<[f64; 2]>,
}

/// A figure the explorer can show and export.
#[derive(Debug, Clone, PartialEq)]
pub enum Figure {
    /// Curves over training.
    Lines {
        /// Title.
        title: String,
        /// X axis label.
        x_label: String,
        /// Y axis label.
        y_label: String,
        /// The curves.
        series: Vec<Series>,
        /// Vertical markers (x, label): where a hyper-parameter changed.
        marks: Vec<(f64, String)>,
        /// Horizontal reference lines (label, y, colour): e.g. the paper's value.
        references: Vec<(String, f64, [u8; 3])>,
        /// Log-scale y axis.
        log_y: bool,
    },
    /// A 2-D scatter with centroids and their trajectories.
    Scatter {
        /// Title.
        title: String,
        /// Points.
        points: Vec<[f32; 2]>,
        /// Colour of each point.
        colors: Vec<[u8; 3]>,
        /// Centroids.
        centroids: Vec<[f32; 2]>,
        /// Trajectory of each centroid.
        trajectories: Vec<Vec<[f32; 2]>>,
        /// Legend entries.
        legend: Vec<(String, [u8; 3])>,
    },
    /// A row (or grid) of small images, e.g. decoded centroids.
    Images {
        /// Title.
        title: String,
        /// Caption and pixels (`h*w*c`, values scaled to 0..1 for display).
        images: Vec<(String, Vec<f32>)>,
        /// Image shape `[h, w, c]`.
        shape: [usize; 3],
        /// Images per row.
        columns: usize,
    },
    /// A matrix of numbers as coloured cells (confusion matrix, centroid values).
    Heatmap {
        /// Title.
        title: String,
        /// Row labels.
        rows: Vec<String>,
        /// Column labels.
        cols: Vec<String>,
        /// Values, row-major.
        values: Vec<f64>,
        /// Write the value in each cell.
        annotate: bool,
    },
}

/// A categorical palette (Tableau 10, then Tableau 20's light tones).
pub const PALETTE: [[u8; 3]; 20] = [
    [31, 119, 180],
    [255, 127, 14],
    [44, 160, 44],
    [214, 39, 40],
    [148, 103, 189],
    [140, 86, 75],
    [227, 119, 194],
    [127, 127, 127],
    [188, 189, 34],
    [23, 190, 207],
    [174, 199, 232],
    [255, 187, 120],
    [152, 223, 138],
    [255, 152, 150],
    [197, 176, 213],
    [196, 156, 148],
    [247, 182, 210],
    [199, 199, 199],
    [219, 219, 141],
    [158, 218, 229],
];

/// Colour of category `i`.
pub fn category_color(i: usize) -> [u8; 3] {
    PALETTE[i % PALETTE.len()]
}

static FONT: Once = Once::new();

fn register_font() {
    FONT.call_once(|| {
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            epaint_default_fonts::UBUNTU_LIGHT,
        );
    });
}

fn rgb(c: [u8; 3]) -> RGBColor {
    RGBColor(c[0], c[1], c[2])
}

/// Renders the figure as an SVG document of `w x h` pixels.
pub fn render_svg(fig: &Figure, w: u32, h: u32) -> Result<String> {
    check_size(w, h)?;
    register_font();
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (w, h)).into_drawing_area();
        draw(&root, fig, false).map_err(|e| AecmError::Backend(format!("svg: {e}")))?;
        root.present()
            .map_err(|e| AecmError::Backend(format!("svg: {e}")))?;
    }
    Ok(s)
}

/// Renders the figure as a PNG file of `w x h` pixels (the encoded bytes).
pub fn render_png(fig: &Figure, w: u32, h: u32) -> Result<Vec<u8>> {
    check_size(w, h)?;
    register_font();
    let mut buf = vec![255u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        draw(&root, fig, true).map_err(|e| AecmError::Backend(format!("png: {e}")))?;
        root.present()
            .map_err(|e| AecmError::Backend(format!("png: {e}")))?;
    }
    let img = image::RgbImage::from_raw(w, h, buf)
        .ok_or_else(|| AecmError::Backend("png: buffer size".into()))?;
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .map_err(|e| AecmError::Backend(format!("png: {e}")))?;
    Ok(out.into_inner())
}

fn check_size(w: u32, h: u32) -> Result<()> {
    if !(64..=8192).contains(&w) || !(64..=8192).contains(&h) {
        return Err(AecmError::config(
            "size",
            format!("{w} x {h}: width and height must be between 64 and 8192 pixels"),
        ));
    }
    Ok(())
}

type DrawResult = std::result::Result<(), String>;

/// Draws `fig` on `root`; `raster` says the backend is a bitmap (see [`RasterPath`]).
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    fig: &Figure,
    raster: bool,
) -> DrawResult {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    match fig {
        Figure::Lines {
            title,
            x_label,
            y_label,
            series,
            marks,
            references,
            log_y,
        } => draw_lines(
            root, title, x_label, y_label, series, marks, references, *log_y, raster,
        ),
        Figure::Scatter {
            title,
            points,
            colors,
            centroids,
            trajectories,
            legend,
        } => draw_scatter(root, title, points, colors, centroids, trajectories, legend),
        Figure::Images {
            title,
            images,
            shape,
            columns,
        } => draw_images(root, title, images, *shape, *columns),
        Figure::Heatmap {
            title,
            rows,
            cols,
            values,
            annotate,
        } => draw_heatmap(root, title, rows, cols, values, *annotate),
    }
}

fn bounds(it: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in it.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-12 {
        return (lo - 0.5, hi + 0.5);
    }
    let pad = 0.05 * (hi - lo);
    (lo - pad, hi + pad)
}

#[allow(clippy::too_many_arguments)]
fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    marks: &[(f64, String)],
    references: &[(String, f64, [u8; 3])],
    log_y: bool,
    raster: bool,
) -> DrawResult {
    let (x0, x1) = bounds(series.iter().flat_map(|s| s.points.iter().map(|p| p[0])));
    let ys = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p[1]))
        .chain(references.iter().map(|r| r.1));
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    let parts = LineParts {
        x: (x0, x1),
        series,
        marks,
        references,
        raster,
    };
    if log_y {
        let pos: Vec<f64> = ys.filter(|v| *v > 0.0).collect();
        let lo = pos.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = pos.iter().copied().fold(0f64, f64::max);
        let (lo, hi) = if lo.is_finite() && hi > 0.0 {
            (lo * 0.8, hi * 1.25)
        } else {
            (1e-3, 1.0)
        };
        let mut chart = builder
            .build_cartesian_2d(x0..x1, (lo..hi).log_scale())
            .map_err(|e| e.to_string())?;
        let x_ticks = tick_labels(x0, x1);
        chart
            .configure_mesh()
            .x_labels(MESH_LABELS)
            .x_label_formatter(&x_ticks)
            .x_desc(x_label)
            .y_desc(format!("{y_label} (log)"))
            .draw()
            .map_err(|e| e.to_string())?;
        // a log axis cannot show values <= 0: those points are left out
        return parts.draw(&mut chart, (lo, hi), |y| y > 0.0);
    }
    let (y0, y1) = bounds(ys);
    let mut chart = builder
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| e.to_string())?;
    let (x_ticks, y_ticks) = (tick_labels(x0, x1), tick_labels(y0, y1));
    chart
        .configure_mesh()
        .x_labels(MESH_LABELS)
        .y_labels(MESH_LABELS)
        .x_label_formatter(&x_ticks)
        .y_label_formatter(&y_ticks)
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| e.to_string())?;
    parts.draw(&mut chart, (y0, y1), |_| true)
}

/// Labelled ticks per linear axis (plotters' default).
const MESH_LABELS: usize = 11;

/// Tick labels for a linear axis over `lo..hi`: whole numbers without a decimal point ("8", not
/// "8.0") when every labelled tick is whole (epochs, K, scores x100), else plotters' own format.
fn tick_labels(lo: f64, hi: f64) -> impl Fn(&f64) -> String {
    let whole = |v: f64| v.fract() == 0.0 && v.abs() < 1e15;
    let all_whole = RangedCoordf64::from(lo..hi)
        .key_points(BoldPoints(MESH_LABELS))
        .into_iter()
        .all(whole);
    move |v: &f64| {
        if all_whole && whole(*v) {
            // `+ 0.0` turns -0 into 0
            format!("{:.0}", *v + 0.0)
        } else {
            RangedCoordf64::format(v)
        }
    }
}

/// What a line chart draws on its axes, whatever the y scale.
struct LineParts<'a> {
    x: (f64, f64),
    series: &'a [Series],
    marks: &'a [(f64, String)],
    references: &'a [(String, f64, [u8; 3])],
    /// Draw the curves with [`RasterPath`] (bitmaps) rather than one wide path (SVG).
    raster: bool,
}

impl LineParts<'_> {
    /// Markers, dashed references, the curves (points kept by `keep_y`) and the legend.
    fn draw<'c, DB: DrawingBackend + 'c, Y: Ranged<ValueType = f64>>(
        &self,
        chart: &mut ChartContext<'c, DB, Cartesian2d<RangedCoordf64, Y>>,
        (y0, y1): (f64, f64),
        keep_y: impl Fn(f64) -> bool,
    ) -> DrawResult {
        let (x0, x1) = self.x;
        // what is drawn (pixels of the plotting area) and named, for placing the legend
        let base = chart.plotting_area().get_base_pixel();
        let to_area =
            |chart: &ChartContext<'c, DB, Cartesian2d<RangedCoordf64, Y>>, x: f64, y: f64| {
                let (px, py) = chart.backend_coord(&(x, y));
                (px - base.0, py - base.1)
            };
        let mut drawn: Vec<Vec<(i32, i32)>> = Vec::new();
        let mut labels: Vec<&str> = Vec::new();
        // a vertical dashed line, darker and wider than the grid, named in the legend
        for (x, name) in self.marks {
            drawn.push(vec![to_area(chart, *x, y0), to_area(chart, *x, y1)]);
            labels.push(name);
            let c = BLACK.mix(0.7);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(*x, y0), (*x, y1)],
                    8,
                    5,
                    c.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c));
        }
        for (name, y, color) in self.references.iter().filter(|r| keep_y(r.1)) {
            drawn.push(vec![to_area(chart, x0, *y), to_area(chart, x1, *y)]);
            labels.push(name);
            let c = rgb(*color);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x0, *y), (x1, *y)],
                    6,
                    4,
                    c.stroke_width(1),
                ))
                .map_err(|e| e.to_string())?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c));
        }
        for s in self.series {
            let kept = || s.points.iter().filter(|p| keep_y(p[1]));
            drawn.push(kept().map(|p| to_area(chart, p[0], p[1])).collect());
            labels.push(&s.name);
            let c = rgb(s.color);
            let points = kept().map(|p| (p[0], p[1]));
            let anno = if self.raster {
                chart.draw_series(std::iter::once(RasterPath {
                    points: points.collect(),
                    color: c,
                    width: CURVE_WIDTH,
                }))
            } else {
                chart.draw_series(LineSeries::new(points, c.stroke_width(CURVE_WIDTH)))
            };
            anno.map_err(|e| e.to_string())?
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c));
        }
        // the legend goes where it covers the least of what was drawn
        let position = legend_position(
            legend_size(labels.into_iter()),
            chart.plotting_area().dim_in_pixel(),
            &drawn,
        );
        chart
            .configure_series_labels()
            .position(position)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// Width of a curve in pixels.
const CURVE_WIDTH: u32 = 2;

/// A polyline `width` pixels wide for bitmaps, drawn as `width` one-pixel anti-aliased lines side
/// by side, each segment's copies shifted along its minor axis (x for steep segments, y for flat
/// ones), with a `width`-pixel square where a flat segment meets a steep one.
///
/// plotters fills a wide path as one polygon scanned in one direction for the whole path
/// (plotters-backend 0.3.7 `rasterizer::polygonize` and `fill_polygon`), which adds a pixel of
/// anti-aliasing along the scan only: with stroke width 2 a flat stretch measured 3.1 px across
/// and a steep one 2.3 px (the test below), so steep rises looked thinner. Here every segment is
/// `width` pixels thick along its minor axis, like a Bresenham thick line (1.8 px across both
/// ways in the same test). SVG keeps plotters' own path (one `<polyline>` with `stroke-width`),
/// which viewers draw evenly.
struct RasterPath {
    points: Vec<(f64, f64)>,
    color: RGBColor,
    width: u32,
}

impl<'a> PointCollection<'a, (f64, f64)> for &'a RasterPath {
    type Point = &'a (f64, f64);
    type IntoIter = &'a [(f64, f64)];
    fn point_iter(self) -> &'a [(f64, f64)] {
        &self.points
    }
}

impl<DB: DrawingBackend> Drawable<DB> for RasterPath {
    fn draw<I: Iterator<Item = BackendCoord>>(
        &self,
        pos: I,
        backend: &mut DB,
        _: (u32, u32),
    ) -> std::result::Result<(), DrawingErrorKind<DB::ErrorType>> {
        let pts: Vec<BackendCoord> = pos.collect();
        let w = self.width.max(1) as i32;
        // offsets -(w-1)/2 ..= w/2: 0, 1 for width 2
        let first = -(w - 1) / 2;
        let line = self.color.stroke_width(1);
        let fill = self.color.filled();
        let steep = |a: BackendCoord, b: BackendCoord| (b.1 - a.1).abs() > (b.0 - a.0).abs();
        for seg in pts.windows(2) {
            let (a, b) = (seg[0], seg[1]);
            for k in first..first + w {
                let d = if steep(a, b) { (k, 0) } else { (0, k) };
                backend.draw_line((a.0 + d.0, a.1 + d.1), (b.0 + d.0, b.1 + d.1), &line)?;
            }
        }
        // where a flat segment meets a steep one their copies are shifted different ways: a
        // square closes the notch (elsewhere the copies meet and a solid square would show as a dot)
        for s in pts
            .windows(3)
            .filter(|s| w > 1 && steep(s[0], s[1]) != steep(s[1], s[2]))
        {
            let lo = (s[1].0 + first, s[1].1 + first);
            // the bitmap backend fills up to, not including, the lower right corner
            backend.draw_rect(lo, (lo.0 + w, lo.1 + w), &fill, true)?;
        }
        Ok(())
    }
}

/// The legend's box in pixels as plotters lays it out: its default 12-px labels, one per line,
/// a 30-px swatch column and a 10-px margin on every side (`SeriesLabelStyle::draw`).
fn legend_size<'a>(labels: impl Iterator<Item = &'a str>) -> (i32, i32) {
    let font = ("sans-serif", 12).into_font();
    let (mut w, mut rows) = (0i32, 0i32);
    for label in labels {
        // an unknown width (no font) counts 7 px a character
        let lw = font.box_size(label).map_or_else(
            |_| i32::try_from(label.chars().count() * 7).unwrap_or(i32::MAX),
            |(w, _)| i32::try_from(w).unwrap_or(i32::MAX),
        );
        w = w.max(lw);
        rows += 1;
    }
    (w.saturating_add(30 + 20), rows * 15 + 20)
}

/// Where a legend of `size` (pixels) covers the fewest pixels of the `drawn` polylines (pixel
/// coordinates of the plotting area, `area` wide and high): a corner or the middle of a side,
/// the upper right on a tie. Segments are sampled every 2 px.
fn legend_position(
    size: (i32, i32),
    area: (u32, u32),
    drawn: &[Vec<(i32, i32)>],
) -> SeriesLabelPosition {
    use SeriesLabelPosition::{
        LowerLeft, LowerRight, MiddleLeft, MiddleRight, UpperLeft, UpperRight,
    };
    let (aw, ah) = (
        i32::try_from(area.0).unwrap_or(i32::MAX),
        i32::try_from(area.1).unwrap_or(i32::MAX),
    );
    let (w, h) = size;
    // the boxes as plotters places them: 5 px from the edges
    let candidates = [
        (UpperRight, aw - w - 5, 5),
        (UpperLeft, 5, 5),
        (LowerRight, aw - w - 5, ah - h - 5),
        (LowerLeft, 5, ah - h - 5),
        (MiddleRight, aw - w - 5, (ah - h) / 2),
        (MiddleLeft, 5, (ah - h) / 2),
    ];
    let mut samples = Vec::new();
    for line in drawn {
        if let [only] = line.as_slice() {
            samples.push(*only);
        }
        for pair in line.windows(2) {
            let ((xa, ya), (xb, yb)) = (pair[0], pair[1]);
            let steps = ((xb - xa).abs().max((yb - ya).abs()) / 2).clamp(1, 4000);
            for k in 0..=steps {
                samples.push((xa + (xb - xa) * k / steps, ya + (yb - ya) * k / steps));
            }
        }
    }
    let covered = |x: i32, y: i32| {
        samples
            .iter()
            .filter(|(px, py)| (x - 3..=x + w + 3).contains(px) && (y - 3..=y + h + 3).contains(py))
            .count()
    };
    candidates
        .into_iter()
        .map(|(pos, x, y)| (covered(x, y), pos))
        .min_by_key(|(n, _)| *n)
        .map_or(UpperRight, |(_, pos)| pos)
}

fn draw_scatter<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    points: &[[f32; 2]],
    colors: &[[u8; 3]],
    centroids: &[[f32; 2]],
    trajectories: &[Vec<[f32; 2]>],
    legend: &[(String, [u8; 3])],
) -> DrawResult {
    let all = || points.iter().chain(centroids);
    let (x0, x1) = bounds(all().map(|p| f64::from(p[0])));
    let (y0, y1) = bounds(all().map(|p| f64::from(p[1])));
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("component 1")
        .y_desc("component 2")
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(points.iter().zip(colors).map(|(p, c)| {
            Circle::new(
                (f64::from(p[0]), f64::from(p[1])),
                2,
                rgb(*c).mix(0.6).filled(),
            )
        }))
        .map_err(|e| e.to_string())?;
    for t in trajectories {
        chart
            .draw_series(LineSeries::new(
                t.iter().map(|p| (f64::from(p[0]), f64::from(p[1]))),
                BLACK.stroke_width(1),
            ))
            .map_err(|e| e.to_string())?;
    }
    chart
        .draw_series(
            centroids
                .iter()
                .map(|p| Cross::new((f64::from(p[0]), f64::from(p[1])), 7, BLACK.stroke_width(3))),
        )
        .map_err(|e| e.to_string())?;
    for (name, c) in legend {
        let c = rgb(*c);
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(|e| e.to_string())?
            .label(name.clone())
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, c.filled()));
    }
    if !legend.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn draw_images<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    images: &[(String, Vec<f32>)],
    shape: [usize; 3],
    columns: usize,
) -> DrawResult {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    let (w, h) = root.dim_in_pixel();
    let area = root.titled(title, ("sans-serif", 22)).map_err(e)?;
    let cols = columns.max(1).min(images.len().max(1));
    let rows = images.len().div_ceil(cols).max(1);
    let cell_w = (w as usize).saturating_sub(20) / cols;
    let cell_h = (h as usize).saturating_sub(50) / rows;
    let [ih, iw, ic] = shape;
    let px = ((cell_w.saturating_sub(6)) / iw.max(1))
        .min(cell_h.saturating_sub(22) / ih.max(1))
        .max(1);
    for (n, (caption, pix)) in images.iter().enumerate() {
        let (r, c) = (n / cols, n % cols);
        let ox = 10 + c * cell_w;
        let oy = 10 + r * cell_h;
        for y in 0..ih {
            for x in 0..iw {
                let at = (y * iw + x) * ic;
                let v = |k: usize| {
                    (pix.get(at + k).copied().unwrap_or(0.0).clamp(0.0, 1.0) * 255.0) as u8
                };
                let color = if ic >= 3 {
                    RGBColor(v(0), v(1), v(2))
                } else {
                    let g = v(0);
                    RGBColor(g, g, g)
                };
                let x0 = (ox + x * px) as i32;
                let y0 = (oy + y * px) as i32;
                area.draw(&Rectangle::new(
                    [(x0, y0), (x0 + px as i32, y0 + px as i32)],
                    color.filled(),
                ))
                .map_err(e)?;
            }
        }
        area.draw(&Text::new(
            caption.clone(),
            (ox as i32, (oy + ih * px + 4) as i32),
            ("sans-serif", 14),
        ))
        .map_err(e)?;
    }
    Ok(())
}

fn draw_heatmap<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    rows: &[String],
    cols: &[String],
    values: &[f64],
    annotate: bool,
) -> DrawResult {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    let area = root.titled(title, ("sans-serif", 22)).map_err(e)?;
    let (w, h) = area.dim_in_pixel();
    let (nr, nc) = (rows.len().max(1), cols.len().max(1));
    let left = 70usize;
    let top = 30usize;
    let cw = (w as usize).saturating_sub(left + 10) / nc;
    let ch = (h as usize).saturating_sub(top + 10) / nr;
    let (lo, hi) = bounds(values.iter().copied());
    for (j, c) in cols.iter().enumerate() {
        area.draw(&Text::new(
            c.clone(),
            ((left + j * cw + cw / 2) as i32 - 6, 8),
            ("sans-serif", 13),
        ))
        .map_err(e)?;
    }
    for (i, r) in rows.iter().enumerate() {
        area.draw(&Text::new(
            r.clone(),
            (6, (top + i * ch + ch / 2) as i32 - 6),
            ("sans-serif", 13),
        ))
        .map_err(e)?;
        for j in 0..nc {
            let v = values.get(i * nc + j).copied().unwrap_or(0.0);
            let t = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
            let shade = (255.0 * (1.0 - 0.85 * t)) as u8;
            let color = RGBColor(shade, shade, 255);
            let x0 = (left + j * cw) as i32;
            let y0 = (top + i * ch) as i32;
            area.draw(&Rectangle::new(
                [(x0, y0), (x0 + cw as i32 - 1, y0 + ch as i32 - 1)],
                color.filled(),
            ))
            .map_err(e)?;
            if annotate {
                let txt = if v.fract() == 0.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.2}")
                };
                area.draw(&Text::new(
                    txt,
                    (x0 + 3, y0 + ch as i32 / 2 - 6),
                    ("sans-serif", 12),
                ))
                .map_err(e)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines() -> Figure {
        Figure::Lines {
            title: "loss".into(),
            x_label: "epoch".into(),
            y_label: "value".into(),
            series: vec![Series {
                name: "E1".into(),
                color: category_color(0),
                points: (0..50)
                    .map(|i| [f64::from(i), 1.0 / (1.0 + f64::from(i))])
                    .collect(),
            }],
            marks: vec![(10.0, "alpha".into())],
            references: vec![("paper".into(), 0.5, [0, 0, 0])],
            log_y: false,
        }
    }

    #[test]
    fn png_has_requested_size_and_is_not_blank() {
        let png = render_png(&lines(), 640, 400).expect("png");
        let img = image::load_from_memory(&png).expect("decode").to_rgb8();
        assert_eq!(img.dimensions(), (640, 400));
        let dark = img.pixels().filter(|p| p.0[0] < 128).count();
        assert!(dark > 500, "only {dark} dark pixels");
    }

    #[test]
    fn svg_is_a_document_with_the_title() {
        let svg = render_svg(&lines(), 500, 300).expect("svg");
        assert!(svg.starts_with("<svg") && svg.contains("width=\"500\""));
        assert!(svg.contains("loss"));
    }

    #[test]
    fn log_scale_renders_and_drops_non_positive_values() {
        let mut f = lines();
        if let Figure::Lines { log_y, series, .. } = &mut f {
            *log_y = true;
            series[0].points.push([50.0, -1.0]);
        }
        let png = render_png(&f, 400, 300).expect("png");
        let img = image::load_from_memory(&png).expect("decode");
        assert_eq!((img.width(), img.height()), (400, 300));
    }

    #[test]
    fn the_legend_goes_where_the_curves_are_not() {
        use SeriesLabelPosition::{LowerRight, UpperLeft, UpperRight};
        let area = (600, 400);
        let size = (120, 65);
        // nothing drawn: the upper right, the first choice on a tie
        assert!(matches!(legend_position(size, area, &[]), UpperRight));
        // a curve falling from the upper left to the lower right leaves the upper right free
        let falling = vec![vec![(0, 0), (600, 400)]];
        assert!(matches!(legend_position(size, area, &falling), UpperRight));
        // a rising curve along the top right and a flat one along the bottom: the upper left
        let busy = vec![vec![(0, 380), (600, 380)], vec![(300, 200), (600, 10)]];
        assert!(matches!(legend_position(size, area, &busy), UpperLeft));
        // curves high everywhere (the K sweep's homogeneity) and a low left end: the lower right
        let high = vec![
            vec![(0, 40), (600, 40)],
            vec![(0, 390), (100, 200), (600, 150)],
        ];
        assert!(matches!(legend_position(size, area, &high), LowerRight));
    }

    #[test]
    fn the_legend_is_as_wide_as_its_longest_label() {
        let (w1, h1) = legend_size(["ARI"].into_iter());
        let (w2, h2) = legend_size(["ARI", "a much longer legend label"].into_iter());
        assert!(w2 > w1 + 50, "{w1} {w2}");
        assert_eq!(h2 - h1, 15);
    }

    #[test]
    fn whole_ticks_lose_the_decimal_point_only_when_all_are_whole() {
        // K = 5..20 and scores 30..80: whole ticks
        let k = tick_labels(5.0, 20.0);
        assert_eq!((k(&6.0), k(&20.0)), ("6".to_string(), "20".to_string()));
        assert_eq!(tick_labels(-10.0, 10.0)(&-0.0), "0");
        // 0..1 ticks at 0.1 steps: 0 keeps its decimal like its neighbours
        let f = tick_labels(0.0, 1.0);
        assert_eq!((f(&0.0), f(&0.3)), ("0.0".to_string(), "0.3".to_string()));
        assert_eq!(tick_labels(0.0, 3.0)(&1.0), "1.0");
    }

    /// Ink of a pure red curve at each pixel, 0..1, whatever it was drawn over (white or a grey
    /// grid line: red minus green is the curve's coverage either way).
    fn red_ink(png: &[u8]) -> (u32, u32, Vec<f64>) {
        let img = image::load_from_memory(png).expect("decode").to_rgb8();
        let (w, h) = img.dimensions();
        let ink = img
            .pixels()
            .map(|p| (f64::from(p.0[0]) - f64::from(p.0[1])).max(0.0) / 255.0)
            .collect();
        (w, h, ink)
    }

    /// Thickness across a line from scan lines `(position, ink along it, centre of that ink)`:
    /// the slope of the centres over the positions turns the mean extent along a scan line into
    /// the thickness across the curve.
    fn thickness(lines: &[(f64, f64, f64)]) -> f64 {
        let n = lines.len() as f64;
        let (mi, mc) = lines
            .iter()
            .fold((0.0, 0.0), |(a, b), l| (a + l.0 / n, b + l.2 / n));
        let cov: f64 = lines.iter().map(|l| (l.0 - mi) * (l.2 - mc)).sum();
        let var: f64 = lines.iter().map(|l| (l.0 - mi).powi(2)).sum();
        let slope = cov / var;
        let extent = lines.iter().map(|l| l.1).sum::<f64>() / n;
        extent / (1.0 + slope * slope).sqrt()
    }

    #[test]
    fn steep_and_flat_stretches_of_a_png_curve_are_equally_thick() {
        // a steep rise on the left, then a nearly flat stretch along the top
        let fig = Figure::Lines {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series {
                name: "curve".into(),
                color: [255, 0, 0],
                points: vec![[0.0, 0.0], [1.0, 10.0], [11.0, 12.0]],
            }],
            marks: vec![],
            references: vec![],
            log_y: false,
        };
        let (w, h, ink) = red_ink(&render_png(&fig, 600, 400).expect("png"));
        let at = |x: u32, y: u32| ink[(y * w + x) as usize];
        // rows through the left third: (row, ink along the row, centre of that ink)
        let rows: Vec<(f64, f64, f64)> = (0..h)
            .filter_map(|y| {
                let s: f64 = (0..w / 3).map(|x| at(x, y)).sum();
                let c: f64 = (0..w / 3).map(|x| f64::from(x) * at(x, y)).sum();
                (s > 0.5).then(|| (f64::from(y), s, c / s))
            })
            .collect();
        // columns through the middle third, upper half
        let cols: Vec<(f64, f64, f64)> = (w / 3..2 * w / 3)
            .filter_map(|x| {
                let s: f64 = (0..h / 2).map(|y| at(x, y)).sum();
                let c: f64 = (0..h / 2).map(|y| f64::from(y) * at(x, y)).sum();
                (s > 0.5).then(|| (f64::from(x), s, c / s))
            })
            .collect();
        assert!(
            rows.len() > 150 && cols.len() > 150,
            "{} {}",
            rows.len(),
            cols.len()
        );
        // the middle half of each stretch, away from the corner and the ends
        let mid = |v: &[(f64, f64, f64)]| v[v.len() / 4..3 * v.len() / 4].to_vec();
        let (steep, flat) = (thickness(&mid(&rows)), thickness(&mid(&cols)));
        for t in [steep, flat] {
            assert!(
                (1.5..=2.5).contains(&t),
                "steep {steep:.2} px, flat {flat:.2} px"
            );
        }
        assert!(
            steep.max(flat) / steep.min(flat) < 1.15,
            "steep {steep:.2} px, flat {flat:.2} px"
        );
    }

    #[test]
    fn bad_size_is_an_error() {
        assert!(render_png(&lines(), 10, 400).is_err());
    }
}
