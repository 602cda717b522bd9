package pccl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tuneInput is rank r's input, element j.
func tuneInput(r, j int) int32 { return int32((r+1)*1000 + j) }

// exactSum runs an AllReduceEx (Sum) of n elements with opts over a world of
// w and checks every element; a refusal comes back as the error.
func exactSum(c *Communicator, rank, w, n int, opts CollectiveOptions) error {
	send := make([]int32, n)
	for j := range send {
		send[j] = tuneInput(rank, j)
	}
	recv := make([]int32, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	info, err := AllReduceEx(ctx, c, send, recv, ReduceOptions{Op: Sum, Tag: opts.Tag}, opts)
	if err != nil {
		return err
	}
	if info.WorldSize != w {
		return fmt.Errorf("%v: world %d, want %d", opts.Algorithm, info.WorldSize, w)
	}
	for j, v := range recv {
		var want int32
		for i := 0; i < w; i++ {
			want += tuneInput(i, j)
		}
		if v != want {
			return fmt.Errorf("%v: element %d of %d: %d, want %d", opts.Algorithm, j, n, v, want)
		}
	}
	return nil
}

// TestTune: two peers tune 1 KiB .. 64 KiB with one iteration; both save
// byte-identical tables, AlgorithmFor agrees (and matches the saved row),
// TuneLoad of the saved file installs the same table again.
func TestTune(t *testing.T) {
	m := startMaster(t)
	const n = 2
	comms := admit(t, m, make([]uint32, n), 0)
	dir := t.TempDir()
	var texts [n]string
	var algos [n][]Algorithm
	parallel(t, n, 60*time.Second, func(i int) error {
		c := comms[i]
		bg := context.Background()
		err := c.TuneSave(filepath.Join(dir, "no-such-dir", "t"))
		if !errors.Is(err, ErrInvalidArgument) {
			return fmt.Errorf("TuneSave into a missing directory: %v", err)
		}
		if err := c.TuneSave("nul\x00byte"); !errors.Is(err, ErrInvalidArgument) {
			return fmt.Errorf("TuneSave of a path with a NUL byte: %v", err)
		}
		err = c.TuneLoad(bg, filepath.Join(dir, "missing"))
		if !errors.Is(err, ErrInvalidArgument) {
			return fmt.Errorf("TuneLoad of a missing file: %v", err)
		}
		if _, err := c.AlgorithmFor(-1, Float); !errors.Is(err, ErrInvalidArgument) {
			return fmt.Errorf("AlgorithmFor(-1): %v", err)
		}
		ended, cancel := context.WithCancel(bg)
		cancel()
		if err := c.Tune(ended, TuneOptions{}); !errors.Is(err, ErrTimeout) ||
			!errors.Is(err, context.Canceled) {
			return fmt.Errorf("Tune with an ended context: %v", err)
		}
		if err := c.Tune(bg, TuneOptions{Iterations: 1, MaxBytes: 64 << 10}); err != nil {
			return err
		}
		path := filepath.Join(dir, fmt.Sprintf("table%d", i))
		if err := c.TuneSave(path); err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		texts[i] = string(b)
		// float32 all-reduces of 1 KiB .. 256 KiB: tuned up to 64 KiB, the rule above.
		for k := 0; k < 9; k++ {
			a, err := c.AlgorithmFor(256<<k, Float)
			if err != nil {
				return err
			}
			algos[i] = append(algos[i], a)
		}
		if err := c.TuneLoad(bg, path); err != nil {
			return err
		}
		again := filepath.Join(dir, fmt.Sprintf("again%d", i))
		if err := c.TuneSave(again); err != nil {
			return err
		}
		if b, err := os.ReadFile(again); err != nil || string(b) != texts[i] {
			return fmt.Errorf("after TuneLoad: %q %v, want %q", b, err, texts[i])
		}
		rank, err := c.Attribute(Rank)
		if err != nil {
			return err
		}
		return exactSum(c, rank, n, 3000, CollectiveOptions{Tag: 1}) // with the tuned table
	})
	if texts[0] != texts[1] {
		t.Fatalf("the members saved different tables:\n%s\n%s", texts[0], texts[1])
	}
	if fmt.Sprint(algos[0]) != fmt.Sprint(algos[1]) {
		t.Fatalf("AlgorithmFor differs: %v and %v", algos[0], algos[1])
	}
	var row []string
	for _, l := range strings.Split(texts[0], "\n") {
		if strings.HasPrefix(l, "world 2:") {
			row = strings.Fields(strings.TrimPrefix(l, "world 2:"))
		}
	}
	if len(row) != 19 {
		t.Fatalf("no row of 19 entries for world 2 in:\n%s", texts[0])
	}
	for k, name := range row {
		// Size classes 0 .. 6 (1 KiB .. 64 KiB) are tuned, the others left to the rule.
		if (name == "auto") != (k > 6) {
			t.Fatalf("size class %d: %q in %v", k, name, row)
		}
		if k <= 6 && algos[0][k].String() != name {
			t.Fatalf("AlgorithmFor of class %d: %v, the table has %q", k, algos[0][k], name)
		}
	}
	for k, a := range algos[0] {
		if a == AlgoAuto || (k >= 6 && a == AlgoRelay) { // the relay takes at most 32 KiB
			t.Fatalf("AlgorithmFor: %v", algos[0])
		}
	}
}

// TestForcedAlgorithm: three peers force every algorithm on an exact
// all-reduce; one that cannot run the operation is InvalidArgument on every
// member; members forcing different algorithms all get InvalidUsage, and
// the group goes on.
func TestForcedAlgorithm(t *testing.T) {
	m := startMaster(t)
	const n = 3
	comms := admit(t, m, make([]uint32, n), 0)
	parallel(t, n, 60*time.Second, func(i int) error {
		c := comms[i]
		rank, err := c.Attribute(Rank)
		if err != nil {
			return err
		}
		o := func(tag uint64, a Algorithm) CollectiveOptions {
			return CollectiveOptions{Tag: tag, Algorithm: a}
		}
		for a := AlgoAuto; a <= AlgoHalvingDoubling; a++ {
			if err := exactSum(c, rank, n, 1000, o(uint64(a), a)); err != nil {
				return err
			}
		}
		// Above the relay's bound: the ring schedules are exact, the relay refused.
		if err := firstErr(exactSum(c, rank, n, 50000, o(10, AlgoRing)),
			exactSum(c, rank, n, 50000, o(11, AlgoRingStriped))); err != nil {
			return err
		}
		err = exactSum(c, rank, n, 50000, o(12, AlgoRelay))
		if !errors.Is(err, ErrInvalidArgument) {
			return fmt.Errorf("relay above its bound: %v", err)
		}
		ctx := context.Background()
		b := []uint16{uint16(rank), 0, 0}
		_, err = Broadcast(ctx, c, b, 2, o(13, AlgoDirect))
		if !errors.Is(err, ErrInvalidArgument) {
			return fmt.Errorf("direct broadcast: %v", err)
		}
		if _, err := Broadcast(ctx, c, b, 2, o(14, AlgoRing)); err != nil {
			return err
		}
		if err := same("ring broadcast", b, []uint16{2, 0, 0}); err != nil {
			return err
		}
		// Rank 0 forces another algorithm than the others.
		for k, pair := range [][2]Algorithm{{AlgoRing, AlgoRingStriped}, {AlgoRelay, AlgoDirect}} {
			mine := pair[1]
			if rank == 0 {
				mine = pair[0]
			}
			err := exactSum(c, rank, n, 1000, o(uint64(20+k), mine))
			if !errors.Is(err, ErrInvalidUsage) {
				return fmt.Errorf("%v against %v: %v", pair[0], pair[1], err)
			}
		}
		start := time.Now()
		for {
			err := exactSum(c, rank, n, 1000, o(30, AlgoAuto))
			if err == nil {
				return nil
			}
			if !errors.Is(err, ErrUpdateTopologyFailed) && !errors.Is(err, ErrRankConnectionLost) ||
				time.Since(start) > 20*time.Second {
				return fmt.Errorf("all-reduce after the refusals: %w", err)
			}
			_ = c.UpdateTopology()
		}
	})
}

// TestTuneRefused: before Connect, alone in a group and after Close.
func TestTuneRefused(t *testing.T) {
	m := startMaster(t)
	url := fmt.Sprintf("127.0.0.1:%d", m.Port())
	bg := context.Background()
	c, err := NewCommunicator(Config{MasterURL: url})
	if err != nil {
		t.Fatal(err)
	}
	expectCode(t, "Tune before Connect", c.Tune(bg, TuneOptions{}), ErrInvalidUsage)
	_, err = c.AlgorithmFor(1, Float)
	expectCode(t, "AlgorithmFor before Connect", err, ErrInvalidUsage)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	err = c.TuneSave(filepath.Join(t.TempDir(), "t"))
	expectCode(t, "TuneSave after Close", err, ErrInvalidUsage)
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
	expectCode(t, "Tune alone", alone.Tune(bg, TuneOptions{}), ErrTooFewPeers)
	expectCode(t, "Tune with min above max",
		alone.Tune(bg, TuneOptions{MinBytes: 1 << 20, MaxBytes: 1 << 10}), ErrInvalidArgument)
	if a, err := alone.AlgorithmFor(1000, Float); err != nil || a == AlgoAuto {
		t.Fatalf("AlgorithmFor alone: %v %v", a, err)
	}
	if AlgoRingStriped.String() != "ring_striped" || Algorithm(9).String() != "invalid" ||
		AlgoHalvingDoubling.String() != "halving_doubling" {
		t.Fatalf("Algorithm.String: %v %v", AlgoRingStriped, Algorithm(9))
	}
}
