// Package pccl is the Go binding of pccl, a fault-tolerant collective
// communication library (the PCCL API of include/pccl.h), over libpccl with
// cgo.
//
// Errors are values: every failing call returns an *Error carrying the
// pcclResult_t code; errors.Is(err, pccl.ErrRankConnectionLost) and the
// other Err* sentinels match by code, CodeOf(err) returns it.
//
// Memory: synchronous calls (AllReduce, SyncSharedState and the blocking
// collective set: Broadcast, Reduce, AllGather, ..., Send, Recv) take Go
// slices. Asynchronous operations (AllReduceAsync and the ...Async
// collectives, which return a *Work) take Buffers, element arrays in C
// memory, because libpccl keeps using their memory after the call returns,
// which the cgo rules forbid for Go memory (docs/go.md explains when data is
// copied).
//
// Deadlines: a blocking collective's context deadline becomes the
// operation's timeout, which cancels it on every member (docs/go.md).
//
// Concurrency: Communicator, Master, AsyncOp, Work and Buffer are safe for
// use by multiple goroutines; a Communicator serializes its calls into the
// library.
//
// Building: cgo finds pccl.h through the repository's include/ directory;
// the linker finds libpccl through the environment, e.g.
//
//	CGO_LDFLAGS="-L$BUILD/bindings/libpccl -Wl,-rpath,$BUILD/bindings/libpccl" go test
package pccl
