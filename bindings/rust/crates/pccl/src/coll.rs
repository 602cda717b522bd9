//! The collective set beyond all-reduce (docs/collectives.md): broadcast, reduce, all-gather,
//! reduce-scatter, all-to-all (and its split-size form), gather, scatter (with their list
//! forms), barrier, send / recv, and split. Blocking forms are methods of [`Communicator`];
//! asynchronous ones are methods of [`AsyncScope`] returning a [`Work`] that borrows the
//! operation's buffers until the scope ends.
//!
//! Buffer sizes are checked against the caller's world and rank as [`Communicator::world_size`]
//! and [`crate::Attribute::Rank`] report them when the call starts: those change only inside
//! `connect`, `update_topology`, `optimize_topology` and `split`, which take `&mut self`, so
//! they cannot change between the check and the library's own reading of them.
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::time::Duration;

use pccl_sys as sys;

use crate::comm::{duration_ms, AsyncScope, Communicator};
use crate::error::{check, Error, Result};
use crate::types::{
    Algorithm, Attribute, DataType, Element, QuantizationAlgorithm, ReduceOp, ReduceOptions,
};

/// Options of one operation of the collective set (`pcclCollectiveOptions_t`).
///
/// `Default` (and [`CollectiveOptions::new`]) is tag 0, the communicator's timeout, no abort,
/// factor 1.0, no quantization, [`Algorithm::Auto`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollectiveOptions {
    /// Identifies the operation among those in flight on the communicator: every member uses
    /// the same tag for the same operation; tags in flight on one communicator must differ
    /// (else `InvalidUsage`).
    pub tag: u64,
    /// Cancels the operation on every member when it has not finished this long after it
    /// started here: every member gets [`Error::Timeout`] and no buffer is touched after the
    /// call (or wait) returned. `None` (or zero): the communicator's timeout, else none.
    pub timeout: Option<Duration>,
    /// `PCCL_COLLECTIVE_ABORT_ON_ERROR`: the library logs and calls `abort()` when the
    /// operation fails or times out (TorchComms' `abort_process_on_timeout_or_error`).
    pub abort_on_error: bool,
    /// This member's factor for [`ReduceOp::PremulSum`] (each member may pass its own).
    pub premul_scalar: f64,
    /// `Some((quantized type, algorithm))` quantizes the traffic of reduce and reduce-scatter
    /// (float data only; any other operation refuses it with `InvalidArgument`).
    pub quantization: Option<(DataType, QuantizationAlgorithm)>,
    /// The algorithm the operation must run. [`Algorithm::Auto`]: the group's tuned table
    /// ([`Communicator::tune`]), else the built-in rule. Every member must pass the same (else
    /// [`Error::InvalidUsage`] for all, before any data moves); one that cannot run the
    /// operation (`Relay` above the master's relay bound, `Direct` on anything but an
    /// all-reduce or above 4 MiB, anything but `Ring` / `RingStriped` for a quantized or
    /// PremulSum operation) is [`Error::InvalidArgument`]. Send / recv ignore it.
    pub algorithm: Algorithm,
}

impl Default for CollectiveOptions {
    fn default() -> CollectiveOptions {
        CollectiveOptions {
            tag: 0,
            timeout: None,
            abort_on_error: false,
            premul_scalar: 1.0,
            quantization: None,
            algorithm: Algorithm::Auto,
        }
    }
}

impl CollectiveOptions {
    /// Every option at its default.
    pub fn new() -> CollectiveOptions {
        CollectiveOptions::default()
    }
    /// The same options with `tag`.
    pub fn tag(mut self, tag: u64) -> CollectiveOptions {
        self.tag = tag;
        self
    }
    /// The same options with an operation timeout (rounded up to whole milliseconds).
    pub fn timeout(mut self, timeout: Duration) -> CollectiveOptions {
        self.timeout = Some(timeout);
        self
    }
    /// The same options with abort-on-error on or off.
    pub fn abort_on_error(mut self, on: bool) -> CollectiveOptions {
        self.abort_on_error = on;
        self
    }
    /// The same options with this member's [`ReduceOp::PremulSum`] factor.
    pub fn premul_scalar(mut self, factor: f64) -> CollectiveOptions {
        self.premul_scalar = factor;
        self
    }
    /// The same options quantizing a reduce's or reduce-scatter's traffic.
    pub fn quantize(
        mut self,
        datatype: DataType,
        algorithm: QuantizationAlgorithm,
    ) -> CollectiveOptions {
        self.quantization = Some((datatype, algorithm));
        self
    }
    /// The same options forcing `algorithm` ([`CollectiveOptions::algorithm`]).
    pub fn algorithm(mut self, algorithm: Algorithm) -> CollectiveOptions {
        self.algorithm = algorithm;
        self
    }

    fn to_raw(self) -> sys::pcclCollectiveOptions_t {
        let (qdt, qalg) = match self.quantization {
            Some((d, a)) => (d.to_raw(), a.to_raw()),
            None => (sys::pcclUint8, sys::pcclQuantNone),
        };
        sys::pcclCollectiveOptions_t {
            timeout_ms: duration_ms(self.timeout),
            tag: self.tag,
            flags: if self.abort_on_error {
                sys::PCCL_COLLECTIVE_ABORT_ON_ERROR
            } else {
                0
            },
            premul_scalar: self.premul_scalar,
            quantization_options: sys::pcclQuantizationOptions_t {
                quantized_datatype: qdt,
                algorithm: qalg,
            },
            algorithm: self.algorithm.to_raw(),
            ..sys::PCCL_COLLECTIVE_OPTIONS_INIT
        }
    }
}

/// `pcclCollectiveInfo_t`: statistics of one finished operation of the collective set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CollectiveInfo {
    /// Members of the operation (the world its ranks refer to).
    pub world_size: u32,
    /// This peer's rank in it.
    pub rank: u32,
    /// The epoch it ran in.
    pub epoch: u64,
    /// Bytes this peer sent on its links.
    pub tx_bytes: u64,
    /// Bytes this peer received on its links.
    pub rx_bytes: u64,
}

impl From<sys::pcclCollectiveInfo_t> for CollectiveInfo {
    fn from(i: sys::pcclCollectiveInfo_t) -> CollectiveInfo {
        CollectiveInfo {
            world_size: i.world_size,
            rank: i.rank,
            epoch: i.epoch,
            tx_bytes: i.tx_bytes,
            rx_bytes: i.rx_bytes,
        }
    }
}

type DT = sys::pcclDataType_t;

/// One validated call of the collective set, as the raw arguments of its C functions. The
/// pointer arrays of the list forms live here: the library keeps using them until the
/// operation ends, so a [`Work`] keeps its `Call`.
#[derive(Debug)]
#[rustfmt::skip]
enum Call {
    AllReduce(*const c_void, *mut c_void, sys::pcclReduceDescriptor_t),
    Broadcast(*mut c_void, usize, DT, c_int),
    Reduce(*const c_void, *mut c_void, usize, DT, sys::pcclRedOp_t, c_int),
    AllGather(*const c_void, *mut c_void, usize, DT),
    ReduceScatter(*const c_void, *mut c_void, usize, DT, sys::pcclRedOp_t),
    AllToAll(*const c_void, *mut c_void, usize, DT),
    AllToAllV(*const c_void, Vec<usize>, *mut c_void, Vec<usize>, DT),
    Gather(*const c_void, *mut c_void, usize, DT, c_int),
    Scatter(*const c_void, *mut c_void, usize, DT, c_int),
    Barrier,
    Send(*const c_void, usize, DT, c_int),
    Recv(*mut c_void, usize, DT, c_int),
    AllGatherList(*const c_void, Vec<*mut c_void>, usize, DT),
    ReduceScatterList(Vec<*const c_void>, *mut c_void, usize, DT, sys::pcclRedOp_t),
    AllToAllList(Vec<*const c_void>, Vec<*mut c_void>, usize, DT),
    GatherList(*const c_void, Vec<*mut c_void>, usize, DT, c_int),
    ScatterList(Vec<*const c_void>, *mut c_void, usize, DT, c_int),
}

/// Where a call's outcome goes: the blocking form's info, or the asynchronous form's work.
#[derive(Clone, Copy)]
enum Out {
    Info(*mut sys::pcclCollectiveInfo_t),
    Work(*mut *mut sys::pcclWork_t),
}

macro_rules! either {
    ($out:expr, $blocking:ident, $start:ident, $($arg:expr),*) => {
        match $out {
            Out::Info(i) => sys::$blocking($($arg),*, i),
            Out::Work(w) => sys::$start($($arg),*, w),
        }
    };
}

/// A list's pointer, null when it is empty (a root-only list on another member).
fn list_ptr<P>(v: &[P]) -> *const P {
    if v.is_empty() {
        ptr::null()
    } else {
        v.as_ptr()
    }
}

impl Call {
    /// Calls the C function.
    ///
    /// # Safety
    /// The pointers hold the sizes the call's builder checked, stay valid (and, for outputs,
    /// unaliased) until the blocking call returned or the work object was waited for or
    /// freed; `c` is a live communicator.
    #[rustfmt::skip]
    unsafe fn invoke(
        &self,
        o: *const sys::pcclCollectiveOptions_t,
        c: *const sys::pcclComm_t,
        out: Out,
    ) -> sys::pcclResult_t {
        use Call::*;
        match self {
            AllReduce(s, r, d) =>
                either!(out, pcclAllReduceEx, pcclAllReduceExAsync, *s, *r, d, o, c),
            Broadcast(b, n, t, root) =>
                either!(out, pcclBroadcast, pcclBroadcastAsync, *b, *n, *t, *root, o, c),
            Reduce(s, r, n, t, op, root) =>
                either!(out, pcclReduce, pcclReduceAsync, *s, *r, *n, *t, *op, *root, o, c),
            AllGather(s, r, n, t) =>
                either!(out, pcclAllGather, pcclAllGatherAsync, *s, *r, *n, *t, o, c),
            ReduceScatter(s, r, n, t, op) =>
                either!(out, pcclReduceScatter, pcclReduceScatterAsync, *s, *r, *n, *t, *op, o, c),
            AllToAll(s, r, n, t) =>
                either!(out, pcclAllToAll, pcclAllToAllAsync, *s, *r, *n, *t, o, c),
            AllToAllV(s, sc, r, rc, t) =>
                either!(out, pcclAllToAllV, pcclAllToAllVAsync,
                        *s, sc.as_ptr(), *r, rc.as_ptr(), *t, o, c),
            Gather(s, r, n, t, root) =>
                either!(out, pcclGather, pcclGatherAsync, *s, *r, *n, *t, *root, o, c),
            Scatter(s, r, n, t, root) =>
                either!(out, pcclScatter, pcclScatterAsync, *s, *r, *n, *t, *root, o, c),
            Barrier => either!(out, pcclBarrier, pcclBarrierAsync, o, c),
            Send(s, n, t, peer) => either!(out, pcclSend, pcclSendAsync, *s, *n, *t, *peer, o, c),
            Recv(r, n, t, peer) => either!(out, pcclRecv, pcclRecvAsync, *r, *n, *t, *peer, o, c),
            AllGatherList(s, rs, n, t) =>
                either!(out, pcclAllGatherList, pcclAllGatherListAsync,
                        *s, rs.as_ptr(), rs.len(), *n, *t, o, c),
            ReduceScatterList(ss, r, n, t, op) =>
                either!(out, pcclReduceScatterList, pcclReduceScatterListAsync,
                        ss.as_ptr(), ss.len(), *r, *n, *t, *op, o, c),
            AllToAllList(ss, rs, n, t) =>
                either!(out, pcclAllToAllList, pcclAllToAllListAsync,
                        ss.as_ptr(), rs.as_ptr(), rs.len(), *n, *t, o, c),
            GatherList(s, rs, n, t, root) =>
                either!(out, pcclGatherList, pcclGatherListAsync,
                        *s, list_ptr(rs), rs.len(), *n, *t, *root, o, c),
            ScatterList(ss, r, n, t, root) =>
                either!(out, pcclScatterList, pcclScatterListAsync,
                        list_ptr(ss), ss.len(), *r, *n, *t, *root, o, c),
        }
    }
}

/// A rank as the C API's `int`.
fn rank_arg(r: u32) -> Result<c_int> {
    if r > c_int::MAX as u32 {
        Err(Error::InvalidArgument)
    } else {
        Ok(r as c_int)
    }
}

fn cp<T>(s: &[T]) -> *const c_void {
    s.as_ptr() as *const c_void
}

fn mp<T>(s: &mut [T]) -> *mut c_void {
    s.as_mut_ptr() as *mut c_void
}

fn ensure(ok: bool) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument)
    }
}

/// The builders of every call: they check the slices against the world and rank and return
/// the raw call, shared by the blocking and the asynchronous forms.
impl Communicator {
    /// (world, rank) for sizing; `TooFewPeers` below two members, as the library.
    fn geometry(&self) -> Result<(usize, i64)> {
        let world = self.world_size()? as usize;
        if world < 2 {
            return Err(Error::TooFewPeers);
        }
        let rank = self.attribute(Attribute::Rank)? as i64;
        Ok((world, rank))
    }

    fn c_all_reduce<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        reduce: ReduceOptions,
    ) -> Result<Call> {
        ensure(send.len() == recv.len())?;
        let d = reduce.descriptor(send.len(), T::DATA_TYPE);
        Ok(Call::AllReduce(cp(send), mp(recv), d))
    }

    fn c_reduce<T: Element>(
        &self,
        send: *const T,
        len: usize,
        recv: Option<(*mut T, usize)>,
        op: ReduceOp,
        root: u32,
    ) -> Result<Call> {
        let (_, rank) = self.geometry()?;
        let recv = if rank == root as i64 {
            match recv {
                Some((p, n)) if n == len => p as *mut c_void,
                _ => return Err(Error::InvalidArgument),
            }
        } else {
            ptr::null_mut()
        };
        let t = T::DATA_TYPE.to_raw();
        Ok(Call::Reduce(
            send as *const c_void,
            recv,
            len,
            t,
            op.to_raw(),
            rank_arg(root)?,
        ))
    }

    fn c_all_gather<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<Call> {
        let (world, _) = self.geometry()?;
        ensure(recv.len() == send.len().saturating_mul(world))?;
        Ok(Call::AllGather(
            cp(send),
            mp(recv),
            send.len(),
            T::DATA_TYPE.to_raw(),
        ))
    }

    fn c_reduce_scatter<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<Call> {
        let (world, _) = self.geometry()?;
        ensure(send.len() == recv.len().saturating_mul(world))?;
        let t = T::DATA_TYPE.to_raw();
        Ok(Call::ReduceScatter(
            cp(send),
            mp(recv),
            recv.len(),
            t,
            op.to_raw(),
        ))
    }

    fn c_all_to_all<T: Element>(&self, send: *const T, recv: *mut T, len: usize) -> Result<Call> {
        let (world, _) = self.geometry()?;
        ensure(len % world == 0)?;
        let t = T::DATA_TYPE.to_raw();
        Ok(Call::AllToAll(
            send as *const c_void,
            recv as *mut c_void,
            len / world,
            t,
        ))
    }

    fn c_all_to_all_v<T: Element>(
        &self,
        send: &[T],
        send_counts: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
    ) -> Result<Call> {
        let (world, _) = self.geometry()?;
        ensure(send_counts.len() == world && recv_counts.len() == world)?;
        let sum = |c: &[usize]| c.iter().try_fold(0usize, |a, &x| a.checked_add(x));
        ensure(sum(send_counts) == Some(send.len()) && sum(recv_counts) == Some(recv.len()))?;
        Ok(Call::AllToAllV(
            cp(send),
            send_counts.to_vec(),
            mp(recv),
            recv_counts.to_vec(),
            T::DATA_TYPE.to_raw(),
        ))
    }

    fn c_gather<T: Element>(&self, send: &[T], recv: Option<&mut [T]>, root: u32) -> Result<Call> {
        let (world, rank) = self.geometry()?;
        let r = if rank == root as i64 {
            match recv {
                Some(r) if r.len() == send.len().saturating_mul(world) => mp(r),
                _ => return Err(Error::InvalidArgument),
            }
        } else {
            ptr::null_mut()
        };
        let t = T::DATA_TYPE.to_raw();
        Ok(Call::Gather(cp(send), r, send.len(), t, rank_arg(root)?))
    }

    fn c_scatter<T: Element>(&self, send: Option<&[T]>, recv: &mut [T], root: u32) -> Result<Call> {
        let (world, rank) = self.geometry()?;
        let s = if rank == root as i64 {
            match send {
                Some(s) if s.len() == recv.len().saturating_mul(world) => cp(s),
                _ => return Err(Error::InvalidArgument),
            }
        } else {
            ptr::null()
        };
        let t = T::DATA_TYPE.to_raw();
        Ok(Call::Scatter(s, mp(recv), recv.len(), t, rank_arg(root)?))
    }

    /// Every buffer of a list holds `count` elements and there is one per member.
    fn list_ok(
        world: usize,
        lens: impl ExactSizeIterator<Item = usize>,
        count: usize,
    ) -> Result<()> {
        ensure(lens.len() == world)?;
        let mut lens = lens;
        ensure(lens.all(|n| n == count))
    }

    fn c_all_gather_list<T: Element>(&self, send: &[T], recv: &mut [&mut [T]]) -> Result<Call> {
        let (world, _) = self.geometry()?;
        Communicator::list_ok(world, recv.iter().map(|r| r.len()), send.len())?;
        let rs = recv.iter_mut().map(|r| mp(r)).collect();
        Ok(Call::AllGatherList(
            cp(send),
            rs,
            send.len(),
            T::DATA_TYPE.to_raw(),
        ))
    }

    fn c_reduce_scatter_list<T: Element>(
        &self,
        send: &[&[T]],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<Call> {
        let (world, _) = self.geometry()?;
        Communicator::list_ok(world, send.iter().map(|s| s.len()), recv.len())?;
        let ss = send.iter().map(|s| cp(s)).collect();
        let t = T::DATA_TYPE.to_raw();
        Ok(Call::ReduceScatterList(
            ss,
            mp(recv),
            recv.len(),
            t,
            op.to_raw(),
        ))
    }

    fn c_all_to_all_list<T: Element>(&self, send: &[&[T]], recv: &mut [&mut [T]]) -> Result<Call> {
        let (world, _) = self.geometry()?;
        let count = send.first().map_or(0, |s| s.len());
        Communicator::list_ok(world, send.iter().map(|s| s.len()), count)?;
        Communicator::list_ok(world, recv.iter().map(|r| r.len()), count)?;
        let ss = send.iter().map(|s| cp(s)).collect();
        let rs = recv.iter_mut().map(|r| mp(r)).collect();
        Ok(Call::AllToAllList(ss, rs, count, T::DATA_TYPE.to_raw()))
    }

    fn c_gather_list<T: Element>(
        &self,
        send: &[T],
        recv: &mut [&mut [T]],
        root: u32,
    ) -> Result<Call> {
        let (world, rank) = self.geometry()?;
        let rs = if rank == root as i64 {
            Communicator::list_ok(world, recv.iter().map(|r| r.len()), send.len())?;
            recv.iter_mut().map(|r| mp(r)).collect()
        } else {
            Vec::new()
        };
        let t = T::DATA_TYPE.to_raw();
        Ok(Call::GatherList(
            cp(send),
            rs,
            send.len(),
            t,
            rank_arg(root)?,
        ))
    }

    fn c_scatter_list<T: Element>(&self, send: &[&[T]], recv: &mut [T], root: u32) -> Result<Call> {
        let (world, rank) = self.geometry()?;
        let ss = if rank == root as i64 {
            Communicator::list_ok(world, send.iter().map(|s| s.len()), recv.len())?;
            send.iter().map(|s| cp(s)).collect()
        } else {
            Vec::new()
        };
        let t = T::DATA_TYPE.to_raw();
        Ok(Call::ScatterList(
            ss,
            mp(recv),
            recv.len(),
            t,
            rank_arg(root)?,
        ))
    }

    /// Runs a call to its verdict. The collective set never touches a buffer after its call
    /// returned, also on `Timeout`, so nothing needs closing here.
    fn run(&self, call: Call, options: CollectiveOptions) -> Result<CollectiveInfo> {
        let c = self.ptr()?;
        let o = options.to_raw();
        let mut info = sys::pcclCollectiveInfo_t::default();
        // SAFETY: the builder checked the sizes; the slices are borrowed by the caller's
        // method for the whole call.
        check(unsafe { call.invoke(&o, c, Out::Info(&mut info)) })?;
        Ok(info.into())
    }

    /// Registers a started work object; its id names it from then on.
    fn register_work(&self, w: *mut sys::pcclWork_t) -> u64 {
        let id = self.next_work.get();
        self.next_work.set(id + 1);
        self.works.borrow_mut().push((id, w));
        id
    }

    fn work_ptr(&self, id: u64) -> Option<*mut sys::pcclWork_t> {
        self.works
            .borrow()
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, w)| *w)
    }

    /// Frees the work object `id` when it is still registered (waiting for it if it runs).
    pub(crate) fn free_work(&self, id: u64) {
        let w = {
            let mut v = self.works.borrow_mut();
            match v.iter().position(|(i, _)| *i == id) {
                Some(i) => v.swap_remove(i).1,
                None => return,
            }
        };
        // SAFETY: w was live and is now out of the registry, so nobody frees it again.
        unsafe { sys::pcclWorkFree(w) };
    }
}

/// Blocking forms. Every one returns when the operation has its verdict (the same on every
/// member); errors as `pcclBroadcast` in pccl.h: `InvalidArgument` (slices that do not fit
/// the world, a root or peer outside it, an op the type has no kernel for),
/// `InvalidUsage` (not connected, members disagree, tag in flight), `TooFewPeers`,
/// `UpdateTopologyFailed` (the group changed before every member started: update the
/// topology, read world and rank again, retry), `RankConnectionLost` (retry),
/// `MasterConnectionFailed`, `Timeout` (cancelled on every member; buffers untouched after
/// the return). Ranks (`root`, `peer`) are those of the caller's group in its current epoch
/// ([`crate::Attribute::Rank`]).
impl Communicator {
    /// All-reduce with the collective set's options (`pcclAllReduceEx`): the tag is
    /// `reduce.tag`, quantization is `reduce`'s; `options` adds the timeout, abort on error, the
    /// [`ReduceOp::PremulSum`] factor and the algorithm ([`CollectiveOptions::algorithm`]).
    pub fn all_reduce_with<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        reduce: impl Into<ReduceOptions>,
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = self.c_all_reduce(send, recv, reduce.into())?;
        self.run(call, options)
    }

    /// Broadcast (`pcclBroadcast`): `root`'s `buf` is copied into every member's `buf` (the
    /// same length everywhere).
    pub fn broadcast<T: Element>(
        &self,
        buf: &mut [T],
        root: u32,
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = Call::Broadcast(mp(buf), buf.len(), T::DATA_TYPE.to_raw(), rank_arg(root)?);
        self.run(call, options)
    }

    /// Reduce (`pcclReduce`): the reduction of every member's `send` lands in `root`'s
    /// `recv` (required there, the length of `send`; ignored elsewhere).
    pub fn reduce<T: Element>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        op: ReduceOp,
        root: u32,
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let recv = recv.map(|r| (r.as_mut_ptr(), r.len()));
        let call = self.c_reduce(send.as_ptr(), send.len(), recv, op, root)?;
        self.run(call, options)
    }

    /// Reduce in place: the root's `buf` becomes the reduction (restored bit for bit when the
    /// operation fails); the others' is only read.
    pub fn reduce_in_place<T: Element>(
        &self,
        buf: &mut [T],
        op: ReduceOp,
        root: u32,
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let p = buf.as_mut_ptr();
        let call = self.c_reduce(p, buf.len(), Some((p, buf.len())), op, root)?;
        self.run(call, options)
    }

    /// All-gather (`pcclAllGather`): every member's `send` lands in block r (r its rank) of
    /// every member's `recv` (world × `send.len()` elements).
    pub fn all_gather<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = self.c_all_gather(send, recv)?;
        self.run(call, options)
    }

    /// All-gather into one buffer per member (`pcclAllGatherList`): `recv[r]` receives rank
    /// r's `send`; `recv` has world entries of `send.len()` elements. Untouched on failure.
    pub fn all_gather_list<T: Element>(
        &self,
        send: &[T],
        recv: &mut [&mut [T]],
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = self.c_all_gather_list(send, recv)?;
        self.run(call, options)
    }

    /// Reduce-scatter (`pcclReduceScatter`): block r of the reduction of every member's `send`
    /// (world × `recv.len()` elements) lands in rank r's `recv`.
    pub fn reduce_scatter<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = self.c_reduce_scatter(send, recv, op)?;
        self.run(call, options)
    }

    /// Reduce-scatter from one buffer per member (`pcclReduceScatterList`): rank r receives
    /// the reduction of every member's `send[r]`.
    pub fn reduce_scatter_list<T: Element>(
        &self,
        send: &[&[T]],
        recv: &mut [T],
        op: ReduceOp,
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = self.c_reduce_scatter_list(send, recv, op)?;
        self.run(call, options)
    }

    /// All-to-all (`pcclAllToAll`): block j of rank i's `send` lands in block i of rank j's
    /// `recv` (equal lengths, a multiple of the world).
    pub fn all_to_all<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        ensure(send.len() == recv.len())?;
        let call = self.c_all_to_all(send.as_ptr(), recv.as_mut_ptr(), send.len())?;
        self.run(call, options)
    }

    /// All-to-all in place (restored bit for bit when it fails).
    pub fn all_to_all_in_place<T: Element>(
        &self,
        buf: &mut [T],
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let p = buf.as_mut_ptr();
        let call = self.c_all_to_all(p as *const T, p, buf.len())?;
        self.run(call, options)
    }

    /// All-to-all over one buffer per member (`pcclAllToAllList`): `send[j]` of rank i lands
    /// in `recv[i]` of rank j; world entries each, all of one length.
    pub fn all_to_all_list<T: Element>(
        &self,
        send: &[&[T]],
        recv: &mut [&mut [T]],
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = self.c_all_to_all_list(send, recv)?;
        self.run(call, options)
    }

    /// All-to-all with split sizes (`pcclAllToAllV`): this rank sends `send_counts[j]`
    /// elements to rank j, taken in rank order from `send`, and receives `recv_counts[j]` from
    /// rank j into `recv` in rank order. Both count lists have world entries and sum to their
    /// buffer's length (else `InvalidArgument` here); what i sends to j must be what j expects
    /// from i (else `InvalidUsage` for every member).
    pub fn all_to_all_v<T: Element>(
        &self,
        send: &[T],
        send_counts: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = self.c_all_to_all_v(send, send_counts, recv, recv_counts)?;
        self.run(call, options)
    }

    /// Gather (`pcclGather`): every member's `send` lands in block r of `root`'s `recv`
    /// (required there, world × `send.len()` elements; ignored elsewhere).
    pub fn gather<T: Element>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        root: u32,
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = self.c_gather(send, recv, root)?;
        self.run(call, options)
    }

    /// Gather into the root's buffers (`pcclGatherList`): world entries of `send.len()`
    /// elements at the root; ignored elsewhere (pass `&mut []`).
    pub fn gather_list<T: Element>(
        &self,
        send: &[T],
        recv: &mut [&mut [T]],
        root: u32,
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = self.c_gather_list(send, recv, root)?;
        self.run(call, options)
    }

    /// Scatter (`pcclScatter`): block r of `root`'s `send` (required there, world ×
    /// `recv.len()` elements; ignored elsewhere) lands in rank r's `recv`.
    pub fn scatter<T: Element>(
        &self,
        send: Option<&[T]>,
        recv: &mut [T],
        root: u32,
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = self.c_scatter(send, recv, root)?;
        self.run(call, options)
    }

    /// Scatter from the root's buffers (`pcclScatterList`): world entries of `recv.len()`
    /// elements at the root; ignored elsewhere (pass `&[]`).
    pub fn scatter_list<T: Element>(
        &self,
        send: &[&[T]],
        recv: &mut [T],
        root: u32,
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = self.c_scatter_list(send, recv, root)?;
        self.run(call, options)
    }

    /// Barrier (`pcclBarrier`): returns once every member of the group entered it.
    pub fn barrier(&self, options: CollectiveOptions) -> Result<CollectiveInfo> {
        self.run(Call::Barrier, options)
    }

    /// Sends `buf` to rank `peer` (`pcclSend`), which receives it with
    /// [`Communicator::recv`] naming this rank, with the same tag, length and type; returns
    /// when the receiver has every byte. `InvalidArgument` for `peer` outside the world or
    /// this peer's own rank.
    pub fn send<T: Element>(
        &self,
        buf: &[T],
        peer: u32,
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = Call::Send(cp(buf), buf.len(), T::DATA_TYPE.to_raw(), rank_arg(peer)?);
        self.run(call, options)
    }

    /// Receives `buf.len()` elements from rank `peer` (`pcclRecv`): the other half of
    /// [`Communicator::send`]. On failure `buf`'s contents are undefined.
    pub fn recv<T: Element>(
        &self,
        buf: &mut [T],
        peer: u32,
        options: CollectiveOptions,
    ) -> Result<CollectiveInfo> {
        let call = Call::Recv(mp(buf), buf.len(), T::DATA_TYPE.to_raw(), rank_arg(peer)?);
        self.run(call, options)
    }

    /// A new communicator over the listed ranks of this peer's group (`pcclCommSplit`,
    /// TorchComms `split`; docs/collectives-split.md): every listed rank calls it with the same
    /// set (any order); the child's ranks follow the parent's order; it has its own peer group
    /// and the parent's master and options. The children join the run as new peers, so **every
    /// other accepted peer of the run must call [`Communicator::update_topology`]** meanwhile
    /// (not `are_peers_pending`). An empty list gives `Ok(None)`. Drop the child to leave.
    /// Errors: `InvalidArgument` (a rank out of range, listed twice, or a list without this
    /// peer's rank), `UpdateTopologyFailed` (update the topology, read ranks again, retry),
    /// `Timeout` (the children were not all admitted within the communicator's timeout, 60 s
    /// without one), the errors of [`Communicator::connect`]. On failure nothing is left joined.
    pub fn split(&mut self, ranks: &[u32]) -> Result<Option<Communicator>> {
        let p = self.ptr()?;
        let raw: Vec<c_int> = ranks
            .iter()
            .map(|&r| rank_arg(r))
            .collect::<Result<Vec<c_int>>>()?;
        let mut child = ptr::null_mut();
        // SAFETY: p is live and &mut self makes this the only call; the list lives across it.
        check(unsafe { sys::pcclCommSplit(p, list_ptr(&raw), raw.len(), &mut child) })?;
        if child.is_null() {
            Ok(None)
        } else {
            Ok(Some(Communicator::from_raw(child, self.timeout_ms)))
        }
    }
}

/// Asynchronous forms: each starts the operation and returns a [`Work`]; its buffers stay
/// borrowed until the scope ends. Errors at the start as the blocking forms' refusals
/// (nothing started); the verdict comes from [`Work::wait`]. Up to 16 operations (these and
/// asynchronous all-reduces) may be in flight on one communicator, on distinct tags.
impl<'scope, 'env> AsyncScope<'scope, 'env> {
    fn start_work(&'scope self, call: Call, options: CollectiveOptions) -> Result<Work<'scope>> {
        let c = self.comm.ptr()?;
        let o = options.to_raw();
        let mut w = ptr::null_mut();
        // SAFETY: the builder checked the sizes; the buffers are borrowed for 'scope and the
        // scope frees (waiting for) every work object before it ends.
        check(unsafe { call.invoke(&o, c, Out::Work(&mut w)) })?;
        let id = self.comm.register_work(w);
        self.works.borrow_mut().push(id);
        let tag = match &call {
            Call::AllReduce(_, _, d) => d.tag,
            _ => options.tag,
        };
        Ok(Work {
            comm: self.comm,
            id,
            tag,
            result: None,
            _call: call,
            _borrow: PhantomData,
        })
    }

    /// Starts [`Communicator::all_reduce_with`] (`pcclAllReduceExAsync`).
    pub fn all_reduce_with<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        reduce: impl Into<ReduceOptions>,
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let call = self.comm.c_all_reduce(send, recv, reduce.into())?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::broadcast`].
    pub fn broadcast<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        root: u32,
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let call = Call::Broadcast(mp(buf), buf.len(), T::DATA_TYPE.to_raw(), rank_arg(root)?);
        self.start_work(call, options)
    }

    /// Starts [`Communicator::reduce`].
    pub fn reduce<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: Option<&'scope mut [T]>,
        op: ReduceOp,
        root: u32,
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let recv = recv.map(|r| (r.as_mut_ptr(), r.len()));
        let call = self
            .comm
            .c_reduce(send.as_ptr(), send.len(), recv, op, root)?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::reduce_in_place`].
    pub fn reduce_in_place<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        op: ReduceOp,
        root: u32,
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let p = buf.as_mut_ptr();
        let call = self
            .comm
            .c_reduce(p, buf.len(), Some((p, buf.len())), op, root)?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::all_gather`].
    pub fn all_gather<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let call = self.comm.c_all_gather(send, recv)?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::all_gather_list`]. The list itself stays borrowed for the scope
    /// too, so its entries cannot be reached before the scope ends (the same for every list
    /// of outputs below).
    pub fn all_gather_list<'b, T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [&'b mut [T]],
        options: CollectiveOptions,
    ) -> Result<Work<'scope>>
    where
        'b: 'scope,
    {
        let call = self.comm.c_all_gather_list(send, recv)?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::reduce_scatter`].
    pub fn reduce_scatter<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: ReduceOp,
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let call = self.comm.c_reduce_scatter(send, recv, op)?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::reduce_scatter_list`].
    pub fn reduce_scatter_list<T: Element>(
        &'scope self,
        send: &'scope [&'scope [T]],
        recv: &'scope mut [T],
        op: ReduceOp,
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let call = self.comm.c_reduce_scatter_list(send, recv, op)?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::all_to_all`].
    pub fn all_to_all<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        ensure(send.len() == recv.len())?;
        let call = self
            .comm
            .c_all_to_all(send.as_ptr(), recv.as_mut_ptr(), send.len())?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::all_to_all_in_place`].
    pub fn all_to_all_in_place<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let p = buf.as_mut_ptr();
        let call = self.comm.c_all_to_all(p as *const T, p, buf.len())?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::all_to_all_list`].
    pub fn all_to_all_list<'b, T: Element>(
        &'scope self,
        send: &'scope [&'scope [T]],
        recv: &'scope mut [&'b mut [T]],
        options: CollectiveOptions,
    ) -> Result<Work<'scope>>
    where
        'b: 'scope,
    {
        let call = self.comm.c_all_to_all_list(send, recv)?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::all_to_all_v`].
    pub fn all_to_all_v<T: Element>(
        &'scope self,
        send: &'scope [T],
        send_counts: &[usize],
        recv: &'scope mut [T],
        recv_counts: &[usize],
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let call = self
            .comm
            .c_all_to_all_v(send, send_counts, recv, recv_counts)?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::gather`].
    pub fn gather<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: Option<&'scope mut [T]>,
        root: u32,
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let call = self.comm.c_gather(send, recv, root)?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::gather_list`].
    pub fn gather_list<'b, T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [&'b mut [T]],
        root: u32,
        options: CollectiveOptions,
    ) -> Result<Work<'scope>>
    where
        'b: 'scope,
    {
        let call = self.comm.c_gather_list(send, recv, root)?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::scatter`].
    pub fn scatter<T: Element>(
        &'scope self,
        send: Option<&'scope [T]>,
        recv: &'scope mut [T],
        root: u32,
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let call = self.comm.c_scatter(send, recv, root)?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::scatter_list`].
    pub fn scatter_list<T: Element>(
        &'scope self,
        send: &'scope [&'scope [T]],
        recv: &'scope mut [T],
        root: u32,
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let call = self.comm.c_scatter_list(send, recv, root)?;
        self.start_work(call, options)
    }

    /// Starts [`Communicator::barrier`].
    pub fn barrier(&'scope self, options: CollectiveOptions) -> Result<Work<'scope>> {
        self.start_work(Call::Barrier, options)
    }

    /// Starts [`Communicator::send`].
    pub fn send<T: Element>(
        &'scope self,
        buf: &'scope [T],
        peer: u32,
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let call = Call::Send(cp(buf), buf.len(), T::DATA_TYPE.to_raw(), rank_arg(peer)?);
        self.start_work(call, options)
    }

    /// Starts [`Communicator::recv`].
    pub fn recv<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        peer: u32,
        options: CollectiveOptions,
    ) -> Result<Work<'scope>> {
        let call = Call::Recv(mp(buf), buf.len(), T::DATA_TYPE.to_raw(), rank_arg(peer)?);
        self.start_work(call, options)
    }
}

/// A started operation of the collective set (`pcclWork_t`), borrowing its buffers for the
/// scope. Dropping it waits for the verdict (and frees the work object); the scope's end frees
/// any work still alive (e.g. one leaked with `mem::forget`), waiting for it first. If the
/// communicator was closed meanwhile (a timed-out all-reduce, see [`Communicator`]), its
/// work objects were waited for and freed then, and the handle reports `InvalidUsage`.
///
/// ```no_run
/// # fn demo(comm: &pccl::Communicator) -> pccl::Result<()> {
/// use pccl::{CollectiveOptions, ReduceOp};
/// let world = comm.world_size()? as usize;
/// let mine = vec![1.0f32; 4];
/// let mut all = vec![0.0f32; 4 * world];
/// let mut blocks = vec![vec![0i64; 2]; world];
/// let mut views: Vec<&mut [i64]> = blocks.iter_mut().map(|b| b.as_mut_slice()).collect();
/// comm.async_scope(|s| {
///     let a = s.all_gather(&mine, &mut all, CollectiveOptions::new().tag(1))?;
///     let b = s.all_gather_list(&[7, 8], &mut views, CollectiveOptions::new().tag(2))?;
///     // ... compute something else meanwhile ...
///     b.wait()?;
///     a.wait().map(|info| println!("epoch {}", info.epoch))
/// })?;
/// println!("{} {}", all[0], blocks[0][0]);
/// # Ok(()) }
/// ```
///
/// Reading a buffer while its operation may write it does not compile:
///
/// ```compile_fail
/// # fn demo(comm: &pccl::Communicator) -> pccl::Result<()> {
/// let mut buf = vec![0i32; 4];
/// comm.async_scope(|s| {
///     let w = s.broadcast(&mut buf, 0, pccl::CollectiveOptions::new())?;
///     println!("{}", buf[0]); // error: `buf` is borrowed by the operation
///     w.wait().map(|_| ())
/// })?;
/// # Ok(()) }
/// ```
///
/// Nor does reaching an output of a list form through its list:
///
/// ```compile_fail
/// # fn demo(comm: &pccl::Communicator) -> pccl::Result<()> {
/// let mut blocks = vec![vec![0i64; 2]; 2];
/// let mut views: Vec<&mut [i64]> = blocks.iter_mut().map(|b| b.as_mut_slice()).collect();
/// comm.async_scope(|s| {
///     let w = s.all_gather_list(&[7, 8], &mut views, pccl::CollectiveOptions::new())?;
///     views[0][0] = 5; // error: the list is borrowed by the operation
///     w.wait().map(|_| ())
/// })?;
/// # Ok(()) }
/// ```
///
/// Nor `split` (which needs `&mut`) while a scope is open:
///
/// ```compile_fail
/// # fn demo(comm: &mut pccl::Communicator) -> pccl::Result<()> {
/// comm.async_scope(|s| {
///     let w = s.barrier(pccl::CollectiveOptions::new())?;
///     let _child = comm.split(&[0, 1])?;
///     w.wait().map(|_| ())
/// })?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Work<'scope> {
    comm: &'scope Communicator,
    id: u64,
    tag: u64,
    result: Option<Result<CollectiveInfo>>,
    /// Keeps the list forms' pointer arrays alive while the library reads them.
    _call: Call,
    _borrow: PhantomData<&'scope mut ()>,
}

impl<'scope> Work<'scope> {
    /// The operation's tag.
    pub fn tag(&self) -> u64 {
        self.tag
    }

    fn settle(&mut self, r: Result<CollectiveInfo>) -> Result<CollectiveInfo> {
        self.result = Some(r);
        self.comm.free_work(self.id);
        r
    }

    fn complete(&mut self) -> Result<CollectiveInfo> {
        if let Some(r) = self.result {
            return r;
        }
        let w = match self.comm.work_ptr(self.id) {
            Some(w) => w,
            None => return self.settle(Err(Error::InvalidUsage)),
        };
        let mut info = sys::pcclCollectiveInfo_t::default();
        // SAFETY: w is registered, so live.
        let r = unsafe { sys::pcclWorkWait(w, &mut info) };
        self.settle(check(r).map(|_| info.into()))
    }

    /// Waits for the verdict (`pcclWorkWait`: bounded by the operation's timeout, else the
    /// communicator's, plus 5 s for the master's answer; unbounded without either). Errors as
    /// the blocking form; `Timeout` when the operation was cancelled by a timeout (its buffers
    /// are no longer touched).
    pub fn wait(mut self) -> Result<CollectiveInfo> {
        self.complete()
    }

    /// Waits at most `timeout` (rounded up to whole milliseconds; zero polls) without
    /// cancelling anything: `Ok(None)` while the operation runs, `Ok(Some(info))` or `Err(e)`
    /// once it has a verdict (later calls repeat it).
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<CollectiveInfo>> {
        if let Some(r) = self.result {
            return r.map(Some);
        }
        let w = match self.comm.work_ptr(self.id) {
            Some(w) => w,
            None => return self.settle(Err(Error::InvalidUsage)).map(Some),
        };
        let mut info = sys::pcclCollectiveInfo_t::default();
        // SAFETY: w is registered, so live.
        let r = unsafe { sys::pcclWorkWaitTimeout(w, duration_ms(Some(timeout)), &mut info) };
        if r == sys::pcclTimeout {
            // Still running, or a verdict that is itself a timeout: the work tells which.
            let mut done = false;
            // SAFETY: as above.
            check(unsafe { sys::pcclWorkIsCompleted(w, &mut done) })?;
            if !done {
                return Ok(None);
            }
        }
        self.settle(check(r).map(|_| info.into())).map(Some)
    }

    /// Whether the operation has its verdict (`pcclWorkIsCompleted`, never blocks); `wait`
    /// then returns at once.
    pub fn is_completed(&self) -> Result<bool> {
        if self.result.is_some() {
            return Ok(true);
        }
        let w = self.comm.work_ptr(self.id).ok_or(Error::InvalidUsage)?;
        let mut done = false;
        // SAFETY: w is registered, so live.
        check(unsafe { sys::pcclWorkIsCompleted(w, &mut done) })?;
        Ok(done)
    }
}

impl<'scope> Drop for Work<'scope> {
    fn drop(&mut self) {
        let _ = self.complete();
    }
}
