package pccl

/*
#include <stdlib.h>
#include "pccl.h"
*/
import "C"

import (
	"context"
	"strings"
	"unsafe"
)

// The auto-tuner of the all-reduce's algorithm (pcclTune, pcclTuneSave,
// pcclTuneLoad, pcclGetAlgorithm). A group's table holds, per world size
// (2 .. 8) and size class (powers of two, 1 KiB .. 256 MiB), the algorithm
// an AlgoAuto all-reduce runs. The master keeps it for the group and sends it
// with every plan, so every member, also one that joins later, chooses alike;
// a world without a tuned row uses the built-in rule.

// TuneOptions holds the options of Tune (pcclTuneOptions_t); zero fields
// mean the library's defaults. Every member must pass the same options.
type TuneOptions struct {
	// Iterations is the number of timed runs per (size, algorithm), the
	// median kept (0: 3; at most 1000).
	Iterations uint32
	// Warmup is the number of untimed runs before them (0: 1; at most 1000).
	Warmup uint32
	// MinBytes and MaxBytes bound the sizes tuned (per block), in bytes,
	// rounded to size classes (0: 1 KiB, and 256 MiB for the all-reduce,
	// 16 MiB for the other kinds).
	MinBytes, MaxBytes uint64
	// Kinds are the kinds tuned, Tune* bits (0: TuneAllReduce).
	Kinds uint32
}

// The kinds TuneOptions.Kinds selects (PCCL_TUNE_*).
const (
	TuneAllReduce     uint32 = 1 << 0
	TuneBroadcast     uint32 = 1 << 1
	TuneReduce        uint32 = 1 << 2
	TuneAllGather     uint32 = 1 << 3
	TuneReduceScatter uint32 = 1 << 4
	TuneAllToAll      uint32 = 1 << 5
	TuneGather        uint32 = 1 << 6
	TuneScatter       uint32 = 1 << 7
	TuneBarrier       uint32 = 1 << 8
	TuneAllKinds      uint32 = 0x1FF
)

// tuneRound checks ctx and runs a tuning round under the mutex.
func (c *Communicator) tuneRound(ctx context.Context, name string, f func() Code) error {
	if err := c.lock(name); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return &Error{Code: Timeout, Op: name, Err: err}
	}
	return newErr(name, f())
}

// Tune tunes the group's operations of opts.Kinds (pcclTune; the all-reduce
// by default): every member calls it with the same options, with no other
// operation in flight. For each kind, each member times every algorithm that
// applies at each size class (float32 Sum, root 0, forced algorithms,
// warm-up first); the master takes each (size, algorithm)'s median over the
// members, keeps the fastest and installs the (kind, world size) row. On success every member holds the same table, and
// later AlgoAuto operations use it.
//
// A context already ended returns Timeout (cause ctx.Err()) and starts
// nothing; once started, the tuning runs to its end (each of its
// operations bounded by Config.Timeout) and holds the communicator's mutex
// meanwhile. Errors: InvalidArgument (Iterations or Warmup above 1000,
// MinBytes above MaxBytes), TooFewPeers (fewer than 2 members), InvalidUsage
// (not connected, more than 8 members, the master's relay off), and the
// errors of a failed operation (RankConnectionLost, UpdateTopologyFailed,
// Timeout: update the topology and tune again; the group keeps its previous
// table).
func (c *Communicator) Tune(ctx context.Context, opts TuneOptions) error {
	var o C.pcclTuneOptions_t
	o.struct_size = C.uint32_t(unsafe.Sizeof(o))
	o.iterations = C.uint32_t(opts.Iterations)
	o.warmup = C.uint32_t(opts.Warmup)
	o.min_bytes = C.uint64_t(opts.MinBytes)
	o.max_bytes = C.uint64_t(opts.MaxBytes)
	o.kinds = C.uint32_t(opts.Kinds)
	return c.tuneRound(ctx, "Tune", func() Code { return Code(C.pcclTune(c.h, &o)) })
}

// cPath returns path as a C string (free it), or nil when it holds a NUL
// byte (which C would take as its end).
func cPath(path string) *C.char {
	if strings.IndexByte(path, 0) >= 0 {
		return nil
	}
	return C.CString(path)
}

// TuneSave writes the group's table as this member holds it to the text file
// path (pcclTuneSave); after Tune every member writes the same bytes.
// InvalidArgument: the file cannot be written (or path holds a NUL byte).
func (c *Communicator) TuneSave(path string) error {
	const name = "TuneSave"
	p := cPath(path)
	if p == nil {
		return badArg(name)
	}
	defer C.free(unsafe.Pointer(p))
	if err := c.lock(name); err != nil {
		return err
	}
	defer c.mu.Unlock()
	return newErr(name, Code(C.pcclTuneSave(c.h, p)))
}

// TuneLoad installs the row of the group's world size from a file TuneSave
// wrote, timing nothing (pcclTuneLoad). It is a tuning round: every member
// calls it (members that load different files get the master's combination
// of them, still one table). InvalidArgument: the file is missing or
// malformed (or path holds a NUL byte); otherwise ctx and the errors are as
// for Tune.
func (c *Communicator) TuneLoad(ctx context.Context, path string) error {
	p := cPath(path)
	if p == nil {
		return badArg("TuneLoad")
	}
	defer C.free(unsafe.Pointer(p))
	return c.tuneRound(ctx, "TuneLoad", func() Code { return Code(C.pcclTuneLoad(c.h, p)) })
}

// AlgorithmFor returns the algorithm an AlgoAuto all-reduce of count
// elements of dt would run now, in the group's current world (unquantized,
// not PremulSum): the group's tuned entry, else the built-in rule; never
// AlgoAuto (pcclGetAlgorithm). Every member of the group gets the same
// answer. InvalidArgument: a negative count or an invalid type;
// InvalidUsage: not connected.
func (c *Communicator) AlgorithmFor(count int, dt DataType) (Algorithm, error) {
	const name = "AlgorithmFor"
	if count < 0 {
		return AlgoAuto, badArg(name)
	}
	if err := c.lock(name); err != nil {
		return AlgoAuto, err
	}
	defer c.mu.Unlock()
	var a C.pcclAlgorithm_t
	if r := Code(C.pcclGetAlgorithm(c.h, C.size_t(count), C.pcclDataType_t(dt), &a)); r != Success {
		return AlgoAuto, newErr(name, r)
	}
	return Algorithm(a), nil
}
