//! [`Picker`]: the fleet as its backends report it, and the choice for each new session.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::time::{Duration, Instant};

use livecount_balance::{HttpLoadSource, LoadFeed, LoadSignal, OrcaLoadSource};
use livecount_capacity::Standing;

use crate::backend::{BackendSpec, Reports};
use crate::own::OwnCount;

/// The longest report interval and TTL a picker takes: beyond this the fleet it sees is
/// not the fleet that is.
pub const MAX_REPORT_WAIT: Duration = Duration::from_secs(3600);

/// The most fallback endpoints an answer carries.
pub const MAX_FALLBACKS: usize = 16;

/// How a [`Picker`] reads the fleet.
///
/// ```
/// use livecount_epp::PickerConfig;
/// use std::time::Duration;
///
/// let config = PickerConfig::default();
/// assert_eq!(config.report_interval, Duration::from_millis(500));
/// assert_eq!(config.report_ttl, Duration::from_secs(2));
/// assert_eq!(config.fallbacks, 2);
/// assert!(config.validate().is_ok());
/// let absurd = PickerConfig { report_ttl: Duration::ZERO, ..config };
/// assert!(absurd.validate().unwrap_err().to_string().contains("report_ttl"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickerConfig {
    /// How often each backend's report is asked for: the ORCA stream's interval, the
    /// `/load` poll's period. No shorter than the backends publish (livecount's agent:
    /// `--report-secs`), or the ORCA reads time out and the streams are reopened.
    pub report_interval: Duration,
    /// How long a report counts after the backend took it. Past it the backend is
    /// unknown, and an unknown backend is never chosen (silence is not free capacity).
    pub report_ttl: Duration,
    /// How many other endpoints follow the chosen one in an answer, best first: Envoy
    /// tries them in order when a connection to the first fails and the route retries.
    pub fallbacks: usize,
    /// The seed of the random pairs (`None`: each thread's own random source), for runs
    /// that must repeat: one thread choosing in turn repeats its choices exactly.
    pub seed: Option<u64>,
}

impl Default for PickerConfig {
    fn default() -> Self {
        PickerConfig {
            report_interval: Duration::from_millis(500),
            report_ttl: Duration::from_secs(2),
            fallbacks: 2,
            seed: None,
        }
    }
}

impl PickerConfig {
    /// Checks every field against its range: both durations above zero and at most
    /// [`MAX_REPORT_WAIT`], the TTL no shorter than the interval (else every backend would
    /// be unknown between two reports), at most [`MAX_FALLBACKS`] fallbacks.
    pub fn validate(&self) -> Result<(), PickerError> {
        let bad = |field: &str, why: String| Err(PickerError::Config(format!("{field}: {why}")));
        for (field, value) in [
            ("report_interval", self.report_interval),
            ("report_ttl", self.report_ttl),
        ] {
            if value.is_zero() || value > MAX_REPORT_WAIT {
                return bad(
                    field,
                    format!("{value:?} is outside (0, {MAX_REPORT_WAIT:?}]"),
                );
            }
        }
        if self.report_ttl < self.report_interval {
            return bad(
                "report_ttl",
                format!(
                    "{:?} is shorter than the report interval {:?}: every backend would read \
                     as unknown between two reports",
                    self.report_ttl, self.report_interval
                ),
            );
        }
        if self.fallbacks > MAX_FALLBACKS {
            return bad(
                "fallbacks",
                format!("{} is above {MAX_FALLBACKS}", self.fallbacks),
            );
        }
        Ok(())
    }
}

/// Why a [`Picker`] could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PickerError {
    /// No backends were given.
    NoBackends,
    /// Two backends name the same endpoint.
    DuplicateEndpoint(SocketAddr),
    /// A [`PickerConfig`] field is out of its range.
    Config(String),
}

impl fmt::Display for PickerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PickerError::NoBackends => f.write_str("no backends: a picker needs at least one"),
            PickerError::DuplicateEndpoint(addr) => {
                write!(f, "the endpoint {addr} is given twice")
            }
            PickerError::Config(why) => write!(f, "picker configuration: {why}"),
        }
    }
}

impl std::error::Error for PickerError {}

/// The answer for one new session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// Send it to `endpoint`; on a retry, to the `fallbacks` in order.
    To {
        /// The chosen endpoint.
        endpoint: SocketAddr,
        /// The next best eligible endpoints, best first.
        fallbacks: Vec<SocketAddr>,
    },
    /// No backend can take it: each is at its hard limit, draining, or unknown (no fresh
    /// report), or none is in the subset asked for.
    NoRoom,
}

impl Pick {
    /// The endpoint list as the protocol writes it: `ip:port[,ip:port…]`, the chosen one
    /// first; `None` for [`NoRoom`](Pick::NoRoom).
    ///
    /// ```
    /// use livecount_epp::Pick;
    /// let pick = Pick::To {
    ///     endpoint: "10.0.0.2:7".parse().unwrap(),
    ///     fallbacks: vec!["10.0.0.1:7".parse().unwrap(), "[::1]:7".parse().unwrap()],
    /// };
    /// assert_eq!(pick.endpoints().as_deref(), Some("10.0.0.2:7,10.0.0.1:7,[::1]:7"));
    /// assert_eq!(Pick::NoRoom.endpoints(), None);
    /// ```
    pub fn endpoints(&self) -> Option<String> {
        let Pick::To {
            endpoint,
            fallbacks,
        } = self
        else {
            return None;
        };
        let mut list = endpoint.to_string();
        for f in fallbacks {
            list.push(',');
            list.push_str(&f.to_string());
        }
        Some(list)
    }
}

/// What a picker has done so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickerStats {
    /// Sessions placed.
    pub picks: u64,
    /// Sessions answered [`Pick::NoRoom`].
    pub no_room: u64,
    /// Sessions placed on each backend, in the order given.
    pub placed: Vec<(SocketAddr, u64)>,
}

/// A session-aware endpoint picker: each backend's latest report (kept fresh by a
/// [`LoadFeed`]), the sessions this picker has placed there since that report, and the
/// choice.
///
/// **The choice.** The eligible backends are those with a fresh report, not draining and
/// below their hard limit (`max_sessions`, when the report carries one). Of two drawn at
/// random, the one using the smaller share of its capacity wins ([`Standing::prefer`], the
/// rule the simulator's `hybrid_p2c` runs): capacity is the reported sessions plus the
/// backend's own headroom by the hybrid model, the share counts the sessions placed since
/// the report, so a burst between two reports spreads instead of landing on one backend.
/// The other eligible backends follow as fallbacks, ranked by the same rule.
///
/// **Its counts are its own.** Each picker replica counts only the sessions it placed; the
/// backends' reports are the truth every replica shares, and a placement stops counting
/// at the next report (which includes it).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use livecount_balance::{BackendLoad, LoadFeed, LoadSignal};
/// use livecount_epp::{BackendSpec, Pick, Picker, PickerConfig};
/// use std::time::Duration;
///
/// let (b1, b2) = ("127.0.0.1:7001".parse().unwrap(), "127.0.0.1:7002".parse().unwrap());
/// let (tx1, rx1) = tokio::sync::mpsc::channel(1);
/// let (tx2, rx2) = tokio::sync::mpsc::channel(1);
/// let ttl = Duration::from_secs(2);
/// let picker = Picker::from_feeds(
///     [
///         (BackendSpec::orca(b1), LoadFeed::spawn(rx1, LoadSignal::Occupancy, ttl)),
///         (BackendSpec::orca(b2), LoadFeed::spawn(rx2, LoadSignal::Occupancy, ttl)),
///     ],
///     PickerConfig { seed: Some(7), ..PickerConfig::default() },
/// )
/// .unwrap();
/// assert_eq!(picker.pick(None), Pick::NoRoom); // nothing reported yet: nothing is free
/// tx1.send(BackendLoad::new(1, 9, 10.0)).await.unwrap(); // 9 of 10
/// tx2.send(BackendLoad::new(1, 1, 10.0)).await.unwrap(); // 1 of 10
/// let heard = async {
///     while !picker.ready_all() {
///         tokio::task::yield_now().await;
///     }
/// };
/// tokio::time::timeout(Duration::from_secs(10), heard).await.expect("both reports arrive");
/// let Pick::To { endpoint, fallbacks } = picker.pick(None) else { panic!() };
/// assert_eq!((endpoint, fallbacks), (b2, vec![b1]));
/// # }
/// ```
pub struct Picker {
    backends: Vec<Backend>,
    config: PickerConfig,
    /// With a seed: the number of the next choice, whose random pair is drawn from
    /// `seed + number`.
    draws: AtomicU64,
    no_room: AtomicU64,
}

/// One backend: where it is, its reports, and this picker's placements on it. A choice
/// takes no lock: the reports are read from the feed, the placement is one
/// compare-and-swap on the backend's own count.
struct Backend {
    spec: BackendSpec,
    feed: LoadFeed,
    own: OwnCount,
}

thread_local! {
    /// The eligible backends of the choice in progress on this thread, kept between
    /// choices: no allocation per choice beyond the answer.
    static ELIGIBLE: RefCell<Vec<Candidate>> = const { RefCell::new(Vec::new()) };
}

#[derive(Debug, Clone, Copy)]
struct Candidate {
    index: usize,
    /// The report it was judged on.
    sequence: u64,
    standing: Standing,
}

/// Best first: the smaller share of capacity in use, then fewer sessions
/// ([`Standing::prefer`]'s order).
fn rank(a: &Candidate, b: &Candidate) -> Ordering {
    if Standing::prefer(&a.standing, &b.standing) {
        Ordering::Greater
    } else if Standing::prefer(&b.standing, &a.standing) {
        Ordering::Less
    } else {
        Ordering::Equal
    }
}

impl Picker {
    /// A picker over `backends`, each read from its [`Reports`] source (an ORCA stream or
    /// `/load` polls) on a task of the current tokio runtime.
    ///
    /// # Errors
    ///
    /// No backends, an endpoint given twice, or a `config` field out of range.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn spawn(
        backends: impl IntoIterator<Item = BackendSpec>,
        config: PickerConfig,
    ) -> Result<Picker, PickerError> {
        config.validate()?;
        let (interval, ttl) = (config.report_interval, config.report_ttl);
        let feeds = backends.into_iter().map(|spec| {
            let feed = match spec.reports {
                Reports::Orca(addr) => LoadFeed::spawn(
                    OrcaLoadSource::new(addr, interval),
                    LoadSignal::Occupancy,
                    ttl,
                ),
                Reports::Load(addr) => LoadFeed::spawn(
                    HttpLoadSource::new(addr, interval),
                    LoadSignal::Occupancy,
                    ttl,
                ),
            };
            (spec, feed)
        });
        Picker::from_feeds(feeds, config)
    }

    /// A picker over backends whose reports arrive through feeds the caller made (any
    /// [`LoadSource`](livecount_balance::LoadSource): a relay, a test). The feeds' own
    /// `max_age` is their TTL; `config.report_interval` and `report_ttl` are checked but
    /// not used.
    ///
    /// # Errors
    ///
    /// As [`spawn`](Picker::spawn).
    pub fn from_feeds(
        feeds: impl IntoIterator<Item = (BackendSpec, LoadFeed)>,
        config: PickerConfig,
    ) -> Result<Picker, PickerError> {
        config.validate()?;
        let backends: Vec<Backend> = feeds
            .into_iter()
            .map(|(spec, feed)| Backend {
                spec,
                feed,
                own: OwnCount::new(),
            })
            .collect();
        if backends.is_empty() {
            return Err(PickerError::NoBackends);
        }
        for (i, b) in backends.iter().enumerate() {
            if backends[..i]
                .iter()
                .any(|o| o.spec.endpoint == b.spec.endpoint)
            {
                return Err(PickerError::DuplicateEndpoint(b.spec.endpoint));
            }
        }
        Ok(Picker {
            backends,
            config,
            draws: AtomicU64::new(0),
            no_room: AtomicU64::new(0),
        })
    }

    /// The backends, in the order given.
    pub fn backends(&self) -> impl Iterator<Item = &BackendSpec> {
        self.backends.iter().map(|b| &b.spec)
    }

    /// Whether any backend has a fresh report (the picker can place a session).
    pub fn ready(&self) -> bool {
        self.backends.iter().any(|b| b.feed.report().is_some())
    }

    /// Whether every backend has a fresh report.
    pub fn ready_all(&self) -> bool {
        self.backends.iter().all(|b| b.feed.report().is_some())
    }

    /// The choice for a new session now, among the backends whose endpoint is in `subset`
    /// when one is given (the gateway's subset hint). Counts the placement.
    pub fn pick(&self, subset: Option<&[SocketAddr]>) -> Pick {
        self.pick_at(Instant::now(), subset)
    }

    /// The choice as of `now` (reports fresh at `now`).
    pub fn pick_at(&self, now: Instant, subset: Option<&[SocketAddr]>) -> Pick {
        ELIGIBLE.with(|eligible| match eligible.try_borrow_mut() {
            Ok(mut eligible) => self.choose(now, subset, &mut eligible),
            // Unreachable (a choice does not choose), but never a panic: a fresh list.
            Err(_) => self.choose(now, subset, &mut Vec::new()),
        })
    }

    fn choose(
        &self,
        now: Instant,
        subset: Option<&[SocketAddr]>,
        eligible: &mut Vec<Candidate>,
    ) -> Pick {
        eligible.clear();
        for (index, backend) in self.backends.iter().enumerate() {
            if subset.is_some_and(|s| !s.contains(&backend.spec.endpoint)) {
                continue;
            }
            // No fresh report: unknown, never chosen.
            let Some(report) = backend.feed.report_at(now) else {
                continue;
            };
            if report.draining {
                continue;
            }
            // A new report counts what was placed before it: only this report's
            // placements are added.
            let sent = backend.own.since(report.sequence);
            let limit = report.max_sessions.map_or(f64::INFINITY, |m| m as f64);
            let standing = Standing::new(report.active, report.headroom, limit, sent);
            if report
                .max_sessions
                .is_some_and(|max| standing.estimated_active >= max)
            {
                continue; // at its hard limit: it would refuse the session
            }
            eligible.push(Candidate {
                index,
                sequence: report.sequence,
                standing,
            });
        }
        let chosen = match eligible.len() {
            0 => {
                self.no_room.fetch_add(1, AtomicOrdering::Relaxed);
                return Pick::NoRoom;
            }
            1 => 0,
            n => {
                let (a, b) = self.pair(n);
                if Standing::prefer(&eligible[a].standing, &eligible[b].standing) {
                    b
                } else {
                    a
                }
            }
        };
        let primary = eligible.swap_remove(chosen);
        self.backends[primary.index].own.place(primary.sequence);
        let k = self.config.fallbacks.min(eligible.len());
        if k > 0 && k < eligible.len() {
            // The best k, then in order: no sort of the whole fleet.
            eligible.select_nth_unstable_by(k - 1, rank);
        }
        eligible[..k].sort_unstable_by(rank);
        let fallbacks = eligible[..k]
            .iter()
            .map(|c| self.backends[c.index].spec.endpoint)
            .collect();
        Pick::To {
            endpoint: self.backends[primary.index].spec.endpoint,
            fallbacks,
        }
    }

    /// Two different indices below `n` (at least 2), at random: from this thread's own
    /// source, or with a seed from the choice's number.
    fn pair(&self, n: usize) -> (usize, usize) {
        let (a, b) = match self.config.seed {
            None => (fastrand::usize(..n), fastrand::usize(..n - 1)),
            Some(seed) => {
                // Relaxed: only a number; choices in turn get the numbers in turn.
                let draw = self.draws.fetch_add(1, AtomicOrdering::Relaxed);
                let mut rng = fastrand::Rng::with_seed(seed.wrapping_add(draw));
                (rng.usize(..n), rng.usize(..n - 1))
            }
        };
        (a, if b >= a { b + 1 } else { b })
    }

    /// What it has done so far.
    pub fn stats(&self) -> PickerStats {
        // The total is the backends' sum: no counter that every choice would write.
        let placed: Vec<(SocketAddr, u64)> = self
            .backends
            .iter()
            .map(|b| (b.spec.endpoint, b.own.placed()))
            .collect();
        PickerStats {
            picks: placed.iter().map(|(_, n)| n).sum(),
            no_room: self.no_room.load(AtomicOrdering::Relaxed),
            placed,
        }
    }
}

impl fmt::Debug for Picker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Picker")
            .field("backends", &self.backends.len())
            .field("config", &self.config)
            .field("stats", &self.stats())
            .finish()
    }
}
