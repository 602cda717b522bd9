//! Shared state: named tensors borrowed mutably from the application.
use std::ffi::CString;
use std::marker::PhantomData;
use std::os::raw::c_void;

use pccl_sys as sys;

use crate::error::{Error, Result};
use crate::types::{DataType, Element};

/// One named tensor of the shared state (`pcclTensorInfo_t`): a mutable borrow of the
/// application's slice, which synchronization overwrites in place when this peer is outdated.
#[derive(Debug)]
pub struct TensorInfo<'a> {
    name: CString,
    data: *mut c_void,
    count: usize,
    datatype: DataType,
    allow_content_inequality: bool,
    _borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: a TensorInfo is a `&'a mut [T]` with `T: Element` (Send + Sync plain data) and an
// owned name; moving it to another thread moves the unique borrow.
unsafe impl<'a> Send for TensorInfo<'a> {}

impl<'a> TensorInfo<'a> {
    /// A tensor named `name` (unique in the state, 1..127 bytes, no NUL) over `data`.
    /// Errors: [`Error::InvalidArgument`] for a name with a NUL byte. (The library checks the
    /// rest when synchronizing.)
    pub fn new<T: Element>(name: &str, data: &'a mut [T]) -> Result<TensorInfo<'a>> {
        let name = CString::new(name).map_err(|_| Error::InvalidArgument)?;
        Ok(TensorInfo {
            name,
            data: data.as_mut_ptr() as *mut c_void,
            count: data.len(),
            datatype: T::DATA_TYPE,
            allow_content_inequality: false,
            _borrow: PhantomData,
        })
    }

    /// The same tensor, allowed (or not) to differ between peers; newcomers still receive it.
    pub fn allow_content_inequality(mut self, allow: bool) -> TensorInfo<'a> {
        self.allow_content_inequality = allow;
        self
    }

    /// The tensor's name.
    pub fn name(&self) -> &str {
        self.name.to_str().unwrap_or("")
    }

    /// Number of elements.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The element type.
    pub fn datatype(&self) -> DataType {
        self.datatype
    }

    /// The tensor's bytes as they are now (little-endian elements).
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: data points to count elements of datatype, uniquely borrowed for 'a by self.
        unsafe {
            std::slice::from_raw_parts(self.data as *const u8, self.count * self.datatype.size())
        }
    }

    fn raw(&self) -> sys::pcclTensorInfo_t {
        sys::pcclTensorInfo_t {
            name: self.name.as_ptr(),
            data: self.data,
            count: self.count,
            datatype: self.datatype.to_raw(),
            device_type: sys::pcclDeviceCpu,
            allow_content_inequality: self.allow_content_inequality,
        }
    }
}

/// The shared state of a peer group (`pcclSharedState_t`): a revision and tensors.
///
/// The revision must advance by exactly 1 per successful synchronization; after a successful
/// [`crate::Communicator::sync_shared_state`] it holds the group's revision (a newcomer adopts it).
#[derive(Debug, Default)]
pub struct SharedState<'a> {
    /// The revision this peer votes (updated by synchronization).
    pub revision: u64,
    tensors: Vec<TensorInfo<'a>>,
}

impl<'a> SharedState<'a> {
    /// An empty state at `revision`.
    pub fn new(revision: u64) -> SharedState<'a> {
        SharedState {
            revision,
            tensors: Vec::new(),
        }
    }

    /// The state with one more tensor.
    pub fn with(mut self, tensor: TensorInfo<'a>) -> SharedState<'a> {
        self.tensors.push(tensor);
        self
    }

    /// Adds a tensor.
    pub fn push(&mut self, tensor: TensorInfo<'a>) {
        self.tensors.push(tensor);
    }

    /// The tensors, in the order they were added.
    pub fn tensors(&self) -> &[TensorInfo<'a>] {
        &self.tensors
    }

    /// The C view of the tensors; valid while self is borrowed.
    pub(crate) fn raw_infos(&self) -> Vec<sys::pcclTensorInfo_t> {
        self.tensors.iter().map(|t| t.raw()).collect()
    }

    /// FNV-1a (64-bit) over every tensor's bytes, in order: a quick fingerprint for comparing
    /// peers' states (not pccl's own XXH3 state hash).
    pub fn fnv1a64(&self) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for t in &self.tensors {
            for &b in t.bytes() {
                h ^= b as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        h
    }
}
