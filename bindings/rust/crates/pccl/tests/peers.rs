//! A master and several peers (threads, one communicator each) in this process: exact
//! all-reduces (i32, f32, f64, multiple), asynchronous all-reduces with timeouts, topology.
mod common;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use pccl::{
    Attribute, Communicator, DataType, Error, Master, QuantizationAlgorithm, ReduceOp,
    ReduceOptions,
};

const COUNT: usize = 1000;

#[test]
fn allreduce_i32_exact_blocking_in_place_async_and_multiple() {
    bounded(90, || {
        let (_m, addr) = master();
        let n = 3;
        let results = run_peers(&addr, n, move |i, c, _| {
            let mut all = Vec::new();
            for k in 0..6usize {
                let send: Vec<i32> = (0..COUNT).map(|j| contribution(i, k, j)).collect();
                let mut out = vec![0i32; COUNT];
                let opts = ReduceOptions::new(ReduceOp::Sum).tag(k as u64);
                let info = match k % 3 {
                    0 => c.all_reduce(&send, &mut out, opts).unwrap(),
                    1 => {
                        out.copy_from_slice(&send);
                        c.all_reduce_in_place(&mut out, opts).unwrap()
                    }
                    _ => c
                        .async_scope(|s| s.all_reduce(&send, &mut out, opts)?.wait())
                        .unwrap(),
                };
                assert_eq!(info.local_world_size, n as u32);
                assert!(info.tx_bytes > 0 && info.rx_bytes > 0);
                for j in 0..COUNT {
                    assert_eq!(
                        out[j],
                        expected_sum(n, k, j),
                        "peer {} step {} element {}",
                        i,
                        k,
                        j
                    );
                }
                all.extend_from_slice(&out);
            }
            // Three buffers at once, at most two in flight, tags 100..102.
            let mut bufs: Vec<Vec<i32>> = (0..3)
                .map(|o| (0..COUNT).map(|j| contribution(i, 100 + o, j)).collect())
                .collect();
            {
                let mut views: Vec<&mut [i32]> =
                    bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
                let info = c
                    .all_reduce_multiple(&mut views, ReduceOptions::new(ReduceOp::Sum).tag(100), 2)
                    .unwrap();
                assert!(info.tx_bytes > 0);
            }
            for (o, b) in bufs.iter().enumerate() {
                for j in 0..COUNT {
                    assert_eq!(b[j], expected_sum(n, 100 + o, j));
                }
            }
            all
        });
        assert!(results.iter().all(|r| r == &results[0]));
    });
}

#[test]
fn allreduce_floats_exact_and_bit_identical() {
    bounded(90, || {
        let (_m, addr) = master();
        let n = 3;
        let results = run_peers(&addr, n, move |i, c, _| {
            // Quarters add exactly in binary32.
            let send: Vec<f32> = (0..COUNT)
                .map(|j| (i + 1) as f32 * 0.25 + j as f32)
                .collect();
            let mut sum = vec![0f32; COUNT];
            c.all_reduce(&send, &mut sum, ReduceOp::Sum).unwrap();
            for j in 0..COUNT {
                assert_eq!(sum[j], 1.5 + 3.0 * j as f32, "element {}", j);
            }
            let mut avg = vec![0f32; COUNT];
            c.all_reduce(&send, &mut avg, ReduceOptions::new(ReduceOp::Avg).tag(1))
                .unwrap();
            for j in 0..COUNT {
                assert_eq!(avg[j], 0.5 + j as f32);
            }
            let d: Vec<f64> = (0..COUNT).map(|j| -((i * 1000 + j) as f64)).collect();
            let mut max = vec![0f64; COUNT];
            c.all_reduce(&d, &mut max, ReduceOptions::new(ReduceOp::Max).tag(2))
                .unwrap();
            for j in 0..COUNT {
                assert_eq!(max[j], -(j as f64));
            }
            // Quantized on the wire: not exact, but the same bits on every peer.
            let g: Vec<f32> = (0..COUNT)
                .map(|j| ((i * 7 + j) % 13) as f32 * 0.1)
                .collect();
            let mut q = vec![0f32; COUNT];
            let opts = ReduceOptions::new(ReduceOp::Sum)
                .tag(3)
                .quantize(DataType::Uint8, QuantizationAlgorithm::MinMax);
            c.all_reduce(&g, &mut q, opts).unwrap();
            for j in 0..COUNT {
                let exact: f32 = (0..n).map(|p| ((p * 7 + j) % 13) as f32 * 0.1).sum();
                assert!(
                    (q[j] - exact).abs() < 0.1,
                    "quantized {} vs {}",
                    q[j],
                    exact
                );
            }
            let bits: Vec<u32> = sum
                .iter()
                .chain(avg.iter())
                .chain(q.iter())
                .map(|x| x.to_bits())
                .collect();
            bits
        });
        assert!(
            results.iter().all(|r| r == &results[0]),
            "peers differ bitwise"
        );
    });
}

/// A peer's operand for the bitwise tests: varied bits across the whole 64-bit word.
fn bits(i: usize, j: usize) -> u64 {
    let z = (j as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((i as u64 + 1) << (7 * i));
    z ^ (z >> 29)
}

#[test]
fn allreduce_bitwise_ops_exact_floats_and_premul_sum_refused() {
    bounded(90, || {
        let (_m, addr) = master();
        let n = 3;
        let results = run_peers(&addr, n, move |i, c, _| {
            let a: Vec<u64> = (0..COUNT).map(|j| bits(i, j)).collect();
            let mut and = vec![0u64; COUNT];
            c.all_reduce(&a, &mut and, ReduceOp::Band).unwrap();
            let b: Vec<i32> = (0..COUNT).map(|j| bits(i, j) as i32).collect();
            let mut or = b.clone();
            c.all_reduce_in_place(&mut or, ReduceOptions::new(ReduceOp::Bor).tag(1))
                .unwrap();
            let x: Vec<u8> = (0..COUNT).map(|j| bits(i, j) as u8).collect();
            let mut xor = vec![0u8; COUNT];
            c.all_reduce(&x, &mut xor, ReduceOptions::new(ReduceOp::Bxor).tag(2))
                .unwrap();
            for j in 0..COUNT {
                let (x0, x1, x2) = (bits(0, j), bits(1, j), bits(2, j));
                assert_eq!(and[j], x0 & x1 & x2, "band element {}", j);
                assert_eq!(or[j], (x0 | x1 | x2) as i32, "bor element {}", j);
                assert_eq!(xor[j], (x0 ^ x1 ^ x2) as u8, "bxor element {}", j);
            }
            // A bitwise op on a float type: refused by the call.
            let f = vec![1f32; 4];
            let mut g = vec![0f32; 4];
            assert_eq!(
                c.all_reduce(&f, &mut g, ReduceOptions::new(ReduceOp::Bxor).tag(3))
                    .err(),
                Some(Error::InvalidArgument)
            );
            // PremulSum has no place for its factor in pcclAllReduce: libpccl refuses it.
            assert_eq!(ReduceOp::PremulSum.to_raw(), 8);
            assert_eq!(
                c.all_reduce(&f, &mut g, ReduceOptions::new(ReduceOp::PremulSum).tag(4))
                    .err(),
                Some(Error::InvalidArgument)
            );
            and
        });
        assert!(results.iter().all(|r| r == &results[0]));
    });
}

#[test]
fn async_wait_timeout_concurrent_ops_and_forgotten_handles() {
    bounded(90, || {
        let (_m, addr) = master();
        let n = 2;
        run_peers(&addr, n, move |i, c, barrier| {
            let send: Vec<i32> = (0..COUNT).map(|j| contribution(i, 0, j)).collect();
            let mut out = vec![0i32; COUNT];
            if i == 0 {
                c.async_scope(|s| {
                    let mut op =
                        s.all_reduce(&send, &mut out, ReduceOptions::new(ReduceOp::Sum).tag(9))?;
                    assert_eq!(op.tag(), 9);
                    // The other peer starts its part 800 ms later: still in flight.
                    let t0 = Instant::now();
                    assert_eq!(op.wait_timeout(Duration::from_millis(100))?, None);
                    assert!(t0.elapsed() >= Duration::from_millis(90));
                    barrier.wait();
                    let info = op.wait_timeout(Duration::from_secs(20))?.expect("finished");
                    assert_eq!(info.local_world_size, 2);
                    // A verdict, once taken, is repeated.
                    assert_eq!(op.wait_timeout(Duration::from_millis(1))?, Some(info));
                    op.wait()
                })
                .unwrap();
            } else {
                barrier.wait();
                thread::sleep(Duration::from_millis(800));
                c.all_reduce(&send, &mut out, ReduceOptions::new(ReduceOp::Sum).tag(9))
                    .unwrap();
            }
            for j in 0..COUNT {
                assert_eq!(out[j], expected_sum(n, 0, j));
            }

            // Two operations in flight at once; results read inside the scope.
            let a: Vec<i32> = (0..COUNT).map(|j| contribution(i, 1, j)).collect();
            let b: Vec<i32> = (0..COUNT).map(|j| contribution(i, 2, j)).collect();
            let (mut ra, mut rb) = (vec![0i32; COUNT], vec![0i32; COUNT]);
            let mut dup = vec![0i32; 1];
            c.async_scope(|s| {
                let op1 = s.all_reduce(&a, &mut ra, ReduceOptions::new(ReduceOp::Sum).tag(1))?;
                let op2 = s.all_reduce(&b, &mut rb, ReduceOptions::new(ReduceOp::Sum).tag(2))?;
                // The same tag twice in flight is refused by the library.
                assert_eq!(
                    s.all_reduce_in_place(&mut dup, ReduceOptions::new(ReduceOp::Sum).tag(1))
                        .err(),
                    Some(Error::InvalidArgument)
                );
                let (r2, buf2) = op2.wait_with_buffer();
                r2?;
                assert_eq!(buf2[5], expected_sum(n, 2, 5));
                op1.wait().map(|_| ())
            })
            .unwrap();
            for j in 0..COUNT {
                assert_eq!(ra[j], expected_sum(n, 1, j));
                assert_eq!(rb[j], expected_sum(n, 2, j));
            }

            // A leaked handle: the scope itself awaits the operation before the borrow ends.
            let mut rc = vec![0i32; COUNT];
            c.async_scope(|s| {
                let op = s.all_reduce(&a, &mut rc, ReduceOptions::new(ReduceOp::Sum).tag(3))?;
                std::mem::forget(op);
                Ok::<(), Error>(())
            })
            .unwrap();
            for j in 0..COUNT {
                assert_eq!(rc[j], expected_sum(n, 1, j));
            }
            // The tag is free again: the scope collected the verdict.
            let mut again = vec![0i32; COUNT];
            c.all_reduce(&a, &mut again, ReduceOptions::new(ReduceOp::Sum).tag(3))
                .unwrap();
            assert_eq!(again, rc);
        });
    });
}

#[test]
fn pending_peers_are_admitted_and_topology_optimized() {
    bounded(90, || {
        let (_m, addr) = master();
        let addr2 = addr.clone();
        // Two peers run; a third arrives later and must be seen pending, then admitted.
        let late = thread::spawn(move || {
            thread::sleep(Duration::from_millis(300));
            let c = connect(&addr2, 0);
            c
        });
        let late = Arc::new(std::sync::Mutex::new(Some(late)));
        let results = run_peers(&addr, 2, move |i, mut c, barrier| {
            let epoch2 = c.attribute(Attribute::Epoch).unwrap(); // the ring of two
            let t0 = Instant::now();
            while !c.are_peers_pending().unwrap() {
                assert!(
                    t0.elapsed() < Duration::from_secs(15),
                    "no pending peer seen"
                );
                thread::sleep(Duration::from_millis(20));
            }
            barrier.wait();
            let mut third = None;
            if i == 0 {
                // Admission: the accepted peers update the topology; the late one's connect
                // returns once admitted.
                let h = late.lock().unwrap().take().unwrap();
                admit(&mut c, Attribute::CURRENT_WORLD_SIZE, 3);
                third = Some(h.join().unwrap());
            } else {
                admit(&mut c, Attribute::CURRENT_WORLD_SIZE, 3);
            }
            (epoch2, c, third)
        });
        // Three peers now: optimize the topology together, then an exact all-reduce.
        let mut comms: Vec<Communicator> = Vec::new();
        let mut epoch2 = Vec::new();
        for (e, c, third) in results {
            epoch2.push(e);
            comms.push(c);
            if let Some(t) = third {
                comms.push(t);
            }
        }
        assert_eq!(comms.len(), 3);
        let hs: Vec<_> = comms
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                thread::spawn(move || {
                    assert_eq!(c.world_size().unwrap(), 3);
                    let mut tries = 0;
                    loop {
                        match c.optimize_topology() {
                            Ok(()) => break,
                            Err(Error::TopologyOptimizationFailed) if tries < 20 => tries += 1,
                            Err(e) => panic!("optimize: {}", e),
                        }
                    }
                    assert_eq!(c.world_size().unwrap(), 3);
                    let send: Vec<i32> = (0..COUNT).map(|j| contribution(i, 4, j)).collect();
                    let mut out = vec![0i32; COUNT];
                    let copied_before = c.copied_bytes().unwrap();
                    let info = c.all_reduce(&send, &mut out, ReduceOp::Sum).unwrap();
                    assert_eq!(info.local_world_size, 3);
                    for j in 0..COUNT {
                        assert_eq!(out[j], expected_sum(3, 4, j));
                    }
                    // 4,000 bytes are relayed by the master (docs/protocol.md §6.8.2, its
                    // default bound 32 KiB): the input copied into the initiate and the result
                    // out of the answer, 2 x 4,000 bytes (docs/benchmarks.md, copied_bytes).
                    let copied = c.copied_bytes().unwrap() - copied_before;
                    assert_eq!(copied, 2 * 4 * COUNT as u64);
                    assert_eq!(info.tx_bytes, 4 * COUNT as u64);
                    assert_eq!(info.rx_bytes, 4 * COUNT as u64);
                    (
                        c.attribute(Attribute::Rank).unwrap(),
                        c.attribute(Attribute::Epoch).unwrap(),
                    )
                })
            })
            .collect();
        let got: Vec<(i32, i32)> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        // Ranks: one position each in the ring of three; one epoch, newer than the ring of two.
        let mut ranks: Vec<i32> = got.iter().map(|g| g.0).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, vec![0, 1, 2], "ranks {:?}", got);
        assert!(
            got.iter().all(|g| g.1 == got[0].1),
            "epochs differ: {:?}",
            got
        );
        assert!(
            epoch2[0] > 0 && epoch2.iter().all(|&e| e == epoch2[0]) && got[0].1 > epoch2[0],
            "epochs {:?} after the admission, {:?} before",
            got,
            epoch2
        );
    });
}

#[test]
fn attributes_across_peer_groups() {
    bounded(60, || {
        let (_m, addr) = master();
        let groups = [0u32, 0, 1];
        let hs: Vec<_> = groups
            .iter()
            .enumerate()
            .map(|(i, &g)| {
                let addr = addr.clone();
                thread::spawn(move || {
                    thread::sleep(Duration::from_millis(50 * i as u64));
                    let mut c = connect(&addr, g);
                    admit(&mut c, Attribute::GlobalWorldSize, 3);
                    (
                        g,
                        c.attribute(Attribute::GlobalWorldSize).unwrap(),
                        c.attribute(Attribute::PeerGroupWorldSize).unwrap(),
                        c.attribute(Attribute::CURRENT_WORLD_SIZE).unwrap(),
                        c.attribute(Attribute::NumDistinctPeerGroups).unwrap(),
                        c.attribute(Attribute::LargestPeerGroupWorldSize).unwrap(),
                        c,
                    )
                })
            })
            .collect();
        let rs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        for (g, global, group, current, distinct, largest, _) in &rs {
            assert_eq!(*global, 3);
            assert_eq!(*group, if *g == 0 { 2 } else { 1 });
            assert_eq!(*current, *group);
            assert_eq!(*distinct, 2);
            assert_eq!(*largest, 2);
        }
    });
}

#[test]
fn master_interrupt_from_another_thread_ends_the_run() {
    bounded(60, || {
        let m = Arc::new(Master::new("tcp://127.0.0.1:0").unwrap());
        m.run().unwrap();
        assert_eq!(m.run().err(), Some(Error::InvalidUsage), "second run");
        let addr = format!("127.0.0.1:{}", m.port());
        let mut c = connect(&addr, 0);
        assert_eq!(c.world_size().unwrap(), 1);
        let waiter = {
            let m = m.clone();
            thread::spawn(move || m.await_termination())
        };
        thread::sleep(Duration::from_millis(100));
        m.interrupt().unwrap();
        waiter.join().unwrap().unwrap();
        // The master is gone: the next collective with it fails.
        let t0 = Instant::now();
        assert_eq!(
            c.update_topology().err(),
            Some(Error::MasterConnectionFailed)
        );
        assert!(t0.elapsed() < Duration::from_secs(10));
    });
}

fn _static_thread_rules() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    send::<Communicator>();
    send::<Master>();
    sync::<Master>();
    send::<pccl::TensorInfo<'static>>();
}

#[test]
fn survivors_continue_on_the_shrunken_ring_after_a_peer_leaves() {
    bounded(90, || {
        let (_m, addr) = master();
        let n = 3;
        let results = run_peers(&addr, n, move |i, c, barrier| {
            if i == n - 1 {
                barrier.wait();
                drop(c); // leaves the run
                return (0, 0);
            }
            barrier.wait();
            let send: Vec<i32> = (0..COUNT).map(|j| contribution(i, 0, j)).collect();
            let mut out = vec![0i32; COUNT];
            // A leave between operations shrinks the ring before the next one; a loss during
            // one fails it with a retryable error.
            let mut lost = 0;
            let t0 = Instant::now();
            loop {
                assert!(
                    t0.elapsed() < Duration::from_secs(30),
                    "no all-reduce on the shrunken ring"
                );
                match c.all_reduce(&send, &mut out, ReduceOp::Sum) {
                    Ok(info) => {
                        // Only peers 0 and 1 can have taken part.
                        assert_eq!(info.local_world_size, 2);
                        for j in 0..COUNT {
                            assert_eq!(out[j], expected_sum(2, 0, j));
                        }
                        break;
                    }
                    Err(e) if e.is_retryable() => {
                        // The failed operation is over: retry it, same tag.
                        lost += 1;
                        thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) => panic!("peer {}: {}", i, e),
                }
            }
            (lost, c.world_size().unwrap())
        });
        assert_eq!(results[0].1, 2);
        assert_eq!(results[1].1, 2);
    });
}

#[test]
fn master_from_a_socket_address_and_peers_by_url() {
    bounded(60, || {
        // PCCL 1.0's pcclCreateMaster(address): a port that was free a moment ago.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let m = Master::from_address(format!("127.0.0.1:{}", port).parse().unwrap()).unwrap();
        assert_eq!(m.port(), port);
        m.run().unwrap();
        let url = format!("tcp://127.0.0.1:{}", port);
        let sums = run_peers(&url, 2, |i, c, _| {
            let mut v = vec![(i as u64 + 1) << 40; 3];
            c.all_reduce_in_place(&mut v, ReduceOp::Sum).unwrap();
            v
        });
        assert_eq!(sums[0], vec![3u64 << 40; 3]);
        assert_eq!(sums[0], sums[1]);
    });
}
