//! `livecount-picker`: measures every counter on this machine for the workload you describe,
//! prints a ranked table and a recommendation, and writes `results/<machine-label>/`.
//!
//!     cargo run --release -- --help

use livecount_picker::{CountingAlloc, Options};

// Counts heap bytes for the memory workload only; off (one Relaxed load) otherwise.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn main() {
    // `--help` prints and exits 0; a bad value prints an error naming its flag and exits 2.
    let opts = Options::parse(std::env::args().skip(1)).unwrap_or_else(|e| e.exit());
    match livecount_picker::run(&opts) {
        Ok(out) => print!("{out}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
