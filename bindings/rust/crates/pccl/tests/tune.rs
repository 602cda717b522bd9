//! The algorithm tuner and forced algorithms with real peers (threads of this process, one
//! communicator each, an in-process master): two peers tune one table (the saved files are
//! byte-identical, `algorithm_for` agrees), forced algorithms are exact, forcing one that cannot
//! run the op is `InvalidArgument`, members forcing different ones get `InvalidUsage`.
mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use pccl::{
    Algorithm, Attribute, CollectiveOptions, Communicator, DataType, Error, ReduceOp,
    ReduceOptions, TuneOptions,
};

/// A path in a directory of this test process under cargo's scratch directory for tests.
fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("pccl_tune-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Rank r's input, element j.
fn input(r: usize, j: usize) -> i32 {
    (r as i32 + 1) * 1000 + j as i32
}

/// An exact all-reduce (sum) of `n` elements with `o`; `Err` when the library refuses it.
fn all_reduce(
    c: &Communicator,
    r: usize,
    w: usize,
    n: usize,
    o: CollectiveOptions,
) -> Result<(), Error> {
    let send: Vec<i32> = (0..n).map(|j| input(r, j)).collect();
    let mut recv = vec![0i32; n];
    let info = c.all_reduce_with(
        &send,
        &mut recv,
        ReduceOptions::new(ReduceOp::Sum).tag(o.tag),
        o,
    )?;
    assert_eq!(info.world_size as usize, w);
    for (j, v) in recv.iter().enumerate() {
        let want: i32 = (0..w).map(|i| input(i, j)).sum();
        assert_eq!(*v, want, "{:?}: element {} of {}", o.algorithm, j, n);
    }
    Ok(())
}

#[test]
fn two_peers_tune_one_table() {
    bounded(90, || {
        let (_m, addr) = master();
        let outs = run_peers(&addr, 2, |i, mut c, _| {
            assert_eq!(
                c.tune_save(scratch("no-such-dir/t")),
                Err(Error::InvalidArgument)
            );
            assert_eq!(c.tune_save("nul\0byte"), Err(Error::InvalidArgument));
            assert_eq!(c.tune_load(scratch("missing")), Err(Error::InvalidArgument));
            let o = TuneOptions::new().iterations(1).bytes(0, 64 << 10);
            c.tune(&o).expect("tune");
            let path = scratch(&format!("table{}", i));
            c.tune_save(&path).expect("tune_save");
            let text = std::fs::read_to_string(&path).unwrap();
            // f32 all-reduces of 1 KiB .. 256 KiB: tuned up to 64 KiB, the rule above.
            let algos: Vec<Algorithm> = (0..9)
                .map(|k| c.algorithm_for(256 << k, DataType::Float).unwrap())
                .collect();
            // Loading the saved file is a tuning round that installs the same row again.
            c.tune_load(&path).expect("tune_load");
            let again = scratch(&format!("again{}", i));
            c.tune_save(&again).unwrap();
            assert_eq!(
                std::fs::read_to_string(&again).unwrap(),
                text,
                "after tune_load"
            );
            // An Auto all-reduce with the tuned table is exact.
            let r = c.attribute(Attribute::Rank).unwrap() as usize;
            all_reduce(&c, r, 2, 3000, CollectiveOptions::new().tag(1)).unwrap();
            (text, algos)
        });
        let _ = std::fs::remove_dir_all(scratch(""));
        let (text, algos) = &outs[0];
        assert_eq!(text, &outs[1].0, "both members saved the same table");
        assert_eq!(algos, &outs[1].1, "algorithm_for agrees on both members");
        let row = text
            .lines()
            .find_map(|l| l.strip_prefix("world 2:"))
            .unwrap_or_else(|| panic!("no row for world 2 in:\n{}", text));
        let names: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(names.len(), 19, "{}", row);
        for (k, name) in names.iter().enumerate() {
            // Size classes 0 ..= 6 (1 KiB ..= 64 KiB) are tuned, the others left to the rule.
            assert_eq!(*name == "auto", k > 6, "size class {}: {}", k, row);
            if k < algos.len() && k <= 6 {
                assert_eq!(algos[k].name(), *name, "algorithm_for of class {}", k);
            }
        }
        assert!(algos.iter().all(|a| *a != Algorithm::Auto), "{:?}", algos);
        // The relay takes at most 32 KiB (the master's default bound).
        assert!(
            algos[6..].iter().all(|a| *a != Algorithm::Relay),
            "{:?}",
            algos
        );
    });
}

#[test]
fn forced_algorithms_are_exact_and_refused_where_they_cannot_run() {
    bounded(60, || {
        let (_m, addr) = master();
        run_peers(&addr, 3, |_, c, _| {
            let r = c.attribute(Attribute::Rank).unwrap() as usize;
            let o = |tag: u64, a: Algorithm| CollectiveOptions::new().tag(tag).algorithm(a);
            // Every algorithm that can run a 4 KB all-reduce, exact; ring and striped ring
            // also at 200 KB (above the relay's bound).
            for (t, a) in Algorithm::ALL.iter().enumerate() {
                all_reduce(&c, r, 3, 1000, o(t as u64, *a)).unwrap();
            }
            all_reduce(&c, r, 3, 50_000, o(10, Algorithm::Ring)).unwrap();
            all_reduce(&c, r, 3, 50_000, o(11, Algorithm::RingStriped)).unwrap();
            // The relay above its bound, direct on a broadcast: refused at the call.
            assert_eq!(
                all_reduce(&c, r, 3, 50_000, o(12, Algorithm::Relay)),
                Err(Error::InvalidArgument)
            );
            let mut b = vec![r as u16; 7];
            assert_eq!(
                c.broadcast(&mut b, 2, o(13, Algorithm::Direct)).err(),
                Some(Error::InvalidArgument)
            );
            // The group is in step: a forced ring broadcast is exact.
            c.broadcast(&mut b, 2, o(14, Algorithm::Ring)).unwrap();
            assert_eq!(b, vec![2u16; 7]);
        });
    });
}

#[test]
fn members_forcing_different_algorithms_get_invalid_usage() {
    bounded(60, || {
        let (_m, addr) = master();
        run_peers(&addr, 2, |_, mut c, _| {
            let r = c.attribute(Attribute::Rank).unwrap() as usize;
            // Two ring schedules, then the relay against the direct all-reduce.
            let pairs = [
                (Algorithm::Ring, Algorithm::RingStriped),
                (Algorithm::Relay, Algorithm::Direct),
            ];
            for (t, (a, b)) in pairs.iter().enumerate() {
                let mine = if r == 0 { *a } else { *b };
                let o = CollectiveOptions::new().tag(t as u64).algorithm(mine);
                assert_eq!(
                    all_reduce(&c, r, 2, 1000, o),
                    Err(Error::InvalidUsage),
                    "{:?}",
                    mine
                );
            }
            // The group goes on (after a topology update if the master re-wired it).
            let t0 = Instant::now();
            loop {
                match all_reduce(&c, r, 2, 1000, CollectiveOptions::new().tag(2)) {
                    Ok(()) => break,
                    Err(Error::UpdateTopologyFailed) | Err(Error::RankConnectionLost) => {
                        assert!(t0.elapsed() < Duration::from_secs(20));
                        let _ = c.update_topology();
                    }
                    Err(e) => panic!("all-reduce after the refusal: {}", e),
                }
            }
        });
    });
}
