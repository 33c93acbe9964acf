//! The picker's choice against its rules: who is eligible, the pair, the placements it
//! counts since each report, the fallbacks, the refusals; then a proptest of random report
//! and pick sequences against a reference model of the same rules.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use livecount_balance::{BackendLoad, LoadFeed, LoadSignal};
use livecount_epp::{BackendSpec, Pick, Picker, PickerConfig, PickerError};
use proptest::prelude::*;
use tokio::sync::mpsc::Sender;

const TTL: Duration = Duration::from_secs(60);

fn addr(i: usize) -> SocketAddr {
    format!("127.0.0.1:{}", 7001 + i).parse().unwrap()
}

/// A picker over `n` backends whose reports the test sends, on a current-thread runtime.
struct Fleet {
    runtime: tokio::runtime::Runtime,
    picker: Picker,
    feeds: Vec<LoadFeed>,
    senders: Vec<Sender<BackendLoad>>,
}

impl Fleet {
    fn new(n: usize, fallbacks: usize, seed: u64) -> Fleet {
        Fleet::with_seed(n, fallbacks, Some(seed))
    }

    fn with_seed(n: usize, fallbacks: usize, seed: Option<u64>) -> Fleet {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = runtime.enter();
        let mut senders = Vec::new();
        let mut feeds = Vec::new();
        let pairs: Vec<(BackendSpec, LoadFeed)> = (0..n)
            .map(|i| {
                let (tx, rx) = tokio::sync::mpsc::channel(1);
                senders.push(tx);
                let feed = LoadFeed::spawn(rx, LoadSignal::Occupancy, TTL);
                feeds.push(feed.clone());
                (BackendSpec::orca(addr(i)), feed)
            })
            .collect();
        let config = PickerConfig {
            fallbacks,
            seed,
            ..PickerConfig::default()
        };
        let picker = Picker::from_feeds(pairs, config).unwrap();
        Fleet {
            runtime,
            picker,
            feeds,
            senders,
        }
    }

    /// Backend `i` reports `load`; returns once the picker can see it.
    fn report(&self, i: usize, load: BackendLoad) {
        let feed = &self.feeds[i];
        self.runtime.block_on(async {
            self.senders[i].send(load.clone()).await.unwrap();
            let seen = tokio::time::timeout(Duration::from_secs(10), async {
                while feed.report().as_ref() != Some(&load) {
                    tokio::task::yield_now().await;
                }
            });
            seen.await.expect("the feed published the report");
        });
    }

    fn pick(&self) -> Pick {
        self.picker.pick(None)
    }

    fn chosen(&self) -> usize {
        match self.pick() {
            Pick::To { endpoint, .. } => usize::from(endpoint.port() - 7001),
            Pick::NoRoom => panic!("no room"),
        }
    }
}

#[test]
fn nothing_heard_is_no_room_not_free_capacity() {
    let fleet = Fleet::new(3, 2, 1);
    assert_eq!(fleet.pick(), Pick::NoRoom);
    assert_eq!(fleet.picker.stats().no_room, 1);
    fleet.report(1, BackendLoad::new(1, 50, 60.0));
    assert_eq!(fleet.chosen(), 1, "the one backend heard from");
}

#[test]
fn draining_and_full_backends_are_passed_over() {
    let fleet = Fleet::new(3, 2, 2);
    fleet.report(0, BackendLoad::new(1, 0, 100.0).draining());
    fleet.report(1, BackendLoad::new(1, 10, 10.0).with_max_sessions(10));
    fleet.report(2, BackendLoad::new(1, 90, 100.0));
    for _ in 0..20 {
        assert_eq!(
            fleet.chosen(),
            2,
            "the only eligible one, however full by the model"
        );
    }
    // Its hard limit reached by this picker's own placements: no room anywhere.
    fleet.report(2, BackendLoad::new(2, 9, 10.0).with_max_sessions(10));
    assert_eq!(fleet.chosen(), 2);
    assert_eq!(
        fleet.pick(),
        Pick::NoRoom,
        "9 reported + 1 placed = its limit"
    );
}

#[test]
fn a_report_older_than_the_ttl_makes_the_backend_unknown() {
    let fleet = Fleet::new(2, 2, 3);
    fleet.report(0, BackendLoad::new(1, 0, 100.0));
    fleet.report(1, BackendLoad::new(1, 0, 100.0).with_age_ms(50_000));
    let now = Instant::now();
    let later = now + Duration::from_secs(20);
    for _ in 0..10 {
        match fleet.picker.pick_at(later, None) {
            Pick::To {
                endpoint,
                fallbacks,
            } => {
                assert_eq!(
                    (endpoint, fallbacks),
                    (addr(0), vec![]),
                    "1 is stale at +20 s"
                );
            }
            Pick::NoRoom => panic!("0 is fresh"),
        }
    }
    assert_eq!(fleet.picker.pick_at(now + TTL, None), Pick::NoRoom);
}

#[test]
fn a_burst_between_reports_spreads_by_the_placements_counted() {
    // Two equal backends: with both in every pair, the less filled wins each time, so a
    // burst of 10 alternates exactly; without the count it would all land on one.
    let fleet = Fleet::new(2, 2, 4);
    fleet.report(0, BackendLoad::new(1, 10, 30.0));
    fleet.report(1, BackendLoad::new(1, 10, 30.0));
    let mut on = [0; 2];
    for _ in 0..10 {
        on[fleet.chosen()] += 1;
    }
    assert_eq!(on, [5, 5]);
    // A new report counts them (it includes them): the count starts again from it.
    fleet.report(0, BackendLoad::new(2, 15, 30.0));
    fleet.report(1, BackendLoad::new(2, 25, 30.0));
    assert_eq!(fleet.chosen(), 0, "15 of 30 against 25 of 30");
    assert_eq!(
        fleet.picker.stats().placed,
        vec![(addr(0), 6), (addr(1), 5)]
    );
}

#[test]
fn choices_made_at_once_count_every_placement_and_still_spread() {
    // Four threads choose 250 times each between two equal backends, with no report in
    // between: every placement is counted once, in the total and in the count each choice
    // reads, so the burst stays within a few sessions of even (a lost count would let one
    // backend take the sessions the other thread thought it had).
    let fleet = Fleet::new(2, 1, 9);
    fleet.report(0, BackendLoad::new(1, 0, 10_000.0));
    fleet.report(1, BackendLoad::new(1, 0, 10_000.0));
    let barrier = std::sync::Barrier::new(4);
    let on: Vec<[u64; 2]> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let mut on = [0; 2];
                    for _ in 0..250 {
                        on[fleet.chosen()] += 1;
                    }
                    on
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let total = [
        on.iter().map(|o| o[0]).sum::<u64>(),
        on.iter().map(|o| o[1]).sum(),
    ];
    let stats = fleet.picker.stats();
    assert_eq!(stats.picks, 1000);
    assert_eq!(stats.placed, vec![(addr(0), total[0]), (addr(1), total[1])]);
    assert!(total[0].abs_diff(total[1]) <= 8, "{total:?}");
}

#[test]
fn the_fallbacks_are_the_best_few_of_a_larger_fleet() {
    // Four or six backends, 5 % to 55 % full, two fallbacks: whichever the pair chose, the
    // answer names the two emptiest of the rest, emptiest first, not any two of them.
    // Reported out of order of fill, so the list's order is not the answer's.
    let fills = [35, 5, 55, 25, 45, 15];
    for (n, seed) in [4, 6]
        .into_iter()
        .flat_map(|n| (0..24).map(move |s| (n, s)))
    {
        let fleet = Fleet::new(n, 2, seed);
        for (i, active) in fills[..n].iter().enumerate() {
            fleet.report(i, BackendLoad::new(1, *active, 100.0));
        }
        let Pick::To {
            endpoint,
            fallbacks,
        } = fleet.pick()
        else {
            panic!("no room")
        };
        let chosen = usize::from(endpoint.port() - 7001);
        let mut rest: Vec<usize> = (0..n).filter(|&i| i != chosen).collect();
        rest.sort_by_key(|&i| fills[i]);
        assert_eq!(
            fallbacks,
            vec![addr(rest[0]), addr(rest[1])],
            "{n} backends, seed {seed}: chose {chosen}"
        );
    }
    // No fallbacks asked for: none given, and the choice still made.
    let fleet = Fleet::new(6, 0, 1);
    for i in 0..6 {
        fleet.report(i, BackendLoad::new(1, 10, 100.0));
    }
    assert!(matches!(fleet.pick(), Pick::To { fallbacks, .. } if fallbacks.is_empty()));
}

#[test]
fn without_a_seed_every_backend_is_drawn_into_some_pair() {
    // Each thread's own random source: over 200 choices among four equal backends every
    // one is chosen, and the pairs never index past the eligible ones.
    let fleet = Fleet::with_seed(4, 3, None);
    for i in 0..4 {
        fleet.report(i, BackendLoad::new(1, 0, 10_000.0));
    }
    let mut on = [0; 4];
    for _ in 0..200 {
        on[fleet.chosen()] += 1;
    }
    assert!(on.iter().all(|&n| n > 0), "{on:?}");
}

#[test]
fn the_bigger_backend_with_more_sessions_can_be_the_emptier() {
    let fleet = Fleet::new(2, 2, 5);
    fleet.report(0, BackendLoad::new(1, 10, 20.0)); // half full
    fleet.report(1, BackendLoad::new(1, 40, 100.0)); // 40 % full
    assert_eq!(fleet.chosen(), 1);
}

#[test]
fn fallbacks_are_the_other_eligible_backends_best_first() {
    let fleet = Fleet::new(5, 3, 6);
    let fills = [0.5, 0.1, 0.9, 0.3, 0.7];
    for (i, f) in fills.iter().enumerate() {
        fleet.report(i, BackendLoad::new(1, (100.0 * f) as u64, 100.0));
    }
    fleet.report(2, BackendLoad::new(2, 10, 100.0).draining());
    for _ in 0..30 {
        let Pick::To {
            endpoint,
            fallbacks,
        } = fleet.pick()
        else {
            panic!("room")
        };
        assert_eq!(fallbacks.len(), 3);
        assert!(!fallbacks.contains(&endpoint) && !fallbacks.contains(&addr(2)));
        let mut rest: Vec<usize> = [1, 3, 0, 4]
            .into_iter()
            .filter(|&i| addr(i) != endpoint)
            .collect();
        rest.truncate(3);
        let expected: Vec<SocketAddr> = rest.into_iter().map(addr).collect();
        // Every backend is reported again after each pick, so the fills stay as set.
        assert_eq!(fallbacks, expected, "chosen {endpoint}");
        fleet.report(0, BackendLoad::new(fleet_seq(), 50, 100.0));
        for (i, f) in fills.iter().enumerate().filter(|(i, _)| *i != 0 && *i != 2) {
            fleet.report(i, BackendLoad::new(fleet_seq(), (100.0 * f) as u64, 100.0));
        }
    }
}

/// An ever-increasing report sequence for the tests that re-report.
fn fleet_seq() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(10);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[test]
fn the_subset_hint_restricts_and_an_empty_one_refuses() {
    let fleet = Fleet::new(3, 2, 7);
    for i in 0..3 {
        fleet.report(i, BackendLoad::new(1, 0, 100.0));
    }
    for _ in 0..10 {
        let only = [addr(2)];
        let pick = fleet.picker.pick(Some(&only));
        assert_eq!(
            pick,
            Pick::To {
                endpoint: addr(2),
                fallbacks: vec![]
            }
        );
    }
    assert_eq!(fleet.picker.pick(Some(&[])), Pick::NoRoom);
    let unknown = ["10.9.9.9:1".parse().unwrap()];
    assert_eq!(fleet.picker.pick(Some(&unknown)), Pick::NoRoom);
}

#[test]
fn the_ranges_include_their_ends_and_readiness_follows_the_reports() {
    let fleet = Fleet::new(2, 2, 3);
    let backends: Vec<SocketAddr> = fleet.picker.backends().map(|b| b.endpoint).collect();
    assert_eq!(backends, vec![addr(0), addr(1)], "in the order given");
    assert!(
        !fleet.picker.ready() && !fleet.picker.ready_all(),
        "nothing heard"
    );
    fleet.report(1, BackendLoad::new(1, 0, 10.0));
    assert!(
        fleet.picker.ready() && !fleet.picker.ready_all(),
        "one of two heard"
    );
    fleet.report(0, BackendLoad::new(1, 0, 10.0));
    assert!(fleet.picker.ready_all());
    // Every bound is inclusive: the longest wait, a TTL equal to the interval, the most
    // fallbacks.
    let edge = PickerConfig {
        report_interval: livecount_epp::MAX_REPORT_WAIT,
        report_ttl: livecount_epp::MAX_REPORT_WAIT,
        fallbacks: livecount_epp::MAX_FALLBACKS,
        seed: None,
    };
    assert_eq!(edge.validate(), Ok(()));
}

#[test]
fn bad_construction_is_refused_with_its_reason() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();
    let feed = || {
        let (_tx, rx) = tokio::sync::mpsc::channel::<BackendLoad>(1);
        LoadFeed::spawn(rx, LoadSignal::Occupancy, TTL)
    };
    let none: Vec<(BackendSpec, LoadFeed)> = Vec::new();
    assert_eq!(
        Picker::from_feeds(none, PickerConfig::default()).unwrap_err(),
        PickerError::NoBackends
    );
    let twice = vec![
        (BackendSpec::orca(addr(0)), feed()),
        (BackendSpec::orca(addr(0)), feed()),
    ];
    assert_eq!(
        Picker::from_feeds(twice, PickerConfig::default()).unwrap_err(),
        PickerError::DuplicateEndpoint(addr(0))
    );
    for (config, field) in [
        (
            PickerConfig {
                report_interval: Duration::ZERO,
                ..PickerConfig::default()
            },
            "report_interval",
        ),
        (
            PickerConfig {
                report_ttl: Duration::from_millis(100),
                ..PickerConfig::default()
            },
            "report_ttl",
        ),
        (
            PickerConfig {
                report_ttl: Duration::from_secs(7200),
                ..PickerConfig::default()
            },
            "report_ttl",
        ),
        (
            PickerConfig {
                fallbacks: 17,
                ..PickerConfig::default()
            },
            "fallbacks",
        ),
    ] {
        let err = Picker::from_feeds(vec![(BackendSpec::orca(addr(0)), feed())], config)
            .unwrap_err()
            .to_string();
        assert!(err.contains(field), "{err}");
    }
}

// === the model ===

/// What the reference knows of one backend.
#[derive(Debug, Clone, Default)]
struct Known {
    report: Option<BackendLoad>,
    sent: u64,
    placed: u64,
}

/// The rules, written plainly: eligible = fresh, not draining, below the limit counting
/// this picker's placements since the report.
fn eligible(k: &Known) -> bool {
    let Some(r) = &k.report else { return false };
    !r.draining && r.max_sessions.is_none_or(|m| r.active + k.sent < m)
}

fn fill(k: &Known) -> f64 {
    let r = k.report.as_ref().unwrap();
    let capacity = (r.active as f64 + r.headroom.max(0.0))
        .min(r.max_sessions.map_or(f64::INFINITY, |m| m as f64));
    if capacity > 0.0 {
        (r.active + k.sent) as f64 / capacity
    } else {
        f64::INFINITY
    }
}

#[derive(Debug, Clone)]
enum Op {
    Report {
        backend: usize,
        active: u64,
        headroom: u8,
        max: Option<u64>,
        draining: bool,
    },
    Pick,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            0usize..4,
            0u64..40,
            any::<u8>(),
            proptest::option::of(1u64..50),
            prop::bool::weighted(0.15)
        )
            .prop_map(|(backend, active, headroom, max, draining)| Op::Report {
                backend,
                active,
                headroom,
                max,
                draining
            }),
        Just(Op::Pick),
        Just(Op::Pick),
        Just(Op::Pick),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Against the reference: a pick is `NoRoom` exactly when nothing is eligible;
    /// otherwise the chosen backend is eligible and not the strictly worst one (two choices
    /// never take the worse of two), and the fallbacks are the other eligible backends in
    /// the reference's order (best first, at most 3); in the end each backend's placements
    /// match the reference's.
    #[test]
    fn the_picker_follows_its_rules(ops in prop::collection::vec(op(), 1..60), seed in any::<u64>()) {
        let fleet = Fleet::new(4, 3, seed);
        let mut known = vec![Known::default(); 4];
        let mut sequence = 0;
        for op in ops {
            match op {
                Op::Report { backend, active, headroom, max, draining } => {
                    sequence += 1;
                    let mut load = BackendLoad::new(sequence, active, active as f64 + f64::from(headroom));
                    if let Some(m) = max {
                        load = load.with_max_sessions(m);
                    }
                    if draining {
                        load = load.draining();
                    }
                    fleet.report(backend, load.clone());
                    known[backend].report = Some(load);
                    known[backend].sent = 0;
                }
                Op::Pick => {
                    let mut ranked: Vec<usize> = (0..4).filter(|&i| eligible(&known[i])).collect();
                    let order = |a: &usize, b: &usize| {
                        let (fa, fb) = (fill(&known[*a]), fill(&known[*b]));
                        fa.partial_cmp(&fb).unwrap().then(
                            (known[*a].report.as_ref().unwrap().active + known[*a].sent)
                                .cmp(&(known[*b].report.as_ref().unwrap().active + known[*b].sent)),
                        )
                    };
                    ranked.sort_by(order);
                    match fleet.pick() {
                        Pick::NoRoom => prop_assert!(ranked.is_empty(), "room on {ranked:?}"),
                        Pick::To { endpoint, fallbacks } => {
                            let chosen = usize::from(endpoint.port() - 7001);
                            prop_assert!(ranked.contains(&chosen), "{chosen} not eligible: {known:?}");
                            if ranked.len() >= 2 {
                                let worst = ranked.last().unwrap();
                                prop_assert!(
                                    order(&chosen, worst) != std::cmp::Ordering::Greater,
                                    "P2C took the strictly worst"
                                );
                            }
                            let rest: Vec<usize> = ranked.iter().copied().filter(|&i| i != chosen).collect();
                            let got: Vec<usize> = fallbacks.iter().map(|a| usize::from(a.port() - 7001)).collect();
                            // Equal keys may come in either order: compare the keys.
                            prop_assert_eq!(got.len(), rest.len().min(3));
                            for (g, r) in got.iter().zip(&rest) {
                                prop_assert_eq!(order(g, r), std::cmp::Ordering::Equal, "{:?} vs {:?}", got, rest);
                            }
                            known[chosen].sent += 1;
                            known[chosen].placed += 1;
                        }
                    }
                }
            }
        }
        let placed: Vec<u64> = fleet.picker.stats().placed.iter().map(|p| p.1).collect();
        let expected: Vec<u64> = known.iter().map(|k| k.placed).collect();
        prop_assert_eq!(placed, expected);
    }
}
