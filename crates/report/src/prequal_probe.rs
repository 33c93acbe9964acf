//! [`PrequalProbe`]: the reply to a Prequal probe — requests in flight and the latency
//! expected at that many — as `/prequal` and ORCA serve it.

use serde::{Deserialize, Serialize};

/// The response header carrying [`PrequalProbe::header_rif`]: the name prequal-rs's
/// `HttpProber` and envoy-prequal read.
pub const RIF_HEADER: &str = "x-prequal-rif";

/// The response header carrying [`PrequalProbe::header_latency_us`]: the name
/// prequal-rs's `HttpProber` and envoy-prequal read.
pub const LATENCY_US_HEADER: &str = "x-prequal-latency-us";

/// A backend's answer to a Prequal probe (Wydrowski et al., NSDI 2024): its requests in
/// flight (RIF) and its latency estimate at that RIF, from
/// [`PrequalEstimator::probe`](crate::PrequalEstimator::probe).
///
/// Sessions are long-lived, so RIF here is the tracker's active session count (what
/// [`LoadReport::active`](crate::LoadReport::active) says), and latency is what the
/// service records per session start (the agent: time to first response chunk).
///
/// ```
/// let probe = livecount_report::PrequalProbe {
///     rif: 12,
///     latency_ms: Some(41.5),
///     samples: 64,
///     samples_used: 16,
/// };
/// let json = serde_json::to_string(&probe).unwrap();
/// assert_eq!(json, r#"{"rif":12,"latency_ms":41.5,"samples":64,"samples_used":16}"#);
/// assert_eq!((probe.header_rif(), probe.header_latency_us()), (12, 41_500));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PrequalProbe {
    /// Requests in flight: sessions open when the report was taken.
    pub rif: u64,
    /// The median latency of the fresh samples nearest to `rif`, in milliseconds; `None`
    /// (JSON `null`) when no fresh sample is near enough
    /// (see [`PrequalEstimator`](crate::PrequalEstimator) for which are).
    pub latency_ms: Option<f64>,
    /// Fresh samples the estimator holds (at most
    /// [`PrequalEstimator::CAPACITY`](crate::PrequalEstimator::CAPACITY)), at any RIF.
    pub samples: u32,
    /// How many of them the median was taken over (0 when `latency_ms` is `None`).
    pub samples_used: u32,
}

impl PrequalProbe {
    /// The probe of a backend that knows no latency yet.
    ///
    /// ```
    /// let probe = livecount_report::PrequalProbe::unknown_latency(3);
    /// assert_eq!((probe.rif, probe.latency_ms, probe.samples), (3, None, 0));
    /// ```
    pub fn unknown_latency(rif: u64) -> Self {
        PrequalProbe {
            rif,
            latency_ms: None,
            samples: 0,
            samples_used: 0,
        }
    }

    /// The value of [`RIF_HEADER`]: `rif`, saturated at `u32::MAX` (prequal-rs parses it
    /// as a `u32` and drops a probe that does not fit).
    ///
    /// ```
    /// let probe = livecount_report::PrequalProbe::unknown_latency(u64::MAX);
    /// assert_eq!(probe.header_rif(), u32::MAX);
    /// ```
    pub fn header_rif(&self) -> u32 {
        u32::try_from(self.rif).unwrap_or(u32::MAX)
    }

    /// The value of [`LATENCY_US_HEADER`]: the latency in whole microseconds (rounded),
    /// **0 when unknown** — prequal-rs's convention for a server that reports RIF only,
    /// under which its hot-cold selection ranks this backend by RIF.
    ///
    /// ```
    /// let mut probe = livecount_report::PrequalProbe::unknown_latency(1);
    /// assert_eq!(probe.header_latency_us(), 0);
    /// probe.latency_ms = Some(0.0125);
    /// assert_eq!(probe.header_latency_us(), 13);
    /// ```
    pub fn header_latency_us(&self) -> u64 {
        // `as` saturates a float: NaN reads 0, a negative 0, an infinite u64::MAX.
        self.latency_ms.map_or(0, |ms| (ms * 1000.0).round() as u64)
    }
}
