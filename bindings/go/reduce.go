package pccl

/*
#include "pccl.h"
*/
import "C"

import (
	"context"
	"sync"
	"time"
	"unsafe"
)

// waitSlice is the longest a Wait holds the communicator's mutex at a time.
const waitSlice = 50 * time.Millisecond

// AsyncOp is an all-reduce in flight (pcclAsyncReduceOp_t). Its buffers
// belong to the operation until Wait returns a result (not a context error).
type AsyncOp struct {
	c   *Communicator
	h   C.pcclAsyncReduceOp_t
	tag uint64

	// Guarded by c.mu:
	done    bool
	orphan  bool // nobody waits: the communicator collects the result
	info    ReduceInfo
	err     error
	release func(ok bool) // called once by finish

	wmu sync.Mutex // one Wait at a time
}

// Tag returns the operation's tag.
func (o *AsyncOp) Tag() uint64 { return o.tag }

// finish records an operation's result and releases its memory. c.mu held.
func (c *Communicator) finish(o *AsyncOp, r Code, info *C.pcclReduceInfo_t) {
	if o.done {
		return
	}
	o.done = true
	if r == Success {
		o.info = ReduceInfo{WorldSize: int(info.local_world_size), TxBytes: uint64(info.tx_bytes),
			RxBytes: uint64(info.rx_bytes)}
	} else {
		o.err = newErr("AllReduce", r)
	}
	delete(c.ops, o)
	if o.release != nil {
		o.release(r == Success && !o.orphan)
		o.release = nil
	}
}

// poll waits at most ms milliseconds for the operation. It reports whether
// the operation has finished.
func (o *AsyncOp) poll(ms uint32) bool {
	c := o.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if o.done {
		return true
	}
	if c.h == nil { // cannot happen: Close finishes every operation
		o.done, o.err = true, &Error{Code: InvalidUsage, Op: "Wait", Err: ErrClosed}
		return true
	}
	var info C.pcclReduceInfo_t
	t0 := time.Now()
	r := Code(C.pcclAwaitAsyncReduceTimeout(&o.h, C.uint32_t(ms), &info))
	if r == Timeout && time.Since(t0) >= time.Duration(ms)*time.Millisecond/2 {
		return false // still in flight (an early pcclTimeout is the operation's own result)
	}
	c.finish(o, r, &info)
	return true
}

// Wait waits for the operation's result, at most until ctx ends. When ctx
// ends first, Wait returns an *Error with code Timeout whose cause is
// ctx.Err() (so errors.Is matches both ErrTimeout and
// context.DeadlineExceeded / context.Canceled); the operation is still in
// flight and its buffers still belong to it: call Wait again. Once the
// result is known, Wait returns it every time. Wait may be called from any
// goroutine; it holds the communicator's mutex for at most 50 ms at a time
// (pcclAwaitAsyncReduceTimeout in slices).
func (o *AsyncOp) Wait(ctx context.Context) (ReduceInfo, error) {
	o.wmu.Lock()
	defer o.wmu.Unlock()
	for {
		slice := waitSlice
		if dl, ok := ctx.Deadline(); ok {
			if rem := time.Until(dl); rem < slice {
				slice = rem
			}
		}
		ms := uint32(durMs(slice))
		if ms == 0 {
			ms = 1
		}
		if o.poll(ms) {
			o.c.mu.Lock()
			info, err := o.info, o.err
			o.c.mu.Unlock()
			return info, err
		}
		if err := ctx.Err(); err != nil {
			return ReduceInfo{}, &Error{Code: Timeout, Op: "Wait", Err: err}
		}
	}
}

func (c *Communicator) descriptor(n int, dt DataType, opts *ReduceOptions) C.pcclReduceDescriptor_t {
	var d C.pcclReduceDescriptor_t
	d.count = C.size_t(n)
	d.op = C.pcclRedOp_t(opts.Op)
	d.tag = C.uint64_t(opts.Tag)
	d.src_descriptor.datatype = C.pcclDataType_t(dt)
	d.src_descriptor.distribution_hint = C.pcclDistributionHint_t(opts.Distribution)
	d.quantization_options.algorithm = C.pcclQuantizationAlgorithm_t(opts.Quantization.Algorithm)
	d.quantization_options.quantized_datatype = C.pcclDataType_t(opts.Quantization.DataType)
	return d
}

// start submits an all-reduce over C memory. c.mu held.
func (c *Communicator) start(send, recv unsafe.Pointer, n int, dt DataType, opts *ReduceOptions,
	release func(ok bool)) (*AsyncOp, Code) {
	d := c.descriptor(n, dt, opts)
	o := &AsyncOp{c: c, tag: opts.Tag, release: release}
	r := Code(C.pcclAllReduceAsync(send, recv, &d, c.h, &o.h))
	if r != Success {
		return nil, r
	}
	c.ops[o] = struct{}{}
	return o, Success
}

// AllReduceAsync starts an all-reduce of send into recv (send == recv
// reduces in place) and returns at once. Both are Buffers, C memory that
// libpccl may use after this call returns; they must have the same length
// and must not be touched or freed until Wait returns the result.
// Asynchronous operations may run concurrently when their tags differ.
func AllReduceAsync[T Element](c *Communicator, send, recv *Buffer[T], opts ReduceOptions) (*AsyncOp, error) {
	const op = "AllReduceAsync"
	if send == nil || recv == nil {
		return nil, &Error{Code: InvalidArgument, Op: op}
	}
	sp, sn, ok := send.acquire()
	if !ok {
		return nil, &Error{Code: InvalidArgument, Op: op}
	}
	rp, rn := sp, sn
	if recv != send {
		if rp, rn, ok = recv.acquire(); !ok {
			send.release()
			return nil, &Error{Code: InvalidArgument, Op: op}
		}
	}
	rel := func(bool) {
		send.release()
		if recv != send {
			recv.release()
		}
	}
	if sn != rn {
		rel(false)
		return nil, &Error{Code: InvalidArgument, Op: op}
	}
	if err := c.lock(op); err != nil {
		rel(false)
		return nil, err
	}
	defer c.mu.Unlock()
	o, r := c.start(sp, rp, sn, DataTypeOf[T](), &opts, rel)
	if r != Success {
		rel(false)
		return nil, newErr(op, r)
	}
	return o, nil
}

func sliceRange[T Element](s []T) (uintptr, uintptr) {
	var z T
	b := uintptr(unsafe.Pointer(&s[0]))
	return b, b + uintptr(len(s))*unsafe.Sizeof(z)
}

// AllReduce reduces send into recv on every peer of the group and returns
// when done. send and recv are Go slices of equal, non-zero length; passing
// the same slice reduces in place; partially overlapping slices are
// rejected (InvalidArgument). recv is written only on success (on failure
// it keeps its content, or — in place — is restored).
//
// With no bound at all (ctx.Done() == nil, as for context.Background(), and
// Config.Timeout == 0) the slices are handed to libpccl directly, without
// copies: the C call returns only when the operation is over, so C keeps no
// Go pointer. Otherwise the data goes through C memory (one copy in, one
// out) and the call waits with pcclAwaitAsyncReduceTimeout until the
// operation ends, ctx ends, or Config.Timeout elapses: then it returns an
// *Error with code Timeout (cause ctx.Err()), recv is left untouched, and
// the operation goes on in the background (its C memory is freed when it
// ends; its tag stays in use until then).
func AllReduce[T Element](ctx context.Context, c *Communicator, send, recv []T, opts ReduceOptions) (ReduceInfo, error) {
	const op = "AllReduce"
	if len(send) == 0 || len(send) != len(recv) {
		return ReduceInfo{}, &Error{Code: InvalidArgument, Op: op}
	}
	s0, s1 := sliceRange(send)
	r0, r1 := sliceRange(recv)
	inPlace := s0 == r0
	if !inPlace && s0 < r1 && r0 < s1 {
		return ReduceInfo{}, &Error{Code: InvalidArgument, Op: op}
	}
	n := len(send)
	dt := DataTypeOf[T]()
	if ctx.Done() == nil && c.timeout == 0 {
		if err := c.lock(op); err != nil {
			return ReduceInfo{}, err
		}
		defer c.mu.Unlock()
		d := c.descriptor(n, dt, &opts)
		var info C.pcclReduceInfo_t
		r := Code(C.pcclAllReduce(unsafe.Pointer(&send[0]), unsafe.Pointer(&recv[0]), &d, c.h, &info))
		if r != Success {
			return ReduceInfo{}, newErr(op, r)
		}
		return ReduceInfo{WorldSize: int(info.local_world_size), TxBytes: uint64(info.tx_bytes),
			RxBytes: uint64(info.rx_bytes)}, nil
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	bytes := uintptr(s1 - s0)
	sbuf := cAlloc(bytes)
	cCopy(sbuf, unsafe.Pointer(&send[0]), bytes)
	rbuf := sbuf
	if !inPlace {
		rbuf = cAlloc(bytes)
	}
	// The copy back runs under c.mu, in the Wait below or (if the caller
	// has not returned yet) in Close; never once AllReduce has returned.
	rel := func(ok bool) {
		if ok {
			cCopy(unsafe.Pointer(&recv[0]), rbuf, bytes)
		}
		cFree(sbuf)
		if rbuf != sbuf {
			cFree(rbuf)
		}
	}
	if err := c.lock(op); err != nil {
		rel(false)
		return ReduceInfo{}, err
	}
	o, r := c.start(sbuf, rbuf, n, dt, &opts, rel)
	c.mu.Unlock()
	if r != Success {
		rel(false)
		return ReduceInfo{}, newErr(op, r)
	}
	info, err := o.Wait(ctx)
	if err == nil {
		return info, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if o.done {
		return o.info, o.err
	}
	o.orphan = true
	return ReduceInfo{}, &Error{Code: Timeout, Op: op, Err: ctx.Err()}
}
