//! Plain words for the shape of a latency distribution, in the wording
//! CloudI's request_rate prints ("moderately_skewed", "platykurtic",
//! "distribution uniform"), so reports read the same as the ones users
//! already compare against.

/// Skewness in words (Bulmer's rule of thumb: |g1| < 0.5 is symmetric
/// enough, above 1 is highly skewed).
pub fn skewness_words(skewness: Option<f64>) -> &'static str {
    match skewness {
        None => "undefined",
        Some(s) if s.abs() > 1.0 => "highly_skewed",
        Some(s) if s.abs() >= 0.5 => "moderately_skewed",
        Some(_) => "approximately_symmetric",
    }
}

/// Excess kurtosis in words, judged to one decimal: a normal distribution's
/// tails are mesokurtic, lighter ones platykurtic, heavier ones leptokurtic.
pub fn kurtosis_words(kurtosis: Option<f64>) -> &'static str {
    match kurtosis.map(|k| (k * 10.0).round()) {
        None => "undefined",
        Some(k) if k > 0.0 => "leptokurtic",
        Some(k) if k < 0.0 => "platykurtic",
        Some(_) => "mesokurtic",
    }
}

/// Excess kurtosis of a raised cosine distribution: 6(90 - π⁴) / (5(π² - 6)²).
const RAISED_COSINE_KURTOSIS: f64 = -0.593_762_875_598_279_4;

/// A guess at the distribution's family from its skewness and excess
/// kurtosis: the first well-known shape whose values fall within a margin of
/// the measured ones (the margin widens for large values, which are noisy).
/// Only meaningful with enough samples to cover the distribution.
pub fn distribution_words(skewness: Option<f64>, kurtosis: Option<f64>) -> &'static str {
    let (Some(s), Some(k)) = (skewness, kurtosis) else { return "undefined" };
    let s_margin = if s.abs() >= 4.0 { s.abs().sqrt() * 0.5 } else { 0.25 };
    let k_margin = if k >= 9.0 { k.sqrt() * 0.5 } else { 0.175 };
    let near_s = |target: f64| (s - target).abs() < s_margin;
    let near_k = |target: f64| (k - target).abs() < k_margin;
    if near_s(0.0) {
        for (name, target) in
            [("normal", 0.0), ("uniform", -1.2), ("logistic", 1.2), ("raised_cosine", RAISED_COSINE_KURTOSIS)]
        {
            if near_k(target) {
                return name;
            }
        }
    } else if near_s(2.0) && near_k(6.0) {
        return "exponential";
    }
    // Skewed families where kurtosis is a function of skewness: the closest
    // whose curve passes through the margins.
    let mut best: Option<(f64, &'static str)> = None;
    for (name, curve) in
        [("gamma_family", gamma_kurtosis as fn(f64) -> f64), ("log_normal_family", log_normal_kurtosis)]
    {
        if s == 0.0 {
            continue;
        }
        let at = curve(s);
        let fits = near_k(at) || {
            let (lo, hi) = (curve(s - s_margin), curve(s + s_margin));
            lo.min(hi) < k && k < lo.max(hi)
        };
        if fits && best.is_none_or(|(d, _)| (at - k).abs() < d) {
            best = Some(((at - k).abs(), name));
        }
    }
    best.map_or("undefined", |(_, name)| name)
}

/// Gamma distributions: excess kurtosis = 1.5 × skewness².
fn gamma_kurtosis(s: f64) -> f64 {
    1.5 * s * s
}

/// Log-normal distributions: with a = exp(σ²), skewness² = (a + 2)²(a - 1)
/// and excess kurtosis = a⁴ + 2a³ + 3a² - 6. Solves the first for a.
fn log_normal_kurtosis(s: f64) -> f64 {
    let target = s * s;
    // (b + 3)² b = target with b = a - 1 > 0: increasing in b, so bisect.
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while (hi + 3.0).powi(2) * hi < target {
        hi *= 2.0;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if (mid + 3.0).powi(2) * mid < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let a = 1.0 + 0.5 * (lo + hi);
    a.powi(4) + 2.0 * a.powi(3) + 3.0 * a * a - 6.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_readings() {
        // Values printed by CloudI's request_rate next to their words.
        assert_eq!(skewness_words(Some(0.62)), "moderately_skewed");
        assert_eq!(skewness_words(Some(0.47)), "approximately_symmetric");
        assert_eq!(skewness_words(Some(-0.23)), "approximately_symmetric");
        assert_eq!(skewness_words(Some(1.7)), "highly_skewed");
        assert_eq!(kurtosis_words(Some(-0.28)), "platykurtic");
        assert_eq!(kurtosis_words(Some(0.04)), "mesokurtic");
        assert_eq!(kurtosis_words(Some(3.0)), "leptokurtic");
        assert_eq!(distribution_words(Some(-0.06), Some(-1.19)), "uniform");
        assert_eq!(distribution_words(Some(0.62), Some(-0.28)), "undefined");
        assert_eq!(skewness_words(None), "undefined");
        assert_eq!(distribution_words(None, Some(1.0)), "undefined");
    }

    #[test]
    fn well_known_shapes() {
        assert_eq!(distribution_words(Some(0.01), Some(0.05)), "normal");
        assert_eq!(distribution_words(Some(2.0), Some(6.0)), "exponential");
        assert_eq!(distribution_words(Some(-0.1), Some(1.25)), "logistic");
        assert_eq!(distribution_words(Some(0.0), Some(-0.6)), "raised_cosine");
        // log-normal with σ = 0.4: a = e^0.16
        let a: f64 = 0.16f64.exp();
        let s = (a + 2.0) * (a - 1.0).sqrt();
        let k = a.powi(4) + 2.0 * a.powi(3) + 3.0 * a * a - 6.0;
        assert!((log_normal_kurtosis(s) - k).abs() < 1e-9);
        assert_eq!(distribution_words(Some(s), Some(k)), "log_normal_family");
        assert_eq!(distribution_words(Some(1.0), Some(1.5)), "gamma_family");
    }
}
