//! Shared-state synchronization (a divergent peer ends bit-identical) and error values.
mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::*;
use pccl::{
    sys, CommOptions, Communicator, DataType, Error, Master, MasterOptions, QuantizationAlgorithm,
    ReduceOp, ReduceOptions, SharedState, SyncStrategy, TensorInfo, BF16, F16,
};

const N: usize = 256;

/// The bytes of tensor `k` of a state.
fn a_copy(st: &SharedState<'_>, k: usize) -> Vec<u8> {
    st.tensors()[k].bytes().to_vec()
}

fn fill(a: &mut [i32], b: &mut [f32], divergent: bool) {
    for j in 0..a.len() {
        a[j] = j as i32;
        b[j] = if divergent { -1.0 } else { j as f32 * 0.5 };
    }
}

#[test]
fn shared_state_divergent_peer_receives_the_popular_content() {
    bounded(90, || {
        let (_m, addr) = master();
        let n = 3;
        let results = run_peers(&addr, n, move |i, c, _| {
            let divergent = i == n - 1;
            let mut a = vec![0i32; N];
            let mut b = vec![0f32; N];
            let mut h = vec![F16(0); 8];
            fill(&mut a, &mut b, divergent);
            for (j, x) in h.iter_mut().enumerate() {
                *x = F16(0x3c00 + j as u16); // 1.0 and the next binary16 values
            }
            let mut noise = vec![i as u64; 4]; // differs between peers, and may
            let (rx0, rx1, rev, hash, bytes);
            {
                let mut st = SharedState::new(0)
                    .with(TensorInfo::new("a", &mut a).unwrap())
                    .with(TensorInfo::new("b", &mut b).unwrap())
                    .with(TensorInfo::new("h", &mut h).unwrap())
                    .with(
                        TensorInfo::new("noise", &mut noise)
                            .unwrap()
                            .allow_content_inequality(true),
                    );
                assert_eq!(st.tensors()[1].datatype(), DataType::Float);
                assert_eq!(st.tensors()[2].datatype(), DataType::Float16);
                let info = c
                    .sync_shared_state(&mut st, SyncStrategy::EnforcePopular)
                    .unwrap();
                rx0 = info.rx_bytes;
                assert_eq!(st.revision, 0);
                st.revision += 1;
                let info = c
                    .sync_shared_state(&mut st, SyncStrategy::EnforcePopular)
                    .unwrap();
                rx1 = info.rx_bytes;
                rev = st.revision;
                // "noise" may differ: fingerprint the tensors that must agree.
                let mut agreed = SharedState::new(0);
                let (mut a2, mut b2, mut h2) = (a_copy(&st, 0), a_copy(&st, 1), a_copy(&st, 2));
                agreed.push(TensorInfo::new("a", &mut a2).unwrap());
                agreed.push(TensorInfo::new("b", &mut b2).unwrap());
                agreed.push(TensorInfo::new("h", &mut h2).unwrap());
                hash = agreed.fnv1a64();
                bytes = st.tensors()[..3]
                    .iter()
                    .flat_map(|t| t.bytes().to_vec())
                    .collect::<Vec<u8>>();
            }
            for j in 0..N {
                assert_eq!(a[j], j as i32);
                assert_eq!(b[j], j as f32 * 0.5, "peer {} b[{}]", i, j);
            }
            assert_eq!(
                noise,
                vec![i as u64; 4],
                "allow_content_inequality keeps local content"
            );
            (divergent, rx0, rx1, rev, bytes, hash)
        });
        for (divergent, rx0, rx1, rev, _, _) in &results {
            // Exactly the differing tensor travels: N floats.
            assert_eq!(*rx0, if *divergent { (N * 4) as u64 } else { 0 });
            assert_eq!(*rx1, 0);
            assert_eq!(*rev, 1);
        }
        assert!(
            results.iter().all(|r| r.4 == results[0].4),
            "states differ bitwise"
        );
        assert!(
            results.iter().all(|r| r.5 == results[0].5),
            "fingerprints differ"
        );
    });
}

#[test]
fn shared_state_receive_only_peer_adopts_the_state() {
    bounded(60, || {
        let (_m, addr) = master();
        let results = run_peers(&addr, 2, move |i, c, _| {
            let mut w = if i == 0 {
                (0..N as i64).collect::<Vec<_>>()
            } else {
                vec![0i64; N]
            };
            let mut bf = if i == 0 {
                vec![BF16::from_f32(1.5); 4]
            } else {
                vec![BF16(0); 4]
            };
            let strategy = if i == 0 {
                SyncStrategy::SendOnly
            } else {
                SyncStrategy::ReceiveOnly
            };
            let info;
            let hash;
            {
                let mut st = SharedState::new(5)
                    .with(TensorInfo::new("w", &mut w).unwrap())
                    .with(TensorInfo::new("bf", &mut bf).unwrap());
                info = c.sync_shared_state(&mut st, strategy).unwrap();
                assert_eq!(st.revision, 5);
                hash = st.fnv1a64();
            }
            assert_eq!(w, (0..N as i64).collect::<Vec<_>>());
            assert_eq!(bf[3].to_f32(), 1.5);
            (info, hash)
        });
        assert_eq!(results[0].0.rx_bytes, 0);
        assert_eq!(results[0].0.tx_bytes, (N * 8 + 8) as u64);
        assert_eq!(results[1].0.rx_bytes, (N * 8 + 8) as u64);
        assert_eq!(results[0].1, results[1].1);
    });
}

#[test]
fn error_codes_round_trip_with_the_c_names() {
    assert_eq!(Error::from_code(0), None);
    for code in 1..sys::PCCL_RESULT_COUNT {
        let e = Error::from_code(code).unwrap();
        assert_eq!(e.code(), code);
        assert_eq!(e.name(), sys::PCCL_RESULT_MAP[code as usize].1);
        assert_eq!(e.message(), sys::PCCL_RESULT_MAP[code as usize].2);
    }
    assert_eq!(Error::from_code(13), Some(Error::Timeout));
    assert_eq!(Error::from_code(17), Some(Error::ProtocolError));
    assert_eq!(Error::from_code(18), Some(Error::AuthenticationFailed));
    assert_eq!(
        Error::from_code(sys::pcclOptimizeTopologyFailed),
        Some(Error::TopologyOptimizationFailed)
    );
    assert_eq!(Error::from_code(99), Some(Error::Unknown(99)));
    assert_eq!(Error::Unknown(99).code(), 99);
    assert_eq!(
        Error::RankConnectionLost.to_string(),
        "peer connection lost (pcclRankConnectionLost, code 8)"
    );
    assert!(Error::RankConnectionLost.is_retryable() && !Error::InvalidUsage.is_retryable());
    assert_eq!(pccl::version() >> 16, sys::PCCL_VERSION_MAJOR);
    assert!(!pccl::build_info().has_cuda_support);
    for d in DataType::ALL.iter() {
        assert_eq!(DataType::from_raw(d.to_raw()), Some(*d));
    }
    assert_eq!(DataType::from_raw(12), None);
    assert_eq!(BF16::from_f32(1.0).0, 0x3f80);
    assert_eq!(
        BF16::from_f32(f32::from_bits(0x3f80_8000)).0,
        0x3f80,
        "ties to even"
    );
    assert_eq!(
        BF16::from_f32(f32::from_bits(0x3f81_8000)).0,
        0x3f82,
        "ties to even"
    );
}

#[test]
fn bad_arguments_and_unconnected_calls() {
    assert_eq!(
        Communicator::new("no such host name:x").err(),
        Some(Error::InvalidArgument)
    );
    assert_eq!(
        Communicator::new("tcp://127.0.0.1:1\0").err(),
        Some(Error::InvalidArgument)
    );
    // Any pool size is accepted (the library clamps values above 8).
    for pool in [9, 16, 64, u32::MAX] {
        let big_pool = CommOptions {
            p2p_connection_pool_size: pool,
            ..Default::default()
        };
        assert!(
            Communicator::with_options("127.0.0.1:1", &big_pool).is_ok(),
            "pool size {}",
            pool
        );
    }
    assert_eq!(Master::new("bogus://x").err(), Some(Error::InvalidArgument));
    let bad_evict = MasterOptions {
        listen_url: Some("tcp://127.0.0.1:0".into()),
        heartbeat: Some(Duration::from_millis(500)),
        evict: Some(Duration::from_millis(400)),
        ..Default::default()
    };
    assert_eq!(
        Master::with_options(&bad_evict).err(),
        Some(Error::InvalidArgument)
    );
    let mut x = [0u8; 1];
    assert_eq!(
        TensorInfo::new("a\0b", &mut x).err(),
        Some(Error::InvalidArgument)
    );

    // Not connected: every call that needs a connection says InvalidUsage.
    let c = Communicator::new("127.0.0.1:1").unwrap();
    let mut buf = vec![1i32; 4];
    assert_eq!(
        c.all_reduce_in_place(&mut buf, ReduceOp::Sum).err(),
        Some(Error::InvalidUsage)
    );
    assert_eq!(c.world_size().err(), Some(Error::InvalidUsage));
    assert_eq!(c.are_peers_pending().err(), Some(Error::InvalidUsage));
    let mut st = SharedState::new(0).with(TensorInfo::new("t", &mut buf).unwrap());
    assert_eq!(
        c.sync_shared_state(&mut st, SyncStrategy::EnforcePopular)
            .err(),
        Some(Error::InvalidUsage)
    );
}

#[test]
fn connecting_to_no_master_fails_in_bounded_time() {
    bounded(30, || {
        // A port that was free a moment ago: nobody listens there.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let opts = CommOptions {
            timeout: Some(Duration::from_secs(3)),
            ..Default::default()
        };
        let mut c =
            Communicator::with_options(&format!("tcp://127.0.0.1:{}", port), &opts).unwrap();
        let t0 = Instant::now();
        let e = c.connect().unwrap_err();
        assert!(
            e == Error::MasterConnectionFailed || e == Error::Timeout,
            "connect to nothing: {}",
            e
        );
        assert!(t0.elapsed() < Duration::from_secs(10));
    });
}

#[test]
fn bad_input_on_a_connected_group() {
    bounded(60, || {
        let (_m, addr) = master();
        // Alone in the group: an all-reduce needs two peers.
        let mut solo = connect(&addr, 7);
        admit(&mut solo, pccl::Attribute::PeerGroupWorldSize, 1);
        let mut one = vec![1i32; 8];
        let alone = solo.all_reduce_in_place(&mut one, ReduceOp::Sum);
        assert_eq!(one, vec![1; 8]);
        // pcclAllReduceAsync refuses at once: the scope's call fails, nothing is in flight.
        let started = solo.async_scope(|s| {
            s.all_reduce_in_place(&mut one, ReduceOptions::new(ReduceOp::Sum).tag(3))
                .map(|_| ())
        });
        assert_eq!(started, Err(Error::TooFewPeers));
        assert_eq!(one, vec![1; 8]);
        // Not closed by the refusal: the communicator still answers.
        assert!(!solo.is_closed());
        assert_eq!(solo.world_size(), Ok(1));
        drop(solo);
        run_peers(&addr, 2, move |i, c, _| {
            let send = vec![1i32; 8];
            let mut short = vec![0i32; 7];
            assert_eq!(
                c.all_reduce(&send, &mut short, ReduceOp::Sum).err(),
                Some(Error::InvalidArgument)
            );
            let mut out = vec![0i32; 8];
            let q = ReduceOptions::new(ReduceOp::Sum)
                .quantize(DataType::Uint8, QuantizationAlgorithm::MinMax);
            assert_eq!(
                c.all_reduce(&send, &mut out, q).err(),
                Some(Error::InvalidArgument),
                "integer quantization"
            );
            let (mut t1, mut t2) = (vec![0u8; 4], vec![0u8; 4]);
            let mut dup = SharedState::new(0)
                .with(TensorInfo::new("same", &mut t1).unwrap())
                .with(TensorInfo::new("same", &mut t2).unwrap());
            assert_eq!(
                c.sync_shared_state(&mut dup, SyncStrategy::EnforcePopular)
                    .err(),
                Some(Error::InvalidArgument)
            );
            let mut e = vec![0u8; 1];
            let mut empty = SharedState::new(0).with(TensorInfo::new("", &mut e).unwrap());
            assert_eq!(
                c.sync_shared_state(&mut empty, SyncStrategy::EnforcePopular)
                    .err(),
                Some(Error::InvalidArgument)
            );
            // The group is still usable after the refused calls.
            let mut ok = vec![(i + 1) as i32; 8];
            c.all_reduce_in_place(&mut ok, ReduceOp::Sum).unwrap();
            assert_eq!(ok, vec![3; 8]);
        });
        assert_eq!(alone.err(), Some(Error::TooFewPeers));
    });
}

#[test]
fn pool_sizes_above_8_are_accepted_and_work() {
    bounded(60, || {
        let (_m, addr) = master();
        // Two peers asking for 16 and 64 connections per neighbour (clamped to 8): exact sums
        // of a buffer large enough to be striped over every connection, and concurrent ones.
        let pools = [16u32, 64];
        let handles: Vec<_> = pools
            .iter()
            .enumerate()
            .map(|(i, &pool)| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let opts = CommOptions {
                        p2p_connection_pool_size: pool,
                        ..options(0)
                    };
                    let mut c = Communicator::with_options(&addr, &opts).unwrap();
                    c.connect().unwrap();
                    admit(&mut c, pccl::Attribute::CURRENT_WORLD_SIZE, 2);
                    const BIG: usize = 1 << 20;
                    let send: Vec<i32> = (0..BIG).map(|j| contribution(i, 0, j)).collect();
                    let mut out = vec![0i32; BIG];
                    let info = c.all_reduce(&send, &mut out, ReduceOp::Sum).unwrap();
                    assert_eq!(info.local_world_size, 2);
                    assert!((0..BIG).all(|j| out[j] == expected_sum(2, 0, j)));
                    let mut bufs: Vec<Vec<i32>> = (0..12)
                        .map(|k| (0..1000).map(|j| contribution(i, k, j)).collect())
                        .collect();
                    let mut refs: Vec<&mut [i32]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
                    c.all_reduce_multiple(&mut refs, ReduceOptions::new(ReduceOp::Sum).tag(10), 12)
                        .unwrap();
                    for (k, b) in bufs.iter().enumerate() {
                        assert!(
                            (0..1000).all(|j| b[j] == expected_sum(2, k, j)),
                            "buffer {}",
                            k
                        );
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("peer");
        }
    });
}

/// Connects two peers of `group` with the given timeout on the first one.
fn pair(addr: &str, group: u32, timeout: Duration) -> (Communicator, Communicator) {
    let a_opts = CommOptions {
        peer_group: group,
        timeout: Some(timeout),
        ..Default::default()
    };
    let mut a = Communicator::with_options(addr, &a_opts).unwrap();
    a.connect().unwrap();
    let addr2 = addr.to_string();
    let h = std::thread::spawn(move || connect(&addr2, group));
    admit(&mut a, pccl::Attribute::PeerGroupWorldSize, 2);
    let b = h.join().unwrap();
    (a, b)
}

#[test]
fn a_timed_out_call_that_borrows_buffers_closes_the_communicator() {
    bounded(60, || {
        let (_m, addr) = master();
        // All-reduce: the partner never joins the operation.
        let (a, b) = pair(&addr, 0, Duration::from_millis(400));
        let send = vec![1i32; 64];
        let mut out = vec![0i32; 64];
        let t0 = Instant::now();
        assert_eq!(
            a.all_reduce(&send, &mut out, ReduceOp::Sum).err(),
            Some(Error::Timeout)
        );
        assert!(
            t0.elapsed() >= Duration::from_millis(390) && t0.elapsed() < Duration::from_secs(5)
        );
        assert!(a.is_closed());
        out[0] = 5; // the buffer is ours again
        assert_eq!(a.world_size().err(), Some(Error::InvalidUsage));
        assert_eq!(
            a.all_reduce(&send, &mut out, ReduceOp::Sum).err(),
            Some(Error::InvalidUsage)
        );
        drop(a);
        drop(b);

        // Shared state: same.
        let (a, b) = pair(&addr, 1, Duration::from_millis(400));
        let mut w = vec![3u16; 16];
        let mut st = SharedState::new(0).with(TensorInfo::new("w", &mut w).unwrap());
        assert_eq!(
            a.sync_shared_state(&mut st, SyncStrategy::EnforcePopular)
                .err(),
            Some(Error::Timeout)
        );
        assert!(a.is_closed());
        drop(st);
        w[0] = 4;
        drop(b);

        // A bounded wait on an asynchronous operation closes nothing.
        let (a, b) = pair(&addr, 2, Duration::from_secs(20));
        let mut buf = vec![1i32; 64];
        a.async_scope(|s| {
            let mut op = s.all_reduce_in_place(&mut buf, ReduceOp::Sum)?;
            assert_eq!(op.wait_timeout(Duration::from_millis(200))?, None);
            assert!(!a.is_closed());
            // Now the partner takes part, and the operation completes.
            let mut other = vec![2i32; 64];
            let h = std::thread::spawn(move || {
                b.all_reduce_in_place(&mut other, ReduceOp::Sum)
                    .map(|_| other)
            });
            let info = op.wait()?;
            assert_eq!(info.local_world_size, 2);
            assert_eq!(h.join().unwrap()?, vec![3i32; 64]);
            Ok::<(), Error>(())
        })
        .unwrap();
        assert_eq!(buf, vec![3i32; 64]);
    });
}
