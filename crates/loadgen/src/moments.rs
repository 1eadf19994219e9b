//! Mean, variance, skewness and kurtosis of a stream of samples, computed
//! exactly from running central-moment sums (one pass, mergeable), not from
//! a histogram's buckets: the histogram gives percentiles, this gives moments.
//!
//! The update and merge formulas are the one-pass ones of Welford (1962) and
//! Pébay (SAND2008-6212), which stay accurate where naive power sums lose
//! everything to cancellation (latencies of ~1e6 µs cubed and to the fourth).

/// Running sums of one sample set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moments {
    n: u64,
    mean: f64,
    /// Sums of the 2nd, 3rd and 4th powers of the deviations from the mean.
    m2: f64,
    m3: f64,
    m4: f64,
    min: f64,
    max: f64,
}

impl Default for Moments {
    fn default() -> Self {
        Moments { n: 0, mean: 0.0, m2: 0.0, m3: 0.0, m4: 0.0, min: f64::INFINITY, max: f64::NEG_INFINITY }
    }
}

impl Moments {
    pub fn new() -> Moments {
        Moments::default()
    }

    pub fn add(&mut self, x: f64) {
        let n0 = self.n as f64;
        self.n += 1;
        let n = self.n as f64;
        let delta = x - self.mean;
        let dn = delta / n;
        let dn2 = dn * dn;
        let term1 = delta * dn * n0;
        self.mean += dn;
        self.m4 += term1 * dn2 * (n * n - 3.0 * n + 3.0) + 6.0 * dn2 * self.m2 - 4.0 * dn * self.m3;
        self.m3 += term1 * dn * (n - 2.0) - 3.0 * dn * self.m2;
        self.m2 += term1;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
    }

    /// Adds another set's samples, as if each had been added here.
    pub fn merge(&mut self, o: &Moments) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *o;
            return;
        }
        let (na, nb) = (self.n as f64, o.n as f64);
        let n = na + nb;
        let delta = o.mean - self.mean;
        let dn = delta / n;
        let dn2 = dn * dn;
        let m2 = self.m2 + o.m2 + delta * dn * na * nb;
        let m3 = self.m3 + o.m3 + delta * dn2 * na * nb * (na - nb) + 3.0 * dn * (na * o.m2 - nb * self.m2);
        let m4 = self.m4
            + o.m4
            + delta * dn2 * dn * na * nb * (na * na - na * nb + nb * nb)
            + 6.0 * dn2 * (na * na * o.m2 + nb * nb * self.m2)
            + 4.0 * dn * (na * o.m3 - nb * self.m3);
        self.mean += dn * nb;
        self.m2 = m2;
        self.m3 = m3;
        self.m4 = m4;
        self.n += o.n;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then_some(self.mean)
    }

    pub fn min(&self) -> Option<f64> {
        (self.n > 0).then_some(self.min)
    }

    pub fn max(&self) -> Option<f64> {
        (self.n > 0).then_some(self.max)
    }

    /// Sample variance (n - 1 in the denominator).
    pub fn variance(&self) -> Option<f64> {
        (self.n > 1).then(|| self.m2 / (self.n as f64 - 1.0))
    }

    /// Sample standard deviation.
    pub fn stddev(&self) -> Option<f64> {
        self.variance().map(f64::sqrt)
    }

    /// Fisher-Pearson coefficient of skewness, g1; undefined when every
    /// sample is equal.
    pub fn skewness(&self) -> Option<f64> {
        let d = self.m2.powf(1.5);
        (self.n > 1 && d > 0.0 && self.spread_is_real()).then(|| (self.n as f64).sqrt() * self.m3 / d)
    }

    /// Excess kurtosis (Fisher: 0 for a normal distribution, -1.2 for a
    /// uniform one, at least -2); undefined when every sample is equal.
    pub fn kurtosis(&self) -> Option<f64> {
        let d = self.m2 * self.m2;
        (self.n > 1 && d > 0.0 && self.spread_is_real()).then(|| self.n as f64 * self.m4 / d - 3.0)
    }

    /// Rounding can leave a tiny m2 for samples that are all equal; a spread
    /// below the precision of the mean is no spread.
    fn spread_is_real(&self) -> bool {
        self.max > self.min
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(xs: &[f64]) -> Moments {
        let mut m = Moments::new();
        for &x in xs {
            m.add(x);
        }
        m
    }

    /// The textbook definitions, two passes, for comparison.
    fn direct(xs: &[f64]) -> (f64, f64, f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let c = |k: i32| xs.iter().map(|x| (x - mean).powi(k)).sum::<f64>();
        let (m2, m3, m4) = (c(2), c(3), c(4));
        (mean, (m2 / (n - 1.0)).sqrt(), n.sqrt() * m3 / m2.powf(1.5), n * m4 / (m2 * m2) - 3.0)
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[test]
    fn matches_the_two_pass_definitions() {
        let xs: Vec<f64> = (0..1000).map(|i| ((i * 7919) % 1013) as f64 * 1.5 + (i as f64).sqrt()).collect();
        let m = of(&xs);
        let (mean, sd, sk, ku) = direct(&xs);
        assert!(close(m.mean().unwrap(), mean, 1e-12));
        assert!(close(m.stddev().unwrap(), sd, 1e-10));
        assert!(close(m.skewness().unwrap(), sk, 1e-9));
        assert!(close(m.kurtosis().unwrap(), ku, 1e-9));
    }

    #[test]
    fn merging_equals_adding_everything_to_one() {
        let xs: Vec<f64> = (0..2000).map(|i| ((i * 31) % 97) as f64 + 1e6).collect();
        let whole = of(&xs);
        let mut parts = of(&xs[..3]);
        parts.merge(&of(&xs[3..1500]));
        parts.merge(&Moments::new());
        parts.merge(&of(&xs[1500..]));
        assert_eq!(parts.count(), whole.count());
        for (a, b) in [
            (parts.mean(), whole.mean()),
            (parts.stddev(), whole.stddev()),
            (parts.skewness(), whole.skewness()),
            (parts.kurtosis(), whole.kurtosis()),
            (parts.min(), whole.min()),
            (parts.max(), whole.max()),
        ] {
            assert!(close(a.unwrap(), b.unwrap(), 1e-9), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn empty_and_single_samples_are_undefined_not_nan() {
        let m = Moments::new();
        assert_eq!((m.mean(), m.stddev(), m.skewness(), m.kurtosis()), (None, None, None, None));
        let one = of(&[5.0]);
        assert_eq!(one.mean(), Some(5.0));
        assert_eq!((one.stddev(), one.skewness(), one.kurtosis()), (None, None, None));
    }
}
