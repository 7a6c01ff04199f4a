package rdzv

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func k8s(extra ...string) map[string]string {
	m := map[string]string{"JOB_COMPLETION_INDEX": "3", "WORLD_SIZE": "16", "JOB_NAME": "rack-check", "TESSERA_K8S_SERVICE": "rack-svc"}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == "<unset>" {
			delete(m, extra[i])
		} else {
			m[extra[i]] = extra[i+1]
		}
	}
	return m
}

func TestK8sIndexedJob(t *testing.T) {
	e, err := ParseEnv(lookupMap(k8s()))
	if err != nil {
		t.Fatal(err)
	}
	if e.Source != "kubernetes" || e.Rank != 3 || e.World != 16 || e.LocalRank != 0 || e.LocalWorld != 1 ||
		e.MasterAddr != "rack-check-0.rack-svc" || e.MasterPort != DefaultMasterPort || e.JobID != "k8s-rack-check" ||
		e.StoreAddr != "rack-check-0.rack-svc:29500" || !e.ServeStore {
		t.Fatalf("got %+v", e)
	}
	// MASTER_ADDR and MASTER_PORT win over the service's name; an external store is enough.
	e, err = ParseEnv(lookupMap(k8s("MASTER_ADDR", "10.1.2.3", "MASTER_PORT", "4000")))
	if err != nil || e.StoreAddr != "10.1.2.3:4000" {
		t.Fatalf("override: %+v %v", e, err)
	}
	e, err = ParseEnv(lookupMap(k8s("TESSERA_K8S_SERVICE", "<unset>", "TESSERA_RDZV", "tcp://store:7000")))
	if err != nil || e.StoreAddr != "store:7000" || e.ServeStore {
		t.Fatalf("external store: %+v %v", e, err)
	}
	// torchrun's variables win when both are present (torchrun inside a pod).
	if e, err := ParseEnv(lookupMap(k8s("RANK", "1", "MASTER_ADDR", "h", "MASTER_PORT", "1"))); err != nil || e.Source != "torchrun" {
		t.Fatalf("torchrun in a pod: %+v %v", e, err)
	}
	for name, m := range map[string]map[string]string{
		"no world":         k8s("WORLD_SIZE", "<unset>"),
		"index past world": k8s("JOB_COMPLETION_INDEX", "16"),
		"bad index":        k8s("JOB_COMPLETION_INDEX", "x"),
		"no master":        k8s("TESSERA_K8S_SERVICE", "<unset>"),
		"bad job name":     k8s("JOB_NAME", "a/b"),
	} {
		if _, err := ParseEnv(lookupMap(m)); errs.CodeOf(err) != errs.Input {
			t.Errorf("%s: want E_INPUT, got %v", name, err)
		}
	}
}
