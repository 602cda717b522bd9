//! Helpers of the integration tests: a master in this process, peers on threads, time bounds.
#![allow(dead_code)]
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use pccl::{Attribute, CommOptions, Communicator, Error, Master};

/// Runs `f` on a thread and fails the test when it does not finish within `secs` seconds
/// (a hung peer cannot hang the test run) or when it panics.
pub fn bounded<F: FnOnce() + Send + 'static>(secs: u64, f: F) {
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test exceeded its {} s bound", secs),
    }
}

/// A running master on a free loopback port, and the address peers use.
pub fn master() -> (Master, String) {
    let m = Master::new("tcp://127.0.0.1:0").expect("create master");
    m.run().expect("run master");
    assert!(m.port() != 0);
    let addr = format!("127.0.0.1:{}", m.port());
    (m, addr)
}

pub fn options(group: u32) -> CommOptions {
    CommOptions {
        peer_group: group,
        timeout: Some(Duration::from_secs(20)),
        ..Default::default()
    }
}

/// Connects a communicator (blocks until admitted).
pub fn connect(addr: &str, group: u32) -> Communicator {
    let mut c = Communicator::with_options(addr, &options(group)).expect("create communicator");
    c.connect().expect("connect");
    c
}

/// Updates the topology until `attr` reaches `n` (within 15 s).
pub fn admit(c: &mut Communicator, attr: Attribute, n: i32) {
    let t0 = Instant::now();
    loop {
        if c.attribute(attr).expect("attribute") >= n {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "world stays below {}",
            n
        );
        match c.update_topology() {
            Ok(()) | Err(Error::UpdateTopologyFailed) => {}
            Err(e) => panic!("update topology: {}", e),
        }
    }
}

/// Runs `n` peers on threads, each with its own connected communicator in a world of `n`,
/// started together (a barrier), and returns what each returned, in peer order.
pub fn run_peers<R, F>(addr: &str, n: usize, f: F) -> Vec<R>
where
    R: Send + 'static,
    F: Fn(usize, Communicator, &Barrier) -> R + Send + Sync + 'static,
{
    let f = Arc::new(f);
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let f = f.clone();
            let barrier = barrier.clone();
            let addr = addr.to_string();
            thread::spawn(move || {
                let mut c = connect(&addr, 0);
                admit(&mut c, Attribute::CURRENT_WORLD_SIZE, n as i32);
                barrier.wait();
                f(i, c, &barrier)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("peer panicked"))
        .collect()
}

/// The value peer `i` contributes to element `j` of step `k` (as tests/integration).
pub fn contribution(i: usize, k: usize, j: usize) -> i32 {
    ((i + 1) * (k + 1) + j) as i32
}

/// The exact sum over `n` peers.
pub fn expected_sum(n: usize, k: usize, j: usize) -> i32 {
    (0..n).map(|i| contribution(i, k, j)).sum()
}
