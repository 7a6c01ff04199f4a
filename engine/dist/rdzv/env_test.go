package rdzv

import (
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func lookupMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func torchrun(extra ...string) map[string]string {
	m := map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
		"MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500"}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == "<unset>" {
			delete(m, extra[i])
		} else {
			m[extra[i]] = extra[i+1]
		}
	}
	return m
}

func slurm(extra ...string) map[string]string {
	m := map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODEID": "2",
		"SLURM_TASKS_PER_NODE": "2(x3),2", "SLURM_NODELIST": "gpu[07-10]", "SLURM_JOB_ID": "123456", "SLURM_STEP_ID": "0"}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == "<unset>" {
			delete(m, extra[i])
		} else {
			m[extra[i]] = extra[i+1]
		}
	}
	return m
}

func TestParseEnvTorchrun(t *testing.T) {
	e, err := ParseEnv(lookupMap(torchrun()))
	if err != nil {
		t.Fatal(err)
	}
	want := Env{Rank: 1, World: 4, LocalRank: 1, LocalWorld: 2, MasterAddr: "10.0.0.5", MasterPort: 29500,
		JobID: "default", StoreAddr: "10.0.0.5:29500", ServeStore: true, Timeout: DefaultTimeout, Source: "torchrun"}
	if e != want {
		t.Fatalf("got %+v\nwant %+v", e, want)
	}
	if got := e.ListenAddr(); got != ":29500" {
		t.Errorf("ListenAddr for a remote master = %q, want every interface", got)
	}
	// By hand: no LOCAL_*, loopback master, a job id and a timeout.
	e, err = ParseEnv(lookupMap(torchrun("LOCAL_RANK", "<unset>", "LOCAL_WORLD_SIZE", "<unset>", "MASTER_ADDR", "127.0.0.1",
		EnvJob, "j1", EnvTimeout, "7")))
	if err != nil {
		t.Fatal(err)
	}
	if e.LocalRank != 1 || e.LocalWorld != 4 || e.JobID != "j1" || e.Timeout != 7*time.Second || e.ListenAddr() != "127.0.0.1:29500" {
		t.Errorf("by-hand env: %+v listen %s", e, e.ListenAddr())
	}
	// torchrun's agent store holds MASTER_PORT: ours goes one above.
	e, err = ParseEnv(lookupMap(torchrun("TORCHELASTIC_USE_AGENT_STORE", "True", "TORCHELASTIC_RUN_ID", "abc")))
	if err != nil || e.StoreAddr != "10.0.0.5:29501" || e.JobID != "torchrun-abc" {
		t.Errorf("agent store: %+v %v", e, err)
	}
	// Under tessera-qa launch: the launcher's store.
	e, err = ParseEnv(lookupMap(torchrun(EnvStore, "tcp://127.0.0.1:4000", "MASTER_ADDR", "<unset>", "MASTER_PORT", "<unset>")))
	if err != nil || e.StoreAddr != "127.0.0.1:4000" || e.ServeStore {
		t.Errorf("launcher store: %+v %v", e, err)
	}
	e, err = ParseEnv(lookupMap(torchrun("MASTER_ADDR", "[::1]")))
	if err != nil || e.StoreAddr != "[::1]:29500" || e.ListenAddr() != "[::1]:29500" {
		t.Errorf("ipv6 master: %+v %v", e, err)
	}
}

func TestParseEnvSlurm(t *testing.T) {
	e, err := ParseEnv(lookupMap(slurm()))
	if err != nil {
		t.Fatal(err)
	}
	want := Env{Rank: 5, World: 8, LocalRank: 1, LocalWorld: 2, MasterAddr: "gpu07", MasterPort: 20000 + 123456%20000,
		JobID: "slurm-123456.0", StoreAddr: "gpu07:23456", ServeStore: true, Timeout: DefaultTimeout, Source: "slurm"}
	if e != want {
		t.Fatalf("got %+v\nwant %+v", e, want)
	}
	e, err = ParseEnv(lookupMap(slurm("MASTER_PORT", "40000", "SLURM_STEP_NODELIST", "n[3-4]", "SLURM_TASKS_PER_NODE", "<unset>", "SLURM_NTASKS_PER_NODE", "4")))
	if err != nil || e.StoreAddr != "n3:40000" || e.LocalWorld != 4 {
		t.Errorf("step node list, explicit port: %+v %v", e, err)
	}
	e, err = ParseEnv(lookupMap(slurm("MASTER_ADDR", "head", "SLURM_NODELIST", "<unset>", "SLURM_JOB_ID", "<unset>", "SLURM_TASKS_PER_NODE", "<unset>")))
	if err != nil || e.StoreAddr != "head:29500" || e.LocalWorld != 0 || e.JobID != "slurm" {
		t.Errorf("master addr without node list: %+v %v", e, err)
	}
	// torchrun inside an allocation: torchrun's variables win.
	m := slurm()
	for k, v := range torchrun() {
		m[k] = v
	}
	if e, err := ParseEnv(lookupMap(m)); err != nil || e.Source != "torchrun" || e.Rank != 1 {
		t.Errorf("torchrun under slurm: %+v %v", e, err)
	}
}

func TestParseEnvErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		code errs.Code
		says string
	}{
		{"nothing", map[string]string{}, errs.Input, "no rank environment"},
		{"rank outside", torchrun("RANK", "4"), errs.Input, "RANK=4 is outside WORLD_SIZE=4"},
		{"rank missing", torchrun("RANK", "<unset>"), errs.Input, "RANK is not set"},
		{"world missing", torchrun("WORLD_SIZE", "<unset>"), errs.Input, "WORLD_SIZE is not set"},
		{"world zero", torchrun("WORLD_SIZE", "0", "RANK", "0"), errs.Input, "WORLD_SIZE=0"},
		{"world huge", torchrun("WORLD_SIZE", "70000"), errs.Input, "WORLD_SIZE=70000"},
		{"negative", torchrun("RANK", "-1"), errs.Input, `RANK="-1" is not a non-negative integer`},
		{"hex", torchrun("WORLD_SIZE", "0x4"), errs.Input, `WORLD_SIZE="0x4"`},
		{"space", torchrun("RANK", " 1"), errs.Input, `RANK=" 1"`},
		{"empty", torchrun("RANK", ""), errs.Input, "RANK is empty"},
		{"overflow", torchrun("RANK", "99999999999999999999"), errs.Input, "out of range"},
		{"local rank outside", torchrun("LOCAL_RANK", "2"), errs.Input, "LOCAL_RANK=2 is outside LOCAL_WORLD_SIZE=2"},
		{"local world too big", torchrun("LOCAL_WORLD_SIZE", "5"), errs.Input, "LOCAL_WORLD_SIZE=5 exceeds WORLD_SIZE=4"},
		{"local rank missing", torchrun("LOCAL_RANK", "<unset>"), errs.Input, "LOCAL_RANK is not set"},
		{"master missing", torchrun("MASTER_ADDR", "<unset>"), errs.Input, "MASTER_ADDR is not set"},
		{"port missing", torchrun("MASTER_PORT", "<unset>"), errs.Input, "MASTER_PORT is not set"},
		{"port zero", torchrun("MASTER_PORT", "0"), errs.Input, "MASTER_PORT=0 is not a port"},
		{"port big", torchrun("MASTER_PORT", "70000"), errs.Input, "MASTER_PORT=70000"},
		{"bad host", torchrun("MASTER_ADDR", "a b"), errs.Input, "MASTER_ADDR"},
		{"bad timeout", torchrun(EnvTimeout, "soon"), errs.Input, EnvTimeout},
		{"bad job", torchrun(EnvJob, "a/b"), errs.Input, EnvJob},
		{"bad store", torchrun(EnvStore, "http://x:1"), errs.Input, "want tcp://host:port"},
		{"store port", torchrun(EnvStore, "tcp://x:0"), errs.Input, "port is not 1..65535"},
		{"etcd port", torchrun(EnvStore, "etcd://x:0"), errs.Input, "TESSERA_RDZV: etcd URL"},
		{"etcd prefix", torchrun(EnvStore, "etcd://x:2379/a//b"), errs.Input, "prefix"},
		{"slurm rank outside", slurm("SLURM_PROCID", "8"), errs.Input, "SLURM_PROCID=8 is outside SLURM_NTASKS=8"},
		{"slurm ntasks missing", slurm("SLURM_NTASKS", "<unset>"), errs.Input, "SLURM_NTASKS is not set"},
		{"slurm localid missing", slurm("SLURM_LOCALID", "<unset>"), errs.Input, "SLURM_LOCALID is not set"},
		{"slurm node list bad", slurm("SLURM_NODELIST", "gpu[07-"), errs.Input, "SLURM_NODELIST"},
		{"slurm node list missing", slurm("SLURM_NODELIST", "<unset>"), errs.Input, "SLURM_NODELIST is not set"},
		{"slurm tasks per node", slurm("SLURM_TASKS_PER_NODE", "2(y3)"), errs.Input, "SLURM_TASKS_PER_NODE"},
		{"slurm node beyond list", slurm("SLURM_TASKS_PER_NODE", "2(x2)"), errs.Input, "lists 2 nodes"},
		{"slurm job id", slurm("SLURM_JOB_ID", "12a"), errs.Input, "SLURM_JOB_ID"},
	} {
		_, err := ParseEnv(lookupMap(c.env))
		if errs.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err %v, want one %s line saying %q", c.name, err, c.code, c.says)
		}
	}
}

func TestTasksOnNode(t *testing.T) {
	for node, want := range []int{4, 4, 4, 1, 3} {
		if got, err := TasksOnNode("X", "4(x3),1,3", node); err != nil || got != want {
			t.Errorf("node %d: %d %v, want %d", node, got, err, want)
		}
	}
}

func TestFormatRanks(t *testing.T) {
	for in, want := range map[string]string{"3": "3", "2,3": "2,3", "2,3,4,7": "2-4,7", "0,2,4": "0,2,4", "": ""} {
		var rs []int
		for _, f := range strings.Split(in, ",") {
			if f != "" {
				n, _ := envInt("x", f)
				rs = append(rs, n)
			}
		}
		if got := FormatRanks(rs); got != want {
			t.Errorf("FormatRanks(%v) = %q, want %q", rs, got, want)
		}
	}
}
