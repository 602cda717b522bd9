//! Safe Rust API of pccl, a fault-tolerant collective communication library (the PCCL API,
//! `include/pccl.h`), over the raw declarations of [`pccl_sys`].
//!
//! * [`Communicator`] — one peer: connect, update/optimize the topology, attributes, blocking
//!   and asynchronous all-reduces over slices, the collective set (broadcast, reduce,
//!   all-gather, reduce-scatter, all-to-all(v), gather, scatter and their list forms,
//!   barrier, send / recv, split; blocking, or asynchronous as a [`Work`] in an
//!   [`AsyncScope`]), shared-state synchronization, the all-reduce's algorithm tuner
//!   ([`Communicator::tune`], [`Algorithm`]). RAII: drop destroys it. `Send`, not `Sync` (one
//!   call at a time, from any thread).
//! * [`Master`] — a master node in this process. `Send + Sync`; `interrupt` from any thread.
//! * [`Error`] — one variant per `pcclResult_t` code; every call returns [`Result`].
//! * [`Element`] — the Rust types pccl reduces (`u8`..`u64`, `i8`..`i64`, `f32`, `f64`,
//!   [`F16`], [`BF16`]), each mapped to its `pcclDataType_t`.
//!
//! ```no_run
//! use pccl::{Communicator, Master, ReduceOp};
//! # fn main() -> pccl::Result<()> {
//! let master = Master::new("tcp://127.0.0.1:0")?;
//! master.run()?;
//! let mut comm = Communicator::new(&format!("127.0.0.1:{}", master.port()))?;
//! comm.connect()?;
//! while comm.world_size()? < 2 {
//!     comm.update_topology()?; // admits peers that are waiting
//! }
//! let grads = vec![1.0f32; 4];
//! let mut sum = vec![0.0f32; 4];
//! let info = comm.all_reduce(&grads, &mut sum, ReduceOp::Sum)?;
//! println!("{:?} over {} peers", sum, info.local_world_size);
//! # Ok(()) }
//! ```
#![deny(missing_debug_implementations)]

mod coll;
mod comm;
mod error;
mod master;
mod state;
mod tune;
mod types;

pub use coll::{CollectiveInfo, CollectiveOptions, Work};
pub use comm::{AsyncReduce, AsyncScope, CommOptions, Communicator};
pub use error::{Error, Result};
pub use master::{Master, MasterOptions};
pub use state::{SharedState, TensorInfo};
pub use tune::TuneOptions;
pub use types::{
    Algorithm, Attribute, BuildInfo, DataType, DistributionHint, Element, QuantizationAlgorithm,
    ReduceInfo, ReduceOp, ReduceOptions, SyncInfo, SyncStrategy, BF16, F16,
};

pub use pccl_sys as sys;

/// Initializes the library (`pcclInit`, idempotent). Constructors call it; calling it again
/// is harmless.
pub fn init() -> Result<()> {
    // SAFETY: pcclInit is safe from any thread at any time.
    error::check(unsafe { sys::pcclInit() })
}

/// The runtime library's version as `0xMMmmpp` (`pcclGetVersion`).
pub fn version() -> u32 {
    let mut v = 0u32;
    // SAFETY: v is a valid output; safe from any thread.
    unsafe {
        sys::pcclGetVersion(&mut v);
    }
    v
}

/// Build-time features of the library (`pcclGetBuildInfo`).
pub fn build_info() -> BuildInfo {
    let mut b = sys::pcclBuildInfo_t::default();
    // SAFETY: b is a valid output; safe from any thread.
    unsafe {
        sys::pcclGetBuildInfo(&mut b);
    }
    BuildInfo {
        has_cuda_support: b.has_cuda_support,
    }
}
