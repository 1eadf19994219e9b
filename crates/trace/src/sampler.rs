//! Which traces are recorded: parent-based, as OpenTelemetry's default
//! `parentbased_traceidratio` sampler decides. A request that carries a
//! traceparent is recorded when its sampled flag is set; a trace the core
//! starts is recorded for a share `ratio` of trace ids, decided from the id
//! alone, so every node and SDK that decides by the same rule agrees.

#[derive(Debug, Clone, Copy)]
pub struct Sampler {
    /// Roots whose id's last 8 bytes, shifted right once, fall below this
    /// are sampled (OpenTelemetry's TraceIdRatioBased rule).
    bound: u64,
}

impl Sampler {
    /// `ratio` is clamped to 0 ..= 1.
    pub fn new(ratio: f64) -> Sampler {
        let ratio = if ratio.is_nan() { 0.0 } else { ratio.clamp(0.0, 1.0) };
        let bound = if ratio >= 1.0 { u64::MAX } else { (ratio * (1u64 << 63) as f64) as u64 };
        Sampler { bound }
    }

    pub fn always() -> Sampler {
        Sampler::new(1.0)
    }

    /// Whether a trace the core starts with this id is recorded.
    pub fn root(&self, trace_id: &[u8; 16]) -> bool {
        if self.bound == u64::MAX {
            return true;
        }
        let low = u64::from_be_bytes(trace_id[8..16].try_into().expect("8 bytes"));
        (low >> 1) < self.bound
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ratio_samples_that_share_of_ids() {
        let s = Sampler::new(0.25);
        let sampled = (0..20_000).filter(|_| s.root(&crate::new_trace_id())).count();
        assert!((4_000..6_000).contains(&sampled), "{sampled}");
        assert!((0..1000).all(|_| Sampler::always().root(&crate::new_trace_id())));
        assert!((0..1000).all(|_| !Sampler::new(0.0).root(&crate::new_trace_id())));
    }
}
