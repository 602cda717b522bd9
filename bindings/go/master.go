package pccl

/*
#include <stdlib.h>
#include "pccl.h"
*/
import "C"

import (
	"sync"
	"time"
	"unsafe"
)

// MasterConfig holds the parameters of NewMaster (pcclMasterCreateParams_t).
// Zero fields mean the library's defaults.
type MasterConfig struct {
	// ListenURL is where to listen: "tcp://host:port" (port 0: any free
	// port, see Master.Port) or "ipc:///path". Empty: tcp://0.0.0.0:48148.
	ListenURL string
	// Heartbeat is the heartbeat period (0: 250 ms).
	Heartbeat time.Duration
	// Evict is the silence after which a peer is evicted (0: 2 s); it
	// must exceed Heartbeat.
	Evict time.Duration
	// VoteTimeout bounds a vote after its first ballot (0: 60 s).
	VoteTimeout time.Duration
	// MaxPeers is the number of peers tracked at most (0: 64).
	MaxPeers uint32
}

// Master is a master node running in this process (pcclMasterInstance_t).
//
// All methods are safe from any goroutine. Interrupt may be called at any
// time, also while another goroutine blocks in AwaitTermination; the other
// calls are serialized.
type Master struct {
	mu   sync.Mutex   // serializes Run, AwaitTermination, Close
	hmu  sync.RWMutex // guards h against Close while Interrupt runs
	h    *C.pcclMasterInstance_t
	port int
}

// NewMaster creates a master listening on cfg.ListenURL; the listener is
// bound on return (Port), and served once Run is called. Master functions
// do not need Init.
func NewMaster(cfg MasterConfig) (*Master, error) {
	if cfg.Heartbeat < 0 || cfg.Evict < 0 || cfg.VoteTimeout < 0 {
		return nil, &Error{Code: InvalidArgument, Op: "NewMaster"}
	}
	var p C.pcclMasterCreateParams_t
	if cfg.ListenURL != "" {
		s := C.CString(cfg.ListenURL)
		defer C.free(unsafe.Pointer(s))
		p.listen_url = s
	}
	p.heartbeat_ms = durMs(cfg.Heartbeat)
	p.evict_ms = durMs(cfg.Evict)
	p.vote_timeout_ms = durMs(cfg.VoteTimeout)
	p.max_peers = C.uint32_t(cfg.MaxPeers)
	m := &Master{}
	var port C.uint16_t
	if r := Code(C.pcclCreateMasterEx(&p, &m.h, &port)); r != Success {
		return nil, newErr("NewMaster", r)
	}
	m.port = int(port)
	return m, nil
}

// StartMaster is NewMaster followed by Run.
func StartMaster(cfg MasterConfig) (*Master, error) {
	m, err := NewMaster(cfg)
	if err != nil {
		return nil, err
	}
	if err := m.Run(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Port returns the TCP port the master is bound to (0 for ipc://).
func (m *Master) Port() int { return m.port }

func (m *Master) closedErr(op string) error {
	return &Error{Code: InvalidUsage, Op: op, Err: ErrClosed}
}

// Run starts serving on the master's own thread and returns at once.
// Running twice fails with InvalidUsage.
func (m *Master) Run() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil {
		return m.closedErr("Master.Run")
	}
	return newErr("Master.Run", Code(C.pcclRunMaster(m.h)))
}

// Interrupt asks the master to stop (it closes every connection). Any
// goroutine, any time; a no-op after Close.
func (m *Master) Interrupt() error {
	m.hmu.RLock()
	defer m.hmu.RUnlock()
	if m.h == nil {
		return nil
	}
	return newErr("Master.Interrupt", Code(C.pcclInterruptMaster(m.h)))
}

// AwaitTermination blocks until the master has stopped (after Interrupt;
// at once if it never ran).
func (m *Master) AwaitTermination() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hmu.RLock()
	defer m.hmu.RUnlock()
	if m.h == nil {
		return nil
	}
	return newErr("Master.AwaitTermination", Code(C.pcclMasterAwaitTermination(m.h)))
}

// Close stops the master (Interrupt), waits for it and frees it. Closing
// twice is a no-op.
func (m *Master) Close() error {
	if err := m.Interrupt(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hmu.Lock()
	defer m.hmu.Unlock()
	if m.h == nil {
		return nil
	}
	r := Code(C.pcclDestroyMaster(m.h))
	m.h = nil
	return newErr("Master.Close", r)
}
