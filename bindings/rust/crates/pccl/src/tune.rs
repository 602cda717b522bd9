//! The auto-tuner of the algorithm per collective kind (`pcclTune`, `pcclTuneSave`,
//! `pcclTuneLoad`, `pcclGetAlgorithm`). A group's table holds, per kind, world size (2 ..= 8)
//! and size class (powers of two, 1 KiB ..= 256 MiB, per block), the algorithm an
//! [`Algorithm::Auto`] op runs. The master
//! keeps it for the group and sends it with every plan, so every member, also one that joins
//! later, chooses alike; a world without a tuned row uses the built-in rule.
use std::ffi::CString;
use std::path::Path;

use pccl_sys as sys;

use crate::comm::Communicator;
use crate::error::{check, Error, Result};
use crate::types::{Algorithm, DataType};

/// Options of [`Communicator::tune`] (`pcclTuneOptions_t`). Zero fields mean the library's
/// defaults, which `Default` (and [`TuneOptions::new`]) gives: 3 timed runs after 1 warm-up,
/// sizes 1 KiB ..= 256 MiB. Every member must pass the same options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TuneOptions {
    /// Timed runs per (size, algorithm), the median kept (0: 3; at most 1000).
    pub iterations: u32,
    /// Untimed runs before them (0: 1; at most 1000).
    pub warmup: u32,
    /// The smallest size tuned in bytes, rounded to its size class (0: 1 KiB).
    pub min_bytes: u64,
    /// The largest size tuned in bytes, rounded to its size class (0: 256 MiB for the
    /// all-reduce, 16 MiB per block for the other kinds).
    pub max_bytes: u64,
    /// The kinds tuned: `pccl_sys::PCCL_TUNE_*` bits (0: the all-reduce only;
    /// `PCCL_TUNE_ALL_KINDS`: every kind of the collective set).
    pub kinds: u32,
}

impl TuneOptions {
    /// Every option at its default.
    pub fn new() -> TuneOptions {
        TuneOptions::default()
    }
    /// The same options with `iterations` timed runs per (size, algorithm).
    pub fn iterations(mut self, iterations: u32) -> TuneOptions {
        self.iterations = iterations;
        self
    }
    /// The same options with `warmup` untimed runs first.
    pub fn warmup(mut self, warmup: u32) -> TuneOptions {
        self.warmup = warmup;
        self
    }
    /// The same options tuning the sizes `min_bytes ..= max_bytes` (0: the default bound).
    pub fn bytes(mut self, min_bytes: u64, max_bytes: u64) -> TuneOptions {
        self.min_bytes = min_bytes;
        self.max_bytes = max_bytes;
        self
    }
    /// The kinds tuned (`pccl_sys::PCCL_TUNE_*` bits).
    pub fn kinds(mut self, kinds: u32) -> TuneOptions {
        self.kinds = kinds;
        self
    }

    fn to_raw(self) -> sys::pcclTuneOptions_t {
        sys::pcclTuneOptions_t {
            iterations: self.iterations,
            warmup: self.warmup,
            min_bytes: self.min_bytes,
            max_bytes: self.max_bytes,
            kinds: self.kinds,
            ..sys::PCCL_TUNE_OPTIONS_INIT
        }
    }
}

/// A path as the C string the library opens (`InvalidArgument` for one with a NUL byte).
fn c_path(path: &Path) -> Result<CString> {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = path
        .to_str()
        .ok_or(Error::InvalidArgument)?
        .as_bytes()
        .to_vec();
    CString::new(bytes).map_err(|_| Error::InvalidArgument)
}

impl Communicator {
    /// Tunes the group's all-reduce (`pcclTune`): every member calls it with the same options.
    /// Each member times every algorithm that applies at each size class (f32 sums, forced
    /// algorithms, warm-up first); the master takes each (size, algorithm)'s median over the
    /// members, keeps the fastest and installs the row of the group's world size. On success
    /// every member holds the same table, and later [`Algorithm::Auto`] operations use it.
    /// `&mut self`: no operation of this communicator can be in flight meanwhile, as the
    /// library requires.
    ///
    /// Errors: `InvalidArgument` (iterations or warm-up above 1000, `min_bytes` above
    /// `max_bytes`), `TooFewPeers` (fewer than 2 members), `InvalidUsage` (not connected, more
    /// than 8 members, or the master's relay off: it cannot combine a table), and the errors of
    /// a failed all-reduce (`RankConnectionLost`, `UpdateTopologyFailed`, `Timeout`: update the
    /// topology and tune again; the group keeps its previous table).
    ///
    /// ```no_run
    /// # fn demo(comm: &mut pccl::Communicator) -> pccl::Result<()> {
    /// use pccl::{Algorithm, DataType, TuneOptions};
    /// comm.tune(&TuneOptions::new().bytes(0, 16 << 20))?; // every member, same options
    /// comm.tune_save("pccl-algorithms.txt")?; // the same text on every member
    /// assert_ne!(comm.algorithm_for(1 << 20, DataType::Float)?, Algorithm::Auto);
    /// # Ok(()) }
    /// ```
    ///
    /// Tuning while an operation of the communicator runs does not compile:
    ///
    /// ```compile_fail
    /// # fn demo(comm: &mut pccl::Communicator) -> pccl::Result<()> {
    /// let a = vec![1i32; 4];
    /// let mut b = vec![0i32; 4];
    /// comm.async_scope(|s| {
    ///     let op = s.all_reduce(&a, &mut b, pccl::ReduceOp::Sum)?;
    ///     comm.tune(&pccl::TuneOptions::new())?;
    ///     op.wait()
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn tune(&mut self, options: &TuneOptions) -> Result<()> {
        let p = self.ptr()?;
        let o = options.to_raw();
        // SAFETY: p is live and &mut self makes this the only call; o lives across the call.
        // The tuner's operations use the library's own buffers only.
        check(unsafe { sys::pcclTune(p, &o) })
    }

    /// Writes the group's table as this member holds it to the text file `path`
    /// (`pcclTuneSave`); after [`Communicator::tune`] every member writes the same bytes.
    /// Errors: `InvalidArgument` (the file cannot be written, a NUL byte in the path),
    /// `InvalidUsage` (not connected).
    pub fn tune_save(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = self.ptr()?;
        let path = c_path(path.as_ref())?;
        // SAFETY: p is live; one call at a time (!Sync); path lives across the call.
        check(unsafe { sys::pcclTuneSave(p, path.as_ptr()) })
    }

    /// Installs the row of the group's world size from a file [`Communicator::tune_save`]
    /// wrote, timing nothing (`pcclTuneLoad`). A tuning round: every member calls it (members
    /// that load different files get the master's combination of them, still one table).
    /// Errors: `InvalidArgument` (the file is missing or malformed, a NUL byte in the path);
    /// otherwise as [`Communicator::tune`].
    pub fn tune_load(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let p = self.ptr()?;
        let path = c_path(path.as_ref())?;
        // SAFETY: as in tune; path lives across the call.
        check(unsafe { sys::pcclTuneLoad(p, path.as_ptr()) })
    }

    /// The algorithm an [`Algorithm::Auto`] all-reduce of `count` elements of `dtype` would
    /// run now, in the group's current world (unquantized, not PremulSum): the group's tuned
    /// entry, else the built-in rule; never `Auto` (`pcclGetAlgorithm`). Every member of the
    /// group gets the same answer. Errors: `InvalidUsage` (not connected), `InternalError`
    /// (a value this crate does not know, from a newer library).
    pub fn algorithm_for(&self, count: usize, dtype: DataType) -> Result<Algorithm> {
        let p = self.ptr()?;
        let mut a: sys::pcclAlgorithm_t = sys::pcclAlgoAuto;
        // SAFETY: p is live; one call at a time (!Sync); a is a valid output.
        check(unsafe { sys::pcclGetAlgorithm(p, count, dtype.to_raw(), &mut a) })?;
        Algorithm::from_raw(a).ok_or(Error::InternalError)
    }
}
