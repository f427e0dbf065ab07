//! The report's plots as SVG (plotters): the roofline, the speedup per benchmark, and the
//! best-so-far speedup and fast1@N against the sample budget.

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Serialize;

use super::data::{Report, Timing};
use super::ReportError;

#[derive(Debug, Clone, Serialize)]
pub struct Plot {
    /// File stem (`roofline` -> `roofline.svg`).
    pub id: &'static str,
    pub title: String,
    pub caption: String,
    /// None when there is nothing to draw; `empty` says why.
    pub svg: Option<String>,
    pub empty: String,
}

const FONT: &str = "sans-serif";

fn err<E: std::fmt::Display>(e: E) -> ReportError {
    ReportError::Plot(e.to_string())
}

/// The series legend every plot draws, boxed at `position`.
fn legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), ReportError>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(position)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .draw()
        .map_err(err)
}

fn short(workload: &str) -> &str {
    workload.split('_').next().unwrap_or(workload)
}

fn render(
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), ReportError>,
) -> Result<String, ReportError> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw(&root)?;
        root.present().map_err(err)?;
    }
    Ok(buf)
}

fn bounds(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((a, b)) => Some((a.min(v), b.max(v))),
        })
}

/// Which timing of a workload a series shows.
type TimingOf = fn(&super::data::WorkloadRow) -> Option<&Timing>;

/// Every workload at (operational intensity, achieved FLOP/s) under the device's roofline.
pub fn roofline(r: &Report) -> Result<Plot, ReportError> {
    let series: [(&str, RGBColor, TimingOf); 3] = [
        ("XLA", BLUE, |w| w.xla.as_ref()),
        ("hand-tuned", RGBColor(0, 140, 60), |w| {
            w.handtuned_tuned.as_ref()
        }),
        ("best candidate", RED, |w| w.best.as_ref()),
    ];
    let mut pts: Vec<(usize, f64, f64, String)> = Vec::new();
    for w in &r.workloads {
        let Some(i) = w.intensity else { continue };
        for (s, (_, _, get)) in series.iter().enumerate() {
            if let Some(tf) = get(w).and_then(|t| t.tflops) {
                pts.push((s, i, tf * 1e12, short(&w.workload).to_string()));
            }
        }
    }
    let mut plot = Plot {
        id: "roofline",
        title: "Roofline".into(),
        caption: match &r.peak {
            Some(p) => format!(
                "Achieved FLOP/s against operational intensity under the {} roofline ({} TFLOP/s, {} GB/s{}).",
                p.device,
                super::tables::sig(p.flops_per_s / 1e12, 4),
                super::tables::sig(p.bytes_per_s / 1e9, 4),
                if p.source == "measured" {
                    "; measured by `jb doctor`: an estimate"
                } else {
                    ""
                }
            ),
            None => "Achieved FLOP/s against operational intensity (no device peak known: no roofline).".into(),
        },
        svg: None,
        empty: "No timed workload with FLOPs and bytes.".into(),
    };
    let Some((x0, x1)) = bounds(pts.iter().map(|p| p.1)) else {
        return Ok(plot);
    };
    let (mut y0, mut y1) = bounds(pts.iter().map(|p| p.2)).unwrap_or((1.0, 1.0));
    let (mut x0, mut x1) = (x0 / 4.0, x1 * 4.0);
    if let Some(p) = &r.peak {
        y1 = y1.max(p.flops_per_s);
        x0 = x0.min(p.ridge() / 16.0);
        x1 = x1.max(p.ridge() * 4.0);
        y0 = y0.min(p.attainable(x0));
    }
    let (y0, y1) = (y0 / 4.0, y1 * 4.0);
    let peak = r.peak.clone();
    plot.svg = Some(render((900, 600), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("Roofline", (FONT, 22))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("operational intensity (FLOP/byte)")
            .y_desc("achieved FLOP/s")
            .x_label_formatter(&|x| super::tables::sig(*x, 2))
            .y_label_formatter(&|y| format!("{y:.0e}"))
            .draw()
            .map_err(err)?;
        if let Some(p) = &peak {
            let line = vec![
                (x0, p.attainable(x0)),
                (p.ridge(), p.flops_per_s),
                (x1, p.flops_per_s),
            ];
            chart
                .draw_series(LineSeries::new(line, BLACK.stroke_width(2)))
                .map_err(err)?
                .label(format!("{} roofline", p.device))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        }
        for (s, (name, color, _)) in series.iter().enumerate() {
            let mine: Vec<&(usize, f64, f64, String)> = pts.iter().filter(|p| p.0 == s).collect();
            if mine.is_empty() {
                continue;
            }
            let color = *color;
            chart
                .draw_series(
                    mine.iter()
                        .map(|(_, x, y, _)| Circle::new((*x, *y), 4, color.filled())),
                )
                .map_err(err)?
                .label(*name)
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
        }
        // Labels where they fit: each workload named once (at its first series' point), beside
        // its point on the first side where it overlaps no label already placed; a point
        // crowded on every side goes unlabelled rather than overprinted.
        let mut placed: Vec<(i32, i32, i32, i32)> = Vec::new();
        let mut named = std::collections::HashSet::new();
        let mut labels = Vec::new();
        for (_, x, y, label) in &pts {
            if !named.insert(label.clone()) {
                continue;
            }
            let (px, py) = chart.backend_coord(&(*x, *y));
            let w = 7 * label.chars().count() as i32;
            let free = [(6, -14), (6, 4), (-w - 6, -14), (-w - 6, 4)]
                .into_iter()
                .map(|(dx, dy)| (dx, dy, (px + dx, py + dy, px + dx + w, py + dy + 12)))
                .find(|(_, _, b)| {
                    placed
                        .iter()
                        .all(|p| b.2 <= p.0 || p.2 <= b.0 || b.3 <= p.1 || p.3 <= b.1)
                });
            if let Some((dx, dy, b)) = free {
                placed.push(b);
                labels.push((*x, *y, (dx, dy), label.clone()));
            }
        }
        chart
            .draw_series(labels.into_iter().map(|(x, y, off, label)| {
                EmptyElement::at((x, y)) + Text::new(label, off, (FONT, 11).into_font())
            }))
            .map_err(err)?;
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    })?);
    Ok(plot)
}

/// Speedup over XLA per benchmark: the tuned hand-written kernel and the best candidate.
pub fn speedup(r: &Report) -> Result<Plot, ReportError> {
    type Ci = Option<(f64, f64)>;
    let rows: Vec<(&str, Option<f64>, Option<f64>, Ci)> = r
        .workloads
        .iter()
        .filter(|w| w.speedups.tuned_vs_xla.is_some() || w.speedups.best_vs_xla.is_some())
        .map(|w| {
            (
                w.workload.as_str(),
                w.speedups.tuned_vs_xla,
                w.speedups.best_vs_xla,
                w.speedups.best_vs_xla_ci,
            )
        })
        .collect();
    let mut plot = Plot {
        id: "speedup",
        title: "Speedup per benchmark".into(),
        caption: "Speedup over XLA (log scale; right of the 1x line is faster than XLA). Error bars: the 95 % interval of a speedup measured paired with XLA.".into(),
        svg: None,
        empty: "No benchmark has both an XLA time and a hand-tuned or candidate time.".into(),
    };
    if rows.is_empty() {
        return Ok(plot);
    }
    let (lo, hi) = bounds(
        rows.iter()
            .flat_map(|r| [r.1, r.2, r.3.map(|c| c.0), r.3.map(|c| c.1)])
            .flatten(),
    )
    .unwrap_or((1.0, 1.0));
    let (x0, x1) = (lo.min(1.0) / 1.5, hi.max(1.0) * 1.5);
    let n = rows.len() as i32;
    let names: Vec<String> = rows.iter().map(|r| r.0.to_string()).collect();
    let height = (170 + 24 * rows.len()).min(4000) as u32;
    let green = RGBColor(0, 140, 60);
    plot.svg = Some(render((900, height), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("Speedup over XLA", (FONT, 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(200)
            // Three rows per benchmark, and three empty ones on top for the legend.
            .build_cartesian_2d((x0..x1).log_scale(), 0..(3 * n + 3))
            .map_err(err)?;
        let label_of = |y: &i32| {
            if y.rem_euclid(3) == 1 && *y < 3 * n {
                let i = n - 1 - y / 3;
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels((3 * n + 3) as usize)
            .y_label_formatter(&label_of)
            .x_label_formatter(&|x| format!("{}x", super::tables::sig(*x, 2)))
            .x_desc("speedup over XLA")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(1.0, 0), (1.0, 3 * n)],
                BLACK.stroke_width(1),
            )))
            .map_err(err)?;
        for (k, (name, color, offset)) in
            [("hand-tuned (tuned)", green, 2), ("best candidate", RED, 1)]
                .into_iter()
                .enumerate()
        {
            let pts: Vec<(f64, i32)> = rows
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let v = if k == 0 { r.1 } else { r.2 }?;
                    Some((v, 3 * (n - 1 - i as i32) + offset))
                })
                .collect();
            if pts.is_empty() {
                continue;
            }
            chart
                .draw_series(pts.iter().map(|(v, y)| {
                    PathElement::new(vec![(1.0, *y), (*v, *y)], color.stroke_width(3))
                }))
                .map_err(err)?;
            chart
                .draw_series(
                    pts.iter()
                        .map(|(v, y)| Circle::new((*v, *y), 4, color.filled())),
                )
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
        }
        // Error bars: the best candidate's interval, a whisker with end caps over its point.
        let bars: Vec<((f64, f64), i32)> = rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((r.3?, 3 * (n - 1 - i as i32) + 1)))
            .collect();
        for ((lo, hi), y) in bars {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(lo, y), (hi, y)],
                    BLACK.stroke_width(1),
                )))
                .map_err(err)?;
            chart
                .draw_series([lo, hi].into_iter().map(|x| {
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(0, -6), (0, 6)], BLACK.stroke_width(1))
                }))
                .map_err(err)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    })?);
    Ok(plot)
}

/// The named series a budget plot draws for one method.
type SeriesOf = fn(&super::data::MethodSummary) -> Vec<(String, &[f64])>;

/// One line per method against the sample budget N.
fn budget_plot(
    r: &Report,
    id: &'static str,
    title: &str,
    caption: &str,
    y_desc: &str,
    values: SeriesOf,
    percent: bool,
) -> Result<Plot, ReportError> {
    let mut plot = Plot {
        id,
        title: title.into(),
        caption: caption.into(),
        svg: None,
        empty: "No method results.".into(),
    };
    let lines: Vec<(String, &[f64])> = r
        .methods
        .iter()
        .flat_map(values)
        .filter(|(_, v)| !v.is_empty())
        .collect();
    if lines.is_empty() {
        return Ok(plot);
    }
    let max_n = lines.iter().map(|l| l.1.len()).max().unwrap_or(1) as i32;
    let y_hi = lines
        .iter()
        .flat_map(|l| l.1.iter().copied())
        .fold(1.0f64, f64::max);
    let (y0, y1) = if percent {
        (0.0, 1.05)
    } else {
        (0.9, y_hi * 1.1)
    };
    let title = title.to_string();
    let y_desc = y_desc.to_string();
    plot.svg = Some(render((900, 500), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(&title, (FONT, 22))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(0..(max_n + 1), y0..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("samples per benchmark (N)")
            .y_desc(y_desc.as_str())
            .x_labels((max_n + 2).min(12) as usize)
            .x_label_formatter(&|x| {
                if (1..=max_n).contains(x) {
                    x.to_string()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| {
                if percent {
                    format!("{:.0}%", y * 100.0)
                } else {
                    format!("{}x", super::tables::sig(*y, 3))
                }
            })
            .draw()
            .map_err(err)?;
        for (i, (name, v)) in lines.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts: Vec<(i32, f64)> = v
                .iter()
                .enumerate()
                .map(|(k, y)| (k as i32 + 1, *y))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
                .map_err(err)?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    })?);
    Ok(plot)
}

pub fn best_so_far(r: &Report) -> Result<Plot, ReportError> {
    budget_plot(
        r,
        "best_so_far",
        "Best-so-far speedup",
        "Geomean over all benchmarks (floor 1x) of the best correct kernel's speedup after N samples.",
        "geomean speedup (floor 1x)",
        |m| vec![(m.name.clone(), m.best_so_far.as_slice())],
        false,
    )
}

pub fn fast1_at_n(r: &Report) -> Result<Plot, ReportError> {
    budget_plot(
        r,
        "fast1_at_n",
        "fast1@N",
        "Share of benchmarks with a kernel among the first N samples that beats XLA: its 95 % interval above 1x, and (point) its point estimate above 1x.",
        "fast1@N",
        |m| {
            vec![
                (m.name.clone(), m.fast1_at_n.as_slice()),
                (format!("{} (point)", m.name), m.fast1_at_n_point.as_slice()),
            ]
        },
        true,
    )
}

/// Every plot, in report order.
pub fn all(r: &Report) -> Result<Vec<Plot>, ReportError> {
    Ok(vec![
        roofline(r)?,
        speedup(r)?,
        best_so_far(r)?,
        fast1_at_n(r)?,
    ])
}
