package pccl

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPcclpeer builds cmd/pcclpeer and runs three of them (one with a
// divergent shared state) against an in-process master.
func TestPcclpeer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "pcclpeer")
	build := exec.Command("go", "build", "-o", bin, "./cmd/pcclpeer")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	m := startMaster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	const steps, count = 4, 5
	values := []int{1, 2, 40}
	outs := make([]chan string, len(values))
	for i, v := range values {
		args := []string{"--master", fmt.Sprintf("127.0.0.1:%d", m.Port()), "--steps", strconv.Itoa(steps),
			"--rank-value", strconv.Itoa(v), "--world", "3", "--count", strconv.Itoa(count)}
		if i == 2 {
			args = append(args, "--diverge")
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		outs[i] = make(chan string, 1)
		go func(i int) {
			var sb strings.Builder
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				sb.WriteString(sc.Text() + "\n")
			}
			if err := cmd.Wait(); err != nil {
				sb.WriteString("EXIT " + err.Error() + "\n")
			}
			outs[i] <- sb.String()
		}(i)
	}
	// The expected output: sums of v*(s+1)+j over the peers, and the hash of
	// the accumulated state.
	total := 0
	for _, v := range values {
		total += v
	}
	var want strings.Builder
	state := make([]int32, count)
	for s := 0; s < steps; s++ {
		parts := make([]string, count)
		for j := range parts {
			x := int32(total*(s+1) + 3*j)
			state[j] += x
			parts[j] = strconv.Itoa(int(x))
		}
		fmt.Fprintf(&want, "step %d world 3 sum %s\n", s, strings.Join(parts, ","))
	}
	h := fnv.New64a()
	for _, x := range state {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(x))
		h.Write(b[:])
	}
	hash := fmt.Sprintf("hash %016x\n", h.Sum64())
	got := make([]string, len(values))
	for i := range values {
		select {
		case got[i] = <-outs[i]:
		case <-ctx.Done():
			t.Fatal("pcclpeer did not finish")
		}
	}
	// Then a broadcast from rank 0, an all-gather and a reduce-scatter (tests/crosslang/run.sh):
	// ranks are ring positions, read from each peer's bcast line.
	rankOf := make([]int, len(values))
	valueOf := make(map[int]int)
	for i, out := range got {
		rankOf[i] = -1
		for _, line := range strings.Split(out, "\n") {
			if _, err := fmt.Sscanf(line, "bcast rank %d world 3", &rankOf[i]); err == nil {
				break
			}
		}
		valueOf[rankOf[i]] = values[i]
	}
	if len(valueOf) != len(values) {
		t.Fatalf("the peers' ranks are not distinct: %v\n%q", rankOf, got)
	}
	seq := func(n int, f func(j int) int) string {
		parts := make([]string, n)
		for j := range parts {
			parts[j] = strconv.Itoa(f(j))
		}
		return strings.Join(parts, ",")
	}
	for i, out := range got {
		r := rankOf[i]
		w := want.String()
		w += fmt.Sprintf("bcast rank %d world 3 data %s\n", r,
			seq(count, func(j int) int { return 1000*valueOf[0] + j }))
		w += fmt.Sprintf("allgather rank %d world 3 data %s\n", r,
			seq(3*count, func(k int) int { return valueOf[k/count]*100 + k%count }))
		w += fmt.Sprintf("reducescatter rank %d world 3 data %s\n", r,
			seq(count, func(e int) int { return total * (r*count + e + 1) }))
		w += hash
		if out != w {
			t.Errorf("peer %d printed:\n%s\nwant:\n%s", i, out, w)
		}
	}
}

// TestDocExample checks that docs/go.md shows cmd/pcclhello verbatim, and
// runs it.
func TestDocExample(t *testing.T) {
	src, err := os.ReadFile("cmd/pcclhello/main.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/go.md")
	if err != nil {
		t.Skip("docs/go.md not found (not in the source tree)")
	}
	if !strings.Contains(string(doc), "```go\n"+string(src)+"```\n") {
		t.Fatal("docs/go.md does not contain cmd/pcclhello/main.go verbatim")
	}
	if testing.Short() {
		return
	}
	bin := filepath.Join(t.TempDir(), "pcclhello")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/pcclhello").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin).Output()
	if err != nil {
		t.Fatalf("pcclhello: %v\n%s", err, out)
	}
	for rank, rx := range []int{0, 0, 12} {
		line := fmt.Sprintf("peer %d: weights [0.5 1.5 2.5] (received %d bytes), sum [3 3 6]\n", rank, rx)
		if !strings.Contains(string(out), line) {
			t.Errorf("pcclhello output lacks %q:\n%s", line, out)
		}
	}
}
