//! The latency report: moments with their plain-word reading, and the
//! percentile ladder from an HDR histogram, printed in the layout of
//! CloudI's request_rate log (so figures can be compared line by line) and
//! available as JSON.

use super::moments::Moments;
use super::shape;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write;

/// Latencies are recorded in microseconds, from 1 µs to 1 hour, with 3
/// significant digits (0.1% error on any percentile).
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// The ladder of percentiles the report prints.
pub const LADDER: &[f64] =
    &[0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 75.0, 80.0, 90.0, 95.0, 99.0, 99.9, 99.99, 99.999, 100.0];

/// Latency samples of one period: exact moments and a histogram.
#[derive(Clone)]
pub struct Latencies {
    pub moments: Moments,
    pub histogram: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies { moments: Moments::new(), histogram: new_histogram() }
    }
}

impl Latencies {
    pub fn record(&mut self, us: u64) {
        let us = us.max(1);
        self.moments.add(us as f64);
        self.histogram.saturating_record(us);
    }

    pub fn merge(&mut self, o: &Latencies) {
        self.moments.merge(&o.moments);
        // Same bounds on both sides: adding cannot fail.
        let _ = self.histogram.add(&o.histogram);
    }

    pub fn count(&self) -> u64 {
        self.moments.count()
    }

    /// A percentile in µs (0 when empty). 0% and 100% are the exact minimum
    /// and maximum; the rest come from the histogram.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count() == 0 {
            return 0;
        }
        if p <= 0.0 {
            return self.moments.min().unwrap_or(0.0) as u64;
        }
        if p >= 100.0 {
            return self.moments.max().unwrap_or(0.0) as u64;
        }
        // The histogram's value is its bucket's upper end: keep it within
        // the exact extremes so the ladder never decreases at 100%.
        let (lo, hi) = (self.moments.min().unwrap_or(0.0) as u64, self.moments.max().unwrap_or(0.0) as u64);
        self.histogram.value_at_quantile(p / 100.0).clamp(lo, hi)
    }

    /// The percentile curve, for plots: (percentile, µs) pairs, denser in
    /// the tail.
    pub fn curve(&self) -> Vec<(f64, u64)> {
        if self.count() == 0 {
            return Vec::new();
        }
        let mut out: Vec<(f64, u64)> = vec![(0.0, self.percentile(0.0))];
        for v in self.histogram.iter_quantiles(4) {
            let p = v.quantile_iterated_to() * 100.0;
            if p > 0.0 && p < 100.0 && p <= 99.9999 {
                out.push((p, self.histogram.highest_equivalent(v.value_iterated_to())));
            }
        }
        out.push((100.0, self.percentile(100.0)));
        out.dedup_by(|b, a| (b.0 - a.0).abs() < 1e-12);
        out
    }

    /// Counts in `n` logarithmic buckets from the minimum to the maximum:
    /// (from µs, to µs, count).
    pub fn buckets(&self, n: usize) -> Vec<(u64, u64, u64)> {
        let (Some(lo), Some(hi)) = (self.moments.min(), self.moments.max()) else { return Vec::new() };
        let (lo, hi) = (lo.max(1.0), hi.max(1.0));
        if hi <= lo {
            return vec![(lo as u64, hi as u64, self.count())];
        }
        let ratio = (hi / lo).powf(1.0 / n as f64);
        let mut out = Vec::with_capacity(n);
        let mut from = lo;
        for i in 0..n {
            let to = if i + 1 == n { hi } else { from * ratio };
            let (a, b) = (from.floor() as u64, to.ceil() as u64);
            let count: u64 = self
                .histogram
                .iter_recorded()
                .filter(|v| {
                    let x = v.value_iterated_to() as f64;
                    x >= from && (x < to || (i + 1 == n && x <= to * 1.001))
                })
                .map(|v| v.count_at_value())
                .sum();
            out.push((a, b.max(a + 1), count));
            from = to;
        }
        out
    }

    pub fn report(&self) -> LatencyReport {
        let m = &self.moments;
        let (skewness, kurtosis) = (m.skewness(), m.kurtosis());
        LatencyReport {
            unit: "us",
            count: m.count(),
            mean: m.mean(),
            stddev: m.stddev(),
            skewness,
            skewness_words: shape::skewness_words(skewness),
            kurtosis,
            kurtosis_words: shape::kurtosis_words(kurtosis),
            distribution: shape::distribution_words(skewness, kurtosis),
            percentiles: LADDER
                .iter()
                .map(|&p| Percentile { percentile: p, label: label(p), us: self.percentile(p) })
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Percentile {
    pub percentile: f64,
    pub label: String,
    pub us: u64,
}

/// What the log prints, as data.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyReport {
    pub unit: &'static str,
    pub count: u64,
    pub mean: Option<f64>,
    pub stddev: Option<f64>,
    pub skewness: Option<f64>,
    pub skewness_words: &'static str,
    pub kurtosis: Option<f64>,
    pub kurtosis_words: &'static str,
    pub distribution: &'static str,
    pub percentiles: Vec<Percentile>,
}

/// "99.9" for 99.9, "50" for 50.
fn short(p: f64) -> String {
    let s = format!("{p:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The ladder's label: the integer part right-aligned so the '%' signs of
/// whole percentiles line up; the ends are named.
fn label(p: f64) -> String {
    let s = short(p);
    let (int, frac) = s.split_once('.').map_or((s.as_str(), ""), |(i, f)| (i, f));
    let frac = if frac.is_empty() { String::new() } else { format!(".{frac}") };
    let name = match p {
        p if p <= 0.0 => " (minimum)",
        p if p >= 100.0 => " (maximum)",
        _ => "",
    };
    format!("{int:>3}{frac}%{name}")
}

/// Formats a number with 2 decimals, or "undefined".
fn num2(x: Option<f64>, width: usize) -> String {
    match x {
        Some(x) => format!("{x:>width$.2}"),
        None => format!("{:>width$}", "undefined"),
    }
}

impl LatencyReport {
    /// The block CloudI prints under its "stable at" line (without it):
    ///
    /// ```text
    ///   request latency (distribution undefined):
    ///     mean                 1847774 us
    ///     stddev                348580.45
    ///     skewness                   0.62 (moderately_skewed)
    ///     kurtosis                  -0.28 (platykurtic)
    ///
    ///       0% (minimum)       1252603 us
    ///      10%                 1429193 us
    /// ```
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "  request latency (distribution {}):", self.distribution);
        let mean = self.mean.map_or("undefined".to_string(), |m| format!("{:.0}", m));
        let _ = writeln!(o, "    mean{mean:>24} us");
        let _ = writeln!(o, "    stddev{}", num2(self.stddev, 25));
        let _ = writeln!(o, "    skewness{} ({})", num2(self.skewness, 23), self.skewness_words);
        let _ = writeln!(o, "    kurtosis{} ({})", num2(self.kurtosis, 23), self.kurtosis_words);
        o.push('\n');
        for p in &self.percentiles {
            // value right-aligned to column 32, as the mean
            let lead = format!("    {}", p.label);
            let w = 32usize.saturating_sub(lead.len()).max(1);
            let _ = writeln!(o, "{lead}{:>w$} us", p.us);
        }
        o
    }

    /// The percentile `p` of the ladder, µs.
    #[cfg(test)]
    pub fn at(&self, p: f64) -> u64 {
        self.percentiles.iter().find(|x| (x.percentile - p).abs() < 1e-9).map_or(0, |x| x.us)
    }
}

/// "stable at 42534.9 [42534.9 .. 42534.9] requests/second"
pub fn stable_line(rate: f64, min: f64, max: f64) -> String {
    format!("stable at {rate:.1} [{min:.1} .. {max:.1}] requests/second")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's block (CloudI 2.0.4, ATS2 processes), without the
    /// markdown indent.
    const SEED: &str = "  request latency (distribution undefined):
    mean                 1847774 us
    stddev                348580.45
    skewness                   0.62 (moderately_skewed)
    kurtosis                  -0.28 (platykurtic)

      0% (minimum)       1252603 us
     10%                 1429193 us
     20%                 1527072 us
     30%                 1619972 us
     40%                 1711703 us
     50%                 1797586 us
     75%                 2062046 us
     80%                 2162432 us
     90%                 2366781 us
     95%                 2521561 us
     99%                 2792762 us
     99.9%               2819852 us
     99.99%              2823322 us
     99.999%             2823738 us
    100% (maximum)       2823842 us
";

    fn sample(xs: impl Iterator<Item = u64>) -> LatencyReport {
        let mut l = Latencies::default();
        for x in xs {
            l.record(x);
        }
        l.report()
    }

    fn near(got: f64, want: f64, tol: f64) {
        assert!((got - want).abs() <= tol, "got {got}, want {want} ± {tol}");
    }

    #[test]
    fn a_constant() {
        let r = sample(std::iter::repeat_n(500, 10_000));
        assert_eq!((r.count, r.mean, r.stddev), (10_000, Some(500.0), Some(0.0)));
        assert_eq!((r.skewness, r.kurtosis), (None, None));
        assert_eq!((r.skewness_words, r.kurtosis_words, r.distribution), ("undefined", "undefined", "undefined"));
        assert!(r.percentiles.iter().all(|p| p.us == 500), "{:?}", r.percentiles);
    }

    #[test]
    fn a_uniform_sample() {
        // uniform on [10000, 20000) µs
        let mut rng = fastrand::Rng::with_seed(7);
        let r = sample((0..200_000).map(|_| rng.u64(10_000..20_000)));
        near(r.mean.unwrap(), 15_000.0, 30.0);
        near(r.stddev.unwrap(), 10_000.0 / 12f64.sqrt(), 15.0);
        near(r.skewness.unwrap(), 0.0, 0.02);
        near(r.kurtosis.unwrap(), -1.2, 0.02);
        assert_eq!(
            (r.skewness_words, r.kurtosis_words, r.distribution),
            ("approximately_symmetric", "platykurtic", "uniform")
        );
        for p in &r.percentiles[1..r.percentiles.len() - 1] {
            near(p.us as f64, 10_000.0 + 100.0 * p.percentile, 60.0);
        }
        assert!(r.at(0.0) < 10_005 && r.at(0.0) >= 10_000);
        assert!(r.at(100.0) > 19_990 && r.at(100.0) < 20_000);
    }

    #[test]
    fn a_normal_ish_sample() {
        // Irwin-Hall: the sum of 12 uniforms is close to normal (excess
        // kurtosis -0.1); mean 10000 µs, standard deviation 1000 µs.
        let mut rng = fastrand::Rng::with_seed(11);
        let r = sample((0..200_000).map(|_| {
            let z: f64 = (0..12).map(|_| rng.f64()).sum::<f64>() - 6.0;
            (10_000.0 + 1000.0 * z).round() as u64
        }));
        near(r.mean.unwrap(), 10_000.0, 10.0);
        near(r.stddev.unwrap(), 1000.0, 10.0);
        near(r.skewness.unwrap(), 0.0, 0.03);
        near(r.kurtosis.unwrap(), -0.1, 0.05);
        assert_eq!(
            (r.skewness_words, r.kurtosis_words, r.distribution),
            ("approximately_symmetric", "platykurtic", "normal")
        );
        // standard normal quantiles: 10% -1.2816, 90% 1.2816, 99% 2.3263
        near(r.at(50.0) as f64, 10_000.0, 20.0);
        near(r.at(10.0) as f64, 10_000.0 - 1281.6, 25.0);
        near(r.at(90.0) as f64, 10_000.0 + 1281.6, 25.0);
        near(r.at(99.0) as f64, 10_000.0 + 2326.3, 60.0);
    }

    #[test]
    fn prints_in_the_seeds_layout() {
        let values = [
            1252603, 1429193, 1527072, 1619972, 1711703, 1797586, 2062046, 2162432, 2366781, 2521561, 2792762, 2819852,
            2823322, 2823738, 2823842,
        ];
        let r = LatencyReport {
            unit: "us",
            count: 1,
            mean: Some(1847774.2),
            stddev: Some(348580.45),
            skewness: Some(0.62),
            skewness_words: "moderately_skewed",
            kurtosis: Some(-0.28),
            kurtosis_words: "platykurtic",
            distribution: "undefined",
            percentiles: LADDER
                .iter()
                .zip(values)
                .map(|(&p, us)| Percentile { percentile: p, label: label(p), us })
                .collect(),
        };
        assert_eq!(r.to_text(), SEED);
        assert_eq!(stable_line(42534.94, 42534.9, 42534.9), "stable at 42534.9 [42534.9 .. 42534.9] requests/second");
    }
}
