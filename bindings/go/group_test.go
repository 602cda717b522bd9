package pccl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

const nPeers = 3

// TestGroup runs one master and three peers (goroutines, one communicator
// each) through every collective, with exact expected values.
func TestGroup(t *testing.T) {
	m := startMaster(t)
	comms := admit(t, m, make([]uint32, nPeers), 0)
	run := func(name string, f func(i int, c *Communicator) error) {
		t.Run(name, func(t *testing.T) {
			parallel(t, nPeers, 30*time.Second, func(i int) error { return f(i, comms[i]) })
		})
	}
	bg := context.Background()

	var ranks, epochs [nPeers]int
	run("Attributes", func(i int, c *Communicator) error {
		for _, a := range []struct {
			attr Attribute
			want int
		}{{GlobalWorldSize, 3}, {PeerGroupWorldSize, 3}, {CurrentWorldSize, 3},
			{NumDistinctPeerGroups, 1}, {LargestPeerGroupWorldSize, 3}} {
			v, err := c.Attribute(a.attr)
			if err != nil || v != a.want {
				return fmt.Errorf("attribute %d: %d %v, want %d", a.attr, v, err, a.want)
			}
		}
		if _, err := c.Attribute(Attribute(99)); !errors.Is(err, ErrInvalidArgument) {
			return fmt.Errorf("unknown attribute: %v", err)
		}
		r, err := c.Attribute(Rank)
		if err != nil || r < 0 || r >= nPeers {
			return fmt.Errorf("rank %d %v, want 0..%d", r, err, nPeers-1)
		}
		e, err := c.Attribute(Epoch)
		if err != nil || e <= 0 {
			return fmt.Errorf("epoch %d %v", e, err)
		}
		ranks[i], epochs[i] = r, e
		return nil
	})
	// One position each in the ring, one epoch for all.
	seen := map[int]bool{}
	for i := range ranks {
		if seen[ranks[i]] || epochs[i] != epochs[0] {
			t.Fatalf("ranks %v epochs %v: want distinct ranks, equal epochs", ranks, epochs)
		}
		seen[ranks[i]] = true
	}

	run("Int32SumZeroCopy", func(i int, c *Communicator) error {
		const n = 1000
		send := make([]int32, n)
		recv := make([]int32, n)
		for j := range send {
			send[j] = int32((i+1)*1000 + j)
		}
		info, err := AllReduce(bg, c, send, recv, ReduceOptions{Op: Sum})
		if err != nil {
			return err
		}
		for j := range recv {
			if want := int32(6000 + 3*j); recv[j] != want {
				return fmt.Errorf("recv[%d] = %d, want %d", j, recv[j], want)
			}
			if send[j] != int32((i+1)*1000+j) {
				return fmt.Errorf("send[%d] changed", j)
			}
		}
		if info.WorldSize != 3 || info.TxBytes == 0 || info.RxBytes == 0 {
			return fmt.Errorf("info %+v", info)
		}
		// Integer sums wrap (two's complement).
		wrap := []int32{math.MaxInt32, math.MinInt32 + int32(i)}
		if _, err := AllReduce(bg, c, wrap, wrap, ReduceOptions{}); err != nil {
			return err
		}
		if wrap[0] != 2147483645 || wrap[1] != -2147483645 {
			return fmt.Errorf("wrapped sums %v", wrap)
		}
		return nil
	})

	run("Float32InPlaceStaged", func(i int, c *Communicator) error {
		ctx, cancel := context.WithTimeout(bg, 20*time.Second)
		defer cancel()
		buf := make([]float32, 4097)
		for j := range buf {
			buf[j] = float32(i+1)*0.5 + float32(j)
		}
		if _, err := AllReduce(ctx, c, buf, buf, ReduceOptions{Op: Sum, Tag: 3}); err != nil {
			return err
		}
		for j := range buf {
			if want := float32(3 + 3*j); buf[j] != want {
				return fmt.Errorf("buf[%d] = %g, want %g", j, buf[j], want)
			}
		}
		return nil
	})

	run("OtherTypesAndOps", func(i int, c *Communicator) error {
		d := []float64{float64(i), -1.5 * float64(i+1)}
		if _, err := AllReduce(bg, c, d, d, ReduceOptions{Op: Avg}); err != nil {
			return err
		}
		if d[0] != 1 || d[1] != -3 {
			return fmt.Errorf("float64 avg %v", d)
		}
		x := []int64{int64(i) * 1e12, -int64(i)}
		if _, err := AllReduce(bg, c, x, x, ReduceOptions{Op: Max}); err != nil {
			return err
		}
		if x[0] != 2e12 || x[1] != 0 {
			return fmt.Errorf("int64 max %v", x)
		}
		u := []uint8{uint8(i + 2), 200}
		if _, err := AllReduce(bg, c, u, u, ReduceOptions{Op: Prod}); err != nil {
			return err
		}
		if u[0] != 24 || u[1] != uint8(200*200*200%256) {
			return fmt.Errorf("uint8 prod %v", u)
		}
		h := []int16{int16(-i), 7}
		if _, err := AllReduce(bg, c, h, h, ReduceOptions{Op: Min}); err != nil {
			return err
		}
		if h[0] != -2 || h[1] != 7 {
			return fmt.Errorf("int16 min %v", h)
		}
		return nil
	})

	run("BitwiseOpsAndPremulSum", func(i int, c *Communicator) error {
		a := []uint32{0x0F0F0F0F << uint(i), 1 << uint(i)}
		if _, err := AllReduce(bg, c, a, a, ReduceOptions{Op: Bor}); err != nil {
			return err
		}
		if a[0] != 0x0F0F0F0F|0x1E1E1E1E|0x3C3C3C3C || a[1] != 7 {
			return fmt.Errorf("uint32 bor %#x", a)
		}
		b := []int64{-1 ^ (1 << uint(i)), int64(i) + 1}
		out := make([]int64, 2)
		if _, err := AllReduce(bg, c, b, out, ReduceOptions{Op: Band}); err != nil {
			return err
		}
		if out[0] != -8 || out[1] != 0 {
			return fmt.Errorf("int64 band %v", out)
		}
		x := []uint8{1 << uint(i), 0xFF}
		if _, err := AllReduce(bg, c, x, x, ReduceOptions{Op: Bxor}); err != nil {
			return err
		}
		if x[0] != 7 || x[1] != 0xFF {
			return fmt.Errorf("uint8 bxor %v", x)
		}
		// A bitwise op on a float type: refused by the call, on every member.
		f := []float32{1, 2}
		if _, err := AllReduce(bg, c, f, f, ReduceOptions{Op: Bxor}); !errors.Is(err, ErrInvalidArgument) {
			return fmt.Errorf("float32 bxor: %v, want InvalidArgument", err)
		}
		// PremulSum: pcclAllReduce has no place for the factor, libpccl refuses it.
		if _, err := AllReduce(bg, c, f, f, ReduceOptions{Op: PremulSum}); !errors.Is(err, ErrInvalidArgument) ||
			f[0] != 1 || f[1] != 2 {
			return fmt.Errorf("float32 premul sum: %v %v, want InvalidArgument, untouched", err, f)
		}
		return nil
	})

	run("Async", func(i int, c *Communicator) error {
		const n = 3000
		a, _ := NewBuffer[int32](n)
		b, _ := NewBuffer[float64](n)
		out, _ := NewBuffer[float64](n)
		defer a.Free()
		defer b.Free()
		defer out.Free()
		for j, s := 0, a.Slice(); j < n; j++ {
			s[j] = int32(i*n + j)
		}
		for j, s := 0, b.Slice(); j < n; j++ {
			s[j] = float64(i) + 0.25
		}
		// Two operations in flight at once, distinct tags.
		opA, err := AllReduceAsync(c, a, a, ReduceOptions{Tag: 11})
		if err != nil {
			return err
		}
		opB, err := AllReduceAsync(c, b, out, ReduceOptions{Tag: 12})
		if err != nil {
			return err
		}
		if err := a.Free(); !errors.Is(err, ErrPendingAsyncOps) {
			return fmt.Errorf("Free of a busy buffer: %v", err)
		}
		if _, err := AllReduceAsync(c, a, a, ReduceOptions{Tag: 11}); !errors.Is(err, ErrInvalidArgument) {
			return fmt.Errorf("tag in flight: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		infoB, err := opB.Wait(ctx)
		if err != nil {
			return err
		}
		infoA, err := opA.Wait(ctx)
		if err != nil {
			return err
		}
		if infoA.WorldSize != 3 || infoB.WorldSize != 3 || opA.Tag() != 11 {
			return fmt.Errorf("infos %+v %+v", infoA, infoB)
		}
		for j, s := 0, a.Slice(); j < n; j++ {
			if want := int32(3*n + 3*j); s[j] != want {
				return fmt.Errorf("a[%d] = %d, want %d", j, s[j], want)
			}
		}
		for j, s := 0, out.Slice(); j < n; j++ {
			if s[j] != 3.75 {
				return fmt.Errorf("out[%d] = %g", j, s[j])
			}
		}
		if again, err := opA.Wait(ctx); err != nil || again != infoA {
			return fmt.Errorf("second Wait: %+v %v", again, err)
		}
		return nil
	})

	// Peer 0 starts an operation alone: its Wait hits the context deadline,
	// the operation stays in flight, and completes once the others join.
	late := make(chan struct{})
	run("AsyncDeadline", func(i int, c *Communicator) error {
		buf, _ := NewBuffer[int32](16)
		defer buf.Free()
		for j, s := 0, buf.Slice(); j < 16; j++ {
			s[j] = int32(i + 1)
		}
		if i != 0 {
			<-late
		}
		op, err := AllReduceAsync(c, buf, buf, ReduceOptions{Tag: 7})
		if err != nil {
			return err
		}
		if i == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			t0 := time.Now()
			_, err := op.Wait(ctx)
			cancel()
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("Wait alone: %v", err)
			}
			if el := time.Since(t0); el < 150*time.Millisecond || el > 2*time.Second {
				return fmt.Errorf("Wait returned after %v", el)
			}
			// The communicator is still usable for other calls meanwhile.
			if ws, err := c.WorldSize(); err != nil || ws != 3 {
				return fmt.Errorf("WorldSize during op: %d %v", ws, err)
			}
			if err := c.UpdateTopology(); !errors.Is(err, ErrPendingAsyncOps) {
				return fmt.Errorf("UpdateTopology with an op in flight: %v", err)
			}
			close(late)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := op.Wait(ctx); err != nil {
			return err
		}
		for j, s := 0, buf.Slice(); j < 16; j++ {
			if s[j] != 6 {
				return fmt.Errorf("buf[%d] = %d", j, s[j])
			}
		}
		return nil
	})

	// Peer 0 runs a synchronous AllReduce alone with a short deadline: it
	// fails with Timeout, recv is untouched, and the operation finishes in
	// the background when the others join; the communicator then works on.
	late2 := make(chan struct{})
	run("SyncDeadlineOrphan", func(i int, c *Communicator) error {
		send := []int32{int32(i + 1), 10}
		recv := []int32{-1, -1}
		if i == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			_, err := AllReduce(ctx, c, send, recv, ReduceOptions{Tag: 9})
			cancel()
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("AllReduce alone: %v", err)
			}
			if recv[0] != -1 || recv[1] != -1 {
				return fmt.Errorf("recv touched: %v", recv)
			}
			close(late2)
		} else {
			<-late2
			if _, err := AllReduce(bg, c, send, recv, ReduceOptions{Tag: 9}); err != nil {
				return err
			}
			if recv[0] != 6 || recv[1] != 30 {
				return fmt.Errorf("recv %v", recv)
			}
		}
		// Everyone, peer 0 included, goes on (peer 0's orphan is collected).
		x := []int32{int32(i)}
		if _, err := AllReduce(bg, c, x, x, ReduceOptions{Tag: 10}); err != nil {
			return err
		}
		if x[0] != 3 {
			return fmt.Errorf("after orphan: %v", x)
		}
		if recv[0] != -1 && i == 0 {
			return fmt.Errorf("orphan wrote recv: %v", recv)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := c.UpdateTopology()
			if err == nil {
				break
			}
			if !errors.Is(err, ErrPendingAsyncOps) && !errors.Is(err, ErrUpdateTopologyFailed) {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("orphan never collected: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.mu.Lock()
		left := len(c.ops)
		c.mu.Unlock()
		if left != 0 {
			return fmt.Errorf("%d operations still tracked", left)
		}
		return nil
	})

	run("ConcurrentGoroutines", func(i int, c *Communicator) error {
		// Four goroutines share the communicator: two with Buffers and
		// AllReduceAsync, two with staged synchronous AllReduce.
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				tag := uint64(100 + g)
				want := int32(3*g + 6)
				if g < 2 {
					b, _ := BufferFrom([]int32{int32(g + i + 1), int32(g + i + 1)})
					defer b.Free()
					op, err := AllReduceAsync(c, b, b, ReduceOptions{Tag: tag})
					if err == nil {
						_, err = op.Wait(ctx)
					}
					if err == nil && (b.Slice()[0] != want || b.Slice()[1] != want) {
						err = fmt.Errorf("goroutine %d: %v want %d", g, b.Slice(), want)
					}
					errs <- err
					return
				}
				s := []int32{int32(g + i + 1)}
				_, err := AllReduce(ctx, c, s, s, ReduceOptions{Tag: tag})
				if err == nil && s[0] != want {
					err = fmt.Errorf("goroutine %d: %v want %d", g, s, want)
				}
				errs <- err
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})

	run("BadInput", func(i int, c *Communicator) error {
		checks := []struct {
			name string
			err  error
		}{}
		add := func(name string, err error) {
			checks = append(checks, struct {
				name string
				err  error
			}{name, err})
		}
		_, err := AllReduce[float32](bg, c, nil, nil, ReduceOptions{})
		add("nil slices", err)
		_, err = AllReduce(bg, c, []float32{}, []float32{}, ReduceOptions{})
		add("empty slices", err)
		_, err = AllReduce(bg, c, make([]float32, 3), make([]float32, 4), ReduceOptions{})
		add("mismatched lengths", err)
		s := make([]int32, 8)
		_, err = AllReduce(bg, c, s[0:4], s[2:6], ReduceOptions{})
		add("overlapping", err)
		_, err = AllReduce(bg, c, s, s, ReduceOptions{Op: ReduceOp(42)})
		add("unknown op (C)", err)
		_, err = AllReduce(bg, c, s, s, ReduceOptions{Quantization: Quantization{Algorithm: QuantizationAlgorithm(9)}})
		add("unknown quantization (C)", err)
		b1, _ := NewBuffer[int32](4)
		b2, _ := NewBuffer[int32](5)
		_, err = AllReduceAsync(c, b1, b2, ReduceOptions{})
		add("async mismatched", err)
		_, err = AllReduceAsync[int32](c, nil, b2, ReduceOptions{})
		add("async nil", err)
		b2.Free()
		_, err = AllReduceAsync(c, b2, b2, ReduceOptions{})
		add("async freed", err)
		b1.Free()
		_, err = c.SyncSharedState(nil, EnforcePopular)
		add("nil state", err)
		_, err = c.SyncSharedState(&SharedState{Tensors: []Tensor{{Name: "x"}}}, EnforcePopular)
		add("tensor without data", err)
		_, err = c.SyncSharedState(&SharedState{Tensors: []Tensor{SliceTensor("d", s), SliceTensor("d", s)}}, EnforcePopular)
		add("duplicate names (C)", err)
		_, err = c.SyncSharedState(&SharedState{Tensors: []Tensor{SliceTensor("", s)}}, EnforcePopular)
		add("empty name (C)", err)
		_, err = c.SyncSharedState(&SharedState{Tensors: []Tensor{SliceTensor("k", s)}}, SyncStrategy(7))
		add("unknown strategy (C)", err)
		for _, ch := range checks {
			if !errors.Is(ch.err, ErrInvalidArgument) || CodeOf(ch.err) != InvalidArgument {
				return fmt.Errorf("%s: %v, want InvalidArgument", ch.name, ch.err)
			}
		}
		// After all that the group still reduces correctly.
		x := []int32{int32(i + 1)}
		if _, err := AllReduce(bg, c, x, x, ReduceOptions{}); err != nil || x[0] != 6 {
			return fmt.Errorf("after bad input: %v %v", x, err)
		}
		return nil
	})

	run("SharedState", func(i int, c *Communicator) error {
		const n = 513
		a := make([]int32, n)
		b, _ := NewBuffer[float32](n)
		defer b.Free()
		divergent := i == nPeers-1
		for j := 0; j < n; j++ {
			a[j] = int32(j * 7)
			if divergent {
				b.Slice()[j] = -1
			} else {
				b.Slice()[j] = float32(j) * 0.5
			}
		}
		opt := SliceTensor("opt", []float64{float64(i)})
		opt.AllowContentInequality = true
		st := &SharedState{Revision: 0, Tensors: []Tensor{SliceTensor("a", a), BufferTensor("b", b), opt}}
		if st.Tensors[0].Len() != n || st.Tensors[1].DataType() != Float {
			return fmt.Errorf("tensor accessors")
		}
		info, err := c.SyncSharedState(st, EnforcePopular)
		if err != nil {
			return err
		}
		wantRx := uint64(0)
		if divergent {
			wantRx = n * 4
		}
		if info.RxBytes != wantRx || st.Revision != 0 {
			return fmt.Errorf("first sync: %+v revision %d, want rx %d", info, st.Revision, wantRx)
		}
		for j := 0; j < n; j++ {
			if a[j] != int32(j*7) || b.Slice()[j] != float32(j)*0.5 {
				return fmt.Errorf("element %d: a %d b %g", j, a[j], b.Slice()[j])
			}
		}
		h := sha256.New()
		h.Write(sliceBytes(a))
		h.Write(sliceBytes(b.Slice()))
		hashes[i] = h.Sum(nil)
		// Revision 1: nobody receives; a ReceiveOnly peer takes part too.
		st.Revision++
		strategy := EnforcePopular
		if i == 1 {
			strategy = ReceiveOnly
		}
		info, err = c.SyncSharedState(st, strategy)
		if err != nil {
			return err
		}
		if info.RxBytes != 0 || st.Revision != 1 {
			return fmt.Errorf("second sync: %+v revision %d", info, st.Revision)
		}
		// A revision that skips ahead is refused... by eviction, so it is not
		// tried here; a wrong key set would be as well.
		return nil
	})
	for i := 1; i < nPeers; i++ {
		if !bytes.Equal(hashes[0], hashes[i]) || len(hashes[i]) != sha256.Size {
			t.Fatalf("shared state differs: peer 0 %x, peer %d %x", hashes[0], i, hashes[i])
		}
	}

	run("TopologyCalls", func(i int, c *Communicator) error {
		pending, err := c.PeersPending()
		if err != nil || pending {
			return fmt.Errorf("PeersPending %v %v", pending, err)
		}
		for tries := 0; ; tries++ {
			err := c.OptimizeTopology()
			if err == nil {
				break
			}
			if !errors.Is(err, ErrTopologyOptimizationFailed) || tries > 20 {
				return fmt.Errorf("OptimizeTopology: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		x := []float32{float32(i) + 0.5}
		if _, err := AllReduce(bg, c, x, x, ReduceOptions{}); err != nil || x[0] != 4.5 {
			return fmt.Errorf("after optimize: %v %v", x, err)
		}
		return nil
	})
}

var hashes [nPeers][]byte

// TestPeerGroups checks the attributes and group scoping of collectives with
// four peers in two groups.
func TestPeerGroups(t *testing.T) {
	m := startMaster(t)
	groups := []uint32{0, 0, 5, 5}
	comms := admit(t, m, groups, 20*time.Second)
	parallel(t, 4, 30*time.Second, func(i int) error {
		c := comms[i]
		for _, a := range []struct {
			attr Attribute
			want int
		}{{GlobalWorldSize, 4}, {PeerGroupWorldSize, 2}, {NumDistinctPeerGroups, 2},
			{LargestPeerGroupWorldSize, 2}} {
			v, err := c.Attribute(a.attr)
			if err != nil || v != a.want {
				return fmt.Errorf("attribute %d: %d %v, want %d", a.attr, v, err, a.want)
			}
		}
		// Config.Timeout is set: this is the staged path.
		x := []int32{int32(i + 1)}
		info, err := AllReduce(context.Background(), c, x, x, ReduceOptions{})
		if err != nil {
			return err
		}
		want := int32(3)
		if groups[i] == 5 {
			want = 7
		}
		if x[0] != want || info.WorldSize != 2 {
			return fmt.Errorf("group all-reduce %v (%+v), want %d", x, info, want)
		}
		return nil
	})
}
