//! Small SVG line and bar charts, written out as text: the HTML report must
//! open anywhere with no network, so no plotting library or CDN.

use std::fmt::Write;

pub struct Series<'a> {
    pub name: &'a str,
    pub color: &'a str,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
    /// Draw dots instead of a line.
    pub dots: bool,
}

/// How an axis maps values to pixels.
#[derive(Clone, Copy)]
pub enum Scale {
    Linear,
    /// Percentiles on "nines": x = -log10(1 - p/100), so 90%, 99%, 99.9%
    /// are evenly spaced and the tail gets the room it deserves.
    Nines,
}

pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub x_scale: Scale,
    pub series: Vec<Series<'a>>,
    /// Bars (x0, x1, height) drawn under the series.
    pub bars: Vec<(f64, f64, f64)>,
    /// Label x ticks as time ("12s") or as given by the scale.
    pub y_format: fn(f64) -> String,
}

const W: f64 = 860.0;
const H: f64 = 300.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 46.0;

/// Nines of a percentile (capped: 100% would be infinite).
pub fn nines(p: f64) -> f64 {
    -(1.0 - (p / 100.0).min(0.999_999)).log10()
}

/// 1, 2, 5 × 10^k steps giving about `n` ticks over [lo, hi].
fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).max(1e-9);
    let raw = span / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| span / s <= n as f64).unwrap_or(10.0 * mag);
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi + step * 1e-9 {
        out.push(v);
        v += step;
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

impl Chart<'_> {
    fn x_of(&self, x: f64) -> f64 {
        match self.x_scale {
            Scale::Linear => x,
            Scale::Nines => nines(x),
        }
    }

    pub fn render(&self) -> String {
        let all = self.series.iter().flat_map(|s| s.points.iter().copied());
        let bars = self.bars.iter().flat_map(|&(a, b, h)| [(a, h), (b, h)]);
        let pts: Vec<(f64, f64)> = all.chain(bars).filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}">"#,
            esc(self.title)
        );
        let _ = write!(s, r#"<rect x="0" y="0" width="{W}" height="{H}" fill="white"/>"#);
        let _ = write!(
            s,
            r##"<text x="{LEFT}" y="20" font-size="15" font-weight="bold" fill="#222">{}</text>"##,
            esc(self.title)
        );
        if pts.is_empty() {
            let _ = write!(
                s,
                r##"<text x="{}" y="{}" font-size="13" fill="#888">no data</text></svg>"##,
                W / 2.0 - 30.0,
                H / 2.0
            );
            return s;
        }
        let (mut x0, mut x1) = (f64::INFINITY, f64::NEG_INFINITY);
        let mut y1 = f64::NEG_INFINITY;
        for &(x, y) in &pts {
            let x = self.x_of(x);
            x0 = x0.min(x);
            x1 = x1.max(x);
            y1 = y1.max(y);
        }
        if let Scale::Nines = self.x_scale {
            x0 = 0.0;
            x1 = x1.ceil().max(1.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let y0 = 0.0;
        let y1 = if y1 <= 0.0 { 1.0 } else { y1 * 1.08 };
        let px = |x: f64| LEFT + (self.x_of(x) - x0) / (x1 - x0) * (W - LEFT - RIGHT);
        let pxn = |n: f64| LEFT + (n - x0) / (x1 - x0) * (W - LEFT - RIGHT);
        let py = |y: f64| H - BOTTOM - (y - y0) / (y1 - y0) * (H - TOP - BOTTOM);

        // grid and y ticks
        for t in nice_ticks(y0, y1, 5) {
            let y = py(t);
            let _ =
                write!(s, r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e4e4e4"/>"##, W - RIGHT);
            let _ = write!(
                s,
                r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#555">{}</text>"##,
                LEFT - 6.0,
                y + 4.0,
                (self.y_format)(t)
            );
        }
        // x ticks
        match self.x_scale {
            Scale::Linear => {
                for t in nice_ticks(x0, x1, 8) {
                    let x = pxn(t);
                    let _ = write!(
                        s,
                        r##"<text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#555">{}</text>"##,
                        H - BOTTOM + 16.0,
                        trim_num(t)
                    );
                }
            }
            Scale::Nines => {
                let mut n = 0.0;
                while n <= x1 + 1e-9 {
                    let p = 100.0 * (1.0 - 10f64.powf(-n));
                    let x = pxn(n);
                    let _ = write!(
                        s,
                        r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#f0f0f0"/>"##,
                        H - BOTTOM
                    );
                    let _ = write!(
                        s,
                        r##"<text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#555">{}%</text>"##,
                        H - BOTTOM + 16.0,
                        trim_num(p)
                    );
                    n += 1.0;
                }
            }
        }
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#888"/>"##,
            H - BOTTOM,
            W - RIGHT,
            H - BOTTOM
        );
        let _ = write!(s, r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="#888"/>"##, H - BOTTOM);
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle" fill="#333">{}</text>"##,
            (LEFT + W - RIGHT) / 2.0,
            H - 8.0,
            esc(self.x_label)
        );
        let _ = write!(
            s,
            r##"<text x="14" y="{:.1}" font-size="12" text-anchor="middle" fill="#333" transform="rotate(-90 14 {:.1})">{}</text>"##,
            (TOP + H - BOTTOM) / 2.0,
            (TOP + H - BOTTOM) / 2.0,
            esc(self.y_label)
        );

        for &(a, b, h) in &self.bars {
            let (xa, xb) = (px(a), px(b));
            let _ = write!(
                s,
                r##"<rect class="bar" x="{xa:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#8fb3de"/>"##,
                py(h),
                (xb - xa).max(1.0),
                (py(0.0) - py(h)).max(0.0)
            );
        }
        for (i, se) in self.series.iter().enumerate() {
            if se.dots {
                for &(x, y) in &se.points {
                    let _ = write!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#, px(x), py(y), se.color);
                }
            } else if !se.points.is_empty() {
                let d: Vec<String> = se.points.iter().map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y))).collect();
                let dash = if se.dashed { r#" stroke-dasharray="6 4""# } else { "" };
                let _ = write!(
                    s,
                    r#"<polyline class="series" fill="none" stroke="{}" stroke-width="2"{dash} points="{}"/>"#,
                    se.color,
                    d.join(" ")
                );
            }
            // legend
            let lx = W - RIGHT - 170.0;
            let ly = TOP + 4.0 + i as f64 * 16.0;
            let _ = write!(s, r#"<rect x="{lx:.1}" y="{ly:.1}" width="14" height="4" fill="{}"/>"#, se.color);
            let _ = write!(
                s,
                r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="#333">{}</text>"##,
                lx + 20.0,
                ly + 5.0,
                esc(se.name)
            );
        }
        s.push_str("</svg>");
        s
    }
}

/// "10", "2.5", "99.99".
pub fn trim_num(x: f64) -> String {
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_numbers() {
        assert_eq!(nice_ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(nice_ticks(0.0, 0.9, 4), vec![0.0, 0.5]);
        assert_eq!(nice_ticks(0.0, 2500.0, 5), vec![0.0, 500.0, 1000.0, 1500.0, 2000.0, 2500.0]);
        assert!((nines(99.9) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn renders_lines_bars_and_an_empty_chart() {
        let c = Chart {
            title: "t <1>",
            x_label: "x",
            y_label: "y",
            x_scale: Scale::Linear,
            series: vec![Series {
                name: "a",
                color: "#000",
                points: vec![(0.0, 1.0), (1.0, 2.0)],
                dashed: false,
                dots: false,
            }],
            bars: vec![(0.0, 0.5, 1.0)],
            y_format: trim_num,
        };
        let svg = c.render();
        assert!(svg.contains("<polyline") && svg.contains("class=\"bar\"") && svg.contains("t &lt;1&gt;"));
        let empty = Chart { series: vec![], bars: vec![], ..c }.render();
        assert!(empty.contains("no data"));
    }
}
