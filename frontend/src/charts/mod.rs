//! Line charts drawn as SVG, with no chart library: the geometry is in [`scale`], the data in
//! [`series`]; this file turns them into elements.
//!
//! The SVG has a fixed `viewBox` and stretches to its container's width, so a chart is always as
//! wide as its card; text scales with it, which at dashboard sizes stays readable.

pub mod scale;
pub mod series;

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use scale::{Scale, band_path, extent, format_duration, format_tick, line_path, nearest};
use series::{Series, smooth_points};

/// The SVG's own coordinates (its `viewBox`).
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 220.0;
/// Where the lines go: the left margin holds the y axis's labels, the bottom one the x axis's.
const PLOT: PlotArea = PlotArea {
    left: 56.0,
    right: WIDTH - 14.0,
    top: 10.0,
    bottom: HEIGHT - 26.0,
};

/// A rectangle of the `viewBox`, by its edges (y grows downwards, so `top < bottom`).
struct PlotArea {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

/// What the x axis counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Milliseconds since the run began, labelled as durations.
    Elapsed,
    /// The trainer's step.
    Step,
}

/// One series as drawn: its paths in pixels and its smoothed points for the hover readout.
#[derive(Debug, Clone, PartialEq)]
struct DrawnSeries {
    label: String,
    color: &'static str,
    dashed: bool,
    count: usize,
    line: String,
    raw: Option<String>,
    band: String,
    /// A lone point draws no line: it is shown as a dot instead.
    dot: Option<(f64, f64)>,
    smoothed: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
struct Layout {
    x: Scale,
    y: Scale,
    x_ticks: Vec<(f64, String)>,
    y_ticks: Vec<(f64, String)>,
    series: Vec<DrawnSeries>,
}

fn layout(all: &[Series], x_axis: XAxis, smoothing: f64) -> Option<Layout> {
    let xs = all.iter().flat_map(|s| {
        s.points
            .iter()
            .map(|p| p.0)
            .chain(s.band.iter().map(|b| b.0))
    });
    let ys = all.iter().flat_map(|s| {
        s.points
            .iter()
            .map(|p| p.1)
            .chain(s.band.iter().flat_map(|b| [b.1, b.2]))
    });
    let (x_lo, x_hi) = extent(xs)?;
    let (y_lo, y_hi) = extent(ys)?;

    let (x0, x1, x_ticks) = match x_axis {
        XAxis::Elapsed => scale::duration_ticks(x_lo.max(0.0), x_hi, 6),
        XAxis::Step => scale::nice_ticks(x_lo, x_hi, 6),
    };
    let (y0, y1, y_ticks) = scale::nice_ticks(y_lo, y_hi, 4);
    let x = Scale::new((x0, x1), (PLOT.left, PLOT.right));
    let y = Scale::new((y0, y1), (PLOT.bottom, PLOT.top));
    let x_step = x_ticks.get(1).map_or(1.0, |t| t - x_ticks[0]);
    let y_step = y_ticks.get(1).map_or(1.0, |t| t - y_ticks[0]);
    let x_ticks = x_ticks
        .into_iter()
        .map(|t| {
            let label = match x_axis {
                XAxis::Elapsed => format_duration(t),
                XAxis::Step => format_tick(t, x_step),
            };
            (x.map(t), label)
        })
        .collect();
    let y_ticks = y_ticks
        .into_iter()
        .map(|t| (y.map(t), format_tick(t, y_step)))
        .collect();

    let series = all
        .iter()
        .map(|s| {
            let smoothed = smooth_points(&s.points, smoothing);
            let to_px =
                |pts: &[(f64, f64)]| line_path(pts.iter().map(|&(a, b)| (x.map(a), y.map(b))));
            let band: Vec<_> = s
                .band
                .iter()
                .map(|&(bx, lo, hi)| (x.map(bx), y.map(lo), y.map(hi)))
                .collect();
            DrawnSeries {
                label: s.label.clone(),
                color: s.color,
                dashed: s.dashed,
                count: s.points.len(),
                line: to_px(&smoothed),
                raw: (smoothing > 0.0).then(|| to_px(&s.points)),
                band: band_path(&band),
                dot: match s.points.as_slice() {
                    [(px, py)] => Some((x.map(*px), y.map(*py))),
                    _ => None,
                },
                smoothed,
            }
        })
        .collect();
    Some(Layout {
        x,
        y,
        x_ticks,
        y_ticks,
        series,
    })
}

/// A short number for the hover readout (four significant digits).
fn readout_value(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 8) as usize;
    format!("{v:.digits$}")
}

/// A line chart card: title, the SVG, a legend and a readout of the values under the pointer.
#[component]
pub fn LineChart(
    title: String,
    x_axis: XAxis,
    #[prop(into)] series: Signal<Vec<Series>>,
    #[prop(into)] smoothing: Signal<f64>,
    /// `data-testid` of the chart's card, for the browser tests.
    #[prop(optional)]
    testid: Option<&'static str>,
) -> impl IntoView {
    let drawn = Memo::new(move |_| series.with(|s| layout(s, x_axis, smoothing.get())));
    // The data x under the pointer, or None when it is outside the chart.
    let hover = RwSignal::new(None::<f64>);

    let on_move = move |ev: leptos::ev::MouseEvent| {
        let Some(svg) = ev
            .current_target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        else {
            return;
        };
        let rect = svg.get_bounding_client_rect();
        if rect.width() <= 0.0 {
            return;
        }
        let px = (f64::from(ev.client_x()) - rect.left()) / rect.width() * WIDTH;
        let x = drawn.with_untracked(|d| {
            d.as_ref()
                .filter(|_| (PLOT.left..=PLOT.right).contains(&px))
                .map(|d| d.x.invert(px))
        });
        hover.set(x);
    };

    let body = move || {
        let Some(d) = drawn.get() else {
            return view! {
                <text x={WIDTH / 2.0} y={HEIGHT / 2.0} text-anchor="middle" class="chart-empty">
                    "No data yet"
                </text>
            }
            .into_any();
        };
        let grid_y = d
            .y_ticks
            .iter()
            .map(|(py, label)| {
                view! {
                    <line class="grid" x1={PLOT.left} x2={PLOT.right} y1={*py} y2={*py} />
                    <text class="tick" x={PLOT.left - 6.0} y={*py + 4.0} text-anchor="end">{label.clone()}</text>
                }
            })
            .collect_view();
        let grid_x = d
            .x_ticks
            .iter()
            .map(|(px, label)| {
                view! {
                    <line class="grid" x1={*px} x2={*px} y1={PLOT.top} y2={PLOT.bottom} />
                    <text class="tick" x={*px} y={HEIGHT - 8.0} text-anchor="middle">{label.clone()}</text>
                }
            })
            .collect_view();
        let lines = d
            .series
            .iter()
            .map(|s| {
                let dash = if s.dashed { "6 4" } else { "none" };
                let band = (!s.band.is_empty()).then(|| {
                    view! { <path class="band" d=s.band.clone() fill=s.color /> }
                });
                let raw = s.raw.clone().map(|raw| {
                    view! { <path class="raw" d=raw stroke=s.color stroke-dasharray=dash /> }
                });
                let dot = s.dot.map(
                    |(cx, cy)| view! { <circle class="dot" cx=cx cy=cy r="3" fill=s.color /> },
                );
                view! {
                    {band}
                    {raw}
                    {dot}
                    <path
                        class="line"
                        d=s.line.clone()
                        stroke=s.color
                        stroke-dasharray=dash
                        data-points=s.count.to_string()
                        data-series=s.label.clone()
                    />
                }
            })
            .collect_view();
        view! {
            <g>{grid_y}{grid_x}</g>
            <g>{lines}</g>
        }
        .into_any()
    };

    let cursor = move || {
        let x = hover.get()?;
        let px = drawn.with(|d| d.as_ref().map(|d| d.x.map(x)))?;
        Some(view! { <line class="cursor" x1=px x2=px y1={PLOT.top} y2={PLOT.bottom} /> })
    };

    let legend = move || {
        drawn.with(|d| {
            d.iter()
                .flat_map(|d| d.series.iter())
                .map(|s| {
                    let style = format!(
                        "border-top: 3px {} {}",
                        if s.dashed { "dashed" } else { "solid" },
                        s.color
                    );
                    view! {
                        <span class="legend-item">
                            <span class="swatch" style=style></span>
                            {s.label.clone()}
                        </span>
                    }
                })
                .collect_view()
        })
    };

    let readout = move || {
        let x = hover.get()?;
        let text = drawn.with(|d| {
            let d = d.as_ref()?;
            let at = match x_axis {
                XAxis::Elapsed => format_duration(x.max(0.0)),
                XAxis::Step => format!("step {}", x.round()),
            };
            let values: Vec<String> = d
                .series
                .iter()
                .filter_map(|s| {
                    nearest(&s.smoothed, x)
                        .map(|(_, y)| format!("{} {}", s.label, readout_value(y)))
                })
                .collect();
            Some(format!("{at}: {}", values.join(" · ")))
        })?;
        Some(view! { <div class="readout">{text}</div> })
    };

    view! {
        <figure class="chart" data-testid=testid>
            <figcaption>{title}</figcaption>
            <svg
                viewBox=format!("0 0 {WIDTH} {HEIGHT}")
                preserveAspectRatio="xMidYMid meet"
                on:mousemove=on_move
                on:mouseleave=move |_| hover.set(None)
            >
                {body}
                {cursor}
            </svg>
            <div class="legend">{legend}</div>
            {readout}
        </figure>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_draws_one_line_per_series_and_counts_its_points() {
        let series = vec![
            Series {
                label: "a".into(),
                color: "red",
                dashed: false,
                points: vec![(0.0, 1.0), (1_000.0, 2.0)],
                band: vec![(0.0, 0.0, 2.0), (1_000.0, 1.0, 3.0)],
            },
            Series {
                label: "b".into(),
                color: "blue",
                dashed: true,
                points: vec![(500.0, 0.5)],
                band: vec![],
            },
        ];
        let d = layout(&series, XAxis::Elapsed, 0.6).expect("a layout");
        assert_eq!(d.series.len(), 2);
        assert_eq!(d.series[0].count, 2);
        assert!(d.series[0].line.starts_with('M'));
        assert!(d.series[0].band.ends_with('Z'));
        assert!(d.series[0].raw.is_some());
        assert!(d.series[1].band.is_empty());
        // The y axis covers the envelope, not only the line.
        assert!(d.y.d0 <= 0.0 && d.y.d1 >= 3.0);
        // A lone point would be an invisible path: it gets a dot.
        assert!(d.series[0].dot.is_none() && d.series[1].dot.is_some());
        assert!(layout(&[], XAxis::Step, 0.0).is_none());
        assert!(
            layout(&series, XAxis::Step, 0.0).unwrap().series[0]
                .raw
                .is_none()
        );
    }

    #[test]
    fn readout_keeps_four_significant_digits() {
        assert_eq!(readout_value(0.123456), "0.1235");
        assert_eq!(readout_value(1234.4), "1234");
        assert_eq!(readout_value(12.0), "12.00");
        assert_eq!(readout_value(0.0), "0");
    }
}
