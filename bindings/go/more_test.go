package pccl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestPeerLeavesAndJoins: three peers reduce; one leaves (Close) and the
// survivors go on with exact sums on the smaller ring; then a newcomer
// joins and receives the whole shared state and the group's revision.
func TestPeerLeavesAndJoins(t *testing.T) {
	m := startMaster(t)
	comms := admit(t, m, []uint32{0, 0, 0}, 20*time.Second)
	bg := context.Background()
	const n = 100
	states := make([][]int64, 4)
	shared := func(i int) *SharedState {
		return &SharedState{Tensors: []Tensor{SliceTensor("w", states[i])}}
	}
	left := make(chan struct{})
	parallel(t, 3, 30*time.Second, func(i int) error {
		c := comms[i]
		states[i] = make([]int64, n)
		for j := range states[i] {
			states[i][j] = int64(j) << 40
		}
		st := shared(i)
		if _, err := c.SyncSharedState(st, EnforcePopular); err != nil {
			return err
		}
		x := []int32{int32(i + 1)}
		if _, err := AllReduce(bg, c, x, x, ReduceOptions{}); err != nil || x[0] != 6 {
			return fmt.Errorf("before leave: %v %v", x, err)
		}
		if i == 2 {
			defer close(left)
			return c.Close()
		}
		<-left
		deadline := time.Now().Add(10 * time.Second)
		for {
			x := []int32{int32(i + 1), 5}
			info, err := AllReduce(bg, c, x, x, ReduceOptions{})
			if errors.Is(err, ErrRankConnectionLost) {
				if x[0] != int32(i+1) || x[1] != 5 {
					return fmt.Errorf("failed in-place all-reduce changed the data: %v", x)
				}
				if time.Now().After(deadline) {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			if info.WorldSize != 2 || x[0] != 3 || x[1] != 10 {
				return fmt.Errorf("after leave: %v world %d", x, info.WorldSize)
			}
			break
		}
		if ws, err := c.WorldSize(); err != nil || ws != 2 {
			return fmt.Errorf("world size after leave %d %v", ws, err)
		}
		st.Revision++
		_, err := c.SyncSharedState(st, EnforcePopular)
		return err
	})

	// A newcomer with a zeroed state and revision 0.
	nc, err := NewCommunicator(Config{MasterURL: fmt.Sprintf("127.0.0.1:%d", m.Port()), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	comms[2] = nc
	states[2] = make([]int64, n)
	hashes := make([][]byte, 3)
	parallel(t, 3, 30*time.Second, func(i int) error {
		c := comms[i]
		if i == 2 {
			if err := c.Connect(); err != nil {
				return err
			}
		} else {
			for {
				ws, err := c.WorldSize()
				if err != nil {
					return err
				}
				if ws == 3 {
					break
				}
				if err := c.UpdateTopology(); err != nil && !errors.Is(err, ErrUpdateTopologyFailed) {
					return err
				}
			}
		}
		st := shared(i)
		st.Revision = 2
		if i == 2 {
			st.Revision = 0
		}
		info, err := c.SyncSharedState(st, EnforcePopular)
		if err != nil {
			return err
		}
		wantRx := uint64(0)
		if i == 2 {
			wantRx = n * 8
		}
		if st.Revision != 2 || info.RxBytes != wantRx {
			return fmt.Errorf("sync with newcomer: revision %d rx %d (want 2, %d)", st.Revision, info.RxBytes, wantRx)
		}
		s := sha256.Sum256(sliceBytes(states[i]))
		hashes[i] = s[:]
		x := []int32{int32(i + 1)}
		if _, err := AllReduce(bg, c, x, x, ReduceOptions{}); err != nil || x[0] != 6 {
			return fmt.Errorf("with newcomer: %v %v", x, err)
		}
		return nil
	})
	for i := 1; i < 3; i++ {
		if !bytes.Equal(hashes[0], hashes[i]) {
			t.Fatalf("state of peer %d differs", i)
		}
	}
	if states[2][n-1] != int64(n-1)<<40 {
		t.Fatalf("newcomer state %d", states[2][n-1])
	}
}

// TestHalfAndQuantized: float16 sums (exact small integers) and a quantized
// float32 all-reduce whose result must be bit-identical on every peer.
func TestHalfAndQuantized(t *testing.T) {
	m := startMaster(t)
	comms := admit(t, m, []uint32{0, 0, 0}, 20*time.Second)
	hashes := make([][32]byte, 3)
	parallel(t, 3, 30*time.Second, func(i int) error {
		c := comms[i]
		// 1.0, 2.0, 3.0 in binary16; the sum 6.0 is 0x4600.
		h := []Half{[]Half{0x3C00, 0x4000, 0x4200}[i]}
		if _, err := AllReduce(context.Background(), c, h, h, ReduceOptions{}); err != nil || h[0] != 0x4600 {
			return fmt.Errorf("float16 sum %#x %v", h, err)
		}
		x := make([]float32, 1024)
		for j := range x {
			x[j] = float32(j%17)*0.37 + float32(i)
		}
		opts := ReduceOptions{Op: Sum, Tag: 1, Distribution: DistributionUniform,
			Quantization: Quantization{Algorithm: QuantMinMax, DataType: Uint8}}
		if _, err := AllReduce(context.Background(), c, x, x, opts); err != nil {
			return err
		}
		for j := range x {
			want := 3*float32(j%17)*0.37 + 3
			if d := x[j] - want; d > 0.5 || d < -0.5 {
				return fmt.Errorf("quantized x[%d] = %g, want about %g", j, x[j], want)
			}
		}
		hashes[i] = sha256.Sum256(sliceBytes(x))
		return nil
	})
	if hashes[0] != hashes[1] || hashes[0] != hashes[2] {
		t.Fatal("quantized all-reduce results differ between peers")
	}
}

// TestAllReduceMultiple: five operations of mixed types, two in flight.
func TestAllReduceMultiple(t *testing.T) {
	m := startMaster(t)
	comms := admit(t, m, []uint32{0, 0, 0}, 20*time.Second)
	parallel(t, 3, 30*time.Second, func(i int) error {
		c := comms[i]
		a := make([]int32, 100)
		ar := make([]int32, 100)
		b := []float32{float32(i), 1}
		cb, _ := NewBuffer[float64](50)
		defer cb.Free()
		db, _ := NewBuffer[int64](10)
		dr, _ := NewBuffer[int64](10)
		defer db.Free()
		defer dr.Free()
		for j := range a {
			a[j] = int32(j * (i + 1))
		}
		for j, s := 0, cb.Slice(); j < 50; j++ {
			s[j] = float64(j) + float64(i)/4
		}
		for j, s := 0, db.Slice(); j < 10; j++ {
			s[j] = int64(i) << 33
		}
		e := []uint16{uint16(i + 1)}
		items := []ReduceItem{
			ReduceSlices(a, ar, ReduceOptions{Tag: 1}),
			ReduceSlices(b, b, ReduceOptions{Tag: 2, Op: Max}),
			ReduceBuffers(cb, cb, ReduceOptions{Tag: 3}),
			ReduceBuffers(db, dr, ReduceOptions{Tag: 4}),
			ReduceSlices(e, e, ReduceOptions{Tag: 5, Op: Prod}),
		}
		info, err := c.AllReduceMultiple(items, 2)
		if err != nil {
			return err
		}
		if info.WorldSize != 3 || info.TxBytes == 0 {
			return fmt.Errorf("info %+v", info)
		}
		for j := range ar {
			if ar[j] != int32(6*j) || a[j] != int32(j*(i+1)) {
				return fmt.Errorf("int32 item: ar[%d] = %d, a %d", j, ar[j], a[j])
			}
		}
		if b[0] != 2 || b[1] != 1 || e[0] != 6 {
			return fmt.Errorf("float32 max %v, uint16 prod %v", b, e)
		}
		for j, s := 0, cb.Slice(); j < 50; j++ {
			if s[j] != float64(3*j)+0.75 {
				return fmt.Errorf("float64 item [%d] = %g", j, s[j])
			}
		}
		for j, s := 0, dr.Slice(); j < 10; j++ {
			if s[j] != 3<<33 || db.Slice()[j] != int64(i)<<33 {
				return fmt.Errorf("int64 item [%d] = %d", j, s[j])
			}
		}
		bad := [][]ReduceItem{nil, {ReduceSlices(a, a[:5], ReduceOptions{})},
			{ReduceBuffers[int64](nil, dr, ReduceOptions{})}, {{}},
			{ReduceSlices(a, ar, ReduceOptions{Tag: 1}), ReduceSlices(b, b, ReduceOptions{Op: ReduceOp(77)})}}
		for k, items := range bad {
			if _, err := c.AllReduceMultiple(items, 1); !errors.Is(err, ErrInvalidArgument) {
				return fmt.Errorf("bad item set %d: %v", k, err)
			}
		}
		return nil
	})
}
