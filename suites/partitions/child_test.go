package partitions_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/tessera-qa/tessera-qa/mig/green"
)

// childEnv selects a child role when this test binary is re-run by a process spec:
// TESSERA_GREEN_CHILD=job|fault|alloc|peek, with TESSERA_GREEN_PART (partition index of a 2-way
// split), TESSERA_GREEN_REPS (job) and TESSERA_GREEN_PTR (peek). A child prints one result
// line ("DIGEST <hex>", "PTR 0x...", "DENIED <error>", "READ <hex>", "ERR <error>") and exits 0
// on success, 3 when the driver failed.
const childEnv = "TESSERA_GREEN_CHILD"

// Sizes of the job every process spec runs on partition A.
const (
	jobN     = 1 << 22
	jobIters = 64
	jobSeed  = 12
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func runChild(role string) int {
	fail := func(err error) int {
		fmt.Printf("ERR %v\n", err)
		return 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if role == "load" {
		return loadGPU(fail)
	}
	parts, err := green.Split(0, 2, 0)
	if err != nil {
		return fail(err)
	}
	p := &parts[envInt("TESSERA_GREEN_PART", 0)]
	switch role {
	case "job":
		j, err := green.NewJob(p, jobN, jobIters, jobSeed)
		if err != nil {
			return fail(err)
		}
		if _, err := j.Run(ctx, envInt("TESSERA_GREEN_REPS", 1)); err != nil {
			return fail(err)
		}
		d, err := j.Digest()
		if err != nil {
			return fail(err)
		}
		fmt.Printf("DIGEST %s\n", d)
		return 0
	case "fault":
		j, err := green.NewJob(p, jobN, jobIters, jobSeed)
		if err != nil {
			return fail(err)
		}
		if err := j.Fault(ctx); err != nil {
			return fail(err)
		}
		fmt.Println("NOFAULT")
		return 0
	case "alloc":
		j, err := green.NewJob(p, jobN, jobIters, jobSeed)
		if err != nil {
			return fail(err)
		}
		if _, err := j.Run(ctx, 1); err != nil {
			return fail(err)
		}
		d, err := j.Digest()
		if err != nil {
			return fail(err)
		}
		fmt.Printf("PTR 0x%x %s\n", j.Out(), d)
		// Hold the buffer until the parent closes stdin.
		bufio.NewReader(os.Stdin).ReadString('\n')
		return 0
	case "peek":
		ptr, err := strconv.ParseUint(os.Getenv("TESSERA_GREEN_PTR"), 0, 64)
		if err != nil {
			return fail(err)
		}
		buf := make([]byte, 4*jobN)
		if err := p.Download(buf, ptr); err != nil {
			fmt.Printf("DENIED %v\n", err)
			return 0
		}
		fmt.Printf("READ %s\n", digest(buf))
		return 0
	}
	return fail(fmt.Errorf("unknown child role %q", role))
}
