package pccl

/*
#include <stdlib.h>
#include "pccl.h"
*/
import "C"

import (
	"unsafe"
)

// tensorData is the memory of one shared-state tensor: a Go slice (staged
// through C memory) or a Buffer (C memory, used in place).
type tensorData interface {
	dtype() DataType
	count() int
	// cmem returns C memory for the call: the buffer itself, or a staging
	// copy (staged true) of the Go slice.
	cmem() (p unsafe.Pointer, staged bool, ok bool)
	// done ends the call: copy back (when staged and ok) and release.
	done(p unsafe.Pointer, staged, copyBack bool)
}

type sliceData[T Element] struct{ s []T }

func (d sliceData[T]) dtype() DataType { return DataTypeOf[T]() }
func (d sliceData[T]) count() int      { return len(d.s) }
func (d sliceData[T]) bytes() uintptr {
	var z T
	return uintptr(len(d.s)) * unsafe.Sizeof(z)
}
func (d sliceData[T]) cmem() (unsafe.Pointer, bool, bool) {
	if len(d.s) == 0 {
		return nil, false, true
	}
	p := cAlloc(d.bytes())
	cCopy(p, unsafe.Pointer(&d.s[0]), d.bytes())
	return p, true, true
}
func (d sliceData[T]) done(p unsafe.Pointer, staged, copyBack bool) {
	if staged && copyBack {
		cCopy(unsafe.Pointer(&d.s[0]), p, d.bytes())
	}
}

type bufferData[T Element] struct{ b *Buffer[T] }

func (d bufferData[T]) dtype() DataType { return DataTypeOf[T]() }
func (d bufferData[T]) count() int      { return d.b.Len() }
func (d bufferData[T]) cmem() (unsafe.Pointer, bool, bool) {
	p, _, ok := d.b.acquire()
	return p, false, ok
}
func (d bufferData[T]) done(unsafe.Pointer, bool, bool) { d.b.release() }

// Tensor is one named tensor of a shared state (pcclTensorInfo_t). Build it
// with SliceTensor or BufferTensor.
type Tensor struct {
	// Name is the key, unique within the shared state (1..127 bytes).
	Name string
	// AllowContentInequality lets peers hold different content (newcomers
	// still receive it).
	AllowContentInequality bool
	data                   tensorData
}

// SliceTensor makes a tensor over a Go slice. Synchronization copies the
// slice to C memory and, after a successful synchronization, back into the
// slice (the cgo rules do not let libpccl hold Go memory).
func SliceTensor[T Element](name string, data []T) Tensor {
	return Tensor{Name: name, data: sliceData[T]{data}}
}

// BufferTensor makes a tensor over a Buffer, synchronized in place without
// copies.
func BufferTensor[T Element](name string, b *Buffer[T]) Tensor {
	return Tensor{Name: name, data: bufferData[T]{b}}
}

// DataType returns the tensor's element type.
func (t Tensor) DataType() DataType {
	if t.data == nil {
		return -1
	}
	return t.data.dtype()
}

// Len returns the tensor's element count.
func (t Tensor) Len() int {
	if t.data == nil {
		return 0
	}
	return t.data.count()
}

// SharedState is the shared state of a peer group (pcclSharedState_t).
type SharedState struct {
	// Revision must advance by exactly 1 per successful synchronization;
	// SyncSharedState sets it to the group's revision.
	Revision uint64
	Tensors  []Tensor
}

// SyncSharedState synchronizes st with the group (a collective of every
// accepted peer of the group; strategy as in pcclSynchronizeSharedState).
// On success the tensors hold the popular content, bit-identical on every
// peer, and st.Revision the group's revision. On failure the tensors are
// untouched. Bounded by Config.Timeout; on Timeout the C memory of the call
// stays allocated until Close (libpccl may still use it), Buffers stay
// marked busy until Close, and Go slices are left as they were.
func (c *Communicator) SyncSharedState(st *SharedState, strategy SyncStrategy) (SyncInfo, error) {
	const op = "SyncSharedState"
	if st == nil {
		return SyncInfo{}, &Error{Code: InvalidArgument, Op: op}
	}
	n := len(st.Tensors)
	for _, t := range st.Tensors {
		if t.data == nil {
			return SyncInfo{}, &Error{Code: InvalidArgument, Op: op}
		}
	}
	if err := c.lock(op); err != nil {
		return SyncInfo{}, err
	}
	defer c.mu.Unlock()
	var infos *C.pcclTensorInfo_t
	var cstate C.pcclSharedState_t
	cstate.revision = C.uint64_t(st.Revision)
	cstate.count = C.size_t(n)
	mems := make([]unsafe.Pointer, n)
	staged := make([]bool, n)
	names := make([]*C.char, n)
	acquired := 0
	if n > 0 {
		infos = (*C.pcclTensorInfo_t)(cAlloc(uintptr(n) * unsafe.Sizeof(*infos)))
		cstate.infos = infos
	}
	arr := unsafe.Slice(infos, n)
	var badArg bool
	for i, t := range st.Tensors {
		p, stg, ok := t.data.cmem()
		if !ok {
			badArg = true
			break
		}
		acquired++
		mems[i], staged[i] = p, stg
		names[i] = C.CString(t.Name)
		arr[i].name = names[i]
		arr[i].data = p
		arr[i].count = C.size_t(t.data.count())
		arr[i].datatype = C.pcclDataType_t(t.data.dtype())
		arr[i].device_type = C.pcclDeviceCpu
		arr[i].allow_content_inequality = C.bool(t.AllowContentInequality)
	}
	r := InvalidArgument
	var info C.pcclSharedStateSyncInfo_t
	if !badArg {
		r = Code(C.pcclSynchronizeSharedState(c.h, &cstate, C.pcclSharedStateSyncStrategy_t(strategy), &info))
	}
	if r == Timeout {
		// The abandoned command may still read or write this memory.
		for i := 0; i < acquired; i++ {
			if staged[i] {
				c.leaked = append(c.leaked, mems[i])
			} else {
				d := st.Tensors[i].data
				c.afterClose = append(c.afterClose, func() { d.done(nil, false, false) })
			}
			c.leaked = append(c.leaked, unsafe.Pointer(names[i]))
		}
		if infos != nil {
			c.leaked = append(c.leaked, unsafe.Pointer(infos))
		}
		return SyncInfo{}, newErr(op, r)
	}
	for i := 0; i < acquired; i++ {
		st.Tensors[i].data.done(mems[i], staged[i], r == Success)
		if staged[i] {
			cFree(mems[i])
		}
		C.free(unsafe.Pointer(names[i]))
	}
	if infos != nil {
		cFree(unsafe.Pointer(infos))
	}
	if r != Success {
		return SyncInfo{}, newErr(op, r)
	}
	st.Revision = uint64(cstate.revision)
	return SyncInfo{TxBytes: uint64(info.tx_bytes), RxBytes: uint64(info.rx_bytes)}, nil
}
