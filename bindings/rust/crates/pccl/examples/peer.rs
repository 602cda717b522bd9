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
//! 3. Runs three operations of the collective set on the epoch of the last completed call (each
//!    retried after an update of the topology while it fails with `UpdateTopologyFailed`), on
//!    int32 buffers, R the rank and W the world the operation reports:
//!    broadcast from rank 0 of C elements, the root's holding 1000 * V + j (the others' -1),
//!    printing `bcast rank R world W data D0,D1,...`; all-gather of V * 100 + j (C elements
//!    each), printing `allgather rank R world W data ...` (all W * C elements, block r from rank
//!    r); SUM-reduce-scatter of W * C elements V * (k + 1), printing
//!    `reducescatter rank R world W data ...` (this rank's block).
//! 4. Synchronizes revision K and prints `hash H`: FNV-1a 64 (offset 0xcbf29ce484222325,
//!    prime 0x100000001b3) over the state's little-endian int32 bytes, 16 lowercase hex digits.
//!
//! The state starts as zeros; with --diverge as all V (the first synchronization repairs it).
//! --verbose logs `peer: revision R rx B tx B` to stderr after each synchronization.
//! Exit status: 0 success, 1 a pccl call failed, 2 bad usage or admission timeout.
use std::process::exit;
use std::time::{Duration, Instant};

use pccl::{
    Attribute, CollectiveInfo, CollectiveOptions, CommOptions, Communicator, Error, ReduceOp,
    ReduceOptions, SharedState, SyncStrategy, TensorInfo,
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

fn print_data(op: &str, info: &CollectiveInfo, data: &[i32]) {
    let csv: Vec<String> = data.iter().map(|x| x.to_string()).collect();
    println!(
        "{} rank {} world {} data {}",
        op,
        info.rank,
        info.world_size,
        csv.join(",")
    );
}

/// One operation of step 3 (0 broadcast, 1 all-gather, 2 reduce-scatter), sized for the rank
/// and world of the last completed call; `UpdateTopologyFailed` (the membership changed before
/// every member started it) updates the topology and sizes and runs it again.
fn collective(
    comm: &mut Communicator,
    op: u32,
    v: i32,
    count: usize,
    timeout: Duration,
) -> Result<(), Error> {
    let deadline = Instant::now() + timeout;
    loop {
        let rank = comm.attribute(Attribute::Rank)?;
        let world = comm.world_size()? as usize;
        let opts = CollectiveOptions::default();
        let (name, result) = match op {
            0 => {
                let mut buf: Vec<i32> = (0..count)
                    .map(|j| {
                        if rank == 0 {
                            v.wrapping_mul(1000).wrapping_add(j as i32)
                        } else {
                            -1
                        }
                    })
                    .collect();
                ("bcast", comm.broadcast(&mut buf, 0, opts).map(|i| (i, buf)))
            }
            1 => {
                let send: Vec<i32> = (0..count)
                    .map(|j| v.wrapping_mul(100).wrapping_add(j as i32))
                    .collect();
                let mut recv = vec![0i32; world * count];
                (
                    "allgather",
                    comm.all_gather(&send, &mut recv, opts).map(|i| (i, recv)),
                )
            }
            _ => {
                let send: Vec<i32> = (0..world * count)
                    .map(|k| v.wrapping_mul(k as i32 + 1))
                    .collect();
                let mut recv = vec![0i32; count];
                let r = comm.reduce_scatter(&send, &mut recv, ReduceOp::Sum, opts);
                ("reducescatter", r.map(|i| (i, recv)))
            }
        };
        match result {
            Ok((info, data)) => {
                print_data(name, &info, &data);
                return Ok(());
            }
            Err(Error::UpdateTopologyFailed) if Instant::now() < deadline => {
                update_topology(comm, deadline)?
            }
            Err(e) => return Err(e),
        }
    }
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
    for op in 0..3 {
        collective(&mut comm, op, a.rank_value as i32, a.count, timeout)?;
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
