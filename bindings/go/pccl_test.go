package pccl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// ---- helpers ----------------------------------------------------------------

func startMaster(t *testing.T) *Master {
	t.Helper()
	m, err := StartMaster(MasterConfig{ListenURL: "tcp://127.0.0.1:0"})
	if err != nil {
		t.Fatalf("StartMaster: %v", err)
	}
	if m.Port() <= 0 {
		t.Fatalf("port %d", m.Port())
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("master Close: %v", err)
		}
	})
	return m
}

// parallel runs f for peers 0..n-1 in goroutines and fails the test when
// one fails or when they are not all done within limit.
func parallel(t *testing.T, n int, limit time.Duration, f func(i int) error) {
	t.Helper()
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			var err error
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("peer %d panicked: %v", i, r)
				}
				errs <- err
			}()
			if e := f(i); e != nil {
				err = fmt.Errorf("peer %d: %w", i, e)
			}
		}(i)
	}
	deadline := time.After(limit)
	for i := 0; i < n; i++ {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatalf("peers not done after %v", limit)
		}
	}
}

// admit connects n communicators (groups[i] is peer i's group) and updates
// the topology until every peer sees the full world.
func admit(t *testing.T, m *Master, groups []uint32, timeout time.Duration) []*Communicator {
	t.Helper()
	n := len(groups)
	comms := make([]*Communicator, n)
	for i := range comms {
		c, err := NewCommunicator(Config{MasterURL: fmt.Sprintf("127.0.0.1:%d", m.Port()),
			PeerGroup: groups[i], Timeout: timeout})
		if err != nil {
			t.Fatalf("NewCommunicator: %v", err)
		}
		comms[i] = c
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	parallel(t, n, 30*time.Second, func(i int) error {
		c := comms[i]
		if err := c.Connect(); err != nil {
			return err
		}
		start := time.Now()
		for {
			ws, err := c.Attribute(GlobalWorldSize)
			if err != nil {
				return err
			}
			if ws >= n {
				return nil
			}
			if time.Since(start) > 20*time.Second {
				return fmt.Errorf("world stays %d < %d", ws, n)
			}
			if err := c.UpdateTopology(); err != nil && !errors.Is(err, ErrUpdateTopologyFailed) {
				return err
			}
		}
	})
	return comms
}

func expectCode(t *testing.T, what string, err error, want *Error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want.Code)
	}
	if CodeOf(err) != want.Code {
		t.Fatalf("%s: CodeOf %v, want %v", what, CodeOf(err), want.Code)
	}
}

func sliceBytes[T Element](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

// ---- tests without a network -------------------------------------------------

func TestConstantsMatchHeader(t *testing.T) {
	h := headerCodes()
	for c := Code(0); c < NumCodes; c++ {
		if v, ok := h[c.String()]; !ok || v != int(c) {
			t.Errorf("%v: header has %d (%v)", c, v, ok)
		}
	}
	if h["PCCL_RESULT_COUNT"] != NumCodes {
		t.Errorf("PCCL_RESULT_COUNT %d", h["PCCL_RESULT_COUNT"])
	}
	dts := map[string]DataType{"pcclUint8": Uint8, "pcclInt8": Int8, "pcclInt16": Int16,
		"pcclUint16": Uint16, "pcclUint32": Uint32, "pcclInt32": Int32, "pcclUint64": Uint64,
		"pcclInt64": Int64, "pcclFloat16": Float16, "pcclBFloat16": BFloat16, "pcclFloat": Float,
		"pcclDouble": Double}
	others := map[string]int{"pcclSum": int(Sum), "pcclAvg": int(Avg), "pcclProd": int(Prod),
		"pcclMax": int(Max), "pcclMin": int(Min), "pcclBand": int(Band), "pcclBor": int(Bor),
		"pcclBxor": int(Bxor), "pcclPremulSum": int(PremulSum), "PCCL_RED_OP_COUNT": int(PremulSum) + 1,
		"GLOBAL_WORLD_SIZE":     int(GlobalWorldSize),
		"PEER_GROUP_WORLD_SIZE": int(PeerGroupWorldSize), "NUM_DISTINCT_PEER_GROUPS": int(NumDistinctPeerGroups),
		"LARGEST_PEER_GROUP_WORLD_SIZE": int(LargestPeerGroupWorldSize),
		"COPIED_BYTES":                  int(CopiedBytes), "COPIED_BYTES_HIGH": int(CopiedBytesHigh),
		"RANK": int(Rank), "EPOCH": int(Epoch),
		"CURRENT_WORLD_SIZE": int(CurrentWorldSize), "ENFORCE_POPULAR": int(EnforcePopular),
		"RECEIVE_ONLY": int(ReceiveOnly), "SEND_ONLY": int(SendOnly), "pcclQuantNone": int(QuantNone),
		"pcclQuantMinMax": int(QuantMinMax), "pcclQuantZeroPointScale": int(QuantZeroPointScale),
		"pcclDistributionNone": int(DistributionNone), "pcclDistributionNormal": int(DistributionNormal),
		"pcclDistributionUniform": int(DistributionUniform), "pcclAlgoAuto": int(AlgoAuto),
		"pcclAlgoRelay": int(AlgoRelay), "pcclAlgoDirect": int(AlgoDirect),
		"pcclAlgoRing": int(AlgoRing), "pcclAlgoRingStriped": int(AlgoRingStriped),
		"pcclAlgoHalvingDoubling": int(AlgoHalvingDoubling)}
	for k, v := range dts {
		others[k] = int(v)
	}
	for k, v := range others {
		if hv, ok := h[k]; !ok || hv != v {
			t.Errorf("%s: Go %d, header %d (%v)", k, v, hv, ok)
		}
	}
	if DataTypeOf[float32]() != Float || DataTypeOf[Half]() != Float16 || DataTypeOf[BHalf]() != BFloat16 ||
		DataTypeOf[int16]() != Int16 || DataTypeOf[uint64]() != Uint64 {
		t.Error("DataTypeOf")
	}
	for d := Uint8; d <= Double; d++ {
		if d.Size() == 0 {
			t.Errorf("%v size 0", d)
		}
	}
	maj, min, pat, err := Version()
	if err != nil || (maj<<16|min<<8|pat) != HeaderVersion {
		t.Errorf("Version %d.%d.%d %v, header %#x", maj, min, pat, err, HeaderVersion)
	}
	if bi, err := GetBuildInfo(); err != nil || bi.HasCUDASupport {
		t.Errorf("GetBuildInfo %+v %v", bi, err)
	}
}

func TestErrorValues(t *testing.T) {
	err := error(&Error{Code: RankConnectionLost, Op: "AllReduce"})
	if !errors.Is(err, ErrRankConnectionLost) || errors.Is(err, ErrTimeout) {
		t.Fatal("errors.Is by code")
	}
	if got := err.Error(); got != "pccl: AllReduce: peer connection lost (pcclRankConnectionLost)" {
		t.Fatalf("message %q", got)
	}
	wrapped := fmt.Errorf("step 3: %w", &Error{Code: Timeout, Op: "Wait", Err: context.DeadlineExceeded})
	if !errors.Is(wrapped, ErrTimeout) || !errors.Is(wrapped, context.DeadlineExceeded) ||
		CodeOf(wrapped) != Timeout {
		t.Fatal("wrapped timeout")
	}
	if CodeOf(nil) != Success || CodeOf(errors.New("x")) != InternalError {
		t.Fatal("CodeOf")
	}
	if OptimizeTopologyFailed != TopologyOptimizationFailed || Code(99).String() != "pcclResult(99)" {
		t.Fatal("names")
	}
	if _, err := NewBuffer[float32](0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NewBuffer(0): %v", err)
	}
	if _, err := NewCommunicator(Config{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NewCommunicator without URL: %v", err)
	}
	if _, err := NewMaster(MasterConfig{ListenURL: "bogus://x"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NewMaster bad URL: %v", err)
	}
	b, _ := NewBuffer[int32](4)
	if err := b.Free(); err != nil || b.Free() != nil || b.Len() != 0 || b.Slice() != nil {
		t.Fatal("double Free")
	}
}

func TestMasterLifecycle(t *testing.T) {
	m, err := NewMaster(MasterConfig{ListenURL: "tcp://127.0.0.1:0", Heartbeat: 100 * time.Millisecond,
		Evict: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(); err != nil {
		t.Fatal(err)
	}
	expectCode(t, "Run twice", m.Run(), ErrInvalidUsage)
	// A second master cannot bind the same port.
	_, err = NewMaster(MasterConfig{ListenURL: fmt.Sprintf("tcp://127.0.0.1:%d", m.Port())})
	expectCode(t, "port in use", err, ErrSystemError)
	done := make(chan error, 1)
	go func() { done <- m.AwaitTermination() }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("AwaitTermination returned before Interrupt: %v", err)
	default:
	}
	if err := m.Interrupt(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("AwaitTermination did not return after Interrupt")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil || m.Interrupt() != nil {
		t.Fatal("second Close / Interrupt after Close")
	}
	err = m.Run()
	expectCode(t, "Run after Close", err, ErrInvalidUsage)
	if !errors.Is(err, ErrClosed) {
		t.Fatal("cause ErrClosed")
	}
}

func TestNotConnected(t *testing.T) {
	m := startMaster(t)
	c, err := NewCommunicator(Config{MasterURL: fmt.Sprintf("tcp://127.0.0.1:%d", m.Port())})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Attribute(GlobalWorldSize)
	expectCode(t, "Attribute before Connect", err, ErrInvalidUsage)
	expectCode(t, "UpdateTopology before Connect", c.UpdateTopology(), ErrInvalidUsage)
	_, err = AllReduce(context.Background(), c, []int32{1}, []int32{0}, ReduceOptions{})
	expectCode(t, "AllReduce before Connect", err, ErrInvalidUsage)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = c.PeersPending()
	expectCode(t, "after Close", err, ErrInvalidUsage)
	if !errors.Is(err, ErrClosed) || c.Close() != nil {
		t.Fatal("closed")
	}
	// Nobody listens on the port of a closed master.
	m2, err := NewMaster(MasterConfig{ListenURL: "tcp://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	port := m2.Port()
	m2.Close()
	c2, err := NewCommunicator(Config{MasterURL: fmt.Sprintf("127.0.0.1:%d", port), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	t0 := time.Now()
	err = c2.Connect()
	if !errors.Is(err, ErrMasterConnectionFailed) && !errors.Is(err, ErrTimeout) {
		t.Fatalf("Connect to nothing: %v", err)
	}
	if time.Since(t0) > 7*time.Second {
		t.Fatalf("Connect took %v", time.Since(t0))
	}
}

// TestRunTokenMismatch: libpccl reads PCCL_RUN_TOKEN when a master is created and at
// each Connect; a peer without the master's token, with another one, or with one an
// open master lacks gets AuthenticationFailed.
func TestRunTokenMismatch(t *testing.T) {
	connect := func(port int) error {
		c, err := NewCommunicator(Config{MasterURL: fmt.Sprintf("127.0.0.1:%d", port), Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.Connect()
	}
	t.Setenv("PCCL_RUN_TOKEN", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	m := startMaster(t)
	os.Unsetenv("PCCL_RUN_TOKEN")
	expectCode(t, "no token", connect(m.Port()), ErrAuthenticationFailed)
	t.Setenv("PCCL_RUN_TOKEN", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	err := connect(m.Port())
	expectCode(t, "other token", err, ErrAuthenticationFailed)
	if !strings.Contains(err.Error(), "authentication failed (pcclAuthenticationFailed)") {
		t.Fatalf("message: %v", err)
	}
	os.Unsetenv("PCCL_RUN_TOKEN")
	open := startMaster(t)
	t.Setenv("PCCL_RUN_TOKEN", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	expectCode(t, "open master", connect(open.Port()), ErrAuthenticationFailed)
}

// TestAlone: a peer alone in its group gets TooFewPeers from AllReduceAsync
// itself (nothing started, its buffers free again) and from both forms of
// AllReduce. The Config's options (URL without scheme, Timeout, Heartbeat)
// reach pcclCreateCommunicatorEx.
func TestAlone(t *testing.T) {
	m := startMaster(t)
	c, err := NewCommunicator(Config{MasterURL: fmt.Sprintf("127.0.0.1:%d", m.Port()),
		PeerGroup: 3, Timeout: 10 * time.Second, Heartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.timeout != 10*time.Second {
		t.Fatalf("timeout %v", c.timeout)
	}
	if err := c.Connect(); err != nil {
		t.Fatal(err)
	}
	if ws, err := c.WorldSize(); err != nil || ws != 1 {
		t.Fatalf("world size %d %v", ws, err)
	}
	b, err := BufferFrom([]int32{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	op, err := AllReduceAsync(c, b, b, ReduceOptions{Tag: 5})
	expectCode(t, "AllReduceAsync alone", err, ErrTooFewPeers)
	if op != nil {
		t.Fatal("an operation was returned")
	}
	if got := b.Slice(); got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("buffer changed: %v", got)
	}
	if err := b.Free(); err != nil {
		t.Fatalf("Free after the refused call: %v", err)
	}
	x := []int32{7, 8}
	_, err = AllReduce(context.Background(), c, x, x, ReduceOptions{}) // staged (Config.Timeout)
	expectCode(t, "AllReduce alone", err, ErrTooFewPeers)
	if x[0] != 7 || x[1] != 8 {
		t.Fatalf("data changed: %v", x)
	}
	// The same tag is free again: nothing is in flight.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = AllReduce(ctx, c, x, x, ReduceOptions{Tag: 5})
	expectCode(t, "AllReduce alone, same tag", err, ErrTooFewPeers)
}
