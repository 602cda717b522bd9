//! [`Error`]: one variant per `pcclResult_t` code other than `pcclSuccess`.
use std::fmt;

use pccl_sys as sys;

/// The failure of a pccl call: one variant per `pcclResult_t` code (the code is
/// [`Error::code`]). Codes 13..=18 are pccl's additions to PCCL 1.0; `Unknown` holds a code a
/// newer libpccl may return that this crate does not know yet (codes are append-only).
///
/// Errors detected by this crate before calling the library (mismatched slice lengths, a NUL
/// byte in a name, a closed communicator) use the code the library returns for the same
/// mistake: [`Error::InvalidArgument`] for bad arguments, [`Error::InvalidUsage`] for a call on
/// a communicator that is not connected (or was closed, see [`crate::Communicator`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// `pcclNotInitialized` (1): `pcclInit` was not called (this crate calls it for you).
    NotInitialized,
    /// `pcclInternalError` (2): an internal invariant of pccl failed.
    InternalError,
    /// `pcclInvalidArgument` (3): a bad argument (type, op, count, name, tag already in flight).
    InvalidArgument,
    /// `pcclInvalidUsage` (4): the call is not legal now (not connected, peers disagree on the
    /// operation, a shared-state key set or revision violation).
    InvalidUsage,
    /// `pcclTooFewPeers` (5): fewer than two peers: update the topology and retry.
    TooFewPeers,
    /// `pcclMasterConnectionFailed` (6): the master is unreachable, gone, or evicted this peer.
    MasterConnectionFailed,
    /// `pcclRankConnectionFailed` (7): a p2p connection could not be established.
    RankConnectionFailed,
    /// `pcclRankConnectionLost` (8): a peer was lost during the operation; buffers are
    /// restored; retry.
    RankConnectionLost,
    /// `pcclNoSharedStateAvailable` (9): no peer holds shared state to distribute.
    NoSharedStateAvailable,
    /// `pcclPendingAsyncOps` (10): not allowed while asynchronous all-reduces run.
    PendingAsyncOps,
    /// `pcclUpdateTopologyFailed` (11): a member dropped while updating the topology: retry.
    UpdateTopologyFailed,
    /// `pcclTopologyOptimizationFailed` (12, alias `pcclOptimizeTopologyFailed`): retry.
    TopologyOptimizationFailed,
    /// `pcclTimeout` (13): a blocking call's timeout elapsed.
    Timeout,
    /// `pcclSystemError` (14): the operating system refused a resource.
    SystemError,
    /// `pcclRemoteError` (15): a remote peer or the master reported an unrecoverable error.
    RemoteError,
    /// `pcclSharedStateSyncFailed` (16): shared state could not be synchronized.
    SharedStateSyncFailed,
    /// `pcclProtocolError` (17): a frame violated the CCoIP wire contract.
    ProtocolError,
    /// `pcclAuthenticationFailed` (18): the run tokens differ (docs/security.md): the master
    /// requires one this peer lacks or holds differently, or could not prove it holds this
    /// peer's (`PCCL_RUN_TOKEN_FILE`).
    AuthenticationFailed,
    /// A code this crate does not know.
    Unknown(u32),
}

/// `Result<T, pccl::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

const KNOWN: [Error; 18] = [
    Error::NotInitialized,
    Error::InternalError,
    Error::InvalidArgument,
    Error::InvalidUsage,
    Error::TooFewPeers,
    Error::MasterConnectionFailed,
    Error::RankConnectionFailed,
    Error::RankConnectionLost,
    Error::NoSharedStateAvailable,
    Error::PendingAsyncOps,
    Error::UpdateTopologyFailed,
    Error::TopologyOptimizationFailed,
    Error::Timeout,
    Error::SystemError,
    Error::RemoteError,
    Error::SharedStateSyncFailed,
    Error::ProtocolError,
    Error::AuthenticationFailed,
];

impl Error {
    /// The error of a `pcclResult_t` code; `None` for `pcclSuccess` (0).
    pub fn from_code(code: u32) -> Option<Error> {
        match code {
            0 => None,
            c if (c as usize) <= KNOWN.len() => Some(KNOWN[c as usize - 1]),
            c => Some(Error::Unknown(c)),
        }
    }

    /// The `pcclResult_t` code.
    pub fn code(self) -> u32 {
        match self {
            Error::Unknown(c) => c,
            e => KNOWN.iter().position(|k| *k == e).unwrap() as u32 + 1,
        }
    }

    /// The C name of the code, e.g. `"pcclRankConnectionLost"`.
    pub fn name(self) -> &'static str {
        match sys::PCCL_RESULT_MAP.get(self.code() as usize) {
            Some(entry) => entry.1,
            None => "unknown",
        }
    }

    /// The library's message for the code (`PCCL_RESULT_MAP`), e.g. `"peer connection lost"`.
    pub fn message(self) -> &'static str {
        match sys::PCCL_RESULT_MAP.get(self.code() as usize) {
            Some(entry) => entry.2,
            None => "unknown result code",
        }
    }

    /// Whether the documented reaction is "update the topology (or just call again) and
    /// retry": too few peers, a lost peer, a failed topology update or optimization.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            Error::TooFewPeers
                | Error::RankConnectionLost
                | Error::UpdateTopologyFailed
                | Error::TopologyOptimizationFailed
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}, code {})",
            self.message(),
            self.name(),
            self.code()
        )
    }
}

impl std::error::Error for Error {}

/// `Ok(())` for `pcclSuccess`, else the error of the code.
pub(crate) fn check(code: sys::pcclResult_t) -> Result<()> {
    match Error::from_code(code) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}
