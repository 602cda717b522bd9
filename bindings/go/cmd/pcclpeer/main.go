// Command pcclpeer is a pccl peer in Go, for examples and cross-language
// tests. It connects to a master, waits until the group has --world peers,
// and then, for each step S in 0..K-1:
//
//  1. updates the topology (retried while it fails with
//     ErrUpdateTopologyFailed);
//  2. synchronizes the shared state (one int32 tensor "state" of --count
//     elements, revision S, strategy ENFORCE_POPULAR);
//  3. all-reduces (Sum, tag 0) the int32 vector v[j] = V*(S+1) + j, where V
//     is --rank-value, and prints "step S world W sum s0,s1,...";
//  4. adds the sum to the state: state[j] += sum[j] (wrapping int32).
//
// Then it runs three ops of the collective set on the epoch of the last
// completed call (each retried after an update of the topology while it fails
// with ErrUpdateTopologyFailed), on int32 buffers, R the rank and W the world
// the op reports:
//
//   - Broadcast from rank 0 of --count elements, the root's holding 1000*V+j
//     (the others' -1): prints "bcast rank R world W data d0,d1,...";
//   - AllGather of V*100+j (--count elements each): prints "allgather rank R
//     world W data ..." (all W*count elements, block r from rank r);
//   - ReduceScatter (Sum) of W*count elements V*(k+1): prints
//     "reducescatter rank R world W data ..." (this rank's block).
//
// Finally it synchronizes the state once more (revision K) and prints
// "hash H": the FNV-1a 64-bit hash of the state's bytes (little-endian
// int32), as 16 lowercase hex digits. The state starts as zeros, or filled
// with V with --diverge (the first synchronization then repairs it).
//
// This is the protocol of the cross-language test (tests/crosslang): the C,
// Python and Rust peers there follow the same sequence of collectives, so
// peers in all four languages form one group.
//
//	pcclpeer --master 127.0.0.1:PORT --steps K --rank-value V [--world N] [--count C]
//
// Exit status: 0 success, 1 a pccl call failed, 2 bad usage or admission timeout.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"time"

	"pccl.dev/pccl"
)

func main() {
	master := flag.String("master", "", "master address host:port or URL (required)")
	steps := flag.Int("steps", 3, "number of steps K")
	rankValue := flag.Int("rank-value", 1, "this peer's value V")
	world := flag.Int("world", 2, "wait until the group has this many peers")
	count := flag.Int("count", 8, "number of elements")
	diverge := flag.Bool("diverge", false, "start with a divergent shared state")
	timeout := flag.Duration("timeout", 30*time.Second, "bound of every blocking call")
	verbose := flag.Bool("verbose", false, "log shared-state statistics to stderr")
	flag.Parse()
	if *master == "" || *steps < 0 || *count <= 0 || *world < 1 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(*master, *steps, int32(*rankValue), *world, *count, *diverge, *timeout, *verbose))
}

func fail(what string, err error) int {
	fmt.Fprintf(os.Stderr, "pcclpeer: %s: %v\n", what, err)
	return 1
}

func run(master string, steps int, v int32, world, count int, diverge bool, timeout time.Duration,
	verbose bool) int {
	c, err := pccl.NewCommunicator(pccl.Config{MasterURL: master, Timeout: timeout})
	if err != nil {
		return fail("create communicator", err)
	}
	defer c.Close()
	if err := c.Connect(); err != nil {
		return fail("connect", err)
	}
	admitted := time.Now()
	for {
		ws, err := c.WorldSize()
		if err != nil {
			return fail("world size", err)
		}
		if ws >= world {
			break
		}
		if time.Since(admitted) > timeout {
			fmt.Fprintf(os.Stderr, "pcclpeer: world stays %d < %d\n", ws, world)
			return 2
		}
		if err := c.UpdateTopology(); err != nil && !errors.Is(err, pccl.ErrUpdateTopologyFailed) {
			return fail("update topology", err)
		}
	}

	state := make([]int32, count)
	if diverge {
		for j := range state {
			state[j] = v
		}
	}
	st := &pccl.SharedState{Tensors: []pccl.Tensor{pccl.SliceTensor("state", state)}}
	sync := func() error {
		info, err := c.SyncSharedState(st, pccl.EnforcePopular)
		if err == nil && verbose {
			fmt.Fprintf(os.Stderr, "pcclpeer: revision %d rx %d tx %d\n", st.Revision, info.RxBytes,
				info.TxBytes)
		}
		return err
	}
	send := make([]int32, count)
	sum := make([]int32, count)
	for s := 0; s < steps; s++ {
		deadline := time.Now().Add(timeout)
		for {
			err := c.UpdateTopology()
			if err == nil {
				break
			}
			if !errors.Is(err, pccl.ErrUpdateTopologyFailed) || time.Now().After(deadline) {
				return fail(fmt.Sprintf("update topology step %d", s), err)
			}
		}
		st.Revision = uint64(s)
		if err := sync(); err != nil {
			return fail("sync shared state", err)
		}
		for j := range send {
			send[j] = v*int32(s+1) + int32(j)
		}
		info, err := pccl.AllReduce(context.Background(), c, send, sum, pccl.ReduceOptions{Op: pccl.Sum})
		if err != nil {
			return fail(fmt.Sprintf("all-reduce step %d", s), err)
		}
		parts := make([]string, count)
		for j, x := range sum {
			parts[j] = strconv.Itoa(int(x))
			state[j] += x
		}
		fmt.Printf("step %d world %d sum %s\n", s, info.WorldSize, strings.Join(parts, ","))
	}
	if rc := collectives(c, v, count, timeout); rc != 0 {
		return rc
	}
	st.Revision = uint64(steps)
	if err := sync(); err != nil {
		return fail("final sync shared state", err)
	}
	h := fnv.New64a()
	for _, x := range state {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(x))
		h.Write(b[:])
	}
	fmt.Printf("hash %016x\n", h.Sum64())
	return 0
}

func printData(op string, info pccl.CollectiveInfo, data []int32) {
	parts := make([]string, len(data))
	for j, x := range data {
		parts[j] = strconv.Itoa(int(x))
	}
	fmt.Printf("%s rank %d world %d data %s\n", op, info.Rank, info.WorldSize, strings.Join(parts, ","))
}

// collectives runs the broadcast, all-gather and reduce-scatter, each sized
// for the rank and world of the last completed call; ErrUpdateTopologyFailed
// (the membership changed before every member started it) updates the
// topology and sizes and runs the op again.
func collectives(c *pccl.Communicator, v int32, count int, timeout time.Duration) int {
	ctx := context.Background()
	ops := []struct {
		name string
		run  func(rank, world int) (pccl.CollectiveInfo, []int32, error)
	}{
		{"bcast", func(rank, _ int) (pccl.CollectiveInfo, []int32, error) {
			buf := make([]int32, count)
			for j := range buf {
				buf[j] = -1
				if rank == 0 {
					buf[j] = v*1000 + int32(j)
				}
			}
			info, err := pccl.Broadcast(ctx, c, buf, 0, pccl.CollectiveOptions{})
			return info, buf, err
		}},
		{"allgather", func(_, world int) (pccl.CollectiveInfo, []int32, error) {
			send := make([]int32, count)
			for j := range send {
				send[j] = v*100 + int32(j)
			}
			recv := make([]int32, world*count)
			info, err := pccl.AllGather(ctx, c, send, recv, pccl.CollectiveOptions{})
			return info, recv, err
		}},
		{"reducescatter", func(_, world int) (pccl.CollectiveInfo, []int32, error) {
			send := make([]int32, world*count)
			for k := range send {
				send[k] = v * int32(k+1)
			}
			recv := make([]int32, count)
			info, err := pccl.ReduceScatter(ctx, c, send, recv, pccl.Sum, pccl.CollectiveOptions{})
			return info, recv, err
		}},
	}
	for _, op := range ops {
		deadline := time.Now().Add(timeout)
		for {
			rank, err := c.Attribute(pccl.Rank)
			if err != nil {
				return fail("rank", err)
			}
			world, err := c.WorldSize()
			if err != nil {
				return fail("world size", err)
			}
			info, data, err := op.run(rank, world)
			if err == nil {
				printData(op.name, info, data)
				break
			}
			if !errors.Is(err, pccl.ErrUpdateTopologyFailed) || time.Now().After(deadline) {
				return fail(op.name, err)
			}
			for {
				err := c.UpdateTopology()
				if err == nil {
					break
				}
				if !errors.Is(err, pccl.ErrUpdateTopologyFailed) || time.Now().After(deadline) {
					return fail("update topology before "+op.name, err)
				}
			}
		}
	}
	return 0
}
