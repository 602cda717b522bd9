package pccl

/*
#include <stdlib.h>
#include "pccl.h"
*/
import "C"

import (
	"errors"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// ErrClosed is the cause of the InvalidUsage error returned by calls on a
// closed Communicator or Master.
var ErrClosed = errors.New("closed")

// Config holds the parameters of NewCommunicator: PeerGroup goes to
// pcclCommCreateParams_t, MasterURL, Timeout and Heartbeat to pccl's
// pcclCommCreateOptions_t (master_url, timeout_ms, heartbeat_ms).
type Config struct {
	// MasterURL is the master's address: "tcp://host:port",
	// "tls+tcp://host:port", "ipc:///path", or "host:port" (taken as tcp://).
	MasterURL string
	// PeerGroup scopes collectives and shared state (default 0).
	PeerGroup uint32
	// Timeout bounds every blocking call (Connect, UpdateTopology,
	// PeersPending, OptimizeTopology, SyncSharedState, AllReduce, Split) and
	// is the default timeout of the collective set's operations; 0 means
	// no bound. Millisecond resolution. AsyncOp.Wait is bounded by its
	// context only.
	Timeout time.Duration
	// Heartbeat is the heartbeat interval to the master (0: 250 ms).
	Heartbeat time.Duration
}

// Communicator is one peer's membership in a run (pcclComm_t).
//
// A Communicator may be used from any number of goroutines: it serializes
// the calls into libpccl with a mutex, as the C ABI requires (one call at a
// time per communicator). A blocking call (Connect, UpdateTopology,
// SyncSharedState, a synchronous AllReduce on Go memory) therefore delays
// the other goroutines' calls on the same communicator until it returns;
// AsyncOp.Wait polls in short slices and lets other calls in between.
type Communicator struct {
	mu      sync.Mutex
	h       *C.pcclComm_t
	timeout time.Duration
	ops     map[*AsyncOp]struct{} // started and not finished
	works   map[*Work]struct{}    // collectives started and not collected
	leaked  []unsafe.Pointer      // C memory a timed-out C call may still use: freed by Close
	// afterClose releases Buffers a timed-out C call may still use.
	afterClose []func()
}

func durMs(d time.Duration) C.uint32_t {
	if d <= 0 {
		return 0
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if ms > 0xffffffff {
		ms = 0xffffffff
	}
	return C.uint32_t(ms)
}

// NewCommunicator creates a communicator (no network activity yet). It
// calls Init.
func NewCommunicator(cfg Config) (*Communicator, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	if cfg.MasterURL == "" || cfg.Timeout < 0 || cfg.Heartbeat < 0 {
		return nil, &Error{Code: InvalidArgument, Op: "NewCommunicator"}
	}
	url := cfg.MasterURL
	if !strings.Contains(url, "://") {
		url = "tcp://" + url
	}
	curl := C.CString(url)
	defer C.free(unsafe.Pointer(curl))
	// PCCL 1.0's parameters: master_address stays zeroed, the URL overrides it.
	var p C.pcclCommCreateParams_t
	p.peer_group = C.uint32_t(cfg.PeerGroup)
	var o C.pcclCommCreateOptions_t
	o.struct_size = C.uint32_t(unsafe.Sizeof(o))
	o.master_url = curl
	o.timeout_ms = durMs(cfg.Timeout)
	o.heartbeat_ms = durMs(cfg.Heartbeat)
	c := &Communicator{timeout: time.Duration(o.timeout_ms) * time.Millisecond,
		ops: make(map[*AsyncOp]struct{}), works: make(map[*Work]struct{})}
	if r := Code(C.pcclCreateCommunicatorEx(&p, &o, &c.h)); r != Success {
		return nil, newErr("NewCommunicator", r)
	}
	return c, nil
}

// lock takes the communicator's mutex, collects finished orphaned
// operations, and fails with InvalidUsage (cause ErrClosed) when closed.
func (c *Communicator) lock(op string) error {
	c.mu.Lock()
	if c.h == nil {
		c.mu.Unlock()
		return &Error{Code: InvalidUsage, Op: op, Err: ErrClosed}
	}
	for o := range c.ops {
		if o.orphan {
			var info C.pcclReduceInfo_t
			r := Code(C.pcclAwaitAsyncReduceTimeout(&o.h, 1, &info))
			if r != Timeout {
				c.finish(o, r, &info)
			}
		}
	}
	return nil
}

// Connect connects to the master and blocks until the accepted peers admit
// this one (they call UpdateTopology).
func (c *Communicator) Connect() error {
	if err := c.lock("Connect"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	return newErr("Connect", Code(C.pcclConnect(c.h)))
}

// UpdateTopology admits pending peers and re-wires the ring; a collective
// of every accepted peer. UpdateTopologyFailed means: retry.
func (c *Communicator) UpdateTopology() error {
	if err := c.lock("UpdateTopology"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	return newErr("UpdateTopology", Code(C.pcclUpdateTopology(c.h)))
}

// PeersPending reports whether peers wait for admission; a collective of
// every accepted peer.
func (c *Communicator) PeersPending() (bool, error) {
	if err := c.lock("PeersPending"); err != nil {
		return false, err
	}
	defer c.mu.Unlock()
	var pending C.bool
	if r := Code(C.pcclArePeersPending(c.h, &pending)); r != Success {
		return false, newErr("PeersPending", r)
	}
	return bool(pending), nil
}

// OptimizeTopology reorders the ring by measured bandwidth; a collective of
// every accepted peer. TopologyOptimizationFailed means: retry.
func (c *Communicator) OptimizeTopology() error {
	if err := c.lock("OptimizeTopology"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	return newErr("OptimizeTopology", Code(C.pcclOptimizeTopology(c.h)))
}

// Attribute reads an integer attribute, as last reported by the master.
func (c *Communicator) Attribute(a Attribute) (int, error) {
	if err := c.lock("Attribute"); err != nil {
		return 0, err
	}
	defer c.mu.Unlock()
	var v C.int
	if r := Code(C.pcclGetAttribute(c.h, C.pcclAttribute_t(a), &v)); r != Success {
		return 0, newErr("Attribute", r)
	}
	return int(v), nil
}

// WorldSize is Attribute(PeerGroupWorldSize).
func (c *Communicator) WorldSize() (int, error) { return c.Attribute(PeerGroupWorldSize) }

// Close leaves the run gracefully, waits for the asynchronous all-reduces
// and Works still in flight (each bounded by its timeout) and frees the
// communicator. Closing twice is a no-op. It is safe to call while other
// goroutines use the communicator: their later calls fail with
// InvalidUsage (cause ErrClosed).
func (c *Communicator) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h == nil {
		return nil
	}
	type res struct {
		r    Code
		info C.pcclReduceInfo_t
	}
	results := make(map[*AsyncOp]*res, len(c.ops))
	for o := range c.ops {
		x := &res{}
		x.r = Code(C.pcclAwaitAsyncReduce(&o.h, &x.info))
		results[o] = x
	}
	for w := range c.works {
		var info C.pcclCollectiveInfo_t
		r := Code(C.pcclWorkWait(w.h, &info))
		c.finishWork(w, r, &info)
	}
	r := Code(C.pcclDestroyCommunicator(c.h))
	c.h = nil
	// The driver thread is gone: no memory is bound to libpccl any more.
	for o, x := range results {
		c.finish(o, x.r, &x.info)
	}
	for _, p := range c.leaked {
		cFree(p)
	}
	c.leaked = nil
	for _, f := range c.afterClose {
		f()
	}
	c.afterClose = nil
	return newErr("Close", r)
}
