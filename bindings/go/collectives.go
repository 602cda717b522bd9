package pccl

/*
#include "pccl.h"
*/
import "C"

import (
	"context"
	"unsafe"
)

// The collective set (docs/collectives.md): every kind has a blocking
// function over Go slices and an ...Async function over Buffers returning a
// *Work. Sizes are in elements; "count" is the length of one block, and a
// buffer holding one block per rank has world * count elements, world being
// the group's size (PeerGroupWorldSize) in the epoch of the communicator's
// last completed call. The binding checks every length against that world
// (InvalidArgument) before libpccl sees the memory.

// mem is a buffer handed to C: its address and length in elements.
type mem struct {
	p unsafe.Pointer
	n int
}

func memOf[T Element](s []T) mem {
	if len(s) == 0 {
		return mem{}
	}
	return mem{unsafe.Pointer(&s[0]), len(s)}
}

func elemSize[T Element]() uintptr {
	var z T
	return unsafe.Sizeof(z)
}

func badArg(name string) error { return &Error{Code: InvalidArgument, Op: name} }

// held collects the Buffers an asynchronous call binds to its operation.
type held struct{ rel []func() }

func holdBuf[T Element](h *held, b *Buffer[T]) (mem, bool) {
	if b == nil {
		return mem{}, true
	}
	p, n, ok := b.acquire()
	if !ok {
		return mem{}, false
	}
	h.rel = append(h.rel, b.release)
	return mem{p, n}, true
}

func (h *held) release() {
	for _, f := range h.rel {
		f()
	}
	h.rel = nil
}

// ptrArray returns a C array of the addresses of ms.
func ptrArray(ms []mem) unsafe.Pointer {
	n := len(ms)
	if n == 0 {
		n = 1
	}
	arr := cAlloc(uintptr(n) * unsafe.Sizeof(uintptr(0)))
	s := unsafe.Slice((*unsafe.Pointer)(arr), n)
	for i, m := range ms {
		s[i] = m.p
	}
	return arr
}

// staged is a list of Go slices copied into one C block (cgo forbids C
// memory holding Go pointers, and a list call takes an array of pointers).
type staged struct {
	block, arr unsafe.Pointer
	ms         []mem
}

// stage copies bufs (when in is true) into C memory, count elements each.
func stage[T Element](bufs [][]T, count int, in bool) *staged {
	es := elemSize[T]()
	total := uintptr(len(bufs)*count) * es
	if total == 0 {
		total = 1
	}
	s := &staged{block: cAlloc(total), ms: make([]mem, len(bufs))}
	for i, b := range bufs {
		p := unsafe.Add(s.block, uintptr(i*count)*es)
		s.ms[i] = mem{p, count}
		if in && count > 0 {
			copy(unsafe.Slice((*T)(p), count), b)
		}
	}
	s.arr = ptrArray(s.ms)
	return s
}

func unstage[T Element](s *staged, bufs [][]T, out bool) {
	if out {
		for i, b := range bufs {
			if s.ms[i].n > 0 {
				copy(b, unsafe.Slice((*T)(s.ms[i].p), s.ms[i].n))
			}
		}
	}
	cFree(s.arr)
	cFree(s.block)
}

// uniform reports whether every slice has length count.
func uniform[T Element](bufs [][]T, count int) bool {
	for _, b := range bufs {
		if len(b) != count {
			return false
		}
	}
	return true
}

func bufLens[T Element](bufs []*Buffer[T]) ([]mem, *held, bool) {
	h := &held{}
	ms := make([]mem, len(bufs))
	for i, b := range bufs {
		if b == nil {
			h.release()
			return nil, nil, false
		}
		m, ok := holdBuf(h, b)
		if !ok {
			h.release()
			return nil, nil, false
		}
		ms[i] = m
	}
	return ms, h, true
}

func memsUniform(ms []mem, count int) bool {
	for _, m := range ms {
		if m.n != count {
			return false
		}
	}
	return true
}

// ---- Broadcast ----

// Broadcast copies root's buf into every member's buf (pcclBroadcast).
//
// Every blocking collective: ctx's deadline becomes the operation's timeout
// (the shorter of it, opts.Timeout and Config.Timeout): when it elapses the
// operation is cancelled on every member and the call returns an *Error with
// code Timeout and cause context.DeadlineExceeded. A context already ended
// returns Timeout with cause ctx.Err() at once, starting nothing. A
// cancellation without a deadline is not observed once the operation runs
// (use the ...Async form and Work.Wait(ctx) to stop waiting). The call holds
// the communicator's mutex until it returns. On failure the outputs are
// undefined except where pccl.h says otherwise (in-place inputs are
// restored; List outputs are untouched).
func Broadcast[T Element](ctx context.Context, c *Communicator, buf []T, root int,
	opts CollectiveOptions) (CollectiveInfo, error) {
	return c.runColl(ctx, "Broadcast", &opts, func(geom) (*coll, error) {
		m := memOf(buf)
		return &coll{kind: kBroadcast, send: m.p, count: m.n, dt: DataTypeOf[T](), root: root}, nil
	})
}

// BroadcastAsync starts a Broadcast of buf (pcclBroadcastAsync).
func BroadcastAsync[T Element](c *Communicator, buf *Buffer[T], root int, opts CollectiveOptions) (*Work, error) {
	const name = "BroadcastAsync"
	return c.startColl(name, &opts, func(geom) (*coll, error) {
		h := &held{}
		m, ok := holdBuf(h, buf)
		if !ok || buf == nil {
			return nil, badArg(name)
		}
		return &coll{kind: kBroadcast, send: m.p, count: m.n, dt: DataTypeOf[T](), root: root,
			after: func(bool) { h.release() }}, nil
	})
}

// ---- Reduce ----

func reduceColl(name string, g geom, send, recv mem, op ReduceOp, root int, dt DataType) (*coll, error) {
	if g.ok && g.rank == root && recv.n != send.n {
		return nil, badArg(name)
	}
	return &coll{kind: kReduce, send: send.p, recv: recv.p, count: send.n, dt: dt, op: op, root: root}, nil
}

// Reduce reduces every member's send into root's recv (pcclReduce); recv
// has len(send) elements at the root (the same slice: in place) and is not
// used elsewhere (nil is fine there). opts.PremulScalar is this member's
// PremulSum factor; opts.Quantization may quantize the traffic.
func Reduce[T Element](ctx context.Context, c *Communicator, send, recv []T, op ReduceOp, root int,
	opts CollectiveOptions) (CollectiveInfo, error) {
	return c.runColl(ctx, "Reduce", &opts, func(g geom) (*coll, error) {
		return reduceColl("Reduce", g, memOf(send), memOf(recv), op, root, DataTypeOf[T]())
	})
}

// ReduceAsync starts a Reduce (pcclReduceAsync); recv may be nil except at
// the root, or send itself.
func ReduceAsync[T Element](c *Communicator, send, recv *Buffer[T], op ReduceOp, root int,
	opts CollectiveOptions) (*Work, error) {
	const name = "ReduceAsync"
	return c.startColl(name, &opts, func(g geom) (*coll, error) {
		h := &held{}
		s, ok1 := holdBuf(h, send)
		r, ok2 := holdBuf(h, recv)
		if !ok1 || !ok2 || send == nil {
			h.release()
			return nil, badArg(name)
		}
		k, err := reduceColl(name, g, s, r, op, root, DataTypeOf[T]())
		if err != nil {
			h.release()
			return nil, err
		}
		k.after = func(bool) { h.release() }
		return k, nil
	})
}

// ---- All-gather ----

func allGatherColl(name string, g geom, send, recv mem, dt DataType) (*coll, error) {
	if g.ok && recv.n != g.world*send.n {
		return nil, badArg(name)
	}
	return &coll{kind: kAllGather, send: send.p, recv: recv.p, count: send.n, dt: dt}, nil
}

// AllGather gathers every member's send into block r (r the sender's rank)
// of every member's recv, world * len(send) elements (pcclAllGather). send
// may be block `rank` of recv (in place).
func AllGather[T Element](ctx context.Context, c *Communicator, send, recv []T,
	opts CollectiveOptions) (CollectiveInfo, error) {
	return c.runColl(ctx, "AllGather", &opts, func(g geom) (*coll, error) {
		return allGatherColl("AllGather", g, memOf(send), memOf(recv), DataTypeOf[T]())
	})
}

// AllGatherAsync starts an AllGather (pcclAllGatherAsync).
func AllGatherAsync[T Element](c *Communicator, send, recv *Buffer[T], opts CollectiveOptions) (*Work, error) {
	return startPair(c, "AllGatherAsync", &opts, send, recv, allGatherColl)
}

// startPair starts a kind taking a send and a receive Buffer.
func startPair[T Element](c *Communicator, name string, opts *CollectiveOptions, send, recv *Buffer[T],
	build func(name string, g geom, send, recv mem, dt DataType) (*coll, error)) (*Work, error) {
	return c.startColl(name, opts, func(g geom) (*coll, error) {
		h := &held{}
		s, ok1 := holdBuf(h, send)
		r, ok2 := holdBuf(h, recv)
		if !ok1 || !ok2 || send == nil || recv == nil {
			h.release()
			return nil, badArg(name)
		}
		k, err := build(name, g, s, r, DataTypeOf[T]())
		if err != nil {
			h.release()
			return nil, err
		}
		own := k.after // the build's own memory (AllReduceExAsync's descriptor)
		k.after = func(ok bool) {
			if own != nil {
				own(ok)
			}
			h.release()
		}
		return k, nil
	})
}

// AllGatherList gathers every member's send into recv[r] of every member,
// len(recv) == world and len(recv[r]) == len(send) (pcclAllGatherList).
// recv is written only on success.
func AllGatherList[T Element](ctx context.Context, c *Communicator, send []T, recv [][]T,
	opts CollectiveOptions) (CollectiveInfo, error) {
	const name = "AllGatherList"
	return c.runColl(ctx, name, &opts, func(g geom) (*coll, error) {
		if (g.ok && len(recv) != g.world) || !uniform(recv, len(send)) {
			return nil, badArg(name)
		}
		st := stage(recv, len(send), false)
		s := memOf(send)
		return &coll{kind: kAllGatherList, send: s.p, recvs: st.arr, n: len(recv), count: s.n,
			dt: DataTypeOf[T](), after: func(ok bool) { unstage(st, recv, ok) }}, nil
	})
}

// AllGatherListAsync starts an AllGatherList over Buffers (pcclAllGatherListAsync).
func AllGatherListAsync[T Element](c *Communicator, send *Buffer[T], recv []*Buffer[T],
	opts CollectiveOptions) (*Work, error) {
	const name = "AllGatherListAsync"
	return c.startColl(name, &opts, func(g geom) (*coll, error) {
		rs, h, ok := bufLens(recv)
		if !ok {
			return nil, badArg(name)
		}
		s, ok := holdBuf(h, send)
		if !ok || send == nil || (g.ok && len(rs) != g.world) || !memsUniform(rs, s.n) {
			h.release()
			return nil, badArg(name)
		}
		arr := ptrArray(rs)
		return &coll{kind: kAllGatherList, send: s.p, recvs: arr, n: len(rs), count: s.n,
			dt: DataTypeOf[T](), after: func(bool) { cFree(arr); h.release() }}, nil
	})
}

// ---- Reduce-scatter ----

func reduceScatterColl(op ReduceOp) func(string, geom, mem, mem, DataType) (*coll, error) {
	return func(name string, g geom, send, recv mem, dt DataType) (*coll, error) {
		if g.ok && send.n != g.world*recv.n {
			return nil, badArg(name)
		}
		return &coll{kind: kReduceScatter, send: send.p, recv: recv.p, count: recv.n, dt: dt, op: op}, nil
	}
}

// ReduceScatter reduces every member's send (world * len(recv) elements)
// and leaves block r of the result in rank r's recv (pcclReduceScatter).
// recv may be block `rank` of send (in place). Options as for Reduce.
func ReduceScatter[T Element](ctx context.Context, c *Communicator, send, recv []T, op ReduceOp,
	opts CollectiveOptions) (CollectiveInfo, error) {
	return c.runColl(ctx, "ReduceScatter", &opts, func(g geom) (*coll, error) {
		return reduceScatterColl(op)("ReduceScatter", g, memOf(send), memOf(recv), DataTypeOf[T]())
	})
}

// ReduceScatterAsync starts a ReduceScatter (pcclReduceScatterAsync).
func ReduceScatterAsync[T Element](c *Communicator, send, recv *Buffer[T], op ReduceOp,
	opts CollectiveOptions) (*Work, error) {
	return startPair(c, "ReduceScatterAsync", &opts, send, recv, reduceScatterColl(op))
}

// ReduceScatterList reduces every member's send[r] into rank r's recv;
// len(send) == world, each of len(recv) elements (pcclReduceScatterList).
func ReduceScatterList[T Element](ctx context.Context, c *Communicator, send [][]T, recv []T, op ReduceOp,
	opts CollectiveOptions) (CollectiveInfo, error) {
	const name = "ReduceScatterList"
	return c.runColl(ctx, name, &opts, func(g geom) (*coll, error) {
		if (g.ok && len(send) != g.world) || !uniform(send, len(recv)) {
			return nil, badArg(name)
		}
		st := stage(send, len(recv), true)
		r := memOf(recv)
		return &coll{kind: kReduceScatterList, sends: st.arr, recv: r.p, n: len(send), count: r.n,
			dt: DataTypeOf[T](), op: op, after: func(bool) { unstage(st, send, false) }}, nil
	})
}

// ReduceScatterListAsync starts a ReduceScatterList over Buffers.
func ReduceScatterListAsync[T Element](c *Communicator, send []*Buffer[T], recv *Buffer[T], op ReduceOp,
	opts CollectiveOptions) (*Work, error) {
	const name = "ReduceScatterListAsync"
	return c.startColl(name, &opts, func(g geom) (*coll, error) {
		ss, h, ok := bufLens(send)
		if !ok {
			return nil, badArg(name)
		}
		r, ok := holdBuf(h, recv)
		if !ok || recv == nil || (g.ok && len(ss) != g.world) || !memsUniform(ss, r.n) {
			h.release()
			return nil, badArg(name)
		}
		arr := ptrArray(ss)
		return &coll{kind: kReduceScatterList, sends: arr, recv: r.p, n: len(ss), count: r.n,
			dt: DataTypeOf[T](), op: op, after: func(bool) { cFree(arr); h.release() }}, nil
	})
}

// ---- All-to-all ----

func allToAllColl(name string, g geom, send, recv mem, dt DataType) (*coll, error) {
	count := 0
	if g.ok {
		if send.n != recv.n || send.n%g.world != 0 {
			return nil, badArg(name)
		}
		count = send.n / g.world
	}
	return &coll{kind: kAllToAll, send: send.p, recv: recv.p, count: count, dt: dt}, nil
}

// AllToAll sends block j of rank i's send to block i of rank j's recv; both
// hold world * count elements (pcclAllToAll). The same slice: in place.
func AllToAll[T Element](ctx context.Context, c *Communicator, send, recv []T,
	opts CollectiveOptions) (CollectiveInfo, error) {
	return c.runColl(ctx, "AllToAll", &opts, func(g geom) (*coll, error) {
		return allToAllColl("AllToAll", g, memOf(send), memOf(recv), DataTypeOf[T]())
	})
}

// AllToAllAsync starts an AllToAll (pcclAllToAllAsync).
func AllToAllAsync[T Element](c *Communicator, send, recv *Buffer[T], opts CollectiveOptions) (*Work, error) {
	return startPair(c, "AllToAllAsync", &opts, send, recv, allToAllColl)
}

// AllToAllList sends rank i's send[j] to rank j's recv[i]; both lists have
// world slices of one length (pcclAllToAllList). recv is written only on
// success.
func AllToAllList[T Element](ctx context.Context, c *Communicator, send, recv [][]T,
	opts CollectiveOptions) (CollectiveInfo, error) {
	const name = "AllToAllList"
	return c.runColl(ctx, name, &opts, func(g geom) (*coll, error) {
		count := 0
		if len(send) > 0 {
			count = len(send[0])
		}
		if (g.ok && len(send) != g.world) || len(recv) != len(send) || !uniform(send, count) ||
			!uniform(recv, count) {
			return nil, badArg(name)
		}
		ss := stage(send, count, true)
		rs := stage(recv, count, false)
		return &coll{kind: kAllToAllList, sends: ss.arr, recvs: rs.arr, n: len(send), count: count,
			dt: DataTypeOf[T](), after: func(ok bool) { unstage(ss, send, false); unstage(rs, recv, ok) }}, nil
	})
}

// AllToAllListAsync starts an AllToAllList over Buffers.
func AllToAllListAsync[T Element](c *Communicator, send, recv []*Buffer[T], opts CollectiveOptions) (*Work, error) {
	const name = "AllToAllListAsync"
	return c.startColl(name, &opts, func(g geom) (*coll, error) {
		ss, h1, ok := bufLens(send)
		if !ok {
			return nil, badArg(name)
		}
		rs, h2, ok := bufLens(recv)
		if !ok {
			h1.release()
			return nil, badArg(name)
		}
		count := 0
		if len(ss) > 0 {
			count = ss[0].n
		}
		if (g.ok && len(ss) != g.world) || len(rs) != len(ss) || !memsUniform(ss, count) ||
			!memsUniform(rs, count) {
			h1.release()
			h2.release()
			return nil, badArg(name)
		}
		sa, ra := ptrArray(ss), ptrArray(rs)
		return &coll{kind: kAllToAllList, sends: sa, recvs: ra, n: len(ss), count: count, dt: DataTypeOf[T](),
			after: func(bool) { cFree(sa); cFree(ra); h1.release(); h2.release() }}, nil
	})
}

// ---- All-to-all-v ----

func allToAllVColl(name string, g geom, send mem, sendCounts []int, recv mem, recvCounts []int,
	dt DataType) (*coll, error) {
	sc := make([]C.size_t, len(sendCounts))
	rc := make([]C.size_t, len(recvCounts))
	ssum, rsum := 0, 0
	for i, n := range sendCounts {
		if n < 0 {
			return nil, badArg(name)
		}
		ssum += n
		sc[i] = C.size_t(n)
	}
	for i, n := range recvCounts {
		if n < 0 {
			return nil, badArg(name)
		}
		rsum += n
		rc[i] = C.size_t(n)
	}
	if g.ok && (len(sc) != g.world || len(rc) != g.world || ssum > send.n || rsum > recv.n) {
		return nil, badArg(name)
	}
	if !g.ok && (len(sc) == 0 || len(rc) == 0) {
		sc, rc = make([]C.size_t, 1), make([]C.size_t, 1) // libpccl refuses the call
	}
	return &coll{kind: kAllToAllV, send: send.p, recv: recv.p, sc: sc, rc: rc, dt: dt}, nil
}

// AllToAllV sends sendCounts[j] elements to rank j, taken consecutively
// from send in rank order, and receives recvCounts[j] elements from rank j
// into recv, consecutively in rank order (pcclAllToAllV); both count lists
// have world entries, and what i sends to j must be what j expects from i
// (else InvalidUsage on every member). send and recv must not overlap.
func AllToAllV[T Element](ctx context.Context, c *Communicator, send []T, sendCounts []int, recv []T,
	recvCounts []int, opts CollectiveOptions) (CollectiveInfo, error) {
	return c.runColl(ctx, "AllToAllV", &opts, func(g geom) (*coll, error) {
		return allToAllVColl("AllToAllV", g, memOf(send), sendCounts, memOf(recv), recvCounts, DataTypeOf[T]())
	})
}

// AllToAllVAsync starts an AllToAllV over Buffers (pcclAllToAllVAsync).
func AllToAllVAsync[T Element](c *Communicator, send *Buffer[T], sendCounts []int, recv *Buffer[T],
	recvCounts []int, opts CollectiveOptions) (*Work, error) {
	const name = "AllToAllVAsync"
	return c.startColl(name, &opts, func(g geom) (*coll, error) {
		h := &held{}
		s, ok1 := holdBuf(h, send)
		r, ok2 := holdBuf(h, recv)
		if !ok1 || !ok2 || send == nil || recv == nil {
			h.release()
			return nil, badArg(name)
		}
		k, err := allToAllVColl(name, g, s, sendCounts, r, recvCounts, DataTypeOf[T]())
		if err != nil {
			h.release()
			return nil, err
		}
		// The count arrays go to C memory: the operation reads them after this call.
		sc, rc := cSizes(k.sc), cSizes(k.rc)
		k.sc, k.rc = unsafe.Slice((*C.size_t)(sc), len(k.sc)), unsafe.Slice((*C.size_t)(rc), len(k.rc))
		k.after = func(bool) { cFree(sc); cFree(rc); h.release() }
		return k, nil
	})
}

func cSizes(s []C.size_t) unsafe.Pointer {
	n := len(s)
	if n == 0 {
		n = 1
	}
	p := cAlloc(uintptr(n) * unsafe.Sizeof(C.size_t(0)))
	copy(unsafe.Slice((*C.size_t)(p), n), s)
	return p
}

// ---- Gather ----

func gatherColl(root int) func(string, geom, mem, mem, DataType) (*coll, error) {
	return func(name string, g geom, send, recv mem, dt DataType) (*coll, error) {
		if g.ok && g.rank == root && recv.n != g.world*send.n {
			return nil, badArg(name)
		}
		return &coll{kind: kGather, send: send.p, recv: recv.p, count: send.n, dt: dt, root: root}, nil
	}
}

// Gather gathers every member's send into block r of root's recv (world *
// len(send) elements; not used elsewhere, nil is fine there) (pcclGather).
// At the root send may be block `root` of recv (in place).
func Gather[T Element](ctx context.Context, c *Communicator, send, recv []T, root int,
	opts CollectiveOptions) (CollectiveInfo, error) {
	return c.runColl(ctx, "Gather", &opts, func(g geom) (*coll, error) {
		return gatherColl(root)("Gather", g, memOf(send), memOf(recv), DataTypeOf[T]())
	})
}

// GatherAsync starts a Gather (pcclGatherAsync); recv may be nil except at the root.
func GatherAsync[T Element](c *Communicator, send, recv *Buffer[T], root int, opts CollectiveOptions) (*Work, error) {
	return startRooted(c, "GatherAsync", &opts, send, recv, true, gatherColl(root))
}

// startRooted starts a rooted kind: the Buffer on the root's side only
// (recv for gather, send for scatter) may be nil on the other members.
func startRooted[T Element](c *Communicator, name string, opts *CollectiveOptions, send, recv *Buffer[T],
	recvAtRoot bool, build func(string, geom, mem, mem, DataType) (*coll, error)) (*Work, error) {
	return c.startColl(name, opts, func(g geom) (*coll, error) {
		h := &held{}
		s, ok1 := holdBuf(h, send)
		r, ok2 := holdBuf(h, recv)
		if !ok1 || !ok2 || (recvAtRoot && send == nil) || (!recvAtRoot && recv == nil) {
			h.release()
			return nil, badArg(name)
		}
		k, err := build(name, g, s, r, DataTypeOf[T]())
		if err != nil {
			h.release()
			return nil, err
		}
		k.after = func(bool) { h.release() }
		return k, nil
	})
}

// GatherList gathers every member's send into recv[r] at the root; there
// len(recv) == world, each of len(send) elements; elsewhere recv is not used
// (pcclGatherList). recv is written only on success.
func GatherList[T Element](ctx context.Context, c *Communicator, send []T, recv [][]T, root int,
	opts CollectiveOptions) (CollectiveInfo, error) {
	const name = "GatherList"
	return c.runColl(ctx, name, &opts, func(g geom) (*coll, error) {
		s := memOf(send)
		k := &coll{kind: kGatherList, send: s.p, count: s.n, dt: DataTypeOf[T](), root: root}
		if g.ok && g.rank != root {
			return k, nil
		}
		if (g.ok && len(recv) != g.world) || !uniform(recv, len(send)) {
			return nil, badArg(name)
		}
		st := stage(recv, len(send), false)
		k.recvs, k.n = st.arr, len(recv)
		k.after = func(ok bool) { unstage(st, recv, ok) }
		return k, nil
	})
}

// GatherListAsync starts a GatherList over Buffers (recv: nil except at the root).
func GatherListAsync[T Element](c *Communicator, send *Buffer[T], recv []*Buffer[T], root int,
	opts CollectiveOptions) (*Work, error) {
	const name = "GatherListAsync"
	return c.startColl(name, &opts, func(g geom) (*coll, error) {
		rs, h, ok := bufLens(recv)
		if !ok {
			return nil, badArg(name)
		}
		s, ok := holdBuf(h, send)
		if !ok || send == nil || (g.ok && g.rank == root && len(rs) != g.world) || !memsUniform(rs, s.n) {
			h.release()
			return nil, badArg(name)
		}
		arr := ptrArray(rs)
		return &coll{kind: kGatherList, send: s.p, recvs: arr, n: len(rs), count: s.n, dt: DataTypeOf[T](),
			root: root, after: func(bool) { cFree(arr); h.release() }}, nil
	})
}

// ---- Scatter ----

func scatterColl(root int) func(string, geom, mem, mem, DataType) (*coll, error) {
	return func(name string, g geom, send, recv mem, dt DataType) (*coll, error) {
		if g.ok && g.rank == root && send.n != g.world*recv.n {
			return nil, badArg(name)
		}
		return &coll{kind: kScatter, send: send.p, recv: recv.p, count: recv.n, dt: dt, root: root}, nil
	}
}

// Scatter sends block r of root's send (world * len(recv) elements; not
// used elsewhere, nil is fine there) to rank r's recv (pcclScatter). At the
// root recv may be block `root` of send (in place).
func Scatter[T Element](ctx context.Context, c *Communicator, send, recv []T, root int,
	opts CollectiveOptions) (CollectiveInfo, error) {
	return c.runColl(ctx, "Scatter", &opts, func(g geom) (*coll, error) {
		return scatterColl(root)("Scatter", g, memOf(send), memOf(recv), DataTypeOf[T]())
	})
}

// ScatterAsync starts a Scatter (pcclScatterAsync); send may be nil except at the root.
func ScatterAsync[T Element](c *Communicator, send, recv *Buffer[T], root int, opts CollectiveOptions) (*Work, error) {
	return startRooted(c, "ScatterAsync", &opts, send, recv, false, scatterColl(root))
}

// ScatterList sends root's send[r] to rank r's recv; at the root len(send)
// == world, each of len(recv) elements; elsewhere send is not used
// (pcclScatterList).
func ScatterList[T Element](ctx context.Context, c *Communicator, send [][]T, recv []T, root int,
	opts CollectiveOptions) (CollectiveInfo, error) {
	const name = "ScatterList"
	return c.runColl(ctx, name, &opts, func(g geom) (*coll, error) {
		r := memOf(recv)
		k := &coll{kind: kScatterList, recv: r.p, count: r.n, dt: DataTypeOf[T](), root: root}
		if g.ok && g.rank != root {
			return k, nil
		}
		if (g.ok && len(send) != g.world) || !uniform(send, len(recv)) {
			return nil, badArg(name)
		}
		st := stage(send, len(recv), true)
		k.sends, k.n = st.arr, len(send)
		k.after = func(bool) { unstage(st, send, false) }
		return k, nil
	})
}

// ScatterListAsync starts a ScatterList over Buffers (send: nil except at the root).
func ScatterListAsync[T Element](c *Communicator, send []*Buffer[T], recv *Buffer[T], root int,
	opts CollectiveOptions) (*Work, error) {
	const name = "ScatterListAsync"
	return c.startColl(name, &opts, func(g geom) (*coll, error) {
		ss, h, ok := bufLens(send)
		if !ok {
			return nil, badArg(name)
		}
		r, ok := holdBuf(h, recv)
		if !ok || recv == nil || (g.ok && g.rank == root && len(ss) != g.world) || !memsUniform(ss, r.n) {
			h.release()
			return nil, badArg(name)
		}
		arr := ptrArray(ss)
		return &coll{kind: kScatterList, sends: arr, recv: r.p, n: len(ss), count: r.n, dt: DataTypeOf[T](),
			root: root, after: func(bool) { cFree(arr); h.release() }}, nil
	})
}

// ---- Barrier ----

// Barrier returns once every member of the group entered it (pcclBarrier).
func (c *Communicator) Barrier(ctx context.Context, opts CollectiveOptions) (CollectiveInfo, error) {
	return c.runColl(ctx, "Barrier", &opts, func(geom) (*coll, error) { return &coll{kind: kBarrier}, nil })
}

// BarrierAsync starts a Barrier (pcclBarrierAsync).
func (c *Communicator) BarrierAsync(opts CollectiveOptions) (*Work, error) {
	return c.startColl("BarrierAsync", &opts, func(geom) (*coll, error) { return &coll{kind: kBarrier}, nil })
}

// ---- Send / Recv ----

// Send sends buf to rank peer, which must Recv from this rank with the same
// tag, length and type (pcclSend). Only the two take part; it returns when
// the receiver has every byte. A blocking Send holds the communicator's
// mutex: to send and receive at once on one communicator (a ring shift),
// start one of the two with SendAsync / RecvAsync.
func Send[T Element](ctx context.Context, c *Communicator, buf []T, peer int,
	opts CollectiveOptions) (CollectiveInfo, error) {
	return c.runColl(ctx, "Send", &opts, func(geom) (*coll, error) {
		m := memOf(buf)
		return &coll{kind: kSend, send: m.p, count: m.n, dt: DataTypeOf[T](), root: peer}, nil
	})
}

// Recv receives len(buf) elements from rank peer into buf (pcclRecv); on
// failure buf's contents are undefined.
func Recv[T Element](ctx context.Context, c *Communicator, buf []T, peer int,
	opts CollectiveOptions) (CollectiveInfo, error) {
	return c.runColl(ctx, "Recv", &opts, func(geom) (*coll, error) {
		m := memOf(buf)
		return &coll{kind: kRecv, recv: m.p, count: m.n, dt: DataTypeOf[T](), root: peer}, nil
	})
}

// SendAsync starts a Send of buf (pcclSendAsync).
func SendAsync[T Element](c *Communicator, buf *Buffer[T], peer int, opts CollectiveOptions) (*Work, error) {
	return startOne(c, "SendAsync", &opts, buf, kSend, peer)
}

// RecvAsync starts a Recv into buf (pcclRecvAsync).
func RecvAsync[T Element](c *Communicator, buf *Buffer[T], peer int, opts CollectiveOptions) (*Work, error) {
	return startOne(c, "RecvAsync", &opts, buf, kRecv, peer)
}

func startOne[T Element](c *Communicator, name string, opts *CollectiveOptions, buf *Buffer[T], kind, peer int) (*Work, error) {
	return c.startColl(name, opts, func(geom) (*coll, error) {
		h := &held{}
		m, ok := holdBuf(h, buf)
		if !ok || buf == nil {
			return nil, badArg(name)
		}
		return &coll{kind: kind, send: m.p, recv: m.p, count: m.n, dt: DataTypeOf[T](), root: peer,
			after: func(bool) { h.release() }}, nil
	})
}

// ---- Split ----

// Split returns a new communicator over the listed ranks of this peer's
// group (pcclCommSplit; ranks of the epoch of the last completed call).
// Every listed rank calls Split with the same set, in any order; the child's
// rank i is the i-th smallest listed parent rank. The children join the run
// as new peers of a group of their own, so every other accepted peer of the
// run must call UpdateTopology meanwhile (docs/collectives-split.md). An
// empty list returns (nil, nil). The call holds this communicator's mutex
// and is bounded by Config.Timeout (60 s without one); the child inherits
// Config.Timeout. Close the child to leave it (the parent stays).
func (c *Communicator) Split(ranks []int) (*Communicator, error) {
	const name = "Split"
	if err := c.lock(name); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	cr := make([]C.int, len(ranks)+1)
	for i, r := range ranks {
		if r < 0 || r > int(^uint32(0)>>1) {
			return nil, badArg(name)
		}
		cr[i] = C.int(r)
	}
	var child *C.pcclComm_t
	if r := Code(C.pcclCommSplit(c.h, &cr[0], C.size_t(len(ranks)), &child)); r != Success {
		return nil, newErr(name, r)
	}
	if child == nil {
		return nil, nil
	}
	return &Communicator{h: child, timeout: c.timeout, ops: make(map[*AsyncOp]struct{}),
		works: make(map[*Work]struct{})}, nil
}

// ---- All-reduce with the collective set's options ----

func allReduceColl(name string, c *Communicator, send, recv mem, dt DataType, ropts *ReduceOptions,
	inC bool) (*coll, error) {
	if send.n != recv.n {
		return nil, badArg(name)
	}
	d := c.descriptor(send.n, dt, ropts)
	k := &coll{kind: kAllReduce, send: send.p, recv: recv.p, desc: &d}
	if inC { // the operation may read its descriptor after the call returns
		k.desc = (*C.pcclReduceDescriptor_t)(cAlloc(unsafe.Sizeof(d)))
		*k.desc = d
	}
	return k, nil
}

// AllReduceEx is the all-reduce with the collective set's options and
// result (pcclAllReduceEx): ropts gives the operator, the tag and the
// quantization (opts.Tag is ignored, opts.Quantization must be the zero
// value); opts gives the timeout, the flags, this member's PremulSum factor
// (AllReduce refuses PremulSum) and the algorithm. send and recv have the
// same length (the same slice: in place). The context works as for
// Broadcast; Go memory is passed directly (libpccl never touches it after
// the call returns).
func AllReduceEx[T Element](ctx context.Context, c *Communicator, send, recv []T, ropts ReduceOptions,
	opts CollectiveOptions) (CollectiveInfo, error) {
	return c.runColl(ctx, "AllReduceEx", &opts, func(geom) (*coll, error) {
		return allReduceColl("AllReduceEx", c, memOf(send), memOf(recv), DataTypeOf[T](), &ropts, false)
	})
}

// AllReduceExAsync starts an AllReduceEx over Buffers (pcclAllReduceExAsync);
// send == recv reduces in place. The Work's tag is ropts.Tag.
func AllReduceExAsync[T Element](c *Communicator, send, recv *Buffer[T], ropts ReduceOptions,
	opts CollectiveOptions) (*Work, error) {
	opts.Tag = ropts.Tag
	return startPair(c, "AllReduceExAsync", &opts, send, recv,
		func(name string, g geom, s, r mem, dt DataType) (*coll, error) {
			k, err := allReduceColl(name, c, s, r, dt, &ropts, true)
			if err == nil {
				desc := k.desc
				k.after = func(bool) { cFree(unsafe.Pointer(desc)) } // startPair chains the Buffers' release
			}
			return k, err
		})
}
