//! [`Master`]: a master node running inside this process.
use std::ffi::CString;
use std::net::SocketAddr;
use std::ptr;
use std::sync::Mutex;
use std::time::Duration;

use pccl_sys as sys;

use crate::comm::{duration_ms, socket_address};
use crate::error::{check, Error, Result};

/// Parameters of [`Master::with_options`] (`pcclMasterCreateParams_t`); `None`/0 means the
/// library's default.
#[derive(Debug, Clone, Default)]
pub struct MasterOptions {
    /// `"tcp://host:port"` (port 0: any free port) or `"ipc:///path"`; `None`: 0.0.0.0:48148.
    pub listen_url: Option<String>,
    /// Heartbeat period (default 250 ms).
    pub heartbeat: Option<Duration>,
    /// Silence after which a peer is evicted (default 2000 ms).
    pub evict: Option<Duration>,
    /// A vote waits at most this long after its first ballot (default 60 s).
    pub vote_timeout: Option<Duration>,
    /// Peers tracked at most (0: 64).
    pub max_peers: u32,
}

/// A master node running in this process (`pcclMasterInstance_t`). Drop destroys it
/// (`pcclDestroyMaster`, which stops it first).
///
/// `Send + Sync`: the library allows [`Master::interrupt`] from any thread at any time, while
/// the other calls take one at a time — this type serializes those with a mutex, so an
/// `Arc<Master>` can be awaited on one thread and interrupted from another.
#[derive(Debug)]
pub struct Master {
    raw: *mut sys::pcclMasterInstance_t,
    port: u16,
    calls: Mutex<()>,
}

// SAFETY: pccl.h: a master takes one call at a time from any thread (serialized by `calls`),
// except pcclInterruptMaster, which any thread may call at any time. Destroy needs &mut self.
unsafe impl Send for Master {}
unsafe impl Sync for Master {}

impl Master {
    /// A master listening on `listen_url` (`pcclCreateMasterEx`), e.g. `"tcp://127.0.0.1:0"`;
    /// bound on return ([`Master::port`]), served once [`Master::run`] is called.
    /// Errors: `InvalidArgument` (bad URL), `SystemError` (listen failed).
    pub fn new(listen_url: &str) -> Result<Master> {
        Master::with_options(&MasterOptions {
            listen_url: Some(listen_url.to_string()),
            ..Default::default()
        })
    }

    /// A master from [`MasterOptions`] (`pcclCreateMasterEx`).
    /// Errors: `InvalidArgument` (bad URL, evict <= heartbeat), `SystemError`.
    pub fn with_options(options: &MasterOptions) -> Result<Master> {
        let url = match &options.listen_url {
            Some(u) => Some(CString::new(u.as_str()).map_err(|_| Error::InvalidArgument)?),
            None => None,
        };
        let params = sys::pcclMasterCreateParams_t {
            listen_url: url.as_ref().map_or(ptr::null(), |u| u.as_ptr()),
            heartbeat_ms: duration_ms(options.heartbeat),
            evict_ms: duration_ms(options.evict),
            vote_timeout_ms: duration_ms(options.vote_timeout),
            max_peers: options.max_peers,
        };
        let mut raw = ptr::null_mut();
        let mut port = 0u16;
        // SAFETY: params (and the URL it points to) live across the call; outputs are valid.
        check(unsafe { sys::pcclCreateMasterEx(&params, &mut raw, &mut port) })?;
        Ok(Master {
            raw,
            port,
            calls: Mutex::new(()),
        })
    }

    /// A master listening on `addr` (`pcclCreateMaster`, PCCL 1.0's form).
    pub fn from_address(addr: SocketAddr) -> Result<Master> {
        let mut raw = ptr::null_mut();
        // SAFETY: the address is passed by value; raw is a valid output.
        check(unsafe { sys::pcclCreateMaster(socket_address(addr), &mut raw) })?;
        Ok(Master {
            raw,
            port: addr.port(),
            calls: Mutex::new(()),
        })
    }

    /// The TCP port the master listens on (the bound one for port 0; 0 for ipc://).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Starts serving on the master's own thread (`pcclRunMaster`, non-blocking).
    /// Errors: `InvalidUsage` (already running), `SystemError`.
    pub fn run(&self) -> Result<()> {
        let _g = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: raw is a live master; calls are serialized by the mutex.
        check(unsafe { sys::pcclRunMaster(self.raw) })
    }

    /// Asks the master to stop (`pcclInterruptMaster`); any thread, any time.
    pub fn interrupt(&self) -> Result<()> {
        // SAFETY: pcclInterruptMaster may be called concurrently with any other master call.
        check(unsafe { sys::pcclInterruptMaster(self.raw) })
    }

    /// Waits until the master stopped after [`Master::interrupt`] (`pcclMasterAwaitTermination`).
    pub fn await_termination(&self) -> Result<()> {
        let _g = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: as in run.
        check(unsafe { sys::pcclMasterAwaitTermination(self.raw) })
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        // SAFETY: exclusive access; raw is not used afterwards.
        unsafe {
            sys::pcclDestroyMaster(self.raw);
        }
    }
}
