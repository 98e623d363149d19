//! The pictures of `soslb report` and `soslb plot`, drawn with plotters in
//! an embedded font (DejaVu Sans): no system font is needed.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use soslb::report::{Run, Work};
use std::error::Error;
use std::path::Path;

type Drawn = Result<(), Box<dyn Error>>;

const FONT: &str = "sans-serif";
const OWN: RGBColor = RGBColor(52, 101, 164);
const HELP: RGBColor = RGBColor(230, 140, 0);
const WAIT: RGBColor = RGBColor(225, 225, 225);
/// Distinct line colours (matplotlib's tab10).
const LINES: [RGBColor; 10] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Make the embedded font the one every picture uses.
pub fn register_font() -> Result<(), String> {
    let bad = |_| "the embedded font (DejaVu Sans) cannot be read".to_string();
    plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular())
        .map_err(bad)?;
    plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold()).map_err(bad)
}

/// A white picture of `size` pixels.
fn canvas(path: &Path, size: (u32, u32)) -> Result<Area<'_>, Box<dyn Error>> {
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    Ok(root)
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

/// A legend's key for a line of `color`, at `(x, y)`.
fn line_key<C: Color>(x: i32, y: i32, color: C) -> PathElement<(i32, i32)> {
    PathElement::new([(x, y), (x + 14, y)], color.stroke_width(2))
}

/// The legend of `chart`, at `at`, in `size` pixels.
fn legend<'a, 'b: 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, BitMapBackend<'b>, CT>,
    at: SeriesLabelPosition,
    size: u32,
) -> Drawn {
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((FONT, size))
        .draw()?;
    Ok(())
}

/// Run `f` on the picture `path`, naming the file in an error.
fn draw(path: &Path, f: impl FnOnce(&Path) -> Drawn) -> Result<(), String> {
    f(path).map_err(|e| format!("{}: cannot draw: {e}", path.display()))
}

/// What a mode balances, for captions.
fn label(run: &Run) -> &'static str {
    match run.mode.as_str() {
        "Static" => "no balancing",
        "Warmup" => "warm-up rescaling",
        "Full" => "rescaling + SOS/AID",
        _ => "run",
    }
}

/// Integer ticks only (rank axes).
fn whole(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-6 {
        format!("{x:.0}")
    } else {
        String::new()
    }
}

/// A tick label: three significant digits, no trailing zeros, an exponent
/// for the very small and the very large.
fn tick(v: &f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        return "0".into();
    }
    if !(1e-3..1e6).contains(&a) {
        return format!("{v:.1e}");
    }
    let decimals = (2 - a.log10().floor() as i32).max(0) as usize;
    let text = format!("{v:.decimals$}");
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => text,
    }
}

/// Per-rank finishing times against the job's end (the paper's Fig. 5),
/// one panel per run, on a common scale.
pub fn ranks(runs: &[Run], path: &Path) -> Result<(), String> {
    draw(path, |path| {
        let root = canvas(path, (520 * runs.len() as u32, 400))?;
        let top = runs.iter().map(|r| r.end).fold(1e-3, f64::max) * 1.35;
        for (run, area) in runs.iter().zip(root.split_evenly((1, runs.len()))) {
            let n = run.ranks as f64;
            let mut chart = ChartBuilder::on(&area)
                .caption(format!("{}: finish per rank", label(run)), (FONT, 20))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(55)
                .build_cartesian_2d(-0.5..n - 0.5, 0.0..top)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(run.ranks.min(16))
                .x_label_formatter(&whole)
                .x_desc("rank")
                .y_desc("time of its last realisation (s)")
                .draw()?;
            chart
                .draw_series(run.rows.iter().map(|r| {
                    let x = r.rank as f64;
                    Rectangle::new([(x - 0.35, 0.0), (x + 0.35, r.finish)], OWN.filled())
                }))?
                .label("rank's last realisation")
                .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], OWN.filled()));
            chart
                .draw_series(LineSeries::new(
                    [(-0.5, run.end), (n - 0.5, run.end)],
                    RED.stroke_width(2),
                ))?
                .label(format!("job end {:.2} s", run.end))
                .legend(|(x, y)| line_key(x, y, RED));
            legend(&mut chart, SeriesLabelPosition::UpperRight, 13)?;
        }
        root.present()?;
        Ok(())
    })
}

/// Each rank's forecast finishing time against job time (the paper's Fig. 7).
pub fn forecast(run: &Run, path: &Path) -> Result<(), String> {
    draw(path, |path| {
        let root = canvas(path, (760, 460))?;
        let x_max = run.end.max(1e-3) * 1.05;
        // Early forecasts of slow ranks can be far off: cut at 3× the end.
        let cap = 3.0 * run.end.max(1e-3);
        let forecasts = || run.forecasts.iter().flatten().map(|p| p.1.min(cap));
        let y_max = forecasts().fold(run.end, f64::max) * 1.05;
        let y_min = forecasts().fold(y_max, f64::min) * 0.9;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("Forecast finishing time per rank ({})", label(run)),
                (FONT, 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, y_min..y_max)?;
        chart
            .configure_mesh()
            .x_desc("job time (s)")
            .y_desc("forecast finishing time (s)")
            .draw()?;
        for (rank, points) in run.forecasts.iter().enumerate() {
            let color = Palette99::pick(rank).to_rgba();
            let series = chart.draw_series(LineSeries::new(
                points.iter().map(|&(t, f)| (t, f.min(cap))),
                color.stroke_width(2),
            ))?;
            if run.ranks <= 16 {
                series
                    .label(format!("rank {rank}"))
                    .legend(move |(x, y)| line_key(x, y, color));
            }
        }
        if let Some(h) = run.horizon {
            chart
                .draw_series(LineSeries::new(
                    [(0.0, h), (x_max, h)],
                    BLACK.stroke_width(1),
                ))?
                .label(format!("horizon {h:.2} s"))
                .legend(|(x, y)| line_key(x, y, BLACK));
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft, 12)?;
        root.present()?;
        Ok(())
    })
}

/// The who-helped-whom matrix, coloured and labelled by realisations.
pub fn help(run: &Run, path: &Path) -> Result<(), String> {
    draw(path, |path| {
        let side = (60 + 34 * run.ranks as u32).clamp(420, 900);
        let root = canvas(path, (side + 60, side))?;
        let n = run.ranks as f64;
        let max = run.help.iter().flatten().copied().max().unwrap_or(0);
        let total: u64 = run.help.iter().flatten().sum();
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("Who helped whom: {total} realisations taken from SOS files"),
                (FONT, 18),
            )
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(50)
            .build_cartesian_2d(-0.5..n - 0.5, -0.5..n - 0.5)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(run.ranks.min(24))
            .y_labels(run.ranks.min(24))
            .x_label_formatter(&whole)
            .y_label_formatter(&whole)
            .x_desc("owner rank (posted the SOS)")
            .y_desc("helper rank")
            .draw()?;
        let cells = run.help.iter().enumerate().flat_map(|(h, row)| {
            row.iter()
                .enumerate()
                .map(move |(o, &v)| (o as f64, h as f64, v))
        });
        let shade = |v: u64| v as f64 / max.max(1) as f64;
        chart.draw_series(cells.clone().map(|(o, h, v)| {
            let f = shade(v);
            let c = RGBColor(
                (255.0 - 200.0 * f) as u8,
                (255.0 - 160.0 * f) as u8,
                (255.0 - 60.0 * f) as u8,
            );
            Rectangle::new([(o - 0.5, h - 0.5), (o + 0.5, h + 0.5)], c.filled())
        }))?;
        chart.draw_series(cells.filter(|c| c.2 > 0).map(|(o, h, v)| {
            let color = if shade(v) > 0.5 { WHITE } else { BLACK };
            let style = (FONT, 13)
                .into_font()
                .color(&color)
                .pos(Pos::new(HPos::Center, VPos::Center));
            Text::new(v.to_string(), (o, h), style)
        }))?;
        root.present()?;
        Ok(())
    })
}

/// Per rank, when it computed its own ids, helped, or had nothing to do.
pub fn timeline(run: &Run, path: &Path) -> Result<(), String> {
    draw(path, |path| {
        let height = (120 + 26 * run.ranks as u32).clamp(300, 1000);
        let root = canvas(path, (800, height))?;
        let n = run.ranks as f64;
        // Room on the right for the legend.
        let x_max = run.end.max(1e-3) * 1.45;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("Timeline per rank ({})", label(run)), (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..x_max, -0.5..n - 0.5)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(run.ranks.min(32))
            .y_label_formatter(&whole)
            .x_desc("job time (s)")
            .y_desc("rank")
            .draw()?;
        let bar = |r: usize, a: f64, b: f64, c: RGBColor| {
            let y = r as f64;
            Rectangle::new([(a, y - 0.38), (b, y + 0.38)], c.filled())
        };
        let key = |c: RGBColor| {
            move |(x, y): (i32, i32)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled())
        };
        chart
            .draw_series((0..run.ranks).map(|r| bar(r, 0.0, run.end, WAIT)))?
            .label("no work")
            .legend(key(WAIT));
        for (work, color, name) in [
            (Work::Own, OWN, "own realisations"),
            (Work::Help, HELP, "helping (SOS ids)"),
        ] {
            chart
                .draw_series(
                    run.timeline
                        .iter()
                        .filter(|s| s.work == work)
                        .map(|s| bar(s.rank, s.start, s.end, color)),
                )?
                .label(name)
                .legend(key(color));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight, 12)?;
        root.present()?;
        Ok(())
    })
}

/// A CSV's columns: names, and per column its values by row (None: empty).
type Columns = (Vec<String>, Vec<Vec<Option<f64>>>);

fn read_csv(path: &Path) -> Result<Columns, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let names: Vec<String> = lines
        .next()
        .ok_or_else(|| format!("{}: empty: a header line is expected", path.display()))?
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    if names.len() < 2 {
        return Err(format!(
            "{}: the header names one column: x and at least one series are needed",
            path.display()
        ));
    }
    let mut columns = vec![Vec::new(); names.len()];
    for (i, line) in lines.enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        if cells.len() != names.len() {
            return Err(format!(
                "{}:{}: {} cells, the header has {}",
                path.display(),
                i + 2,
                cells.len(),
                names.len()
            ));
        }
        for (c, cell) in cells.iter().enumerate() {
            let cell = cell.trim();
            let v = if cell.is_empty() {
                None
            } else {
                Some(cell.parse::<f64>().map_err(|_| {
                    format!(
                        "{}:{}: column `{}`: {cell:?} is not a number",
                        path.display(),
                        i + 2,
                        names[c]
                    )
                })?)
            };
            columns[c].push(v);
        }
    }
    Ok((names, columns))
}

/// A line plot of a CSV file: its first column (x) against each other one.
pub fn lines(
    csv: &Path,
    out: &Path,
    title: &str,
    labels: (&str, &str),
    log: (bool, bool),
) -> Result<(), String> {
    let (names, columns) = read_csv(csv)?;
    let series: Vec<(String, Vec<(f64, f64)>)> = names[1..]
        .iter()
        .zip(&columns[1..])
        .map(|(name, ys)| {
            let points = columns[0]
                .iter()
                .zip(ys)
                .filter_map(|(x, y)| Some(((*x)?, (*y)?)))
                .filter(|&(x, y)| (!log.0 || x > 0.0) && (!log.1 || y > 0.0))
                .collect();
            (name.clone(), points)
        })
        .collect();
    let all = || series.iter().flat_map(|s| s.1.iter());
    let span = |v: Vec<f64>, log: bool| -> Result<(f64, f64), String> {
        let (lo, hi) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            });
        if !lo.is_finite() {
            return Err(format!("{}: no point to plot", csv.display()));
        }
        Ok(if log {
            (lo / 1.3, hi * 1.3)
        } else {
            let pad = ((hi - lo) * 0.06).max(hi.abs() * 0.02).max(1e-9);
            (
                if lo >= 0.0 {
                    (lo - pad).max(0.0)
                } else {
                    lo - pad
                },
                hi + pad,
            )
        })
    };
    let x = span(all().map(|p| p.0).collect(), log.0)?;
    let y = span(all().map(|p| p.1).collect(), log.1)?;
    // The legend goes to the upper corner with fewer points.
    let at = |v: f64, (lo, hi): (f64, f64), log: bool| match log {
        true => (v / lo).ln() / (hi / lo).ln(),
        false => (v - lo) / (hi - lo),
    };
    let left = all()
        .filter(|p| at(p.1, y, log.1) > 0.5)
        .map(|p| at(p.0, x, log.0) < 0.5)
        .fold(0i64, |n, l| n + if l { 1 } else { -1 });
    let legend = if left > 0 {
        SeriesLabelPosition::UpperRight
    } else {
        SeriesLabelPosition::UpperLeft
    };
    let text = Labels {
        title,
        x: labels.0,
        y: labels.1,
        legend,
    };
    draw(out, |path| match log {
        (false, false) => draw_lines(path, x.0..x.1, y.0..y.1, &series, &text),
        (true, false) => draw_lines(path, (x.0..x.1).log_scale(), y.0..y.1, &series, &text),
        (false, true) => draw_lines(path, x.0..x.1, (y.0..y.1).log_scale(), &series, &text),
        (true, true) => draw_lines(
            path,
            (x.0..x.1).log_scale(),
            (y.0..y.1).log_scale(),
            &series,
            &text,
        ),
    })
}

struct Labels<'a> {
    title: &'a str,
    x: &'a str,
    y: &'a str,
    legend: SeriesLabelPosition,
}

fn draw_lines<X, Y>(
    path: &Path,
    x: X,
    y: Y,
    series: &[(String, Vec<(f64, f64)>)],
    text: &Labels,
) -> Drawn
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let root = canvas(path, (720, 460))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(text.title, (FONT, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(65)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .x_desc(text.x)
        .y_desc(text.y)
        .draw()?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = LINES[i % LINES.len()];
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(name.as_str())
            .legend(move |(x, y)| line_key(x, y, color));
        // Larger marks first: series that coincide stay visible.
        let r = 3 + 3 * (series.len() - 1 - i) as i32 / 2;
        chart.draw_series(points.iter().map(|&p| Circle::new(p, r, color.filled())))?;
    }
    legend(&mut chart, text.legend.clone(), 13)?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn ticks() {
        let t = |v: f64| super::tick(&v);
        assert_eq!(
            [
                t(0.0),
                t(1000.0),
                t(0.00030000000003),
                t(2.5),
                t(12.26),
                t(1e-5),
                t(-0.5)
            ],
            ["0", "1000", "3.0e-4", "2.5", "12.3", "1.0e-5", "-0.5"]
        );
    }
}
