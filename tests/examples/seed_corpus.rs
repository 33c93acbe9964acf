//! Writes hand-made seed programs into every fuzz target's corpus, so fuzzing starts from
//! programs that already cross threads, respawn threads and race with sessions open.
//!
//! ```text
//! cargo run -p livecount-tests --example seed_corpus
//! ```

use livecount_support::check::{Op, Program};
use livecount_tests::{FUZZ_TARGETS, fuzz_dir};

fn seeds() -> Vec<(&'static str, Program)> {
    let end = |thread, session| Op::End { thread, session };
    let long: Vec<Op> = (0..48u8)
        .map(|i| match i % 6 {
            0 | 3 => Op::Start { thread: i % 4 },
            1 | 4 => end((i + 1) % 4, i),
            2 => Op::Burst {
                thread: i % 4,
                n: i % 5 + 1,
            },
            _ if i % 12 == 5 => Op::Race { rounds: 8 },
            _ if i % 24 == 11 => Op::EndAtExit {
                thread: i % 4,
                session: i,
            },
            _ => Op::Respawn { thread: i % 4 },
        })
        .collect();
    vec![
        (
            "cross-thread-end",
            Program::new(2, vec![Op::Start { thread: 0 }, end(1, 0)]),
        ),
        (
            "respawn-hands-over-cells",
            Program::new(
                3,
                vec![
                    Op::Burst { thread: 0, n: 4 },
                    Op::Respawn { thread: 0 },
                    Op::Start { thread: 0 },
                    end(2, 1),
                    Op::Respawn { thread: 2 },
                    end(2, 0),
                    Op::Read { thread: 1 },
                ],
            ),
        ),
        (
            "race-with-sessions-open",
            Program::new(
                4,
                vec![
                    Op::Burst { thread: 1, n: 3 },
                    Op::Race { rounds: 16 },
                    end(3, 2),
                    Op::Race { rounds: 32 },
                    Op::Read { thread: 0 },
                ],
            ),
        ),
        (
            "end-at-exit",
            Program::new(
                3,
                vec![
                    Op::Burst { thread: 0, n: 3 },
                    Op::Read { thread: 1 },
                    Op::EndAtExit {
                        thread: 1,
                        session: 0,
                    },
                    Op::EndAtExit {
                        thread: 0,
                        session: 1,
                    },
                    Op::Race { rounds: 8 },
                ],
            ),
        ),
        ("long-mixed", Program::new(4, long)),
    ]
}

fn main() -> std::io::Result<()> {
    for (target, _) in FUZZ_TARGETS {
        let dir = fuzz_dir().join("corpus").join(target);
        std::fs::create_dir_all(&dir)?;
        for (name, program) in seeds() {
            std::fs::write(dir.join(format!("seed-{name}")), program.encode())?;
        }
    }
    println!(
        "wrote {} seeds into each of {} corpora",
        seeds().len(),
        FUZZ_TARGETS.len()
    );
    Ok(())
}
