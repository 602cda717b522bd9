package pccl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"testing"
	"time"
)

// TestCollectives runs every kind of the collective set, blocking and
// asynchronous, with exact expected values at N = 2 and N = 3 (one master,
// one communicator per peer goroutine).
func TestCollectives(t *testing.T) {
	for _, n := range []int{2, 3} {
		n := n
		t.Run(fmt.Sprintf("N%d", n), func(t *testing.T) {
			m := startMaster(t)
			comms := admit(t, m, make([]uint32, n), 0)
			parallel(t, n, 40*time.Second, func(i int) error { return collectiveSuite(comms[i], n) })
		})
	}
}

// same fails with a description when got != want.
func same(what string, got, want any) error {
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("%s: got %v, want %v", what, got, want)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func bufOf[T Element](data []T) *Buffer[T] {
	b, err := BufferFrom(data)
	if err != nil {
		panic(err)
	}
	return b
}

func newBuf[T Element](n int) *Buffer[T] {
	b, err := NewBuffer[T](n)
	if err != nil {
		panic(err)
	}
	return b
}

func freeAll[T Element](bs ...*Buffer[T]) {
	for _, b := range bs {
		if b != nil {
			if err := b.Free(); err != nil {
				panic(err)
			}
		}
	}
}

func copyOut[T Element](b *Buffer[T]) []T { return append([]T(nil), b.Slice()...) }

func collectiveSuite(c *Communicator, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bg := context.Background()
	rank, err := c.Attribute(Rank)
	if err != nil {
		return err
	}
	epoch, err := c.Attribute(Epoch)
	if err != nil {
		return err
	}
	S := n * (n + 1) / 2 // sum of rank+1
	ranks := make([]int, n)
	for i := range ranks {
		ranks[i] = i
	}

	// Broadcast: blocking (root 1, with a deadline) and asynchronous (root 0).
	bc := []int32{0, 0, 0}
	if rank == 1 {
		bc = []int32{7, -8, 1 << 30}
	}
	info, err := Broadcast(ctx, c, bc, 1, CollectiveOptions{})
	if err != nil {
		return err
	}
	if err := firstErr(same("broadcast", bc, []int32{7, -8, 1 << 30}),
		same("broadcast info", info.WorldSize == n && info.Rank == rank && info.Epoch == uint64(epoch), true)); err != nil {
		return fmt.Errorf("%w (info %+v, epoch %d)", err, info, epoch)
	}
	fb := newBuf[float64](2)
	if rank == 0 {
		copy(fb.Slice(), []float64{math.Pi, -0.5})
	}
	w, err := BroadcastAsync(c, fb, 0, CollectiveOptions{Tag: 1})
	if err != nil {
		return err
	}
	if err := fb.Free(); !errors.Is(err, ErrPendingAsyncOps) {
		return fmt.Errorf("Free of a busy buffer: %v", err)
	}
	if _, err := w.Wait(bg); err != nil {
		return err
	}
	if err := same("broadcast async", copyOut(fb), []float64{math.Pi, -0.5}); err != nil {
		return err
	}
	freeAll(fb)

	// Reduce: sums, bitwise ops (in place at the root), PremulSum, Max,
	// and the asynchronous form.
	send := []int32{int32(rank + 1), int32(10 * (rank + 1))}
	var recv []int32
	if rank == 0 {
		recv = make([]int32, 2)
	}
	if _, err := Reduce(ctx, c, send, recv, Sum, 0, CollectiveOptions{}); err != nil {
		return err
	}
	if rank == 0 {
		if err := same("reduce sum", recv, []int32{int32(S), int32(10 * S)}); err != nil {
			return err
		}
	}
	all := uint32(1)<<n - 1
	xor := all
	if n%2 == 1 {
		xor |= 0x100
	}
	for _, tc := range []struct {
		op   ReduceOp
		want uint32
	}{{Bor, all | 0x100}, {Band, 0x100}, {Bxor, xor}} {
		u := []uint32{1<<rank | 0x100}
		if _, err := Reduce(ctx, c, u, u, tc.op, n-1, CollectiveOptions{Tag: 2}); err != nil {
			return err
		}
		if rank == n-1 {
			if err := same(fmt.Sprintf("reduce op %d", tc.op), u[0], tc.want); err != nil {
				return err
			}
		} else if u[0] != 1<<rank|0x100 {
			return fmt.Errorf("reduce changed a non-root's input: %x", u[0])
		}
	}
	pre := []float64{1, 2.5}
	preOut := make([]float64, 2)
	if _, err := Reduce(ctx, c, pre, preOut, PremulSum, 0,
		CollectiveOptions{PremulScalar: float64(rank + 1)}); err != nil {
		return err
	}
	if rank == 0 {
		if err := same("premul sum", preOut, []float64{float64(S), 2.5 * float64(S)}); err != nil {
			return err
		}
	}
	// A bitwise op on floats is refused by libpccl on every member.
	if _, err := Reduce(ctx, c, pre, preOut, Bxor, 0, CollectiveOptions{}); !errors.Is(err, ErrInvalidArgument) {
		return fmt.Errorf("float bxor: %v", err)
	}
	rs := bufOf([]int64{int64(rank) - 5, int64(rank) << 40})
	var rr *Buffer[int64]
	if rank == 1 {
		rr = newBuf[int64](2)
	}
	if w, err = ReduceAsync(c, rs, rr, Max, 1, CollectiveOptions{Tag: 3}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	if rank == 1 {
		if err := same("reduce async max", copyOut(rr), []int64{int64(n-1) - 5, int64(n-1) << 40}); err != nil {
			return err
		}
	}
	freeAll(rs, rr)

	// All-gather: separate buffers, in place, async, lists.
	gWant := make([]int16, 0, 2*n)
	for r := 0; r < n; r++ {
		gWant = append(gWant, int16(10*r), int16(-10*r-1))
	}
	mine := []int16{int16(10 * rank), int16(-10*rank - 1)}
	got := make([]int16, 2*n)
	if _, err := AllGather(ctx, c, mine, got, CollectiveOptions{}); err != nil {
		return err
	}
	if err := same("all-gather", got, gWant); err != nil {
		return err
	}
	inPlace := make([]int16, 2*n)
	copy(inPlace[2*rank:], mine)
	if _, err := AllGather(ctx, c, inPlace[2*rank:2*rank+2], inPlace, CollectiveOptions{}); err != nil {
		return err
	}
	if err := same("all-gather in place", inPlace, gWant); err != nil {
		return err
	}
	if _, err := AllGather(ctx, c, mine, got[1:], CollectiveOptions{}); !errors.Is(err, ErrInvalidArgument) {
		return fmt.Errorf("all-gather short recv: %v", err)
	}
	gs, gr := bufOf(mine), newBuf[int16](2*n)
	if w, err = AllGatherAsync(c, gs, gr, CollectiveOptions{Tag: 4}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	if err := same("all-gather async", copyOut(gr), gWant); err != nil {
		return err
	}
	freeAll(gs, gr)
	gl := make([][]int16, n)
	for r := range gl {
		gl[r] = make([]int16, 2)
	}
	if _, err := AllGatherList(ctx, c, mine, gl, CollectiveOptions{}); err != nil {
		return err
	}
	glb := make([]*Buffer[int16], n)
	for r := range gl {
		if err := same("all-gather list", gl[r], gWant[2*r:2*r+2]); err != nil {
			return err
		}
		glb[r] = newBuf[int16](2)
	}
	gs = bufOf(mine)
	if w, err = AllGatherListAsync(c, gs, glb, CollectiveOptions{Tag: 5}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	for r := range glb {
		if err := same("all-gather list async", copyOut(glb[r]), gWant[2*r:2*r+2]); err != nil {
			return err
		}
	}
	freeAll(append(glb, gs)...)

	// Reduce-scatter: block k of rank r's input is r*100 + 2k + e.
	rsIn := make([]int32, 2*n)
	for j := range rsIn {
		rsIn[j] = int32(rank*100 + j)
	}
	rsWant := []int32{int32(100*n*(n-1)/2 + n*(2*rank)), int32(100*n*(n-1)/2 + n*(2*rank+1))}
	rsOut := make([]int32, 2)
	if _, err := ReduceScatter(ctx, c, rsIn, rsOut, Sum, CollectiveOptions{}); err != nil {
		return err
	}
	if err := same("reduce-scatter", rsOut, rsWant); err != nil {
		return err
	}
	rsb, rso := bufOf(rsIn), newBuf[int32](2)
	if w, err = ReduceScatterAsync(c, rsb, rso, Sum, CollectiveOptions{Tag: 6}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	if err := same("reduce-scatter async", copyOut(rso), rsWant); err != nil {
		return err
	}
	rsl := make([][]int32, n)
	rslb := make([]*Buffer[int32], n)
	for r := range rsl {
		rsl[r] = rsIn[2*r : 2*r+2]
		rslb[r] = bufOf(rsl[r])
	}
	rsOut = make([]int32, 2)
	if _, err := ReduceScatterList(ctx, c, rsl, rsOut, Sum, CollectiveOptions{}); err != nil {
		return err
	}
	if err := same("reduce-scatter list", rsOut, rsWant); err != nil {
		return err
	}
	if w, err = ReduceScatterListAsync(c, rslb, rso, Sum, CollectiveOptions{Tag: 7}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	if err := same("reduce-scatter list async", copyOut(rso), rsWant); err != nil {
		return err
	}
	freeAll(append(rslb, rsb, rso)...)
	// Quantized (min/max into uint8): lossy, deterministic; values within
	// one code step of the exact sums.
	qIn := make([]float32, 64*n)
	for j := range qIn {
		qIn[j] = float32(j%64) * 0.25 * float32(rank+1)
	}
	qOut := make([]float32, 64)
	if _, err := ReduceScatter(ctx, c, qIn, qOut, Sum, CollectiveOptions{
		Quantization: Quantization{Algorithm: QuantMinMax, DataType: Uint8}}); err != nil {
		return err
	}
	for j, v := range qOut {
		exact := float32(j) * 0.25 * float32(S)
		if math.Abs(float64(v-exact)) > 0.25*float64(S)*64/255*2 {
			return fmt.Errorf("quantized reduce-scatter[%d] = %g, exact %g", j, v, exact)
		}
	}

	// All-to-all: block j of rank i's input holds i*100 + j*10 + k.
	a2a := func(i, j int) []uint8 { return []uint8{uint8(i*100 + j*10), uint8(i*100 + j*10 + 1)} }
	var aIn, aWant []uint8
	for j := 0; j < n; j++ {
		aIn = append(aIn, a2a(rank, j)...)
		aWant = append(aWant, a2a(j, rank)...)
	}
	aOut := make([]uint8, 2*n)
	if _, err := AllToAll(ctx, c, aIn, aOut, CollectiveOptions{}); err != nil {
		return err
	}
	aIP := append([]uint8(nil), aIn...)
	if _, err := AllToAll(ctx, c, aIP, aIP, CollectiveOptions{}); err != nil {
		return err
	}
	if err := firstErr(same("all-to-all", aOut, aWant), same("all-to-all in place", aIP, aWant)); err != nil {
		return err
	}
	ab, ao := bufOf(aIn), newBuf[uint8](2*n)
	if w, err = AllToAllAsync(c, ab, ao, CollectiveOptions{Tag: 8}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	if err := same("all-to-all async", copyOut(ao), aWant); err != nil {
		return err
	}
	freeAll(ab, ao)
	al, alo := make([][]uint8, n), make([][]uint8, n)
	alb, albo := make([]*Buffer[uint8], n), make([]*Buffer[uint8], n)
	for j := range al {
		al[j], alo[j] = a2a(rank, j), make([]uint8, 2)
		alb[j], albo[j] = bufOf(al[j]), newBuf[uint8](2)
	}
	if _, err := AllToAllList(ctx, c, al, alo, CollectiveOptions{}); err != nil {
		return err
	}
	if w, err = AllToAllListAsync(c, alb, albo, CollectiveOptions{Tag: 9}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	for j := range alo {
		if err := firstErr(same("all-to-all list", alo[j], a2a(j, rank)),
			same("all-to-all list async", copyOut(albo[j]), a2a(j, rank))); err != nil {
			return err
		}
	}
	freeAll(append(alb, albo...)...)

	// All-to-all-v: rank i sends i+j+1 elements i*1000 + j*10 + e to rank j.
	var vIn []int64
	sc, rc := make([]int, n), make([]int, n)
	var vWant []int64
	for j := 0; j < n; j++ {
		sc[j], rc[j] = rank+j+1, rank+j+1
		for e := 0; e < rank+j+1; e++ {
			vIn = append(vIn, int64(rank*1000+j*10+e))
			vWant = append(vWant, int64(j*1000+rank*10+e))
		}
	}
	vOut := make([]int64, len(vWant))
	if _, err := AllToAllV(ctx, c, vIn, sc, vOut, rc, CollectiveOptions{}); err != nil {
		return err
	}
	if err := same("all-to-all-v", vOut, vWant); err != nil {
		return err
	}
	vb, vo := bufOf(vIn), newBuf[int64](len(vWant))
	if w, err = AllToAllVAsync(c, vb, sc, vo, rc, CollectiveOptions{Tag: 10}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	if err := same("all-to-all-v async", copyOut(vo), vWant); err != nil {
		return err
	}
	freeAll(vb, vo)

	// Gather to the last rank: separate, in place, async, lists.
	root := n - 1
	gm := []uint16{uint16(rank + 1), uint16(1000 + rank)}
	var gaWant []uint16
	for r := 0; r < n; r++ {
		gaWant = append(gaWant, uint16(r+1), uint16(1000+r))
	}
	var ga []uint16
	if rank == root {
		ga = make([]uint16, 2*n)
	}
	if _, err := Gather(ctx, c, gm, ga, root, CollectiveOptions{}); err != nil {
		return err
	}
	if rank == root {
		if err := same("gather", ga, gaWant); err != nil {
			return err
		}
		ga = make([]uint16, 2*n)
		copy(ga[2*root:], gm)
		if _, err := Gather(ctx, c, ga[2*root:2*root+2], ga, root, CollectiveOptions{}); err != nil {
			return err
		}
		if err := same("gather in place", ga, gaWant); err != nil {
			return err
		}
	} else if _, err := Gather(ctx, c, gm, nil, root, CollectiveOptions{}); err != nil {
		return err
	}
	gmb := bufOf(gm)
	var gab *Buffer[uint16]
	var gal [][]uint16
	var galb []*Buffer[uint16]
	if rank == root {
		gab = newBuf[uint16](2 * n)
		gal, galb = make([][]uint16, n), make([]*Buffer[uint16], n)
		for r := range gal {
			gal[r], galb[r] = make([]uint16, 2), newBuf[uint16](2)
		}
	}
	if w, err = GatherAsync(c, gmb, gab, root, CollectiveOptions{Tag: 11}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	if _, err := GatherList(ctx, c, gm, gal, root, CollectiveOptions{}); err != nil {
		return err
	}
	if w, err = GatherListAsync(c, gmb, galb, root, CollectiveOptions{Tag: 12}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	if rank == root {
		if err := same("gather async", copyOut(gab), gaWant); err != nil {
			return err
		}
		for r := range gal {
			if err := firstErr(same("gather list", gal[r], gaWant[2*r:2*r+2]),
				same("gather list async", copyOut(galb[r]), gaWant[2*r:2*r+2])); err != nil {
				return err
			}
		}
	}
	freeAll(append(galb, gmb, gab)...)

	// Scatter from rank 0: block r is {3r, 3r+1}.
	var sIn []float32
	var sl [][]float32
	var slb []*Buffer[float32]
	var sb *Buffer[float32]
	if rank == 0 {
		for r := 0; r < n; r++ {
			sIn = append(sIn, float32(3*r), float32(3*r)+0.5)
			sl = append(sl, []float32{float32(3 * r), float32(3*r) + 0.5})
			slb = append(slb, bufOf(sl[r]))
		}
		sb = bufOf(sIn)
	}
	sWant := []float32{float32(3 * rank), float32(3*rank) + 0.5}
	sOut := make([]float32, 2)
	if _, err := Scatter(ctx, c, sIn, sOut, 0, CollectiveOptions{}); err != nil {
		return err
	}
	if err := same("scatter", sOut, sWant); err != nil {
		return err
	}
	if rank == 0 {
		ip := append([]float32(nil), sIn...)
		if _, err := Scatter(ctx, c, ip, ip[0:2], 0, CollectiveOptions{}); err != nil {
			return err
		}
	} else if _, err := Scatter[float32](ctx, c, nil, sOut, 0, CollectiveOptions{}); err != nil {
		return err
	}
	so := newBuf[float32](2)
	if w, err = ScatterAsync(c, sb, so, 0, CollectiveOptions{Tag: 13}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	if err := same("scatter async", copyOut(so), sWant); err != nil {
		return err
	}
	sOut = make([]float32, 2)
	if _, err := ScatterList(ctx, c, sl, sOut, 0, CollectiveOptions{}); err != nil {
		return err
	}
	if err := same("scatter list", sOut, sWant); err != nil {
		return err
	}
	if w, err = ScatterListAsync(c, slb, so, 0, CollectiveOptions{Tag: 14}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	if err := same("scatter list async", copyOut(so), sWant); err != nil {
		return err
	}
	freeAll(append(slb, sb, so)...)

	// Barrier, blocking and asynchronous.
	if info, err = c.Barrier(ctx, CollectiveOptions{}); err != nil {
		return err
	}
	if info.WorldSize != n || info.Rank != rank {
		return fmt.Errorf("barrier info %+v", info)
	}
	if w, err = c.BarrierAsync(CollectiveOptions{Tag: 15}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}

	// Send / recv around the ring: rank r sends on tag 20+r to r+1.
	next, prev := (rank+1)%n, (rank+n-1)%n
	p2p := []int32{int32(rank), int32(rank * rank), -1}
	sbuf := bufOf(p2p)
	if w, err = SendAsync(c, sbuf, next, CollectiveOptions{Tag: uint64(20 + rank)}); err != nil {
		return err
	}
	in := make([]int32, 3)
	if _, err := Recv(ctx, c, in, prev, CollectiveOptions{Tag: uint64(20 + prev)}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	if err := same("recv", in, []int32{int32(prev), int32(prev * prev), -1}); err != nil {
		return err
	}
	rbuf := newBuf[int32](3)
	if w, err = RecvAsync(c, rbuf, prev, CollectiveOptions{Tag: uint64(30 + prev)}); err != nil {
		return err
	}
	if _, err := Send(ctx, c, p2p, next, CollectiveOptions{Tag: uint64(30 + rank)}); err != nil {
		return err
	}
	if _, err := w.Wait(ctx); err != nil {
		return err
	}
	if err := same("recv async", copyOut(rbuf), []int32{int32(prev), int32(prev * prev), -1}); err != nil {
		return err
	}
	freeAll(sbuf, rbuf)
	if _, err := Send(ctx, c, p2p, rank, CollectiveOptions{}); !errors.Is(err, ErrInvalidArgument) {
		return fmt.Errorf("send to self: %v", err)
	}

	// AllReduceEx: PremulSum with each member's factor, blocking and async.
	px := []float32{1, -0.25, 8}
	if _, err := AllReduceEx(ctx, c, px, px, ReduceOptions{Op: PremulSum, Tag: 50},
		CollectiveOptions{PremulScalar: float64(rank + 1)}); err != nil {
		return err
	}
	if err := same("all-reduce premul", px, []float32{float32(S), -0.25 * float32(S), 8 * float32(S)}); err != nil {
		return err
	}
	pb := bufOf([]float64{float64(rank), 1})
	if w, err = AllReduceExAsync(c, pb, pb, ReduceOptions{Op: PremulSum, Tag: 51},
		CollectiveOptions{PremulScalar: 2}); err != nil {
		return err
	}
	if w.Tag() != 51 {
		return fmt.Errorf("work tag %d", w.Tag())
	}
	if info, err = w.Wait(ctx); err != nil {
		return err
	}
	if err := same("all-reduce premul async", copyOut(pb), []float64{float64(n * (n - 1)), float64(2 * n)}); err != nil {
		return err
	}
	if info.WorldSize != n || info.TxBytes == 0 {
		return fmt.Errorf("all-reduce info %+v", info)
	}
	freeAll(pb)
	if _, err := AllReduce(ctx, c, px, px, ReduceOptions{Op: PremulSum}); !errors.Is(err, ErrInvalidArgument) {
		return fmt.Errorf("AllReduce with PremulSum: %v", err)
	}

	// Three operations in flight, started in an order that depends on the
	// rank, waited for in another; IsCompleted and Free.
	b1, b2 := bufOf([]int32{int32(rank)}), newBuf[int32](n)
	starts := []func() (*Work, error){
		func() (*Work, error) { return BroadcastAsync(c, b1, 0, CollectiveOptions{Tag: 40}) },
		func() (*Work, error) { return c.BarrierAsync(CollectiveOptions{Tag: 41}) },
		func() (*Work, error) {
			src := bufOf([]int32{int32(rank * 7)})
			w, err := AllGatherAsync(c, src, b2, CollectiveOptions{Tag: 42})
			if err == nil {
				w.Free() // waits: src is free again afterwards
				if !w.IsCompleted() {
					return nil, errors.New("a freed work is not completed")
				}
				freeAll(src)
			}
			return w, err
		},
	}
	works := make([]*Work, 3)
	for k := range starts {
		j := (k + rank) % 3
		if works[j], err = starts[j](); err != nil {
			return err
		}
	}
	for j := 2; j >= 0; j-- {
		if _, err := works[j].Wait(ctx); err != nil {
			return fmt.Errorf("work tag %d: %w", works[j].Tag(), err)
		}
		if !works[j].IsCompleted() {
			return errors.New("IsCompleted false after Wait")
		}
		works[j].Free()
	}
	want7 := make([]int32, n)
	for r := range want7 {
		want7[r] = int32(7 * r)
	}
	if err := firstErr(same("concurrent broadcast", copyOut(b1), []int32{0}),
		same("concurrent all-gather", copyOut(b2), want7)); err != nil {
		return err
	}
	freeAll(b1, b2)
	return nil
}

// TestCollectiveTimeout: a blocking collective's context deadline becomes
// its timeout (the op is cancelled on both members), a work's options'
// timeout, WaitTimeout / Wait(ctx) on a running op, an ended context.
func TestCollectiveTimeout(t *testing.T) {
	m := startMaster(t)
	comms := admit(t, m, make([]uint32, 2), 0)
	step := make(chan struct{})
	// retryBarrier runs a barrier on both peers until it succeeds (after a
	// cancelled op the group re-wires: UpdateTopologyFailed first).
	retryBarrier := func(c *Communicator, tag uint64) error {
		for k := 0; k < 20; k++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := c.Barrier(ctx, CollectiveOptions{Tag: tag})
			cancel()
			if err == nil {
				return nil
			}
			if !errors.Is(err, ErrUpdateTopologyFailed) && !errors.Is(err, ErrRankConnectionLost) {
				return err
			}
			if err := c.UpdateTopology(); err != nil && !errors.Is(err, ErrUpdateTopologyFailed) {
				return err
			}
		}
		return errors.New("barrier never succeeded")
	}
	parallel(t, 2, 30*time.Second, func(i int) error {
		c := comms[i]
		if i == 1 {
			// Peer 1 sits out the timed-out ops, then joins the rest.
			<-step
			if err := retryBarrier(c, 1); err != nil {
				return err
			}
			<-step
			if err := retryBarrier(c, 2); err != nil {
				return err
			}
			<-step
			_, err := c.Barrier(context.Background(), CollectiveOptions{Tag: 3})
			return err
		}
		// An ended context starts nothing.
		done, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Barrier(done, CollectiveOptions{}); !errors.Is(err, ErrTimeout) ||
			!errors.Is(err, context.Canceled) {
			return fmt.Errorf("ended context: %v", err)
		}
		// The deadline cancels the op: Timeout, cause DeadlineExceeded.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		t0 := time.Now()
		_, err := Broadcast(ctx, c, []int32{1}, 0, CollectiveOptions{Tag: 9})
		cancel()
		if el := time.Since(t0); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) ||
			el < 250*time.Millisecond || el > 5*time.Second {
			return fmt.Errorf("deadline: %v after %v", err, el)
		}
		step <- struct{}{}
		if err := retryBarrier(c, 1); err != nil {
			return err
		}
		// The options' timeout of an asynchronous op: the op's own Timeout.
		w, err := c.BarrierAsync(CollectiveOptions{Tag: 8, Timeout: 200 * time.Millisecond})
		if err != nil {
			return err
		}
		_, err = w.Wait(context.Background())
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != Timeout || pe.Err != nil {
			return fmt.Errorf("async op timeout: %v", err)
		}
		step <- struct{}{}
		if err := retryBarrier(c, 2); err != nil {
			return err
		}
		// A bounded wait on a running op does not cancel it.
		w, err = c.BarrierAsync(CollectiveOptions{Tag: 3})
		if err != nil {
			return err
		}
		if _, err := w.WaitTimeout(100 * time.Millisecond); !errors.Is(err, ErrTimeout) ||
			!errors.Is(err, ErrStillRunning) {
			return fmt.Errorf("WaitTimeout: %v", err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 60*time.Millisecond)
		_, err = w.Wait(ctx)
		cancel()
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("Wait(ctx): %v", err)
		}
		if w.IsCompleted() {
			return errors.New("completed without its partner")
		}
		step <- struct{}{}
		if _, err = w.Wait(context.Background()); err != nil {
			return err
		}
		// Close waits for a Work nobody waited for (its own timeout ends it)
		// and releases its Buffer; the Work keeps the result.
		b := bufOf([]int32{1, 2})
		w, err = BroadcastAsync(c, b, 0, CollectiveOptions{Tag: 4, Timeout: 200 * time.Millisecond})
		if err != nil {
			return err
		}
		if err := c.Close(); err != nil {
			return err
		}
		if err := b.Free(); err != nil {
			return fmt.Errorf("Free after Close: %v", err)
		}
		if _, err := w.Wait(context.Background()); !errors.Is(err, ErrTimeout) || !w.IsCompleted() {
			return fmt.Errorf("work after Close: %v", err)
		}
		return nil
	})
}

// TestSplit: ranks 0 and 1 of three split off while rank 2 admits their
// children with UpdateTopology; the child's ranks follow the parent's.
func TestSplit(t *testing.T) {
	m := startMaster(t)
	comms := admit(t, m, make([]uint32, 3), 20*time.Second)
	var mu sync.Mutex
	childWorlds := map[int]int{}
	parallel(t, 3, 30*time.Second, func(i int) error {
		c := comms[i]
		rank, err := c.Attribute(Rank)
		if err != nil {
			return err
		}
		if child, err := c.Split(nil); child != nil || err != nil {
			return fmt.Errorf("empty split: %v %v", child, err)
		}
		if rank == 2 {
			if _, err := c.Split([]int{0, 1}); !errors.Is(err, ErrInvalidArgument) {
				return fmt.Errorf("split without the caller: %v", err)
			}
			for start := time.Now(); ; {
				g, err := c.Attribute(GlobalWorldSize)
				if err != nil {
					return err
				}
				if g >= 5 {
					return nil
				}
				if time.Since(start) > 20*time.Second {
					return fmt.Errorf("global world stays %d", g)
				}
				if err := c.UpdateTopology(); err != nil && !errors.Is(err, ErrUpdateTopologyFailed) {
					return err
				}
			}
		}
		child, err := c.Split([]int{1, 0})
		if err != nil {
			return err
		}
		defer child.Close()
		cr, err := child.Attribute(Rank)
		if err != nil {
			return err
		}
		cw, err := child.WorldSize()
		if err != nil {
			return err
		}
		mu.Lock()
		childWorlds[rank] = cw
		mu.Unlock()
		if cr != rank || cw != 2 {
			return fmt.Errorf("child rank %d world %d, parent rank %d", cr, cw, rank)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		parents := make([]int32, 2)
		if _, err := AllGather(ctx, child, []int32{int32(rank)}, parents, CollectiveOptions{}); err != nil {
			return err
		}
		if err := same("child all-gather", parents, []int32{0, 1}); err != nil {
			return err
		}
		msg := []uint64{0}
		if cr == 0 {
			msg[0] = 0xfeedface
			_, err = Send(ctx, child, msg, 1, CollectiveOptions{Tag: 7})
		} else {
			_, err = Recv(ctx, child, msg, 0, CollectiveOptions{Tag: 7})
		}
		if err != nil {
			return err
		}
		return same("child send/recv", msg[0], uint64(0xfeedface))
	})
	if len(childWorlds) != 2 {
		t.Fatalf("children %v", childWorlds)
	}
}

// TestCollectivesRefused: before Connect, alone in a group and after Close,
// libpccl's refusal comes back and no Buffer stays bound.
func TestCollectivesRefused(t *testing.T) {
	m := startMaster(t)
	url := fmt.Sprintf("127.0.0.1:%d", m.Port())
	c, err := NewCommunicator(Config{MasterURL: url})
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	_, err = AllGather(bg, c, []int32{1}, make([]int32, 1), CollectiveOptions{})
	expectCode(t, "AllGather before Connect", err, ErrInvalidUsage)
	_, err = c.BarrierAsync(CollectiveOptions{})
	expectCode(t, "BarrierAsync before Connect", err, ErrInvalidUsage)
	_, err = c.Split([]int{0, 1})
	expectCode(t, "Split before Connect", err, ErrInvalidUsage)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Broadcast(bg, c, []int32{1}, 0, CollectiveOptions{})
	expectCode(t, "Broadcast after Close", err, ErrInvalidUsage)
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}

	alone, err := NewCommunicator(Config{MasterURL: url, PeerGroup: 9, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	if err := alone.Connect(); err != nil {
		t.Fatal(err)
	}
	b := bufOf([]int32{4, 5})
	w, err := AllGatherAsync(alone, b, b, CollectiveOptions{Tag: 1})
	expectCode(t, "AllGatherAsync alone", err, ErrTooFewPeers)
	if w != nil {
		t.Fatal("a work was returned")
	}
	if err := b.Free(); err != nil {
		t.Fatalf("Free after the refused call: %v", err)
	}
	_, err = Reduce(bg, alone, []int32{1}, nil, Sum, 0, CollectiveOptions{})
	expectCode(t, "Reduce alone", err, ErrTooFewPeers)
	_, err = Broadcast(bg, alone, []int32{1}, 0, CollectiveOptions{Timeout: -1})
	expectCode(t, "negative timeout", err, ErrInvalidArgument)
}
