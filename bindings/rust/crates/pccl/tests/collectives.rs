//! The collective set with real peers (threads of this process, one communicator each, an
//! in-process master): every kind exact at N = 2 and 3, blocking and asynchronous (all at once
//! on distinct tags), send / recv, split, a timeout, and the crate's size checks.
mod common;

use std::time::{Duration, Instant};

use common::*;
use pccl::{
    Attribute, CollectiveInfo, CollectiveOptions, CommOptions, Communicator, DataType, Error,
    QuantizationAlgorithm, ReduceOp, ReduceOptions,
};

/// Elements per rank.
const C: usize = 5;

/// Rank r's value for element j.
fn v(r: usize, j: usize) -> i32 {
    (r * 100 + j) as i32
}

/// What rank `from` puts in its block for rank `to`, element j (all-to-all, scatter).
fn code(from: usize, to: usize, j: usize) -> i32 {
    (from * 1000 + to * 100 + j) as i32
}

/// Varied bits for the bitwise ops.
fn bits(r: usize, j: usize) -> u32 {
    let z = (j as u32 + 1).wrapping_mul(0x9e37_79b9) ^ ((r as u32 + 1) << (5 * r));
    z ^ (z >> 13)
}

fn opt(tag: u64) -> CollectiveOptions {
    CollectiveOptions::new().tag(tag)
}

/// The inputs of one round of every kind, for rank r of w.
struct Inputs {
    r: usize,
    w: usize,
    bcast: Vec<i32>,
    red_send: Vec<i32>,
    red_recv: Vec<i32>,
    band: Vec<u32>,
    ag_send: Vec<i32>,
    ag_recv: Vec<i32>,
    agl: Vec<Vec<i32>>,
    rs_send: Vec<i32>,
    rs_recv: Vec<i32>,
    rsl_send: Vec<Vec<u32>>,
    rsl_recv: Vec<u32>,
    a2a_send: Vec<i32>,
    a2a_recv: Vec<i32>,
    a2a_in_place: Vec<i32>,
    a2al_send: Vec<Vec<i32>>,
    a2al_recv: Vec<Vec<i32>>,
    v_send: Vec<i32>,
    v_send_counts: Vec<usize>,
    v_recv: Vec<i32>,
    v_recv_counts: Vec<usize>,
    g_recv: Vec<i32>,
    gl_recv: Vec<Vec<i32>>,
    sc_send: Vec<i32>,
    sc_recv: Vec<i32>,
    scl_send: Vec<Vec<i32>>,
    scl_recv: Vec<i32>,
    premul_send: Vec<f64>,
    premul_recv: Vec<f64>,
}

// Roots of the rooted kinds.
fn bcast_root(w: usize) -> usize {
    w - 1
}
const REDUCE_ROOT: usize = 0;
const BAND_ROOT: usize = 1;
fn gather_root(w: usize) -> usize {
    w - 1
}
const SCATTER_ROOT: usize = 0;

/// Rank i sends rank j this many elements in the all-to-all-v.
fn v_count(i: usize, j: usize) -> usize {
    i + 2 * j + 1
}

impl Inputs {
    fn new(r: usize, w: usize) -> Inputs {
        let n = w * C;
        let blocks = |f: &dyn Fn(usize, usize) -> i32| -> Vec<i32> {
            (0..n).map(|k| f(k / C, k % C)).collect()
        };
        let mut v_send = Vec::new();
        for j in 0..w {
            v_send.extend((0..v_count(r, j)).map(|k| code(r, j, k)));
        }
        Inputs {
            r,
            w,
            bcast: (0..C)
                .map(|j| if r == bcast_root(w) { v(r, j) } else { -1 })
                .collect(),
            red_send: (0..C).map(|j| v(r, j)).collect(),
            red_recv: vec![0; C],
            band: (0..C).map(|j| bits(r, j)).collect(),
            ag_send: (0..C).map(|j| v(r, j)).collect(),
            ag_recv: vec![0; n],
            agl: vec![vec![0; C]; w],
            rs_send: (0..n).map(|k| v(r, k)).collect(),
            rs_recv: vec![0; C],
            rsl_send: (0..w)
                .map(|b| (0..C).map(|j| bits(r, b * C + j)).collect())
                .collect(),
            rsl_recv: vec![0; C],
            a2a_send: blocks(&|b, j| code(r, b, j)),
            a2a_recv: vec![0; n],
            a2a_in_place: blocks(&|b, j| code(r, b, j)),
            a2al_send: (0..w)
                .map(|b| (0..C).map(|j| code(r, b, j)).collect())
                .collect(),
            a2al_recv: vec![vec![0; C]; w],
            v_send,
            v_send_counts: (0..w).map(|j| v_count(r, j)).collect(),
            v_recv: vec![0; (0..w).map(|j| v_count(j, r)).sum()],
            v_recv_counts: (0..w).map(|j| v_count(j, r)).collect(),
            g_recv: vec![0; if r == gather_root(w) { n } else { 0 }],
            gl_recv: vec![vec![0; C]; if r == 0 { w } else { 0 }],
            sc_send: if r == SCATTER_ROOT {
                blocks(&|b, j| code(r, b, j))
            } else {
                Vec::new()
            },
            sc_recv: vec![0; C],
            scl_send: if r == gather_root(w) {
                (0..w)
                    .map(|b| (0..C).map(|j| code(r, b, j)).collect())
                    .collect()
            } else {
                Vec::new()
            },
            scl_recv: vec![0; C],
            premul_send: (0..C).map(|j| j as f64 + 0.5).collect(),
            premul_recv: vec![0.0; C],
        }
    }

    /// Every output exact.
    fn check(&self, what: &str) {
        let (r, w) = (self.r, self.w);
        let ranks = 0..w;
        for j in 0..C {
            assert_eq!(self.bcast[j], v(bcast_root(w), j), "{} broadcast", what);
            if r == REDUCE_ROOT {
                let want: i32 = ranks.clone().map(|i| v(i, j)).sum();
                assert_eq!(self.red_recv[j], want, "{} reduce", what);
            }
            let and = ranks.clone().fold(!0u32, |a, i| a & bits(i, j));
            if r == BAND_ROOT {
                assert_eq!(self.band[j], and, "{} reduce band in place", what);
            } else {
                assert_eq!(self.band[j], bits(r, j), "{} reduce input kept", what);
            }
            let sum: i32 = ranks.clone().map(|i| v(i, r * C + j)).sum();
            assert_eq!(self.rs_recv[j], sum, "{} reduce-scatter", what);
            let xor = ranks.clone().fold(0u32, |a, i| a ^ bits(i, r * C + j));
            assert_eq!(self.rsl_recv[j], xor, "{} reduce-scatter list (bxor)", what);
            assert_eq!(
                self.sc_recv[j],
                code(SCATTER_ROOT, r, j),
                "{} scatter",
                what
            );
            assert_eq!(
                self.scl_recv[j],
                code(gather_root(w), r, j),
                "{} scatter list",
                what
            );
            let premul: f64 = ranks
                .clone()
                .map(|i| (i + 1) as f64 * (j as f64 + 0.5))
                .sum();
            assert_eq!(self.premul_recv[j], premul, "{} premul sum", what);
            for b in 0..w {
                let k = b * C + j;
                assert_eq!(self.ag_recv[k], v(b, j), "{} all-gather", what);
                assert_eq!(self.agl[b][j], v(b, j), "{} all-gather list", what);
                assert_eq!(self.a2a_recv[k], code(b, r, j), "{} all-to-all", what);
                assert_eq!(
                    self.a2a_in_place[k],
                    code(b, r, j),
                    "{} all-to-all in place",
                    what
                );
                assert_eq!(
                    self.a2al_recv[b][j],
                    code(b, r, j),
                    "{} all-to-all list",
                    what
                );
                if r == gather_root(w) {
                    assert_eq!(self.g_recv[k], v(b, j), "{} gather", what);
                }
                if r == 0 {
                    assert_eq!(self.gl_recv[b][j], v(b, j), "{} gather list", what);
                }
            }
        }
        let mut k = 0;
        for j in 0..w {
            for e in 0..v_count(j, r) {
                assert_eq!(self.v_recv[k], code(j, r, e), "{} all-to-all-v", what);
                k += 1;
            }
        }
    }
}

fn check_info(info: CollectiveInfo, r: usize, w: usize) {
    assert_eq!(info.world_size, w as u32);
    assert_eq!(info.rank, r as u32);
    assert!(info.epoch > 0);
}

fn mut_views(v: &mut [Vec<i32>]) -> Vec<&mut [i32]> {
    v.iter_mut().map(|b| b.as_mut_slice()).collect()
}

fn views<T>(v: &[Vec<T>]) -> Vec<&[T]> {
    v.iter().map(|b| b.as_slice()).collect()
}

/// Every kind, blocking, one after the other (tag 0 each).
fn blocking_round(c: &Communicator, r: usize, w: usize) {
    let mut x = Inputs::new(r, w);
    let o = CollectiveOptions::new();
    let u = |i: usize| i as u32;
    let mut infos = Vec::new();
    infos.push(c.broadcast(&mut x.bcast, u(bcast_root(w)), o).unwrap());
    let recv = if r == REDUCE_ROOT {
        Some(&mut x.red_recv[..])
    } else {
        None
    };
    infos.push(c.reduce(&x.red_send, recv, ReduceOp::Sum, 0, o).unwrap());
    infos.push(
        c.reduce_in_place(&mut x.band, ReduceOp::Band, u(BAND_ROOT), o)
            .unwrap(),
    );
    infos.push(c.all_gather(&x.ag_send, &mut x.ag_recv, o).unwrap());
    infos.push(
        c.all_gather_list(&x.ag_send, &mut mut_views(&mut x.agl), o)
            .unwrap(),
    );
    infos.push(
        c.reduce_scatter(&x.rs_send, &mut x.rs_recv, ReduceOp::Sum, o)
            .unwrap(),
    );
    infos.push(
        c.reduce_scatter_list(&views(&x.rsl_send), &mut x.rsl_recv, ReduceOp::Bxor, o)
            .unwrap(),
    );
    infos.push(c.all_to_all(&x.a2a_send, &mut x.a2a_recv, o).unwrap());
    infos.push(c.all_to_all_in_place(&mut x.a2a_in_place, o).unwrap());
    infos.push(
        c.all_to_all_list(&views(&x.a2al_send), &mut mut_views(&mut x.a2al_recv), o)
            .unwrap(),
    );
    infos.push(
        c.all_to_all_v(
            &x.v_send,
            &x.v_send_counts,
            &mut x.v_recv,
            &x.v_recv_counts,
            o,
        )
        .unwrap(),
    );
    let g = if r == gather_root(w) {
        Some(&mut x.g_recv[..])
    } else {
        None
    };
    infos.push(c.gather(&x.ag_send, g, u(gather_root(w)), o).unwrap());
    infos.push(
        c.gather_list(&x.ag_send, &mut mut_views(&mut x.gl_recv), 0, o)
            .unwrap(),
    );
    let s = if r == SCATTER_ROOT {
        Some(&x.sc_send[..])
    } else {
        None
    };
    infos.push(c.scatter(s, &mut x.sc_recv, 0, o).unwrap());
    infos.push(
        c.scatter_list(&views(&x.scl_send), &mut x.scl_recv, u(gather_root(w)), o)
            .unwrap(),
    );
    infos.push(c.barrier(o).unwrap());
    infos.push(
        c.all_reduce_with(
            &x.premul_send,
            &mut x.premul_recv,
            ReduceOp::PremulSum,
            o.premul_scalar((r + 1) as f64),
        )
        .unwrap(),
    );
    for i in infos {
        check_info(i, r, w);
    }
    x.check("blocking");
}

/// Every kind started at once in one scope (tags 1..=15), awaited in reverse order.
fn async_round(c: &Communicator, r: usize, w: usize) {
    let mut x = Inputs::new(r, w);
    let u = |i: usize| i as u32;
    let mut agl = mut_views(&mut x.agl);
    let rsl = views(&x.rsl_send);
    let a2al_send = views(&x.a2al_send);
    let mut a2al_recv = mut_views(&mut x.a2al_recv);
    let mut gl = mut_views(&mut x.gl_recv);
    let scl = views(&x.scl_send);
    let infos = c
        .async_scope(|s| -> pccl::Result<Vec<CollectiveInfo>> {
            let mut works = Vec::new();
            works.push(s.broadcast(&mut x.bcast, u(bcast_root(w)), opt(1))?);
            let recv = if r == REDUCE_ROOT {
                Some(&mut x.red_recv[..])
            } else {
                None
            };
            works.push(s.reduce(&x.red_send, recv, ReduceOp::Sum, 0, opt(2))?);
            works.push(s.reduce_in_place(&mut x.band, ReduceOp::Band, u(BAND_ROOT), opt(3))?);
            works.push(s.all_gather(&x.ag_send, &mut x.ag_recv, opt(4))?);
            works.push(s.all_gather_list(&x.ag_send, &mut agl, opt(5))?);
            works.push(s.reduce_scatter(&x.rs_send, &mut x.rs_recv, ReduceOp::Sum, opt(6))?);
            works.push(s.reduce_scatter_list(&rsl, &mut x.rsl_recv, ReduceOp::Bxor, opt(7))?);
            works.push(s.all_to_all(&x.a2a_send, &mut x.a2a_recv, opt(8))?);
            works.push(s.all_to_all_in_place(&mut x.a2a_in_place, opt(9))?);
            works.push(s.all_to_all_list(&a2al_send, &mut a2al_recv, opt(10))?);
            works.push(s.all_to_all_v(
                &x.v_send,
                &x.v_send_counts,
                &mut x.v_recv,
                &x.v_recv_counts,
                opt(11),
            )?);
            let g = if r == gather_root(w) {
                Some(&mut x.g_recv[..])
            } else {
                None
            };
            works.push(s.gather(&x.ag_send, g, u(gather_root(w)), opt(12))?);
            works.push(s.gather_list(&x.ag_send, &mut gl, 0, opt(13))?);
            let sc = if r == SCATTER_ROOT {
                Some(&x.sc_send[..])
            } else {
                None
            };
            works.push(s.scatter(sc, &mut x.sc_recv, 0, opt(14))?);
            works.push(s.scatter_list(&scl, &mut x.scl_recv, u(gather_root(w)), opt(15))?);
            works.push(s.all_reduce_with(
                &x.premul_send,
                &mut x.premul_recv,
                ReduceOptions::new(ReduceOp::PremulSum).tag(16),
                CollectiveOptions::new().premul_scalar((r + 1) as f64),
            )?);
            assert_eq!(works[3].tag(), 4);
            let mut infos = Vec::new();
            while let Some(wk) = works.pop() {
                infos.push(wk.wait()?);
            }
            // The 16 slots are free again: a barrier in the same scope.
            infos.push(s.barrier(opt(1))?.wait()?);
            Ok(infos)
        })
        .unwrap();
    drop((agl, rsl, a2al_send, a2al_recv, gl, scl));
    assert_eq!(infos.len(), 17);
    for i in infos {
        check_info(i, r, w);
    }
    x.check("async");
}

/// A ring shift by send / recv: blocking (rank 0 sends first, the others receive first),
/// then asynchronous (both started, then awaited).
fn send_recv_round(c: &Communicator, r: usize, w: usize) {
    let next = ((r + 1) % w) as u32;
    let prev = ((r + w - 1) % w) as u32;
    let data: Vec<i64> = (0..7).map(|j| (r * 10 + j) as i64).collect();
    let mut got = vec![0i64; 7];
    let o = opt(30);
    if r == 0 {
        check_info(c.send(&data, next, o).unwrap(), r, w);
        check_info(c.recv(&mut got, prev, o).unwrap(), r, w);
    } else {
        check_info(c.recv(&mut got, prev, o).unwrap(), r, w);
        check_info(c.send(&data, next, o).unwrap(), r, w);
    }
    let want: Vec<i64> = (0..7).map(|j| (prev as usize * 10 + j) as i64).collect();
    assert_eq!(got, want, "blocking recv");
    let mut got2 = vec![0i64; 7];
    c.async_scope(|s| -> pccl::Result<()> {
        // One tag for both: a send and a receive of one tag between other pairs are other ops.
        let snd = s.send(&data, next, opt(31))?;
        let mut rcv = s.recv(&mut got2, prev, opt(31))?;
        let info = loop {
            if let Some(i) = rcv.wait_timeout(Duration::from_millis(50))? {
                break i;
            }
        };
        assert!(rcv.is_completed()?);
        check_info(info, r, w);
        check_info(snd.wait()?, r, w);
        Ok(())
    })
    .unwrap_or_else(|e| panic!("async send/recv: {}", e));
    assert_eq!(got2, want, "async recv");
}

fn exact_at(n: usize) {
    let (_m, addr) = master();
    let outs = run_peers(&addr, n, move |_, c, _| {
        let w = c.world_size().unwrap() as usize;
        let r = c.attribute(Attribute::Rank).unwrap() as usize;
        assert_eq!(w, n);
        blocking_round(&c, r, w);
        async_round(&c, r, w);
        send_recv_round(&c, r, w);
        r
    });
    let mut ranks = outs;
    ranks.sort();
    assert_eq!(ranks, (0..n).collect::<Vec<_>>());
}

#[test]
fn every_kind_exact_at_n2() {
    bounded(60, || exact_at(2));
}

#[test]
fn every_kind_exact_at_n3() {
    bounded(60, || exact_at(3));
}

#[test]
fn quantized_reduce_and_refusals() {
    bounded(60, || {
        let (_m, addr) = master();
        run_peers(&addr, 2, move |_, c, _| {
            let r = c.attribute(Attribute::Rank).unwrap() as usize;
            // Quantized reduce-scatter: lossy, within a quantization step.
            let send: Vec<f32> = (0..8).map(|j| ((r * 3 + j) % 5) as f32 * 0.25).collect();
            let mut recv = vec![0f32; 4];
            let q = opt(1).quantize(DataType::Uint8, QuantizationAlgorithm::MinMax);
            c.reduce_scatter(&send, &mut recv, ReduceOp::Sum, q)
                .unwrap();
            for j in 0..4 {
                let k = r * 4 + j;
                let exact: f32 = (0..2).map(|i| ((i * 3 + k) % 5) as f32 * 0.25).sum();
                assert!((recv[j] - exact).abs() < 0.05, "{} vs {}", recv[j], exact);
            }
            // Sizes that do not fit the world: refused by the crate, nothing started.
            let mut small = vec![0i32; 3];
            assert_eq!(
                c.all_gather(&[1, 2], &mut small, opt(2)).err(),
                Some(Error::InvalidArgument)
            );
            assert_eq!(
                c.all_to_all_v(&[1], &[1], &mut small, &[1, 2], opt(2))
                    .err(),
                Some(Error::InvalidArgument)
            );
            assert_eq!(
                c.gather(&[1], None, r as u32, opt(2)).err(),
                Some(Error::InvalidArgument)
            );
            // A root outside the world, a send to oneself, quantization on a broadcast, a
            // bitwise op on floats: refused by libpccl at the call.
            assert_eq!(
                c.broadcast(&mut small, 2, opt(2)).err(),
                Some(Error::InvalidArgument)
            );
            assert_eq!(
                c.send(&small, r as u32, opt(2)).err(),
                Some(Error::InvalidArgument)
            );
            assert_eq!(
                c.broadcast(&mut small, 0, q).err(),
                Some(Error::InvalidArgument)
            );
            let f = [1f32; 2];
            assert_eq!(
                c.reduce(&f, None, ReduceOp::Bor, 1, opt(2)).err(),
                Some(Error::InvalidArgument)
            );
            // The group is still in step: one more exact op.
            let mut b = vec![r as i32; 2];
            c.broadcast(&mut b, 1, opt(3)).unwrap();
            assert_eq!(b, vec![1, 1]);
        });
    });
}

#[test]
fn a_timeout_cancels_on_every_member_and_the_group_goes_on() {
    bounded(60, || {
        let (_m, addr) = master();
        run_peers(&addr, 2, move |i, mut c, barrier| {
            if i == 0 {
                // The other peer never calls this barrier: it times out here.
                let t0 = Instant::now();
                let o = opt(5).timeout(Duration::from_millis(300));
                assert_eq!(c.barrier(o).err(), Some(Error::Timeout));
                let dt = t0.elapsed();
                assert!(
                    dt >= Duration::from_millis(290) && dt < Duration::from_secs(6),
                    "{:?}",
                    dt
                );
            }
            barrier.wait();
            // After a cancelled op the group may have a new epoch: update and retry.
            let t0 = Instant::now();
            loop {
                match c.barrier(opt(7)) {
                    Ok(_) => break,
                    Err(Error::UpdateTopologyFailed) | Err(Error::RankConnectionLost) => {
                        assert!(t0.elapsed() < Duration::from_secs(20));
                        let _ = c.update_topology();
                    }
                    Err(e) => panic!("barrier after the timeout: {}", e),
                }
            }
            // A work's bounded wait cancels nothing; a zero wait polls. Peer 1 sends late.
            let r = c.attribute(Attribute::Rank).unwrap() as u32;
            let mut buf = [0u8; 4];
            if i == 0 {
                c.async_scope(|s| -> pccl::Result<()> {
                    let mut w = s.recv(&mut buf, 1 - r, opt(8))?;
                    assert_eq!(w.wait_timeout(Duration::from_millis(0))?, None);
                    assert!(!w.is_completed()?);
                    let info = loop {
                        if let Some(info) = w.wait_timeout(Duration::from_millis(100))? {
                            break info;
                        }
                    };
                    assert!(w.is_completed()?);
                    assert_eq!(w.wait(), Ok(info));
                    Ok(())
                })
                .unwrap();
                assert_eq!(buf, [1, 2, 3, 4]);
            } else {
                std::thread::sleep(Duration::from_millis(400));
                c.send(&[1u8, 2, 3, 4], 1 - r, opt(8)).unwrap();
            }
        });
    });
}

#[test]
fn split_into_a_child_while_the_rest_admits_it() {
    bounded(60, || {
        let (_m, addr) = master();
        let n = 3;
        let outs = run_peers(&addr, n, move |_, mut c, _| {
            let r = c.attribute(Attribute::Rank).unwrap() as usize;
            if r == n - 1 {
                // Not listed: vote the children in (two new peers of the run).
                admit(&mut c, Attribute::GlobalWorldSize, (n + 2) as i32);
                return (r, Vec::new());
            }
            let child = c
                .split(&[1, 0])
                .expect("split")
                .expect("a child for a listed rank");
            assert_eq!(child.world_size().unwrap(), 2);
            let cr = child.attribute(Attribute::Rank).unwrap() as usize;
            assert_eq!(cr, r, "child ranks follow the parent's order");
            // An all-gather of the parent ranks in the child, then a send / recv.
            let mut parents = vec![0u32; 2];
            let info = child.all_gather(&[r as u32], &mut parents, opt(1)).unwrap();
            assert_eq!(info.world_size, 2);
            assert_eq!(parents, vec![0, 1]);
            let mut got = [0u16; 3];
            if cr == 0 {
                child.send(&[7u16, 8, 9], 1, opt(2)).unwrap();
            } else {
                child.recv(&mut got, 0, opt(2)).unwrap();
                assert_eq!(got, [7, 8, 9]);
            }
            // The parent is not affected; an empty list makes no child.
            assert!(c.split(&[]).unwrap().is_none());
            (r, parents)
        });
        assert_eq!(outs.len(), n);
    });
}

#[test]
fn closing_the_communicator_frees_its_work_objects() {
    bounded(60, || {
        let (_m, addr) = master();
        let gate = std::sync::Arc::new(std::sync::Barrier::new(2));
        let (a2, g2) = (addr.clone(), gate.clone());
        let other = std::thread::spawn(move || {
            let mut c = connect(&a2, 0);
            admit(&mut c, Attribute::CURRENT_WORLD_SIZE, 2);
            g2.wait(); // calls nothing until the first peer is done
            g2.wait();
        });
        let o = CommOptions {
            timeout: Some(Duration::from_millis(500)),
            ..CommOptions::default()
        };
        let mut c = Communicator::with_options(&addr, &o).unwrap();
        c.connect().unwrap();
        admit(&mut c, Attribute::CURRENT_WORLD_SIZE, 2);
        gate.wait();
        let r = c.attribute(Attribute::Rank).unwrap() as u32;
        let mut buf = [0u8; 4];
        c.async_scope(|s| {
            // Nobody sends: the work is still registered when the all-reduce below times out
            // and closes the communicator, which frees it first.
            let w = s.recv(&mut buf, 1 - r, opt(1)).unwrap();
            let mut out = [0i32; 4];
            let comm = s.communicator();
            assert_eq!(
                comm.all_reduce(&[1; 4], &mut out, ReduceOp::Sum).err(),
                Some(Error::Timeout)
            );
            assert!(comm.is_closed());
            assert_eq!(w.is_completed(), Err(Error::InvalidUsage));
            assert_eq!(w.wait(), Err(Error::InvalidUsage));
            assert_eq!(s.barrier(opt(2)).err(), Some(Error::InvalidUsage));
        });
        gate.wait();
        other.join().unwrap();
    });
}
