//! A complete pccl program: a master and three peers in one process (one thread each), an
//! exact all-reduce, an asynchronous one, and a shared state that one peer gets wrong and
//! every peer ends up holding bit-identically.
//!
//!   cargo run --example hello
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use pccl::{
    CommOptions, Communicator, Error, Master, ReduceOp, ReduceOptions, SharedState, SyncStrategy,
    TensorInfo,
};

const PEERS: usize = 3;

fn peer(rank: usize, address: String, start: Arc<Barrier>) -> Result<u64, Error> {
    let options = CommOptions {
        timeout: Some(Duration::from_secs(20)),
        ..Default::default()
    };
    let mut comm = Communicator::with_options(&address, &options)?;
    comm.connect()?; // returns once the peers already in the run admit this one
    while comm.world_size()? < PEERS as u32 {
        match comm.update_topology() {
            // A member dropped during the vote: just vote again.
            Ok(()) | Err(Error::UpdateTopologyFailed) => {}
            Err(e) => return Err(e),
        }
    }
    start.wait();

    // Blocking all-reduce: peer r contributes r + 1 everywhere; 1 + 2 + 3 = 6.
    let grads = vec![(rank + 1) as i32; 8];
    let mut sum = vec![0i32; 8];
    let info = comm.all_reduce(&grads, &mut sum, ReduceOp::Sum)?;
    assert_eq!(sum, vec![6; 8]);
    println!(
        "peer {}: sum {:?} over {} peers",
        rank,
        &sum[..3],
        info.local_world_size
    );

    // Asynchronous all-reduce: the buffers stay borrowed until the scope ends.
    let x = vec![rank as f32 * 0.5; 4];
    let mut mean = vec![0f32; 4];
    comm.async_scope(|s| {
        let op = s.all_reduce(&x, &mut mean, ReduceOptions::new(ReduceOp::Avg).tag(1))?;
        // ... other work here; `mean` cannot be touched until the scope ends ...
        op.wait()
    })?;
    assert_eq!(mean, vec![0.5; 4]);

    // Shared state: the last peer holds different weights and receives the popular ones.
    let mut weights: Vec<f32> = (0..16).map(|j| j as f32).collect();
    if rank == PEERS - 1 {
        weights[3] = -1.0;
    }
    let mut step = vec![7u64];
    let mut state = SharedState::new(0)
        .with(TensorInfo::new("weights", &mut weights)?)
        .with(TensorInfo::new("step", &mut step)?);
    let sync = comm.sync_shared_state(&mut state, SyncStrategy::EnforcePopular)?;
    let fingerprint = state.fnv1a64();
    println!(
        "peer {}: revision {} received {} bytes",
        rank, state.revision, sync.rx_bytes
    );
    drop(state);
    assert_eq!(weights[3], 3.0);
    Ok(fingerprint)
}

fn main() {
    let master = Master::new("tcp://127.0.0.1:0").expect("master");
    master.run().expect("run master");
    let address = format!("127.0.0.1:{}", master.port());
    let start = Arc::new(Barrier::new(PEERS));
    let peers: Vec<_> = (0..PEERS)
        .map(|rank| {
            let (address, start) = (address.clone(), start.clone());
            thread::spawn(move || peer(rank, address, start))
        })
        .collect();
    let prints: Vec<u64> = peers
        .into_iter()
        .map(|p| p.join().unwrap().expect("peer"))
        .collect();
    assert!(prints.iter().all(|p| *p == prints[0]));
    println!("all {} peers hold shared state {:016x}", PEERS, prints[0]);
    master.interrupt().expect("interrupt");
    master.await_termination().expect("await");
}
