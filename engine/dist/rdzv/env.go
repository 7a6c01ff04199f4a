package rdzv

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// MaxWorld is the largest world a frame header can address (its Src field is 16 bits).
const MaxWorld = 1<<16 - 1

// DefaultMasterPort is torch's default master port, used under Slurm when neither
// MASTER_PORT nor SLURM_JOB_ID says otherwise.
const DefaultMasterPort = 29500

// Slurm master ports: 20000 + SLURM_JOB_ID mod 20000, so that concurrent jobs sharing a first
// node rarely collide. Two steps of one job running at the same time share the port: give
// them MASTER_PORT explicitly.
const (
	slurmPortBase = 20000
	slurmPortSpan = 20000
)

// Env is where this process sits in a job, from the variables its launcher set.
type Env struct {
	Rank, World int
	// LocalRank is the rank among the processes of this node; LocalWorld their number (0 when
	// the launcher did not say, as under srun without SLURM_TASKS_PER_NODE).
	LocalRank, LocalWorld int
	MasterAddr            string
	MasterPort            int
	// JobID keeps the keys of concurrent jobs on one store apart and is checked in the
	// transports' handshakes.
	JobID string
	// StoreAddr is the rendezvous store's host:port, or an etcd cluster's etcd://... URL
	// (TESSERA_RDZV=etcd://...). ServeStore says rank 0 serves it there (torchrun-style
	// variables, srun); false when a launcher or an etcd cluster already serves it (TESSERA_RDZV).
	StoreAddr  string
	ServeStore bool
	// Timeout bounds the rendezvous (TESSERA_RDZV_TIMEOUT, default DefaultTimeout).
	Timeout time.Duration
	// Source names the launcher the variables came from: "torchrun" (RANK, WORLD_SIZE, ...:
	// torchrun, tessera-qa launch, or set by hand), "slurm" or "kubernetes" (an Indexed Job:
	// k8s.go).
	Source string
}

// The variables ParseEnv reads besides torchrun's and Slurm's.
const (
	EnvStore   = "TESSERA_RDZV"         // tcp://host:port of a store served by the launcher, or etcd://host:port[,...][/prefix]
	EnvJob     = "TESSERA_RDZV_JOB"     // job id
	EnvTimeout = "TESSERA_RDZV_TIMEOUT" // rendezvous timeout: a Go duration ("90s") or seconds
)

// FromOS reads the process environment (see ParseEnv).
func FromOS() (Env, error) { return ParseEnv(os.LookupEnv) }

// ParseEnv reads a rank's place in its job from the environment:
//
//   - torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
//     (tessera-qa launch sets the same; by hand, LOCAL_* may be left out: the node is assumed
//     to run the whole world). These win when both kinds are present (torchrun inside an
//     allocation).
//   - Slurm's SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and the node list (SLURM_STEP_NODELIST,
//     else SLURM_NODELIST, else SLURM_JOB_NODELIST): the master is the list's first host unless
//     MASTER_ADDR is set, the port MASTER_PORT or 20000 + SLURM_JOB_ID mod 20000.
//   - a Kubernetes Indexed Job's JOB_COMPLETION_INDEX with WORLD_SIZE, the master at index
//     0's pod through the Job's headless service (k8s.go), when RANK is not set.
//
// The store is rank 0's, at MASTER_ADDR:MASTER_PORT; under torchrun's agent store
// (TORCHELASTIC_USE_AGENT_STORE=True, where torchrun's own store holds MASTER_PORT) at
// MASTER_PORT+1. TESSERA_RDZV=tcp://host:port names a store a launcher already serves;
// TESSERA_RDZV=etcd://host:port[,host:port...][/prefix] an etcd cluster (package rdzv/etcd, which a program imports to allow it).
// Missing or malformed variables are one E_INPUT line naming the variable.
func ParseEnv(lookup func(string) (string, bool)) (Env, error) {
	get := func(k string) string { v, _ := lookup(k); return v }
	has := func(k string) bool { _, ok := lookup(k); return ok }
	var e Env
	var err error
	e.Timeout = DefaultTimeout
	if v, ok := lookup(EnvTimeout); ok {
		if e.Timeout, err = parseTimeout(v); err != nil {
			return Env{}, err
		}
	}
	storeURL, external := lookup(EnvStore)
	if external {
		if e.StoreAddr, err = parseStoreURL(storeURL); err != nil {
			return Env{}, err
		}
	}
	switch {
	case has(EnvK8sIndex) && !has("RANK"):
		e.Source = "kubernetes"
		err = e.parseK8s(get, has, external)
	case has("RANK") || has("WORLD_SIZE"):
		e.Source = "torchrun"
		err = e.parseTorchrun(get, has, external)
	case has("SLURM_PROCID"):
		e.Source = "slurm"
		err = e.parseSlurm(get, has, external)
	default:
		return Env{}, errs.New(errs.Input, "no rank environment: set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (as torchrun and tessera-qa launch do), or start the ranks with srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODELIST)")
	}
	if err != nil {
		return Env{}, err
	}
	if v, ok := lookup(EnvJob); ok {
		if v == "" || len(v) > 200 || strings.ContainsAny(v, " \t\n/") {
			return Env{}, errs.New(errs.Input, "%s=%.80q: want 1..200 characters without spaces or '/'", EnvJob, v)
		}
		e.JobID = v
	}
	if !external {
		port := e.MasterPort
		if get("TORCHELASTIC_USE_AGENT_STORE") == "True" {
			port++ // torchrun's own store listens on MASTER_PORT
			if port > 65535 {
				return Env{}, errs.New(errs.Input, "MASTER_PORT=%d: under torchrun's agent store the rendezvous uses MASTER_PORT+1, which is not a port", e.MasterPort)
			}
		}
		e.StoreAddr = net.JoinHostPort(e.MasterAddr, strconv.Itoa(port))
		e.ServeStore = true
	}
	return e, e.Validate()
}

func (e *Env) parseTorchrun(get func(string) string, has func(string) bool, external bool) error {
	var err error
	for _, k := range []string{"RANK", "WORLD_SIZE"} {
		if !has(k) {
			return errs.New(errs.Input, "%s is not set (the other torchrun variables are): set RANK and WORLD_SIZE together", k)
		}
	}
	if e.Rank, err = envInt("RANK", get("RANK")); err != nil {
		return err
	}
	if e.World, err = envInt("WORLD_SIZE", get("WORLD_SIZE")); err != nil {
		return err
	}
	e.LocalRank, e.LocalWorld = e.Rank, e.World
	if has("LOCAL_WORLD_SIZE") {
		if e.LocalWorld, err = envInt("LOCAL_WORLD_SIZE", get("LOCAL_WORLD_SIZE")); err != nil {
			return err
		}
	}
	if has("LOCAL_RANK") {
		if e.LocalRank, err = envInt("LOCAL_RANK", get("LOCAL_RANK")); err != nil {
			return err
		}
	} else if has("LOCAL_WORLD_SIZE") {
		return errs.New(errs.Input, "LOCAL_RANK is not set (LOCAL_WORLD_SIZE=%s is)", get("LOCAL_WORLD_SIZE"))
	}
	e.JobID = "default"
	if id := get("TORCHELASTIC_RUN_ID"); id != "" && !strings.ContainsAny(id, " \t\n/") && len(id) <= 200 {
		e.JobID = "torchrun-" + id
	}
	if external && !has("MASTER_ADDR") && !has("MASTER_PORT") {
		return nil // the launcher's store is all a rank needs
	}
	return e.parseMaster(get, has, "")
}

// parseMaster reads MASTER_ADDR and MASTER_PORT; defHost and defPort (when non-zero) stand in
// for absent ones.
func (e *Env) parseMaster(get func(string) string, has func(string) bool, defHost string, defPort ...int) error {
	switch {
	case has("MASTER_ADDR"):
		h, err := checkHost("MASTER_ADDR", get("MASTER_ADDR"))
		if err != nil {
			return err
		}
		e.MasterAddr = h
	case defHost != "":
		e.MasterAddr = defHost
	default:
		return errs.New(errs.Input, "MASTER_ADDR is not set (RANK=%d WORLD_SIZE=%d are): rank 0's host is needed to meet", e.Rank, e.World)
	}
	switch {
	case has("MASTER_PORT"):
		p, err := envInt("MASTER_PORT", get("MASTER_PORT"))
		if err != nil {
			return err
		}
		if p < 1 || p > 65535 {
			return errs.New(errs.Input, "MASTER_PORT=%d is not a port (want 1..65535)", p)
		}
		e.MasterPort = p
	case len(defPort) > 0:
		e.MasterPort = defPort[0]
	default:
		return errs.New(errs.Input, "MASTER_PORT is not set (MASTER_ADDR=%s is): the rendezvous port is needed to meet", e.MasterAddr)
	}
	return nil
}

func (e *Env) parseSlurm(get func(string) string, has func(string) bool, external bool) error {
	var err error
	if e.Rank, err = envInt("SLURM_PROCID", get("SLURM_PROCID")); err != nil {
		return err
	}
	ntasks := "SLURM_NTASKS"
	if !has(ntasks) && has("SLURM_NPROCS") {
		ntasks = "SLURM_NPROCS"
	}
	if !has(ntasks) {
		return errs.New(errs.Input, "SLURM_NTASKS is not set (SLURM_PROCID=%d is): is this a step started by srun?", e.Rank)
	}
	if e.World, err = envInt(ntasks, get(ntasks)); err != nil {
		return err
	}
	if !has("SLURM_LOCALID") {
		return errs.New(errs.Input, "SLURM_LOCALID is not set (SLURM_PROCID=%d is): is this a step started by srun?", e.Rank)
	}
	if e.LocalRank, err = envInt("SLURM_LOCALID", get("SLURM_LOCALID")); err != nil {
		return err
	}
	e.LocalWorld, err = slurmLocalWorld(get, has)
	if err != nil {
		return err
	}
	job := get("SLURM_JOB_ID")
	if job == "" {
		job = get("SLURM_JOBID")
	}
	port := DefaultMasterPort
	e.JobID = "slurm"
	if job != "" {
		id, err := envInt("SLURM_JOB_ID", job)
		if err != nil {
			return err
		}
		port = SlurmPort(id)
		e.JobID = "slurm-" + job
		if step := get("SLURM_STEP_ID"); step != "" {
			if _, err := envInt("SLURM_STEP_ID", step); err != nil {
				return err
			}
			e.JobID += "." + step
		}
	}
	var first string
	if !has("MASTER_ADDR") {
		name, list := "", ""
		for _, k := range []string{"SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST"} {
			if v, ok := lookupIn(get, has, k); ok {
				name, list = k, v
				break
			}
		}
		if name == "" && external {
			return nil // the launcher's store is all a rank needs
		}
		if name == "" {
			return errs.New(errs.Input, "SLURM_NODELIST is not set and neither is MASTER_ADDR: rank 0's host is unknown")
		}
		if first, err = FirstNode(list); err != nil {
			return errs.Wrap(errs.Input, err, "%s", name)
		}
	}
	return e.parseMaster(get, has, first, port)
}

func lookupIn(get func(string) string, has func(string) bool, k string) (string, bool) {
	if !has(k) {
		return "", false
	}
	return get(k), true
}

// SlurmPort is the master port derived from a Slurm job id when MASTER_PORT is not set.
func SlurmPort(jobID int) int { return slurmPortBase + jobID%slurmPortSpan }

// slurmLocalWorld reads this node's task count from SLURM_STEP_TASKS_PER_NODE (or
// SLURM_TASKS_PER_NODE) and SLURM_NODEID, else SLURM_NTASKS_PER_NODE; 0 when none is set.
func slurmLocalWorld(get func(string) string, has func(string) bool) (int, error) {
	for _, k := range []string{"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"} {
		if !has(k) || !has("SLURM_NODEID") {
			continue
		}
		node, err := envInt("SLURM_NODEID", get("SLURM_NODEID"))
		if err != nil {
			return 0, err
		}
		return TasksOnNode(k, get(k), node)
	}
	if has("SLURM_NTASKS_PER_NODE") {
		return envInt("SLURM_NTASKS_PER_NODE", get("SLURM_NTASKS_PER_NODE"))
	}
	return 0, nil
}

// TasksOnNode reads Slurm's compressed task counts ("2(x3),1": three nodes with 2 tasks,
// then one with 1) and returns node's count. name is the variable, for messages.
func TasksOnNode(name, v string, node int) (int, error) {
	bad := func() (int, error) {
		return 0, errs.New(errs.Input, "%s=%.80q: want counts like 4 or 2(x3),1", name, v)
	}
	if v == "" {
		return bad()
	}
	idx := 0
	for _, part := range strings.Split(v, ",") {
		count, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasPrefix(part[i:], "(x") || !strings.HasSuffix(part, ")") {
				return bad()
			}
			count, rep = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := strconv.ParseUint(count, 10, 31)
		r, err2 := strconv.ParseUint(rep, 10, 31)
		if err1 != nil || err2 != nil || c == 0 || r == 0 {
			return bad()
		}
		if node < idx+int(r) {
			return int(c), nil
		}
		idx += int(r)
	}
	return 0, errs.New(errs.Input, "%s=%.80q lists %d nodes, SLURM_NODEID is %d", name, v, idx, node)
}

// envInt parses a non-negative decimal variable strictly: no sign, no spaces, no hex.
func envInt(name, v string) (int, error) {
	if v == "" {
		return 0, errs.New(errs.Input, "%s is empty: want a non-negative integer", name)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, errs.New(errs.Input, "%s=%.40q is not a non-negative integer", name, v)
		}
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, errs.New(errs.Input, "%s=%.40q is out of range", name, v)
	}
	return int(n), nil
}

func checkHost(name, h string) (string, error) {
	if h == "" {
		return "", errs.New(errs.Input, "%s is empty: want a host name or address", name)
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return h, nil
	}
	for i := 0; i < len(h); i++ {
		if !hostByte(h[i]) {
			return "", errs.New(errs.Input, "%s=%.80q is not a host name or address", name, h)
		}
	}
	return h, nil
}

func parseTimeout(v string) (time.Duration, error) {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d, nil
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 && n < 1e7 {
		return time.Duration(n * float64(time.Second)), nil
	}
	return 0, errs.New(errs.Input, "%s=%.40q: want a positive duration (90s, 5m) or seconds", EnvTimeout, v)
}

func parseStoreURL(u string) (string, error) {
	rest, ok := strings.CutPrefix(u, "tcp://")
	if !ok {
		if strings.HasPrefix(u, "etcd://") {
			eu, err := ParseEtcdURL(u)
			if err != nil {
				return "", errs.Wrap(errs.Input, err, "%s", EnvStore)
			}
			return eu.String(), nil // Join dials it through package rdzv/etcd
		}
		return "", errs.New(errs.Input, "%s=%.80q: want tcp://host:port or etcd://host:port[,host:port...][/prefix]", EnvStore, u)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", errs.New(errs.Input, "%s=%.80q: want tcp://host:port", EnvStore, u)
	}
	if _, err := checkHost(EnvStore, host); err != nil {
		return "", err
	}
	p, err := envInt(EnvStore+" port", port)
	if err != nil || p < 1 || p > 65535 {
		return "", errs.New(errs.Input, "%s=%.80q: port is not 1..65535", EnvStore, u)
	}
	return net.JoinHostPort(host, port), nil
}

// Validate checks that the numbers are consistent: 0 <= Rank < World <= MaxWorld and
// 0 <= LocalRank < LocalWorld <= World (when LocalWorld is known).
func (e Env) Validate() error {
	src := func(std, slurm string) string {
		if e.Source == "slurm" {
			return slurm
		}
		return std
	}
	rank, world := src("RANK", "SLURM_PROCID"), src("WORLD_SIZE", "SLURM_NTASKS")
	lrank, lworld := src("LOCAL_RANK", "SLURM_LOCALID"), src("LOCAL_WORLD_SIZE", "tasks per node")
	switch {
	case e.World < 1 || e.World > MaxWorld:
		return errs.New(errs.Input, "%s=%d: want 1..%d", world, e.World, MaxWorld)
	case e.Rank < 0 || e.Rank >= e.World:
		return errs.New(errs.Input, "%s=%d is outside %s=%d (want 0..%d)", rank, e.Rank, world, e.World, e.World-1)
	case e.LocalWorld < 0 || e.LocalWorld > e.World:
		return errs.New(errs.Input, "%s=%d exceeds %s=%d", lworld, e.LocalWorld, world, e.World)
	case e.LocalRank < 0 || (e.LocalWorld > 0 && e.LocalRank >= e.LocalWorld):
		return errs.New(errs.Input, "%s=%d is outside %s=%d", lrank, e.LocalRank, lworld, e.LocalWorld)
	case e.StoreAddr == "":
		return errs.New(errs.Input, "no rendezvous store address (MASTER_ADDR/MASTER_PORT or %s)", EnvStore)
	}
	return nil
}

// ListenAddr is where rank 0 serves the store: the master address itself when it is a
// loopback address, every interface otherwise (a host name may resolve to an interface other
// than the one peers reach).
func (e Env) ListenAddr() string {
	host, port, err := net.SplitHostPort(e.StoreAddr)
	if err != nil {
		return e.StoreAddr
	}
	if IsLoopback(host) {
		return e.StoreAddr
	}
	return net.JoinHostPort("", port)
}

// IsEtcd reports whether the rendezvous goes through an etcd cluster (StoreAddr is an
// etcd:// URL) rather than a TCP store.
func (e Env) IsEtcd() bool { return strings.HasPrefix(e.StoreAddr, "etcd://") }

// IsLoopback reports whether host is localhost or a loopback address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

func (e Env) String() string {
	return fmt.Sprintf("rank %d/%d (local %d/%d) job %s store %s (%s)", e.Rank, e.World, e.LocalRank, e.LocalWorld, e.JobID, e.StoreAddr, e.Source)
}
