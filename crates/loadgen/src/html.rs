//! The HTML report: one self-contained page (inline CSS and SVG, no script,
//! no network) with the summary, throughput and latency over time, the
//! latency distribution, and the ticks.

use super::bench_report::BenchReport;
use super::progress::human_us;
use super::svg::{trim_num, Chart, Scale, Series};
use std::fmt::Write;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn us_label(v: f64) -> String {
    human_us(v.round() as u64)
}

fn rate_label(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{}k", trim_num(v / 1000.0))
    } else {
        trim_num(v)
    }
}

pub fn render(r: &BenchReport) -> String {
    let samples = &r.samples;
    let throughput = Chart {
        title: "Throughput over time",
        x_label: "seconds",
        y_label: "requests/second",
        x_scale: Scale::Linear,
        series: vec![
            Series {
                name: "answered",
                color: "#1f6fd1",
                points: samples.iter().map(|s| (s.at_s, s.rate)).collect(),
                dashed: false,
                dots: false,
            },
            Series {
                name: "target",
                color: "#999",
                points: samples.iter().filter_map(|s| s.target_rate.map(|t| (s.at_s, t))).collect(),
                dashed: true,
                dots: false,
            },
            Series {
                name: "errors + timeouts",
                color: "#d12f1f",
                points: samples
                    .iter()
                    .filter(|s| s.errors + s.timeouts > 0)
                    .map(|s| (s.at_s, (s.errors + s.timeouts) as f64))
                    .collect(),
                dashed: false,
                dots: true,
            },
        ],
        bars: vec![],
        y_format: rate_label,
    };
    let latency_time = Chart {
        title: "Latency over time (from when each request was due)",
        x_label: "seconds",
        y_label: "latency",
        x_scale: Scale::Linear,
        series: vec![
            Series {
                name: "p50",
                color: "#1f6fd1",
                points: samples.iter().filter(|s| s.rate > 0.0).map(|s| (s.at_s, s.p50_us as f64)).collect(),
                dashed: false,
                dots: false,
            },
            Series {
                name: "p99",
                color: "#e07b00",
                points: samples.iter().filter(|s| s.rate > 0.0).map(|s| (s.at_s, s.p99_us as f64)).collect(),
                dashed: false,
                dots: false,
            },
        ],
        bars: vec![],
        y_format: us_label,
    };
    let percentiles = Chart {
        title: "Latency by percentile",
        x_label: "percentile",
        y_label: "latency",
        x_scale: Scale::Nines,
        series: vec![Series {
            name: "latency",
            color: "#1f6fd1",
            points: r.latency_curve.iter().map(|&(p, us)| (p, us as f64)).collect(),
            dashed: false,
            dots: false,
        }],
        bars: vec![],
        y_format: us_label,
    };
    let histogram = Chart {
        title: "Latency distribution (requests per latency range)",
        x_label: "latency (us)",
        y_label: "requests",
        x_scale: Scale::Linear,
        series: vec![],
        bars: r.latency_histogram.iter().map(|&(a, b, n)| (a as f64, b as f64, n as f64)).collect(),
        y_format: trim_num,
    };

    let mut h = String::new();
    let title = format!("cumulo bench: {}", r.target);
    let _ = write!(
        h,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px; color: #222; background: #fafafa; }}
h1 {{ font-size: 20px; }} h2 {{ font-size: 16px; margin-top: 28px; }}
.meta td {{ padding: 2px 12px 2px 0; }}
.verdict {{ font-size: 18px; font-weight: bold; }}
.ok {{ color: #17803d; }} .bad {{ color: #b3261e; }}
pre {{ background: white; border: 1px solid #ddd; padding: 12px; display: inline-block; }}
.chart {{ display: block; margin: 12px 0; border: 1px solid #ddd; }}
table.ticks {{ border-collapse: collapse; font-size: 12px; }}
table.ticks td, table.ticks th {{ border: 1px solid #ddd; padding: 2px 8px; text-align: right; }}
table.ticks td.why {{ text-align: left; color: #b3261e; }}
</style></head><body>
<h1>{}</h1>
"#,
        esc(&title),
        esc(&title)
    );
    let (cls, verdict) = match &r.result {
        Some(held) if r.success => ("ok", held.line.clone()),
        Some(held) => ("bad", format!("{} (with errors or timeouts)", held.line)),
        None => ("bad", "no stable rate found".to_string()),
    };
    let _ = writeln!(h, r#"<p class="verdict {cls}">{}</p>"#, esc(&verdict));
    let _ = writeln!(h, r#"<table class="meta">"#);
    for (k, v) in [
        ("kind", r.kind.clone()),
        ("target", r.target.clone()),
        ("rate", r.rate_mode.clone()),
        ("connections", r.connections.to_string()),
        (
            "answered",
            format!(
                "{} ok, {} errors, {} timeouts in {:.1} s",
                r.totals.ok, r.totals.errors, r.totals.timeouts, r.totals.seconds
            ),
        ),
        ("accounting", r.totals.accounting()),
        ("date", r.date.clone()),
        ("machine", r.machine.clone()),
        ("command", r.command.clone()),
    ] {
        let _ = writeln!(h, "<tr><td>{k}</td><td>{}</td></tr>", esc(&v));
    }
    let _ = writeln!(h, "</table>");
    if let Some(held) = &r.result {
        let _ =
            writeln!(h, "<h2>Latency report</h2>\n<pre>{}\n{}</pre>", esc(&held.line), esc(&held.latency.to_text()));
    }
    let _ = writeln!(h, "<h2>Over time</h2>");
    h.push_str(&throughput.render());
    h.push_str(&latency_time.render());
    let _ = writeln!(
        h,
        "\n<h2>Latency distribution{}</h2>",
        if r.rate_mode == "dynamic" { " at the stable rate" } else { "" }
    );
    h.push_str(&percentiles.render());
    h.push_str(&histogram.render());
    let _ = writeln!(h, "\n<h2>Ticks</h2>\n<table class=\"ticks\"><tr><th>tick</th><th>end s</th><th>target/s</th><th>answered/s</th><th>ok</th><th>errors</th><th>timeouts</th><th>p50</th><th>p99</th><th>failed because</th></tr>");
    for t in &r.ticks {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{:.1}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"why\">{}</td></tr>",
            t.index,
            t.at_s,
            t.target_rate.map_or("max".to_string(), |x| format!("{x:.1}")),
            t.rate,
            t.ok,
            t.errors,
            t.timeouts,
            human_us(t.p50_us),
            human_us(t.p99_us),
            esc(t.failed.as_deref().unwrap_or(""))
        );
    }
    let _ = writeln!(h, "</table>\n</body></html>");
    h
}
