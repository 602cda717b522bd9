//! [`Communicator`]: one peer's membership in a run, and its collectives.
use std::cell::{Cell, RefCell};
use std::ffi::CString;
use std::marker::PhantomData;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::time::Duration;

use pccl_sys as sys;

use crate::error::{check, Error, Result};
use crate::state::SharedState;
use crate::types::{Attribute, Element, ReduceInfo, ReduceOptions, SyncInfo, SyncStrategy};

/// Milliseconds of an optional duration for the C API: `None` (and zero) is 0, "default" or
/// "no bound"; anything else rounds up to at least 1 ms and saturates at `u32::MAX`.
pub(crate) fn duration_ms(d: Option<Duration>) -> u32 {
    match d {
        None => 0,
        Some(d) => {
            let ms = (d.as_nanos() + 999_999) / 1_000_000;
            ms.min(u32::MAX as u128) as u32
        }
    }
}

/// A `ccoip_socket_address_t` from a Rust socket address.
pub(crate) fn socket_address(addr: SocketAddr) -> sys::ccoip_socket_address_t {
    let mut a = sys::ccoip_socket_address_t::default();
    match addr {
        SocketAddr::V4(v4) => {
            a.inet.protocol = sys::inetIPv4;
            a.inet.ipv4.data = v4.ip().octets();
        }
        SocketAddr::V6(v6) => {
            a.inet.protocol = sys::inetIPv6;
            a.inet.ipv6.data = v6.ip().octets();
        }
    }
    a.port = addr.port();
    a
}

/// Parameters of [`Communicator::with_options`]: `peer_group` and `p2p_connection_pool_size`
/// go to PCCL 1.0's `pcclCommCreateParams_t`, `timeout` and `heartbeat` (and the master's URL)
/// to pccl's `pcclCommCreateOptions_t` (`pcclCreateCommunicatorEx`).
#[derive(Debug, Clone, Default)]
pub struct CommOptions {
    /// Peer group: collectives and shared state are scoped to it.
    pub peer_group: u32,
    /// Connections per ring neighbour: 0 means pccl's default (2); values above 8 are
    /// accepted and clamped to 8 by the library (with a log line).
    pub p2p_connection_pool_size: u32,
    /// Upper bound of every blocking call (`timeout_ms`); `None`: no bound. See
    /// [`Communicator`] for what a timeout does to calls that borrow buffers.
    pub timeout: Option<Duration>,
    /// Heartbeat interval to the master (`heartbeat_ms`); `None`: 250 ms.
    pub heartbeat: Option<Duration>,
}

/// A communicator (`pcclComm_t`): one peer's membership in a run. Drop destroys it
/// (`pcclDestroyCommunicator`: leaves the run gracefully and stops its threads).
///
/// # Threads
/// `Send` but not `Sync`: pccl.h allows a communicator to be called from any thread, one call
/// at a time, which is exactly a value that can move between threads but cannot be shared.
///
/// # Borrowed buffers and timeouts
/// All-reduces and shared-state synchronization borrow the application's slices; the library
/// may write them until the operation has a verdict. When a call that borrows buffers hits the
/// communicator's `timeout` (`pcclTimeout`), the operation would still own the memory after the
/// borrow ended, so this crate **closes the communicator** (destroys it, which stops the
/// threads that could write) before returning [`Error::Timeout`]. Every later call on a closed
/// communicator returns [`Error::InvalidUsage`] (as the library does for one that is not
/// connected): create and connect a new one. Calls that borrow nothing (connect, topology,
/// attributes) keep the library's semantics. [`AsyncReduce::wait_timeout`] is the way to wait
/// for a bounded time without closing anything. The collective set (broadcast, reduce, ...,
/// send / recv: `coll.rs`) is the exception: its timeout cancels the operation on every member
/// and the library touches no buffer after the call returned, so it closes nothing.
#[derive(Debug)]
pub struct Communicator {
    pub(crate) raw: Cell<*mut sys::pcclComm_t>,
    pub(crate) timeout_ms: u32,
    /// Work objects of the collective set not freed yet, by id (see `coll.rs`): `close` frees
    /// them before it destroys the C communicator they point into.
    pub(crate) works: RefCell<Vec<(u64, *mut sys::pcclWork_t)>>,
    pub(crate) next_work: Cell<u64>,
}

// SAFETY: pccl.h: "a communicator may be called from any thread, one call at a time".
// Communicator is !Sync (Cell), so only one thread can reach it at a time.
unsafe impl Send for Communicator {}

impl Communicator {
    /// A communicator for the master at `master` with default options: either a URL
    /// (`"tcp://host:port"`, `"tls+tcp://host:port"`, `"ipc:///path"`) or `"host:port"`.
    /// Nothing is sent before [`Communicator::connect`]. Calls `pcclInit`.
    pub fn new(master: &str) -> Result<Communicator> {
        Communicator::with_options(master, &CommOptions::default())
    }

    /// A communicator with options (`pcclCreateCommunicatorEx`).
    /// Errors: `InvalidArgument` (an address that does not parse or resolve, a URL too long),
    /// `SystemError`.
    pub fn with_options(master: &str, options: &CommOptions) -> Result<Communicator> {
        crate::init()?;
        let mut url = None;
        let mut address = sys::ccoip_socket_address_t::default();
        if master.contains("://") {
            url = Some(CString::new(master).map_err(|_| Error::InvalidArgument)?);
        } else {
            let addr = master
                .to_socket_addrs()
                .map_err(|_| Error::InvalidArgument)?
                .next()
                .ok_or(Error::InvalidArgument)?;
            address = socket_address(addr);
        }
        let timeout_ms = duration_ms(options.timeout);
        let params = sys::pcclCommCreateParams_t {
            master_address: address,
            peer_group: options.peer_group,
            p2p_connection_pool_size: options.p2p_connection_pool_size,
        };
        let opts = sys::pcclCommCreateOptions_t {
            timeout_ms,
            heartbeat_ms: duration_ms(options.heartbeat),
            master_url: url.as_ref().map_or(ptr::null(), |u| u.as_ptr()),
            ..sys::PCCL_COMM_CREATE_OPTIONS_INIT
        };
        let mut raw = ptr::null_mut();
        // SAFETY: params, options and the URL live across the call (the library copies them).
        check(unsafe { sys::pcclCreateCommunicatorEx(&params, &opts, &mut raw) })?;
        Ok(Communicator::from_raw(raw, timeout_ms))
    }

    pub(crate) fn from_raw(raw: *mut sys::pcclComm_t, timeout_ms: u32) -> Communicator {
        Communicator {
            raw: Cell::new(raw),
            timeout_ms,
            works: RefCell::new(Vec::new()),
            next_work: Cell::new(0),
        }
    }

    pub(crate) fn ptr(&self) -> Result<*mut sys::pcclComm_t> {
        let p = self.raw.get();
        if p.is_null() {
            Err(Error::InvalidUsage)
        } else {
            Ok(p)
        }
    }

    /// Whether a timed-out buffer-borrowing call closed this communicator.
    pub fn is_closed(&self) -> bool {
        self.raw.get().is_null()
    }

    /// Destroys the C communicator (joining its threads) and marks this one closed. Work
    /// objects still alive are waited for and freed first (they point into the communicator);
    /// their handles then report [`Error::InvalidUsage`].
    pub(crate) fn close(&self) {
        let works = std::mem::take(&mut *self.works.borrow_mut());
        for (_, w) in works {
            // SAFETY: w is a live work object of this communicator, removed from the registry
            // so nothing frees it again; pcclWorkFree waits for a running op first.
            unsafe { sys::pcclWorkFree(w) };
        }
        let p = self.raw.replace(ptr::null_mut());
        if !p.is_null() {
            // SAFETY: p was live; nothing uses it after this (every call checks for null).
            unsafe {
                sys::pcclDestroyCommunicator(p);
            }
        }
    }

    /// Connects to the master and blocks until the accepted peers admit this one
    /// (`pcclConnect`). Errors: `InvalidUsage` (already connected, version mismatch),
    /// `MasterConnectionFailed`, `Timeout`, `SystemError`, `AuthenticationFailed` (the master
    /// and this peer do not hold the same run token, docs/security.md).
    pub fn connect(&mut self) -> Result<()> {
        let p = self.ptr()?;
        // SAFETY: p is live and &mut self makes this the only call.
        check(unsafe { sys::pcclConnect(p) })
    }

    /// Votes to admit pending peers and re-wires the ring (`pcclUpdateTopology`), a collective
    /// of every accepted peer. `&mut self`: no asynchronous all-reduce can be in flight.
    /// Errors: `InvalidUsage` (not connected), `UpdateTopologyFailed` (retry),
    /// `MasterConnectionFailed`, `Timeout`.
    pub fn update_topology(&mut self) -> Result<()> {
        let p = self.ptr()?;
        // SAFETY: as in connect.
        check(unsafe { sys::pcclUpdateTopology(p) })
    }

    /// Reorders the ring by measured bandwidth (`pcclOptimizeTopology`), a collective of every
    /// accepted peer. Errors: `InvalidUsage`, `TopologyOptimizationFailed` (retry),
    /// `MasterConnectionFailed`, `Timeout`.
    pub fn optimize_topology(&mut self) -> Result<()> {
        let p = self.ptr()?;
        // SAFETY: as in connect.
        check(unsafe { sys::pcclOptimizeTopology(p) })
    }

    /// Whether peers wait for admission (`pcclArePeersPending`), a collective of every
    /// accepted peer. Errors: `InvalidUsage`, `MasterConnectionFailed`, `Timeout`.
    pub fn are_peers_pending(&self) -> Result<bool> {
        let p = self.ptr()?;
        let mut pending = false;
        // SAFETY: p is live; one call at a time (!Sync).
        check(unsafe { sys::pcclArePeersPending(p, &mut pending) })?;
        Ok(pending)
    }

    /// An integer attribute as last reported by the master (`pcclGetAttribute`).
    /// Errors: `InvalidUsage` (not connected).
    pub fn attribute(&self, attribute: Attribute) -> Result<i32> {
        let p = self.ptr()?;
        let mut v: c_int = 0;
        // SAFETY: as in are_peers_pending.
        check(unsafe { sys::pcclGetAttribute(p, attribute.to_raw(), &mut v) })?;
        Ok(v)
    }

    /// Tensor bytes this communicator's runtime has copied in memory beyond what the sockets
    /// moved, since it was created (`PCCL_ATTRIBUTE_COPIED_BYTES` and `_HIGH`, docs/core.md
    /// §3.6); updated when an API call completes.
    pub fn copied_bytes(&self) -> Result<u64> {
        let p = self.ptr()?;
        let mut lo: c_int = 0;
        let mut hi: c_int = 0;
        // SAFETY: as in are_peers_pending.
        check(unsafe { sys::pcclGetAttribute(p, sys::PCCL_ATTRIBUTE_COPIED_BYTES, &mut lo) })?;
        // SAFETY: as in are_peers_pending.
        check(unsafe { sys::pcclGetAttribute(p, sys::PCCL_ATTRIBUTE_COPIED_BYTES_HIGH, &mut hi) })?;
        Ok(((hi.max(0) as u64) << 31) | lo.max(0) as u64)
    }

    /// The caller's peer group's world size ([`Attribute::PeerGroupWorldSize`]).
    pub fn world_size(&self) -> Result<u32> {
        self.attribute(Attribute::PeerGroupWorldSize)
            .map(|v| v.max(0) as u32)
    }

    /// Starts an all-reduce of raw buffers (count elements of T each).
    fn start<T: Element>(
        &self,
        send: *const T,
        recv: *mut T,
        count: usize,
        options: &ReduceOptions,
    ) -> Result<sys::pcclAsyncReduceOp_t> {
        let p = self.ptr()?;
        let desc = options.descriptor(count, T::DATA_TYPE);
        let mut h = sys::pcclAsyncReduceOp_t {
            comm: ptr::null_mut(),
            tag: 0,
        };
        // SAFETY: the callers guarantee send/recv hold count elements and stay borrowed until
        // `finish` returned (or the communicator was closed).
        check(unsafe {
            sys::pcclAllReduceAsync(send as *const c_void, recv as *mut c_void, &desc, p, &mut h)
        })?;
        Ok(h)
    }

    /// Waits for an operation's verdict, bounded by the communicator's timeout; on a timeout
    /// closes the communicator (the operation still owns its buffers).
    fn finish(&self, h: &sys::pcclAsyncReduceOp_t) -> Result<ReduceInfo> {
        if self.is_closed() {
            return Err(Error::InvalidUsage);
        }
        let mut info = sys::pcclReduceInfo_t::default();
        // SAFETY: h was returned by pcclAllReduceAsync on this (live) communicator. With a
        // timeout > 0 the operation stays registered on pcclTimeout; 0 waits without bound.
        let r = unsafe { sys::pcclAwaitAsyncReduceTimeout(h, self.timeout_ms, &mut info) };
        if r == sys::pcclTimeout {
            self.close();
        }
        check(r)?;
        Ok(info.into())
    }

    /// Blocking all-reduce of `send` into `recv` (equal lengths), bit-identical on every
    /// peer. Errors: `InvalidArgument` (lengths differ, unsupported quantization, tag in
    /// flight), `InvalidUsage` (not connected, peers disagree), `TooFewPeers`,
    /// `RankConnectionLost` (retry), `MasterConnectionFailed`, `Timeout` (closes the
    /// communicator, see [`Communicator`]).
    pub fn all_reduce<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        options: impl Into<ReduceOptions>,
    ) -> Result<ReduceInfo> {
        if send.len() != recv.len() {
            return Err(Error::InvalidArgument);
        }
        let h = self.start(
            send.as_ptr(),
            recv.as_mut_ptr(),
            send.len(),
            &options.into(),
        )?;
        self.finish(&h)
    }

    /// Blocking all-reduce in place (restored bit-exactly when it fails).
    /// Errors as [`Communicator::all_reduce`].
    pub fn all_reduce_in_place<T: Element>(
        &self,
        buf: &mut [T],
        options: impl Into<ReduceOptions>,
    ) -> Result<ReduceInfo> {
        let p = buf.as_mut_ptr();
        let h = self.start(p as *const T, p, buf.len(), &options.into())?;
        self.finish(&h)
    }

    /// In-place all-reduces of every buffer, at most `max_in_flight` at a time, retried on the
    /// shrunken ring until all succeed (`pcclAllReduceMultipleWithRetry`). Buffer i uses tag
    /// `options.tag + i`. Returns the summed tx/rx bytes. Errors: `InvalidArgument`,
    /// `InvalidUsage`, `TooFewPeers`, `MasterConnectionFailed`, `Timeout` (closes).
    pub fn all_reduce_multiple<T: Element>(
        &self,
        bufs: &mut [&mut [T]],
        options: impl Into<ReduceOptions>,
        max_in_flight: u32,
    ) -> Result<ReduceInfo> {
        let p = self.ptr()?;
        let options = options.into();
        let descs: Vec<sys::pcclReduceOpDescriptor_t> = bufs
            .iter_mut()
            .enumerate()
            .map(|(i, b)| sys::pcclReduceOpDescriptor_t {
                sendbuf: b.as_mut_ptr() as *mut c_void,
                recvbuf: b.as_mut_ptr() as *mut c_void,
                descriptor: options
                    .tag(options.tag.wrapping_add(i as u64))
                    .descriptor(b.len(), T::DATA_TYPE),
            })
            .collect();
        let mut info = sys::pcclReduceInfo_t::default();
        let window = max_in_flight.min(i32::MAX as u32) as c_int;
        // SAFETY: every buffer is uniquely borrowed for the call; on pcclTimeout the library
        // may still write them, so the communicator is closed before they are released.
        let r = unsafe {
            sys::pcclAllReduceMultipleWithRetry(descs.as_ptr(), descs.len(), p, &mut info, window)
        };
        if r == sys::pcclTimeout {
            self.close();
        }
        check(r)?;
        Ok(info.into())
    }

    /// Runs `f` with a scope in which asynchronous all-reduces (and the collective set's
    /// operations, [`crate::Work`]) can be started. The buffers of
    /// an operation stay borrowed until the scope ends (so the compiler rejects any use of them
    /// before) unless [`AsyncReduce::wait_with_buffer`] hands the result buffer back earlier.
    /// When `f` returns (or panics), every operation not awaited yet is awaited, so leaking a
    /// handle with `mem::forget` cannot free memory the library still writes.
    ///
    /// ```no_run
    /// # fn demo(comm: &pccl::Communicator) -> pccl::Result<()> {
    /// use pccl::{ReduceOp, ReduceOptions};
    /// let grads = vec![1.0f32; 1024];
    /// let mut sum = vec![0.0f32; 1024];
    /// comm.async_scope(|s| {
    ///     let op = s.all_reduce(&grads, &mut sum, ReduceOptions::new(ReduceOp::Sum).tag(7))?;
    ///     // ... compute something else meanwhile ...
    ///     op.wait()
    /// })?;
    /// println!("{}", sum[0]);
    /// # Ok(()) }
    /// ```
    ///
    /// Reading the receive buffer while the operation runs does not compile:
    ///
    /// ```compile_fail
    /// # fn demo(comm: &pccl::Communicator) -> pccl::Result<()> {
    /// let grads = vec![1.0f32; 4];
    /// let mut sum = vec![0.0f32; 4];
    /// comm.async_scope(|s| {
    ///     let op = s.all_reduce(&grads, &mut sum, pccl::ReduceOp::Sum)?;
    ///     println!("{}", sum[0]); // error: `sum` is mutably borrowed by the operation
    ///     op.wait()
    /// })?;
    /// # Ok(()) }
    /// ```
    ///
    /// Nor does a buffer that dies inside the scope, while the operation may outlive it:
    ///
    /// ```compile_fail
    /// # fn demo(comm: &pccl::Communicator) -> pccl::Result<()> {
    /// comm.async_scope(|s| {
    ///     let local = vec![1i32; 4];
    ///     let mut out = vec![0i32; 4];
    ///     let op = s.all_reduce(&local, &mut out, pccl::ReduceOp::Sum)?;
    ///     std::mem::forget(op);
    ///     Ok::<(), pccl::Error>(())
    /// })?;
    /// # Ok(()) }
    /// ```
    ///
    /// And `update_topology` (which needs no operation in flight) cannot run in a scope:
    ///
    /// ```compile_fail
    /// # fn demo(comm: &mut pccl::Communicator) -> pccl::Result<()> {
    /// let a = vec![1i32; 4];
    /// let mut b = vec![0i32; 4];
    /// comm.async_scope(|s| {
    ///     let op = s.all_reduce(&a, &mut b, pccl::ReduceOp::Sum)?;
    ///     comm.update_topology()?;
    ///     op.wait()
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn async_scope<'env, F, R>(&'env self, f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope AsyncScope<'scope, 'env>) -> R,
    {
        let scope = AsyncScope {
            comm: self,
            in_flight: RefCell::new(Vec::new()),
            works: RefCell::new(Vec::new()),
            _scope: PhantomData,
            _env: PhantomData,
        };
        let guard = ScopeGuard { scope: &scope };
        let r = f(&scope);
        drop(guard);
        r
    }

    /// Synchronizes the shared state of the caller's peer group
    /// (`pcclSynchronizeSharedState`, PCCL 1.0's 4-argument form): the popular revision and content win; an outdated
    /// peer's tensors are overwritten in place after their hashes were verified. On success
    /// `state.revision` is the group's revision. Errors: `InvalidArgument` (bad or duplicate
    /// names, more than 64 tensors), `InvalidUsage` (revision or key-set violation, strategy
    /// conflict: the master evicts this peer), `NoSharedStateAvailable`,
    /// `RankConnectionLost` (tensors untouched, retry), `MasterConnectionFailed`, `Timeout`
    /// (closes the communicator, see [`Communicator`]).
    pub fn sync_shared_state(
        &self,
        state: &mut SharedState<'_>,
        strategy: SyncStrategy,
    ) -> Result<SyncInfo> {
        let p = self.ptr()?;
        let mut infos = state.raw_infos();
        let mut raw = sys::pcclSharedState_t {
            revision: state.revision,
            count: infos.len(),
            infos: infos.as_mut_ptr(),
        };
        let mut info = sys::pcclSharedStateSyncInfo_t::default();
        // SAFETY: the tensors are uniquely borrowed by `state`; names and infos live across
        // the call. On pcclTimeout the abandoned transfer may still write the tensors, so the
        // communicator is closed (its threads joined) before the borrow ends.
        let r =
            unsafe { sys::pcclSynchronizeSharedState(p, &mut raw, strategy.to_raw(), &mut info) };
        if r == sys::pcclTimeout {
            self.close();
        }
        check(r)?;
        state.revision = raw.revision;
        Ok(SyncInfo {
            tx_bytes: info.tx_bytes,
            rx_bytes: info.rx_bytes,
        })
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        self.close();
    }
}

/// A scope for asynchronous operations on one communicator (all-reduces, and the collective
/// set as [`crate::Work`]); see [`Communicator::async_scope`].
#[derive(Debug)]
pub struct AsyncScope<'scope, 'env: 'scope> {
    pub(crate) comm: &'env Communicator,
    /// Tags started in this scope whose verdict nobody has taken yet.
    in_flight: RefCell<Vec<u64>>,
    /// Ids of the work objects started in this scope (freed at its end when still alive).
    pub(crate) works: RefCell<Vec<u64>>,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

struct ScopeGuard<'a, 'scope, 'env> {
    scope: &'a AsyncScope<'scope, 'env>,
}

impl<'a, 'scope, 'env> Drop for ScopeGuard<'a, 'scope, 'env> {
    fn drop(&mut self) {
        let tags = std::mem::take(&mut *self.scope.in_flight.borrow_mut());
        for tag in tags {
            let h = sys::pcclAsyncReduceOp_t {
                comm: self.scope.comm.raw.get(),
                tag,
            };
            let _ = self.scope.comm.finish(&h);
        }
        let ids = std::mem::take(&mut *self.scope.works.borrow_mut());
        for id in ids {
            self.scope.comm.free_work(id);
        }
    }
}

impl<'scope, 'env> AsyncScope<'scope, 'env> {
    /// The communicator, for blocking calls inside the scope.
    pub fn communicator(&self) -> &'env Communicator {
        self.comm
    }

    fn register<T: Element>(
        &'scope self,
        h: sys::pcclAsyncReduceOp_t,
        recv: *mut T,
        len: usize,
    ) -> AsyncReduce<'scope, T> {
        self.in_flight.borrow_mut().push(h.tag);
        AsyncReduce {
            comm: self.comm,
            in_flight: &self.in_flight,
            op: h,
            recv,
            len,
            result: None,
            _borrow: PhantomData,
        }
    }

    /// Starts an all-reduce of `send` into `recv` (`pcclAllReduceAsync`); both stay borrowed
    /// until the scope ends. Errors: `InvalidArgument` (lengths differ, tag already in
    /// flight), `InvalidUsage` (not connected, more than 16 in flight), `TooFewPeers` (the
    /// group had fewer than two peers at the last topology update: nothing started).
    pub fn all_reduce<T: Element>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        options: impl Into<ReduceOptions>,
    ) -> Result<AsyncReduce<'scope, T>> {
        if send.len() != recv.len() {
            return Err(Error::InvalidArgument);
        }
        let h = self.comm.start(
            send.as_ptr(),
            recv.as_mut_ptr(),
            send.len(),
            &options.into(),
        )?;
        Ok(self.register(h, recv.as_mut_ptr(), recv.len()))
    }

    /// Starts an in-place all-reduce; `buf` stays borrowed until the scope ends.
    pub fn all_reduce_in_place<T: Element>(
        &'scope self,
        buf: &'scope mut [T],
        options: impl Into<ReduceOptions>,
    ) -> Result<AsyncReduce<'scope, T>> {
        let p = buf.as_mut_ptr();
        let h = self
            .comm
            .start(p as *const T, p, buf.len(), &options.into())?;
        Ok(self.register(h, p, buf.len()))
    }
}

/// An asynchronous all-reduce in flight (`pcclAsyncReduceOp_t`). Dropping it waits for it.
#[derive(Debug)]
pub struct AsyncReduce<'scope, T: Element> {
    comm: &'scope Communicator,
    in_flight: &'scope RefCell<Vec<u64>>,
    op: sys::pcclAsyncReduceOp_t,
    recv: *mut T,
    len: usize,
    result: Option<Result<ReduceInfo>>,
    _borrow: PhantomData<&'scope mut [T]>,
}

impl<'scope, T: Element> AsyncReduce<'scope, T> {
    /// The operation's tag.
    pub fn tag(&self) -> u64 {
        self.op.tag
    }

    fn settle(&mut self, r: Result<ReduceInfo>) -> Result<ReduceInfo> {
        let mut v = self.in_flight.borrow_mut();
        if let Some(i) = v.iter().position(|&t| t == self.op.tag) {
            v.swap_remove(i);
        }
        self.result = Some(r);
        r
    }

    fn complete(&mut self) -> Result<ReduceInfo> {
        if let Some(r) = self.result {
            return r;
        }
        let r = self.comm.finish(&self.op);
        self.settle(r)
    }

    /// Waits for the verdict (`pcclAwaitAsyncReduceTimeout` with the communicator's timeout;
    /// a timeout closes the communicator, see [`Communicator`]). Errors as
    /// [`Communicator::all_reduce`].
    pub fn wait(mut self) -> Result<ReduceInfo> {
        self.complete()
    }

    /// As [`AsyncReduce::wait`], and hands the receive buffer back for use inside the scope.
    pub fn wait_with_buffer(mut self) -> (Result<ReduceInfo>, &'scope mut [T]) {
        let r = self.complete();
        // SAFETY: the operation has its verdict (or the communicator was closed, joining the
        // threads), so the library no longer touches the buffer; it was borrowed for 'scope
        // and this handle, its only other user, is consumed.
        let buf = unsafe { std::slice::from_raw_parts_mut(self.recv, self.len) };
        (r, buf)
    }

    /// Waits at most `timeout` (rounded up to whole milliseconds, at least 1) without closing
    /// anything: `Ok(None)` when the operation is still running (wait again later),
    /// `Ok(Some(info))` or `Err(e)` once it has a verdict (later calls repeat it).
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<ReduceInfo>> {
        if let Some(r) = self.result {
            return r.map(Some);
        }
        if self.comm.is_closed() {
            return self.settle(Err(Error::InvalidUsage)).map(Some);
        }
        let ms = duration_ms(Some(timeout)).max(1);
        let mut info = sys::pcclReduceInfo_t::default();
        // SAFETY: the handle is registered on the live communicator; with ms > 0 a timeout
        // keeps the operation registered.
        let r = unsafe { sys::pcclAwaitAsyncReduceTimeout(&self.op, ms, &mut info) };
        if r == sys::pcclTimeout {
            return Ok(None);
        }
        self.settle(check(r).map(|_| info.into())).map(Some)
    }
}

impl<'scope, T: Element> Drop for AsyncReduce<'scope, T> {
    fn drop(&mut self) {
        let _ = self.complete();
    }
}
