//! The in-band encodings decode to the report (a parser per form, written from the spec
//! text, not from the encoder), and the cache changes exactly when a report is published.

use std::collections::HashMap;

use base64::Engine as _;
use livecount_capacity::CapacityConfig;
use livecount_session::SessionTracker;
use proptest::prelude::*;

use super::*;
use crate::PrequalProbe;

/// Reads a `TEXT` value the way Envoy's parser does: the prefix, then comma-separated
/// `name=value` (or `name:value`) entries, whitespace around them ignored; duplicate,
/// unknown or empty names, and values that are not finite non-negative numbers, are errors.
fn parse_text(value: &str) -> Result<OrcaLoadReport, String> {
    let body = value.strip_prefix("TEXT ").ok_or("no TEXT prefix")?;
    let mut out = OrcaLoadReport::default();
    let mut seen = std::collections::HashSet::new();
    for entry in body.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, v) = entry
            .split_once(['=', ':'])
            .ok_or(format!("no value: {entry}"))?;
        let v: f64 = v.trim().parse().map_err(|e| format!("{entry}: {e}"))?;
        if !v.is_finite() || v < 0.0 {
            return Err(format!("bad value {entry}"));
        }
        if !seen.insert(name.to_owned()) {
            return Err(format!("duplicate {name}"));
        }
        match name {
            "cpu_utilization" => out.cpu_utilization = v,
            "mem_utilization" => out.mem_utilization = v,
            "application_utilization" => out.application_utilization = v,
            "rps_fractional" => out.rps_fractional = v,
            "eps" => out.eps = v,
            _ => {
                let key = name
                    .strip_prefix("named_metrics.")
                    .filter(|k| !k.is_empty())
                    .ok_or(format!("unsupported metric name {name}"))?;
                out.named_metrics.insert(key.to_owned(), v);
            }
        }
    }
    Ok(out)
}

/// Reads a `JSON` value as the proto's JSON mapping: known fields only, numbers only.
fn parse_json(value: &str) -> Result<OrcaLoadReport, String> {
    let body = value.strip_prefix("JSON ").ok_or("no JSON prefix")?;
    let v: serde_json::Value = serde_json::from_str(body).map_err(|e| e.to_string())?;
    let object = v.as_object().ok_or("not an object")?;
    let mut out = OrcaLoadReport::default();
    for (name, v) in object {
        let number = || v.as_f64().ok_or(format!("{name} is not a number"));
        match name.as_str() {
            "cpu_utilization" => out.cpu_utilization = number()?,
            "mem_utilization" => out.mem_utilization = number()?,
            "application_utilization" => out.application_utilization = number()?,
            "rps_fractional" => out.rps_fractional = number()?,
            "eps" => out.eps = number()?,
            "named_metrics" => {
                for (k, v) in v.as_object().ok_or("named_metrics is not an object")? {
                    let n = v.as_f64().ok_or(format!("{k} is not a number"))?;
                    out.named_metrics.insert(k.clone(), n);
                }
            }
            other => return Err(format!("unknown field {other}")),
        }
    }
    Ok(out)
}

/// Reads a `BIN` value: base64 (padded or not), then the proto.
fn parse_bin(value: &str) -> Result<OrcaLoadReport, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value)
        .map_err(|e| e.to_string())?;
    OrcaLoadReport::decode(&bytes[..]).map_err(|e| e.to_string())
}

fn parse(format: InbandFormat, value: &str) -> Result<OrcaLoadReport, String> {
    match format {
        InbandFormat::Text => parse_text(value),
        InbandFormat::Json => parse_json(value),
        InbandFormat::Bin => parse_bin(value),
    }
}

fn config() -> CapacityConfig {
    CapacityConfig::builder().build().unwrap()
}

#[test]
fn a_published_report_decodes_to_its_orca_report_in_every_form() {
    let tracker: SessionTracker = SessionTracker::default();
    let board = Arc::new(LoadBoard::builder("b", config()).max_sessions(50).build());
    let _open: Vec<_> = (0..4).map(|_| tracker.start()).collect();
    let report = board.publish(tracker.snapshot());
    let orca = orca_report(&report);
    assert_eq!(sanitized(&orca), orca, "a board's report needs no cleaning");
    let inband = InbandOrca::new(Arc::clone(&board));
    for format in InbandFormat::ALL {
        let value = inband.value(format);
        let decoded = parse(format, value.to_str().unwrap()).unwrap();
        assert_eq!(decoded, orca, "{format}: {value:?}");
        // The weight a WRR computes is the documented one.
        let weight = decoded.rps_fractional / decoded.application_utilization;
        assert!((weight - crate::orca::wrr_weight(&report)).abs() < 1e-6 * weight);
    }
}

#[test]
fn text_and_json_look_as_the_spec_shows() {
    let mut r = LoadReport::empty("b");
    (r.sequence, r.active, r.generating, r.headroom) = (7, 4, 1, 45.0);
    (r.effective_capacity, r.raw_utilisation) = (49.0, 0.25);
    let orca = orca_report(&r);
    let text = encode_text(&orca);
    assert!(
        text.starts_with("TEXT cpu_utilization=0.25, rps_fractional="),
        "{text}"
    );
    assert!(text.contains(", application_utilization=0.1, named_metrics.active_sessions=4, "));
    assert!(text.ends_with("named_metrics.session_utilization=0.08163265306122448"));
    let json = encode_json(&orca);
    assert!(
        json.starts_with(r#"JSON {"cpu_utilization":0.25,"rps_fractional":"#),
        "{json}"
    );
    assert!(
        json.contains(r#""named_metrics":{"active_sessions":4,"#),
        "{json}"
    );
    assert_eq!(encode_text(&orca), text, "byte-identical every time");
    assert_eq!(
        InbandFormat::ALL.map(|f| f.header_name()),
        [
            "endpoint-load-metrics",
            "endpoint-load-metrics",
            "endpoint-load-metrics-bin"
        ]
    );
}

#[test]
fn values_a_strict_reader_refuses_are_left_out_never_sent() {
    let mut orca = OrcaLoadReport {
        cpu_utilization: f64::NAN,
        mem_utilization: -1.0,
        rps_fractional: f64::INFINITY,
        application_utilization: 0.5,
        ..OrcaLoadReport::default()
    };
    orca.named_metrics.insert("ok".into(), 2.0);
    orca.named_metrics.insert("neg".into(), -2.0);
    orca.named_metrics.insert("nan".into(), f64::NAN);
    orca.named_metrics.insert("a,b=c".into(), 1.0);
    orca.named_metrics.insert(String::new(), 1.0);
    let expected = OrcaLoadReport {
        application_utilization: 0.5,
        named_metrics: HashMap::from([("ok".to_owned(), 2.0)]),
        ..OrcaLoadReport::default()
    };
    for format in InbandFormat::ALL {
        let value = encode(format, &orca);
        assert_eq!(
            parse(format, &value).unwrap(),
            expected,
            "{format}: {value}"
        );
    }
    assert_eq!(encode_text(&OrcaLoadReport::default()), "TEXT ");
    assert_eq!(encode_json(&OrcaLoadReport::default()), "JSON {}");
}

#[test]
fn formats_parse_by_name() {
    for f in InbandFormat::ALL {
        assert_eq!(f.as_str().parse(), Ok(f));
        assert_eq!(f.to_string().to_uppercase().parse(), Ok(f));
    }
    assert!("xml".parse::<InbandFormat>().is_err());
}

#[test]
fn the_cache_changes_exactly_when_a_report_is_published() {
    let tracker: SessionTracker = SessionTracker::default();
    let board = Arc::new(LoadBoard::new("b", config()));
    let inband = InbandOrca::new(Arc::clone(&board));
    let first = inband.current();
    assert_eq!(first.sequence(), 0);
    for _ in 0..3 {
        assert!(Arc::ptr_eq(&first, &inband.current()));
    }
    let _s = tracker.start();
    let published = board.publish(tracker.snapshot());
    let second = inband.current();
    assert!(!Arc::ptr_eq(&first, &second));
    assert!(Arc::ptr_eq(second.report(), &published));
    assert!(Arc::ptr_eq(&second, &inband.current()));
    // Draining publishes a new report: a new encoding, at the floor weight.
    let drained = {
        tracker.begin_drain();
        board.publish(tracker.snapshot())
    };
    let third = inband.current();
    assert!(Arc::ptr_eq(third.report(), &drained));
    let orca = parse_bin(third.value(InbandFormat::Bin).to_str().unwrap()).unwrap();
    let weight = orca.rps_fractional / orca.application_utilization;
    assert!((weight - 10.0).abs() < 1e-9, "{weight}");
}

#[test]
fn concurrent_readers_never_cache_an_older_report_over_a_newer_one() {
    let tracker: SessionTracker = SessionTracker::default();
    let board = Arc::new(LoadBoard::new("b", config()));
    let inband = InbandOrca::new(Arc::clone(&board));
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                for _ in 0..2_000 {
                    let seen = inband.current().sequence();
                    assert!(seen <= board.latest().sequence);
                }
            });
        }
        for _ in 0..200 {
            board.publish(tracker.snapshot());
        }
    });
    let last = board.latest();
    assert!(Arc::ptr_eq(inband.current().report(), &last));
}

/// Any report, including values no board publishes.
fn any_report() -> impl Strategy<Value = LoadReport> {
    let figure = prop_oneof![
        8 => 0.0..1e7f64,
        1 => Just(0.0),
        1 => any::<f64>(),
    ];
    (
        (any::<u64>(), 0..10_000u64, 0..10_000u64, any::<bool>()),
        (figure.clone(), figure.clone(), figure),
        proptest::option::of((0..1000u64, proptest::option::of(0.0..1e5f64))),
    )
        .prop_map(
            |((sequence, active, generating, draining), (cpu, capacity, headroom), prequal)| {
                let mut r = LoadReport::empty("b");
                (r.sequence, r.active, r.generating, r.draining) =
                    (sequence, active, generating, draining);
                (r.raw_utilisation, r.effective_capacity, r.headroom) = (cpu, capacity, headroom);
                r.prequal = prequal.map(|(rif, latency_ms)| PrequalProbe {
                    rif,
                    latency_ms,
                    samples: 1,
                    samples_used: 1,
                });
                r
            },
        )
}

proptest! {
    /// Every form decodes (by its own parser) to exactly the cleaned ORCA report, whose
    /// values are the report's; a report with only valid figures is carried whole.
    #[test]
    fn every_form_decodes_to_the_reports_values(report in any_report()) {
        let orca = orca_report(&report);
        let clean = sanitized(&orca);
        for format in InbandFormat::ALL {
            let value = encode(format, &orca);
            prop_assert!(HeaderValue::try_from(value.as_str()).is_ok(), "{}", value);
            prop_assert_eq!(&parse(format, &value).unwrap(), &clean, "{}: {}", format, value);
        }
        let valid = |v: f64| v.is_finite() && v >= 0.0;
        if orca.named_metrics.values().all(|v| valid(*v)) && valid(orca.cpu_utilization) {
            prop_assert_eq!(&clean, &orca);
        }
        prop_assert_eq!(clean.named_metrics.get(crate::orca::ACTIVE_SESSIONS), Some(&(report.active as f64)));
    }

    /// `InbandOrca` against a reference that re-encodes the board's latest report on every
    /// read and counts publishes: the values always equal the reference's, and the cached
    /// encoding is replaced exactly at the first read after each publish.
    #[test]
    fn the_cache_agrees_with_encoding_every_time(ops in proptest::collection::vec(0..4u8, 1..40)) {
        let tracker: SessionTracker = SessionTracker::default();
        let board = Arc::new(LoadBoard::new("b", config()));
        let inband = InbandOrca::new(Arc::clone(&board));
        let mut open = Vec::new();
        let mut last: Option<Arc<EncodedReport>> = None;
        let mut published_since_read = true; // the first read encodes
        for op in ops {
            match op {
                0 => open.push(tracker.start()),
                1 => { open.pop(); }
                2 => { board.publish(tracker.snapshot()); published_since_read = true; }
                _ => {
                    let now = inband.current();
                    let expected = orca_report(&board.latest());
                    for format in InbandFormat::ALL {
                        let value = now.value(format).to_str().unwrap();
                        if format == InbandFormat::Bin {
                            // prost writes a map in its `HashMap`'s order: compare decoded.
                            prop_assert_eq!(parse_bin(value).unwrap(), expected.clone());
                        } else {
                            prop_assert_eq!(value, encode(format, &expected));
                        }
                        prop_assert_eq!(inband.value(format), now.value(format).clone());
                    }
                    let changed = last.as_ref().is_none_or(|l| !Arc::ptr_eq(l, &now));
                    prop_assert_eq!(changed, published_since_read);
                    published_since_read = false;
                    last = Some(now);
                }
            }
        }
    }
}
