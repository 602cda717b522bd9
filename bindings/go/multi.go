package pccl

/*
#include "pccl.h"
*/
import "C"

import (
	"unsafe"
)

// ReduceItem is one all-reduce of AllReduceMultiple, built by ReduceSlices
// or ReduceBuffers.
type ReduceItem struct {
	send, recv tensorData
	inPlace    bool
	n          int
	dt         DataType
	opts       ReduceOptions
	err        error // an invalid item (reported by AllReduceMultiple)
}

// ReduceSlices describes an all-reduce of Go slices (staged through C memory
// by AllReduceMultiple). The same slice as send and recv reduces in place.
func ReduceSlices[T Element](send, recv []T, opts ReduceOptions) ReduceItem {
	it := ReduceItem{send: sliceData[T]{send}, recv: sliceData[T]{recv}, n: len(send),
		dt: DataTypeOf[T](), opts: opts}
	if len(send) == 0 || len(send) != len(recv) {
		it.err = &Error{Code: InvalidArgument, Op: "AllReduceMultiple"}
		return it
	}
	s0, s1 := sliceRange(send)
	r0, r1 := sliceRange(recv)
	it.inPlace = s0 == r0
	if !it.inPlace && s0 < r1 && r0 < s1 {
		it.err = &Error{Code: InvalidArgument, Op: "AllReduceMultiple"}
	}
	return it
}

// ReduceBuffers describes an all-reduce of Buffers (used in place, no copies).
func ReduceBuffers[T Element](send, recv *Buffer[T], opts ReduceOptions) ReduceItem {
	it := ReduceItem{dt: DataTypeOf[T](), opts: opts}
	if send == nil || recv == nil || send.Len() == 0 || send.Len() != recv.Len() {
		it.err = &Error{Code: InvalidArgument, Op: "AllReduceMultiple"}
		return it
	}
	it.send, it.recv, it.n, it.inPlace = bufferData[T]{send}, bufferData[T]{recv}, send.Len(), send == recv
	return it
}

// AllReduceMultiple runs all items, at most maxInFlight (<= 0: 1) at a time,
// retrying those that fail because a peer left on the shrunken ring until
// all succeed (pcclAllReduceMultipleWithRetry). The items' tags must be
// distinct. The returned byte counts are summed over the operations. It
// blocks, holding the communicator, bounded by Config.Timeout; recv slices
// are written only when the whole call succeeds (Buffers are updated in
// place as operations complete).
func (c *Communicator) AllReduceMultiple(items []ReduceItem, maxInFlight int) (ReduceInfo, error) {
	const op = "AllReduceMultiple"
	if len(items) == 0 {
		return ReduceInfo{}, &Error{Code: InvalidArgument, Op: op}
	}
	for _, it := range items {
		if it.err != nil {
			return ReduceInfo{}, it.err
		}
		if it.send == nil {
			return ReduceInfo{}, &Error{Code: InvalidArgument, Op: op}
		}
	}
	if err := c.lock(op); err != nil {
		return ReduceInfo{}, err
	}
	defer c.mu.Unlock()
	n := len(items)
	var d C.pcclReduceOpDescriptor_t
	descs := (*C.pcclReduceOpDescriptor_t)(cAlloc(uintptr(n) * unsafe.Sizeof(d)))
	arr := unsafe.Slice(descs, n)
	type mem struct {
		p      unsafe.Pointer
		staged bool
		data   tensorData
		isRecv bool
	}
	var mems []mem
	cleanup := func(ok bool) {
		for _, m := range mems {
			m.data.done(m.p, m.staged, ok && m.isRecv)
			if m.staged {
				cFree(m.p)
			}
		}
		cFree(unsafe.Pointer(descs))
	}
	for i := range items {
		it := &items[i]
		sp, sst, ok := it.send.cmem()
		if !ok {
			cleanup(false)
			return ReduceInfo{}, &Error{Code: InvalidArgument, Op: op}
		}
		mems = append(mems, mem{sp, sst, it.send, it.inPlace})
		rp := sp
		if !it.inPlace {
			var rst bool
			if rp, rst, ok = it.recv.cmem(); !ok {
				cleanup(false)
				return ReduceInfo{}, &Error{Code: InvalidArgument, Op: op}
			}
			mems = append(mems, mem{rp, rst, it.recv, true})
		}
		arr[i].sendbuf = sp
		arr[i].recvbuf = rp
		arr[i].descriptor = c.descriptor(it.n, it.dt, &it.opts)
	}
	var info C.pcclReduceInfo_t
	r := Code(C.pcclAllReduceMultipleWithRetry(descs, C.size_t(n), c.h, &info, C.int(maxInFlight)))
	if r == Timeout {
		// Operations may still use the memory: keep it until Close.
		for _, m := range mems {
			if m.staged {
				c.leaked = append(c.leaked, m.p)
			} else {
				data := m.data
				c.afterClose = append(c.afterClose, func() { data.done(nil, false, false) })
			}
		}
		c.leaked = append(c.leaked, unsafe.Pointer(descs))
		return ReduceInfo{}, newErr(op, r)
	}
	cleanup(r == Success)
	if r != Success {
		return ReduceInfo{}, newErr(op, r)
	}
	return ReduceInfo{WorldSize: int(info.local_world_size), TxBytes: uint64(info.tx_bytes),
		RxBytes: uint64(info.rx_bytes)}, nil
}
