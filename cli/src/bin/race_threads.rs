//! A proof program that passes on a GPU by luck of timing: two host threads, each with its own
//! clone of one client (so its own stream), share one buffer; the writer writes it, the reader
//! reads it, and nothing orders the two. The reader sleeps first, so on a real device the
//! write has almost always been issued by then, and the read matches the host's values; in
//! the other order it reads the zeros the buffer was created with. `--fixed` orders them:
//! the writer flushes its stream after the write and then signals the reader, which waits for
//! the signal instead of sleeping.
//!
//! `LOCKSTEP_RECORD=race.rec race-threads` records it; `lockstep explore --recording race.rec`
//! finds the race (a read that depends on the interleaving). Flags: `proof/mod.rs`.

use std::process::ExitCode;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use lockstep::{Bytes, ComputeClient, Device};

mod proof;

/// Elements of the shared buffer.
const ELEMS: u32 = 1024;

/// How long the buggy reader waits, hoping the writer is done: long on a host, yet no
/// ordering at all.
const HOPEFUL_WAIT: Duration = Duration::from_millis(200);

struct RaceThreads;

impl proof::Program for RaceThreads {
    const NAME: &'static str = "race-threads";

    fn run<D: Device>(client: ComputeClient<D>, fixed: bool) -> Result<bool, lockstep::Error> {
        let expected: Vec<u32> = (0..ELEMS).map(|i| 3 * i + 1).collect();
        let shared = client.create(Bytes::from_elems(&vec![0u32; ELEMS as usize]))?;
        let (written, signalled) = mpsc::channel::<()>();
        let writer = {
            let (client, shared, data) = (client.clone(), shared.clone(), expected.clone());
            std::thread::spawn(move || -> Result<(), lockstep::Error> {
                client.write(&shared, Bytes::from_elems(&data))?;
                if fixed {
                    // The fix: the write is on the device's books before the reader hears of it.
                    client.flush()?;
                    let _ = written.send(());
                }
                Ok(())
            })
        };
        let reader = std::thread::spawn(move || -> Result<Vec<u32>, lockstep::Error> {
            if fixed {
                let _ = signalled.recv();
            } else {
                std::thread::sleep(HOPEFUL_WAIT);
            }
            Ok(client.read_one(shared)?.to_elems::<u32>())
        });
        joined(writer)?;
        Ok(joined(reader)? == expected)
    }
}

/// What `thread` returned; its panic, passed on.
fn joined<T>(thread: JoinHandle<Result<T, lockstep::Error>>) -> Result<T, lockstep::Error> {
    thread
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

fn main() -> ExitCode {
    proof::main::<RaceThreads>()
}
