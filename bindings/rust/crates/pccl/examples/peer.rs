//! One peer of a cross-language run: joins a master, all-reduces K steps of integers, then
//! synchronizes a shared state and prints its fingerprint.
//!
//!   peer --master HOST:PORT|URL --steps K --rank-value V [--world W] [--count C]
//!        [--diverge] [--group G] [--timeout-ms T]
//!
//! 1. Connects and updates the topology until its group has at least W peers (default 2).
//! 2. Step s = 0..K-1: element j of its buffer (int32, C elements, default 4) is
//!    V * (s + 1) + j; an in-order SUM all-reduce with tag s; prints
//!    `step S world W sum X0,X1,...` (W: peers that took part).
//! 3. Shared state: one int32 tensor named "state" holding the last step's sum (zeros when
//!    K = 0), element 0 plus 1 with --diverge, revision 0, strategy ENFORCE_POPULAR. Prints
//!    `revision R rx B` and `hash H`: FNV-1a 64 (offset 0xcbf29ce484222325, prime
//!    0x100000001b3) over the tensor's bytes (little-endian int32), 16 lowercase hex digits.
//!
//! Exit status: 0 success, 1 a pccl call failed, 2 bad usage.
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
}

fn usage(msg: &str) -> ! {
    eprintln!("peer: {}", msg);
    eprintln!(
        "usage: peer --master HOST:PORT|URL --steps K --rank-value V [--world W] [--count C] \
         [--diverge] [--group G] [--timeout-ms T]"
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
        count: 4,
        diverge: false,
        group: 0,
        timeout_ms: 30000,
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

fn run(a: &Args) -> Result<(), Error> {
    let options = CommOptions {
        peer_group: a.group,
        timeout: Some(Duration::from_millis(a.timeout_ms)),
        ..Default::default()
    };
    let mut comm = Communicator::with_options(&a.master, &options)?;
    comm.connect()?;
    let t0 = Instant::now();
    while comm.world_size()? < a.world {
        if t0.elapsed() > Duration::from_millis(a.timeout_ms) {
            eprintln!("peer: world stays {} < {}", comm.world_size()?, a.world);
            return Err(Error::Timeout);
        }
        match comm.update_topology() {
            Ok(()) | Err(Error::UpdateTopologyFailed) => {}
            Err(e) => return Err(e),
        }
    }
    let mut sum = vec![0i32; a.count];
    for s in 0..a.steps {
        let send: Vec<i32> = (0..a.count)
            .map(|j| (a.rank_value * (s as i64 + 1) + j as i64) as i32)
            .collect();
        let info = comm.all_reduce(
            &send,
            &mut sum,
            ReduceOptions::new(ReduceOp::Sum).tag(s as u64),
        )?;
        let csv: Vec<String> = sum.iter().map(|x| x.to_string()).collect();
        println!(
            "step {} world {} sum {}",
            s,
            info.local_world_size,
            csv.join(",")
        );
    }
    let mut state = sum.clone();
    if a.diverge && !state.is_empty() {
        state[0] = state[0].wrapping_add(1);
    }
    let mut st = SharedState::new(0).with(TensorInfo::new("state", &mut state)?);
    let info = comm.sync_shared_state(&mut st, SyncStrategy::EnforcePopular)?;
    println!("revision {} rx {}", st.revision, info.rx_bytes);
    println!("hash {:016x}", st.fnv1a64());
    Ok(())
}

fn main() {
    let a = parse_args();
    if let Err(e) = run(&a) {
        eprintln!("peer: {}", e);
        exit(1);
    }
}
