package pccl

/*
#include <stdlib.h>
#include "pccl.h"

// Kinds of gopccl_coll, one per C collective.
enum {
	GK_BROADCAST, GK_REDUCE, GK_ALLGATHER, GK_REDUCESCATTER, GK_ALLTOALL, GK_GATHER,
	GK_SCATTER, GK_BARRIER, GK_SEND, GK_RECV, GK_ALLGATHER_LIST, GK_REDUCESCATTER_LIST,
	GK_ALLTOALL_LIST, GK_GATHER_LIST, GK_SCATTER_LIST, GK_ALLTOALLV, GK_ALLREDUCE
};

// gopccl_coll calls the blocking form of one collective (work == NULL) or its
// ...Async form. sends and recvs are C arrays of n pointers (list forms);
// desc is the all-reduce's descriptor.
static pcclResult_t gopccl_coll(int kind, void *send, void *recv, void **sends, void **recvs,
	size_t n, size_t count, int dtype, int op, int root, const size_t *scounts,
	const size_t *rcounts, const pcclReduceDescriptor_t *desc, const pcclCollectiveOptions_t *o,
	const pcclComm_t *comm, pcclCollectiveInfo_t *info, pcclWork_t **work)
{
	pcclDataType_t dt = (pcclDataType_t)dtype;
	pcclRedOp_t rop = (pcclRedOp_t)op;
	const void *const *csends = (const void *const *)sends;
	void *const *crecvs = (void *const *)recvs;
	switch (kind) {
	case GK_BROADCAST:
		return work ? pcclBroadcastAsync(send, count, dt, root, o, comm, work)
			    : pcclBroadcast(send, count, dt, root, o, comm, info);
	case GK_REDUCE:
		return work ? pcclReduceAsync(send, recv, count, dt, rop, root, o, comm, work)
			    : pcclReduce(send, recv, count, dt, rop, root, o, comm, info);
	case GK_ALLGATHER:
		return work ? pcclAllGatherAsync(send, recv, count, dt, o, comm, work)
			    : pcclAllGather(send, recv, count, dt, o, comm, info);
	case GK_REDUCESCATTER:
		return work ? pcclReduceScatterAsync(send, recv, count, dt, rop, o, comm, work)
			    : pcclReduceScatter(send, recv, count, dt, rop, o, comm, info);
	case GK_ALLTOALL:
		return work ? pcclAllToAllAsync(send, recv, count, dt, o, comm, work)
			    : pcclAllToAll(send, recv, count, dt, o, comm, info);
	case GK_GATHER:
		return work ? pcclGatherAsync(send, recv, count, dt, root, o, comm, work)
			    : pcclGather(send, recv, count, dt, root, o, comm, info);
	case GK_SCATTER:
		return work ? pcclScatterAsync(send, recv, count, dt, root, o, comm, work)
			    : pcclScatter(send, recv, count, dt, root, o, comm, info);
	case GK_BARRIER:
		return work ? pcclBarrierAsync(o, comm, work) : pcclBarrier(o, comm, info);
	case GK_SEND:
		return work ? pcclSendAsync(send, count, dt, root, o, comm, work)
			    : pcclSend(send, count, dt, root, o, comm, info);
	case GK_RECV:
		return work ? pcclRecvAsync(recv, count, dt, root, o, comm, work)
			    : pcclRecv(recv, count, dt, root, o, comm, info);
	case GK_ALLGATHER_LIST:
		return work ? pcclAllGatherListAsync(send, crecvs, n, count, dt, o, comm, work)
			    : pcclAllGatherList(send, crecvs, n, count, dt, o, comm, info);
	case GK_REDUCESCATTER_LIST:
		return work ? pcclReduceScatterListAsync(csends, n, recv, count, dt, rop, o, comm, work)
			    : pcclReduceScatterList(csends, n, recv, count, dt, rop, o, comm, info);
	case GK_ALLTOALL_LIST:
		return work ? pcclAllToAllListAsync(csends, crecvs, n, count, dt, o, comm, work)
			    : pcclAllToAllList(csends, crecvs, n, count, dt, o, comm, info);
	case GK_GATHER_LIST:
		return work ? pcclGatherListAsync(send, crecvs, n, count, dt, root, o, comm, work)
			    : pcclGatherList(send, crecvs, n, count, dt, root, o, comm, info);
	case GK_SCATTER_LIST:
		return work ? pcclScatterListAsync(csends, n, recv, count, dt, root, o, comm, work)
			    : pcclScatterList(csends, n, recv, count, dt, root, o, comm, info);
	case GK_ALLTOALLV:
		return work ? pcclAllToAllVAsync(send, scounts, recv, rcounts, dt, o, comm, work)
			    : pcclAllToAllV(send, scounts, recv, rcounts, dt, o, comm, info);
	case GK_ALLREDUCE:
		return work ? pcclAllReduceExAsync(send, recv, desc, o, comm, work)
			    : pcclAllReduceEx(send, recv, desc, o, comm, info);
	}
	return pcclInvalidArgument;
}
*/
import "C"

import (
	"context"
	"errors"
	"sync"
	"time"
	"unsafe"
)

// AbortOnError is the CollectiveOptions flag PCCL_COLLECTIVE_ABORT_ON_ERROR:
// when the operation fails or times out, libpccl logs it and aborts the
// process.
const AbortOnError uint32 = 1

// CollectiveOptions describes one operation of the collective set
// (pcclCollectiveOptions_t); the zero value is every default. Members of an
// operation must agree on Tag, Quantization and Algorithm; Timeout and
// PremulScalar are each member's own.
type CollectiveOptions struct {
	// Tag identifies the operation among those in flight on the communicator
	// (default 0): concurrent operations need distinct tags.
	Tag uint64
	// Timeout cancels the operation on every member when it has not finished
	// this long after it started here (every member gets Timeout). 0: the
	// communicator's Config.Timeout (or the environment's PCCL_TIMEOUT_MS).
	// Millisecond resolution. A blocking call's context deadline shortens it.
	Timeout time.Duration
	// Flags: AbortOnError or 0.
	Flags uint32
	// PremulScalar is this member's factor for PremulSum; 0 means 1 (C's
	// default). Other operators ignore it.
	PremulScalar float64
	// Quantization of the traffic of Reduce and ReduceScatter (and their
	// Async and List forms); any other kind refuses an algorithm other than
	// QuantNone (InvalidArgument).
	Quantization Quantization
	// Algorithm is the algorithm the operation must run; AlgoAuto (the zero
	// value): the group's tuned table (Tune), else the built-in rule. Members
	// that pass different ones all get InvalidUsage, before any data moves;
	// one that cannot run the operation is InvalidArgument (AlgoRelay above
	// the master's relay bound, AlgoDirect on another kind than an all-reduce
	// or above 4 MiB, anything but the ring schedules for a quantized or
	// PremulSum operation). Send and Recv ignore it.
	Algorithm Algorithm
}

// CollectiveInfo holds the statistics of one finished operation
// (pcclCollectiveInfo_t).
type CollectiveInfo struct {
	WorldSize int    // members of the operation (the world its ranks refer to)
	Rank      int    // this peer's rank in it
	Epoch     uint64 // the epoch it ran in
	TxBytes   uint64 // bytes this peer sent on its links
	RxBytes   uint64 // bytes this peer received on its links
}

func collInfo(i *C.pcclCollectiveInfo_t) CollectiveInfo {
	return CollectiveInfo{WorldSize: int(i.world_size), Rank: int(i.rank), Epoch: uint64(i.epoch),
		TxBytes: uint64(i.tx_bytes), RxBytes: uint64(i.rx_bytes)}
}

// cOptions converts the options with the given timeout.
func (o *CollectiveOptions) cOptions(timeout time.Duration) C.pcclCollectiveOptions_t {
	var x C.pcclCollectiveOptions_t
	x.struct_size = C.uint32_t(unsafe.Sizeof(x))
	x.timeout_ms = durMs(timeout)
	x.tag = C.uint64_t(o.Tag)
	x.flags = C.uint32_t(o.Flags)
	x.premul_scalar = 1.0
	if o.PremulScalar != 0 {
		x.premul_scalar = C.double(o.PremulScalar)
	}
	x.quantization_options.algorithm = C.pcclQuantizationAlgorithm_t(o.Quantization.Algorithm)
	x.quantization_options.quantized_datatype = C.pcclDataType_t(o.Quantization.DataType)
	x.algorithm = C.uint32_t(o.Algorithm)
	return x
}

// Kinds of gopccl_coll.
const (
	kBroadcast = iota
	kReduce
	kAllGather
	kReduceScatter
	kAllToAll
	kGather
	kScatter
	kBarrier
	kSend
	kRecv
	kAllGatherList
	kReduceScatterList
	kAllToAllList
	kGatherList
	kScatterList
	kAllToAllV
	kAllReduce
)

// coll is one prepared call of gopccl_coll.
type coll struct {
	kind         int
	send, recv   unsafe.Pointer
	sends, recvs unsafe.Pointer // C arrays of n pointers (list forms)
	n, count     int
	dt           DataType
	op           ReduceOp
	root         int // the peer for send / recv
	sc, rc       []C.size_t
	desc         *C.pcclReduceDescriptor_t // kAllReduce
	// after runs once the C memory is no longer the operation's: ok is the
	// operation's success (copy outputs back, free staging, release Buffers).
	after func(ok bool)
}

func (k *coll) call(o *C.pcclCollectiveOptions_t, h *C.pcclComm_t, info *C.pcclCollectiveInfo_t,
	work **C.pcclWork_t) Code {
	var sc, rc *C.size_t
	if len(k.sc) > 0 {
		sc = &k.sc[0]
	}
	if len(k.rc) > 0 {
		rc = &k.rc[0]
	}
	return Code(C.gopccl_coll(C.int(k.kind), k.send, k.recv, (*unsafe.Pointer)(k.sends),
		(*unsafe.Pointer)(k.recvs), C.size_t(k.n), C.size_t(k.count), C.int(k.dt), C.int(k.op),
		C.int(k.root), sc, rc, k.desc, o, h, info, work))
}

// geom is the world and rank a collective started now runs in (ok false
// when they are unknown: not connected, in no ring, alone; libpccl then
// refuses the call before touching any buffer).
type geom struct {
	world, rank int
	ok          bool
}

// geometry reads the group's world and this peer's rank. c.mu held: no call
// of another goroutine completes between it and the collective's start, so
// they are the values libpccl pins the collective to.
func (c *Communicator) geometry() geom {
	var w, r C.int
	if Code(C.pcclGetAttribute(c.h, C.PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &w)) != Success ||
		Code(C.pcclGetAttribute(c.h, C.PCCL_ATTRIBUTE_RANK, &r)) != Success {
		return geom{}
	}
	return geom{world: int(w), rank: int(r), ok: w >= 2 && r >= 0 && r < w}
}

// runColl runs a blocking collective. prep (called under c.mu) checks the
// sizes against the group's world and rank and builds the call; the C call
// returns only when the operation is over and never touches its buffers
// afterwards (pccl.h), so Go memory may be passed directly.
func (c *Communicator) runColl(ctx context.Context, name string, opts *CollectiveOptions,
	prep func(g geom) (*coll, error)) (CollectiveInfo, error) {
	if opts.Timeout < 0 {
		return CollectiveInfo{}, &Error{Code: InvalidArgument, Op: name}
	}
	if err := c.lock(name); err != nil {
		return CollectiveInfo{}, err
	}
	defer c.mu.Unlock()
	// The time left is measured once the mutex is ours: waiting for another
	// goroutine's call must not stretch the op past ctx's deadline.
	if err := ctx.Err(); err != nil {
		return CollectiveInfo{}, &Error{Code: Timeout, Op: name, Err: err}
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = c.timeout
	}
	dl, hasDl := ctx.Deadline()
	if hasDl {
		rem := time.Until(dl)
		if rem < time.Millisecond {
			rem = time.Millisecond
		}
		if timeout == 0 || rem < timeout {
			timeout = rem
		}
	}
	o := opts.cOptions(timeout)
	k, err := prep(c.geometry())
	if err != nil {
		return CollectiveInfo{}, err
	}
	var info C.pcclCollectiveInfo_t
	r := k.call(&o, c.h, &info, nil)
	if k.after != nil {
		k.after(r == Success)
	}
	if r != Success {
		e := &Error{Code: r, Op: name}
		if r == Timeout {
			if err := ctx.Err(); err != nil {
				e.Err = err
			} else if hasDl && !time.Now().Before(dl) {
				e.Err = context.DeadlineExceeded
			}
		}
		return CollectiveInfo{}, e
	}
	return collInfo(&info), nil
}

// startColl starts an asynchronous collective; prep as for runColl, its
// buffers C memory that stays the operation's until it ends.
func (c *Communicator) startColl(name string, opts *CollectiveOptions,
	prep func(g geom) (*coll, error)) (*Work, error) {
	if opts.Timeout < 0 {
		return nil, &Error{Code: InvalidArgument, Op: name}
	}
	o := opts.cOptions(opts.Timeout)
	if err := c.lock(name); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	k, err := prep(c.geometry())
	if err != nil {
		return nil, err
	}
	var h *C.pcclWork_t
	if r := k.call(&o, c.h, nil, &h); r != Success {
		if k.after != nil {
			k.after(false)
		}
		return nil, newErr(name, r)
	}
	w := &Work{c: c, h: h, op: name, tag: opts.Tag, release: k.after}
	c.works[w] = struct{}{}
	return w, nil
}

// Work is a collective in flight (pcclWork_t), started by one of the ...Async
// functions. Its Buffers belong to the operation until a wait returns its
// result (not a context error), IsCompleted reports true, or Free returns.
// Once the result is known the C work object is freed; the Work keeps the
// result, which every later Wait returns. A Work may be used from any
// goroutine. Close on the communicator waits for the Works still in flight.
type Work struct {
	c   *Communicator
	op  string
	tag uint64

	// Guarded by c.mu:
	h       *C.pcclWork_t
	done    bool
	info    CollectiveInfo
	err     error
	release func(ok bool)

	wmu sync.Mutex // one wait at a time
}

// Tag returns the operation's tag.
func (w *Work) Tag() uint64 { return w.tag }

// finishWork records a result, frees the C work object and releases the
// operation's memory. c.mu held.
func (c *Communicator) finishWork(w *Work, r Code, info *C.pcclCollectiveInfo_t) {
	if w.done {
		return
	}
	w.done = true
	if r == Success {
		w.info = collInfo(info)
	} else {
		w.err = newErr(w.op, r)
	}
	C.pcclWorkFree(w.h)
	w.h = nil
	delete(c.works, w)
	if w.release != nil {
		w.release(r == Success)
		w.release = nil
	}
}

// collect finishes w if its operation has ended. c.mu held.
func (w *Work) collect(ms uint32) bool {
	if w.done {
		return true
	}
	var info C.pcclCollectiveInfo_t
	r := Code(C.pcclWorkWaitTimeout(w.h, C.uint32_t(ms), &info))
	if r == Timeout {
		// Still running, or the operation's own result is Timeout.
		var completed C.bool
		if Code(C.pcclWorkIsCompleted(w.h, &completed)) != Success || !bool(completed) {
			return false
		}
		r = Code(C.pcclWorkWait(w.h, &info))
	}
	w.c.finishWork(w, r, &info)
	return true
}

// poll waits at most ms milliseconds (0: no wait) under the mutex.
func (w *Work) poll(ms uint32) (bool, CollectiveInfo, error) {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !w.done && c.h == nil { // cannot happen: Close finishes every Work
		w.done, w.err = true, &Error{Code: InvalidUsage, Op: w.op, Err: ErrClosed}
	}
	if !w.collect(ms) {
		return false, CollectiveInfo{}, nil
	}
	return true, w.info, w.err
}

// wait polls in slices of at most 50 ms until the result is known or
// deadline (zero: none) passes or done closes.
func (w *Work) wait(deadline time.Time, done <-chan struct{}) (bool, CollectiveInfo, error) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	for {
		slice := waitSlice
		if !deadline.IsZero() {
			rem := time.Until(deadline)
			if rem < slice {
				slice = rem
			}
		}
		var ms uint32
		if slice > 0 {
			ms = uint32(durMs(slice))
		}
		if ok, info, err := w.poll(ms); ok {
			return true, info, err
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return false, CollectiveInfo{}, nil
		}
		select {
		case <-done:
			return false, CollectiveInfo{}, nil
		default:
		}
	}
}

// Wait waits for the operation's result (pcclWorkWait), at most until ctx
// ends. When ctx ends first, Wait returns an *Error with code Timeout whose
// cause is ctx.Err() (errors.Is matches ErrTimeout and
// context.DeadlineExceeded / context.Canceled): the operation is still in
// flight — a context does not cancel it (its CollectiveOptions.Timeout
// does) — and its Buffers are still its own: wait again. The operation's
// own result may also be Timeout (its timeout cancelled it on every
// member), then without a cause. Wait holds the communicator's mutex for at
// most 50 ms at a time.
func (w *Work) Wait(ctx context.Context) (CollectiveInfo, error) {
	dl, _ := ctx.Deadline()
	if ok, info, err := w.wait(dl, ctx.Done()); ok {
		return info, err
	}
	err := ctx.Err()
	if err == nil {
		err = context.DeadlineExceeded
	}
	return CollectiveInfo{}, &Error{Code: Timeout, Op: w.op, Err: err}
}

// ErrStillRunning is the cause of the Timeout error WaitTimeout returns when
// the operation has not finished (its own Timeout result has no cause).
var ErrStillRunning = errors.New("still running")

// WaitTimeout waits at most d (0: a poll) for the operation
// (pcclWorkWaitTimeout). When it is still running WaitTimeout returns an
// *Error with code Timeout and cause ErrStillRunning; the operation is not
// cancelled: wait again.
func (w *Work) WaitTimeout(d time.Duration) (CollectiveInfo, error) {
	if d < 0 {
		d = 0
	}
	if ok, info, err := w.wait(time.Now().Add(d), nil); ok {
		return info, err
	}
	return CollectiveInfo{}, &Error{Code: Timeout, Op: w.op, Err: ErrStillRunning}
}

// IsCompleted reports whether the operation has finished
// (pcclWorkIsCompleted); never blocks. When it has, its result is collected
// and its Buffers are free again.
func (w *Work) IsCompleted() bool {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.done {
		return true
	}
	var completed C.bool
	if Code(C.pcclWorkIsCompleted(w.h, &completed)) != Success || !bool(completed) {
		return false
	}
	return w.collect(0)
}

// Free releases the work object (pcclWorkFree). A running operation is
// waited for first (its Buffers are its own until it ends; the wait is
// bounded by the operation's timeout plus 5 s, or unbounded without one),
// holding the communicator's mutex. Afterwards Wait returns the result.
// Freeing twice, or after the result is known, is a no-op.
func (w *Work) Free() {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.done || w.h == nil {
		return
	}
	var info C.pcclCollectiveInfo_t
	r := Code(C.pcclWorkWait(w.h, &info))
	c.finishWork(w, r, &info)
}
