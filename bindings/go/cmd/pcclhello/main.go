// Command pcclhello runs a master and three peers in one process: the peers
// all-reduce a float32 vector and synchronize a shared state.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"pccl.dev/pccl"
)

func main() {
	master, err := pccl.StartMaster(pccl.MasterConfig{ListenURL: "tcp://127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	defer master.Close()
	url := fmt.Sprintf("tcp://127.0.0.1:%d", master.Port())

	const peers = 3
	var wg sync.WaitGroup
	for rank := 0; rank < peers; rank++ {
		wg.Add(1)
		go func(rank int) {
			defer wg.Done()
			if err := peer(url, rank, peers); err != nil {
				log.Fatalf("peer %d: %v", rank, err)
			}
		}(rank)
	}
	wg.Wait()
}

func peer(url string, rank, peers int) error {
	comm, err := pccl.NewCommunicator(pccl.Config{MasterURL: url, Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer comm.Close()
	if err := comm.Connect(); err != nil {
		return err
	}
	// Admit the others: update the topology until everyone is in.
	for {
		world, err := comm.WorldSize()
		if err != nil {
			return err
		}
		if world == peers {
			break
		}
		if err := comm.UpdateTopology(); err != nil && !errors.Is(err, pccl.ErrUpdateTopologyFailed) {
			return err
		}
	}

	// Shared state: every peer ends with the popular content (rank 2 diverges).
	weights := []float32{0.5, 1.5, 2.5}
	if rank == 2 {
		weights[0] = 99
	}
	state := &pccl.SharedState{Tensors: []pccl.Tensor{pccl.SliceTensor("weights", weights)}}
	info, err := comm.SyncSharedState(state, pccl.EnforcePopular)
	if err != nil {
		return err
	}

	// All-reduce in place: every peer gets the sum.
	grad := []float32{float32(rank), 1, 2}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		_, err := pccl.AllReduce(ctx, comm, grad, grad, pccl.ReduceOptions{Op: pccl.Sum})
		if errors.Is(err, pccl.ErrRankConnectionLost) {
			continue // a peer left: the buffer is restored, retry on the smaller ring
		}
		if err != nil {
			return err
		}
		break
	}
	fmt.Printf("peer %d: weights %v (received %d bytes), sum %v\n", rank, weights, info.RxBytes, grad)
	return nil
}
