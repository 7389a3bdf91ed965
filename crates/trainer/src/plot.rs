//! Loss and accuracy curves as a standalone SVG (opens in any browser; no plotting dependency).

use std::fmt::Write;

use crate::metrics::Row;

const W: f64 = 520.0;
const H: f64 = 300.0;
const PAD_L: f64 = 56.0;
const PAD_R: f64 = 16.0;
const PAD_T: f64 = 30.0;
const PAD_B: f64 = 40.0;

struct Series<'a> {
    name: &'a str,
    color: &'a str,
    points: Vec<(f64, f64)>,
}

fn panel(out: &mut String, x0: f64, title: &str, x_label: &str, series: &[Series<'_>], y_range: Option<(f64, f64)>) {
    let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.points.iter().copied()).collect();
    let (xmin, xmax) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (mut ymin, mut ymax) =
        y_range.unwrap_or_else(|| all.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1))));
    if all.is_empty() {
        return;
    }
    if (ymax - ymin).abs() < 1e-12 {
        ymin -= 0.5;
        ymax += 0.5;
    }
    let xspan = (xmax - xmin).max(1e-12);
    let sx = |x: f64| x0 + PAD_L + (x - xmin) / xspan * (W - PAD_L - PAD_R);
    let sy = |y: f64| PAD_T + (1.0 - (y - ymin) / (ymax - ymin)) * (H - PAD_T - PAD_B);
    let _ = write!(
        out,
        r##"<rect x="{}" y="{PAD_T}" width="{}" height="{}" fill="none" stroke="#999"/>"##,
        x0 + PAD_L,
        W - PAD_L - PAD_R,
        H - PAD_T - PAD_B
    );
    let _ = write!(out, r#"<text x="{}" y="20" font-size="14" font-weight="bold">{title}</text>"#, x0 + PAD_L);
    for k in 0..=4 {
        let y = ymin + (ymax - ymin) * k as f64 / 4.0;
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" font-size="10" text-anchor="end">{:.3}</text>"#,
            x0 + PAD_L - 4.0,
            sy(y) + 3.0,
            y
        );
        let x = xmin + xspan * k as f64 / 4.0;
        let _ = write!(
            out,
            r#"<text x="{}" y="{}" font-size="10" text-anchor="middle">{:.0}</text>"#,
            sx(x),
            H - PAD_B + 14.0,
            x
        );
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" font-size="11" text-anchor="middle">{x_label}</text>"#,
        x0 + PAD_L + (W - PAD_L - PAD_R) / 2.0,
        H - 8.0
    );
    for (i, s) in series.iter().enumerate() {
        if s.points.is_empty() {
            continue;
        }
        let pts: Vec<String> = s.points.iter().map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y))).collect();
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.6" points="{}"/>"#,
            s.color,
            pts.join(" ")
        );
        let ly = PAD_T + 14.0 + 14.0 * i as f64;
        let lx = x0 + W - PAD_R - 110.0;
        let _ = write!(
            out,
            r#"<line x1="{lx}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="2"/><text x="{}" y="{}" font-size="11">{}</text>"#,
            ly - 4.0,
            lx + 16.0,
            ly - 4.0,
            s.color,
            lx + 20.0,
            ly,
            s.name
        );
    }
}

/// Render the curves of a run's metrics rows (x axis: optimizer step).
pub fn curves_svg(rows: &[Row]) -> String {
    let steps: Vec<&Row> = rows.iter().filter(|r| r.kind == "step").collect();
    let epochs: Vec<&Row> = rows.iter().filter(|r| r.kind == "epoch").collect();
    let pick = |rs: &[&Row], f: &dyn Fn(&Row) -> Option<f64>| -> Vec<(f64, f64)> {
        rs.iter().filter_map(|r| f(r).filter(|v| v.is_finite()).map(|v| (r.step as f64, v))).collect()
    };
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{H}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>"#,
        2.0 * W
    );
    panel(
        &mut out,
        0.0,
        "loss",
        "optimizer step",
        &[
            Series { name: "train (step)", color: "#9ecae1", points: pick(&steps, &|r| r.loss) },
            Series { name: "train (epoch)", color: "#3182bd", points: pick(&epochs, &|r| r.loss) },
            Series { name: "valid", color: "#e6550d", points: pick(&epochs, &|r| r.valid_loss) },
        ],
        None,
    );
    panel(
        &mut out,
        W,
        "accuracy",
        "optimizer step",
        &[
            Series { name: "train top-1", color: "#3182bd", points: pick(&epochs, &|r| r.top1) },
            Series { name: "valid top-1", color: "#e6550d", points: pick(&epochs, &|r| r.valid_top1) },
            Series { name: "valid top-5", color: "#31a354", points: pick(&epochs, &|r| r.valid_top5) },
            Series { name: "valid NLD", color: "#756bb1", points: pick(&epochs, &|r| r.valid_nld.map(|v| v.max(0.0))) },
        ],
        Some((0.0, 1.0)),
    );
    out.push_str("</svg>\n");
    out
}
