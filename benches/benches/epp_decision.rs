//! What the endpoint picker's decision costs, per call: p50, p99 and p99.9 of
//! `EndpointPicker::answer` on a gRPC request's headers (the choice, its placement count,
//! the header and the `envoy.lb` metadata built: everything the picker does for a session
//! but the gRPC exchange), over fleets of 3, 16 and 128 backends, on one thread and on two
//! threads at once (both asking the one picker, as Envoy's streams do).
//!
//!     cargo bench -p livecount-benches --bench epp_decision
//!
//! Each call is timed on its own (`Instant` around it; the clock's own cost, measured the
//! same way on an empty body, is printed beside and not subtracted). The threads start on
//! a barrier and time only their own calls. Every backend has a fresh report with room,
//! so every call takes the full path (no early refusal). Criterion is not used: it
//! reports means of samples, and a decision's tail is what a session's startup feels.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use livecount_balance::{BackendLoad, LoadFeed, LoadSignal};
use livecount_epp::generated::envoy::config::core::v3::{HeaderMap, HeaderValue};
use livecount_epp::generated::envoy::service::ext_proc::v3::{
    HttpHeaders, ProcessingRequest, processing_request,
};
use livecount_epp::{BackendSpec, EndpointPicker, Picker, PickerConfig};

/// Calls timed per thread and row.
const CALLS: usize = 200_000;

/// A picker over `n` backends, each with a fresh report (`i` sessions of 1 000, so the
/// fills differ), fed through channels on `runtime`.
fn picker(runtime: &tokio::runtime::Runtime, n: usize) -> EndpointPicker {
    let _guard = runtime.enter();
    let mut senders = Vec::new();
    let feeds: Vec<(BackendSpec, LoadFeed)> = (0..n)
        .map(|i| {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            senders.push(tx);
            let addr = format!("10.0.{}.{}:50051", i / 250, i % 250 + 1);
            let spec = BackendSpec::orca(addr.parse().unwrap());
            let feed = LoadFeed::spawn(rx, LoadSignal::Occupancy, Duration::from_secs(3600));
            (spec, feed)
        })
        .collect();
    let picker = Arc::new(Picker::from_feeds(feeds, PickerConfig::default()).unwrap());
    runtime.block_on(async {
        for (i, tx) in senders.iter().enumerate() {
            tx.send(BackendLoad::new(1, i as u64, 1000.0))
                .await
                .unwrap();
        }
        let heard = async {
            while !picker.ready_all() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), heard)
            .await
            .expect("every backend's report arrives");
    });
    EndpointPicker::new(picker)
}

/// A gRPC request's headers, as Envoy sends them (values in `raw_value`).
fn request() -> ProcessingRequest {
    let header = |k: &str, v: &str| HeaderValue {
        key: k.to_owned(),
        value: String::new(),
        raw_value: v.as_bytes().to_vec(),
    };
    let headers = HeaderMap {
        headers: vec![
            header(":method", "POST"),
            header(":path", "/livecount.agent.v1.Agent/Converse"),
            header(":authority", "sessions"),
            header(":scheme", "http"),
            header("content-type", "application/grpc"),
            header("te", "trailers"),
            header("x-request-id", "1b4d6e5c-3f7a-4d2e-9c1a-8f0e2d4b6a7c"),
        ],
    };
    ProcessingRequest {
        request: Some(processing_request::Request::RequestHeaders(HttpHeaders {
            headers: Some(headers),
            end_of_stream: false,
        })),
        metadata_context: None,
    }
}

/// Nanoseconds per call, `CALLS` calls of `f`, each timed on its own.
fn timed(mut f: impl FnMut()) -> Vec<u64> {
    let mut out = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        f();
        out.push(t.elapsed().as_nanos() as u64);
    }
    out
}

fn quantiles(mut ns: Vec<u64>) -> String {
    ns.sort_unstable();
    let q = |p: f64| ns[((ns.len() - 1) as f64 * p) as usize];
    format!(
        "p50 {:>6} ns  p99 {:>6} ns  p99.9 {:>6} ns",
        q(0.5),
        q(0.99),
        q(0.999)
    )
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let message = request();
    println!(
        "clock alone (empty body): {}",
        quantiles(timed(|| black_box(())))
    );
    for n in [3, 16, 128] {
        let service = picker(&runtime, n);
        let one = timed(|| {
            black_box(service.answer(black_box(&message)).unwrap());
        });
        println!("{n:>3} backends, 1 thread:  {}", quantiles(one));
        let barrier = Arc::new(Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (service, barrier, message) =
                    (service.clone(), Arc::clone(&barrier), message.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    timed(|| {
                        black_box(service.answer(black_box(&message)).unwrap());
                    })
                })
            })
            .collect();
        let both: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        println!("{n:>3} backends, 2 threads: {}", quantiles(both));
        let stats = service.picker().stats();
        assert_eq!(stats.picks, 3 * CALLS as u64, "every call placed a session");
    }
}
