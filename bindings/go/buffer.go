package pccl

import (
	"sync"
	"unsafe"
)

// Buffer is an array of n elements of type T in C memory (calloc), which
// libpccl may keep using after a call returns: the memory of asynchronous
// all-reduces and the zero-copy form of shared-state tensors. Go's cgo rules
// forbid C from keeping Go memory, so those uses take a Buffer, never a Go
// slice.
//
// A Buffer is not freed by the garbage collector: call Free. Slice views
// the memory as a Go slice (valid until Free). Do not touch the memory while
// an asynchronous operation on it is in flight.
type Buffer[T Element] struct {
	mu   sync.Mutex
	p    unsafe.Pointer
	n    int
	busy int // in-flight operations using the buffer
}

// NewBuffer allocates n zeroed elements in C memory. n must be > 0.
func NewBuffer[T Element](n int) (*Buffer[T], error) {
	if n <= 0 {
		return nil, &Error{Code: InvalidArgument, Op: "NewBuffer"}
	}
	var z T
	return &Buffer[T]{p: cAlloc(uintptr(n) * unsafe.Sizeof(z)), n: n}, nil
}

// BufferFrom allocates a Buffer holding a copy of data (len(data) > 0).
func BufferFrom[T Element](data []T) (*Buffer[T], error) {
	b, err := NewBuffer[T](len(data))
	if err != nil {
		return nil, err
	}
	copy(b.Slice(), data)
	return b, nil
}

// Slice returns the buffer's memory as a Go slice (nil after Free). The
// slice must not be used after Free.
func (b *Buffer[T]) Slice() []T {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p == nil {
		return nil
	}
	return unsafe.Slice((*T)(b.p), b.n)
}

// Len returns the number of elements (0 after Free).
func (b *Buffer[T]) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p == nil {
		return 0
	}
	return b.n
}

// Free releases the memory. It fails with PendingAsyncOps while an
// asynchronous operation uses the buffer (Wait for it first). Freeing twice
// is a no-op.
func (b *Buffer[T]) Free() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.busy > 0 {
		return &Error{Code: PendingAsyncOps, Op: "Buffer.Free"}
	}
	if b.p != nil {
		cFree(b.p)
		b.p = nil
	}
	return nil
}

// acquire marks the buffer as bound to an operation and returns its memory.
func (b *Buffer[T]) acquire() (unsafe.Pointer, int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p == nil {
		return nil, 0, false
	}
	b.busy++
	return b.p, b.n, true
}

func (b *Buffer[T]) release() {
	b.mu.Lock()
	b.busy--
	b.mu.Unlock()
}
