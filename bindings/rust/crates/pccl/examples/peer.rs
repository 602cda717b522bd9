//! One peer of a cross-language run (tests/crosslang): the same protocol as the C and Python
//! peers there and Go's `pcclpeer`, so peers in all four languages form one group.
//!
//!   peer --master HOST:PORT|URL --steps K --rank-value V [--world N] [--count C]
//!        [--diverge] [--group G] [--timeout-ms T] [--verbose]
//!
//! 1. Connects and updates the topology until its group has at least N peers (default 2).
//! 2. Step s = 0..K-1: updates the topology (retried on `UpdateTopologyFailed`); synchronizes
//!    the shared state (one int32 tensor named "state" of C elements, default 8, revision s,
//!    strategy ENFORCE_POPULAR); SUM-all-reduces (tag 0) v[j] = V * (s + 1) + j into a
//!    separate buffer; prints `step S world W sum X0,X1,...` (W: peers that took part);
//!    state[j] += sum[j] (wrapping).
//! 3. Synchronizes revision K and prints `hash H`: FNV-1a 64 (offset 0xcbf29ce484222325,
//!    prime 0x100000001b3) over the state's little-endian int32 bytes, 16 lowercase hex digits.
//!
//! The state starts as zeros; with --diverge as all V (the first synchronization repairs it).
//! --verbose logs `peer: revision R rx B tx B` to stderr after each synchronization.
//! Exit status: 0 success, 1 a pccl call failed, 2 bad usage or admission timeout.
use std::process::exit;
use std::time::{Duration, Instant};

use pccl::{
    CommOptions, Communicator, Error, ReduceOp, ReduceOptions, SharedState, SyncStrategy,
    TensorInfo,
};

struct Args {
    master: String,
    steps: u32,
    rank_value: i64,
    world: u32,
    count: usize,
    diverge: bool,
    group: u32,
    timeout_ms: u64,
    verbose: bool,
}

fn usage(msg: &str) -> ! {
    eprintln!("peer: {}", msg);
    eprintln!(
        "usage: peer --master HOST:PORT|URL --steps K --rank-value V [--world W] [--count C] \
         [--diverge] [--group G] [--timeout-ms T] [--verbose]"
    );
    exit(2)
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> T {
    v.parse()
        .unwrap_or_else(|_| usage(&format!("bad value for {}: {}", flag, v)))
}

fn parse_args() -> Args {
    let mut a = Args {
        master: String::new(),
        steps: 1,
        rank_value: 1,
        world: 2,
        count: 8,
        diverge: false,
        group: 0,
        timeout_ms: 30000,
        verbose: false,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let flag = argv[i].as_str();
        if flag == "--diverge" {
            a.diverge = true;
            i += 1;
            continue;
        }
        if flag == "--verbose" {
            a.verbose = true;
            i += 1;
            continue;
        }
        let v = match argv.get(i + 1) {
            Some(v) => v.as_str(),
            None => usage(&format!("{} needs a value", flag)),
        };
        match flag {
            "--master" => a.master = v.to_string(),
            "--steps" => a.steps = num(flag, v),
            "--rank-value" => a.rank_value = num(flag, v),
            "--world" => a.world = num(flag, v),
            "--count" => a.count = num(flag, v),
            "--group" => a.group = num(flag, v),
            "--timeout-ms" => a.timeout_ms = num(flag, v),
            _ => usage(&format!("unknown flag {}", flag)),
        }
        i += 2;
    }
    if a.master.is_empty() {
        usage("--master is required");
    }
    a
}

/// `update_topology`, retried while it fails with `UpdateTopologyFailed` (until `deadline`).
fn update_topology(comm: &mut Communicator, deadline: Instant) -> Result<(), Error> {
    loop {
        match comm.update_topology() {
            Ok(()) => return Ok(()),
            Err(Error::UpdateTopologyFailed) if Instant::now() < deadline => {}
            Err(e) => return Err(e),
        }
    }
}

/// Synchronizes the shared state (one int32 tensor "state", `revision`, ENFORCE_POPULAR).
fn sync(comm: &Communicator, state: &mut [i32], revision: u64, verbose: bool) -> Result<(), Error> {
    let mut st = SharedState::new(revision).with(TensorInfo::new("state", state)?);
    let info = comm.sync_shared_state(&mut st, SyncStrategy::EnforcePopular)?;
    if verbose {
        eprintln!(
            "peer: revision {} rx {} tx {}",
            st.revision, info.rx_bytes, info.tx_bytes
        );
    }
    Ok(())
}

/// FNV-1a 64 over the little-endian bytes of the int32 elements.
fn fnv1a64(v: &[i32]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for x in v {
        for b in x.to_le_bytes().iter() {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

fn run(a: &Args) -> Result<(), Error> {
    let timeout = Duration::from_millis(a.timeout_ms);
    let options = CommOptions {
        peer_group: a.group,
        timeout: Some(timeout),
        ..Default::default()
    };
    let mut comm = Communicator::with_options(&a.master, &options)?;
    comm.connect()?;
    let t0 = Instant::now();
    while comm.world_size()? < a.world {
        if t0.elapsed() > timeout {
            eprintln!("peer: world stays {} < {}", comm.world_size()?, a.world);
            exit(2);
        }
        match comm.update_topology() {
            Ok(()) | Err(Error::UpdateTopologyFailed) => {}
            Err(e) => return Err(e),
        }
    }
    let fill = if a.diverge { a.rank_value as i32 } else { 0 };
    let mut state = vec![fill; a.count];
    let mut sum = vec![0i32; a.count];
    for s in 0..a.steps {
        update_topology(&mut comm, Instant::now() + timeout)?;
        sync(&comm, &mut state, s as u64, a.verbose)?;
        let send: Vec<i32> = (0..a.count)
            .map(|j| {
                a.rank_value
                    .wrapping_mul(s as i64 + 1)
                    .wrapping_add(j as i64) as i32
            })
            .collect();
        let info = comm.all_reduce(&send, &mut sum, ReduceOptions::new(ReduceOp::Sum).tag(0))?;
        let csv: Vec<String> = sum.iter().map(|x| x.to_string()).collect();
        println!(
            "step {} world {} sum {}",
            s,
            info.local_world_size,
            csv.join(",")
        );
        for (x, y) in state.iter_mut().zip(sum.iter()) {
            *x = x.wrapping_add(*y);
        }
    }
    sync(&comm, &mut state, a.steps as u64, a.verbose)?;
    println!("hash {:016x}", fnv1a64(&state));
    Ok(())
}

fn main() {
    let a = parse_args();
    if let Err(e) = run(&a) {
        eprintln!("peer: {}", e);
        exit(1);
    }
}
