package rdzv

import (
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Kubernetes Indexed Jobs (completionMode: Indexed) give every pod its index in
// JOB_COMPLETION_INDEX and a stable hostname <job-name>-<index>; pods whose spec names a
// headless service as their subdomain resolve each other as <job-name>-<index>.<service>.
// A rank is then:
//
//	rank        JOB_COMPLETION_INDEX
//	world       WORLD_SIZE (the manifest sets it to the Job's completions)
//	master      MASTER_ADDR, else <JOB_NAME>-0.<TESSERA_K8S_SERVICE> (JOB_NAME from the
//	            pod label batch.kubernetes.io/job-name through the downward API)
//	port        MASTER_PORT, else 29500
//	local rank  0 of 1 (one rank per pod), unless LOCAL_RANK and LOCAL_WORLD_SIZE say otherwise
//	job id      k8s-<JOB_NAME>
//
// docs/distributed.md has a manifest. The store and the rendezvous are the usual ones: rank 0
// serves the store at the master's port (TESSERA_RDZV overrides, as everywhere).
const (
	EnvK8sIndex   = "JOB_COMPLETION_INDEX"
	EnvK8sJob     = "JOB_NAME"
	EnvK8sService = "TESSERA_K8S_SERVICE"
)

func (e *Env) parseK8s(get func(string) string, has func(string) bool, external bool) error {
	var err error
	if e.Rank, err = envInt(EnvK8sIndex, get(EnvK8sIndex)); err != nil {
		return err
	}
	if !has("WORLD_SIZE") {
		return errs.New(errs.Input, "WORLD_SIZE is not set (%s=%d is): set it to the Indexed Job's completions in the pod's env", EnvK8sIndex, e.Rank)
	}
	if e.World, err = envInt("WORLD_SIZE", get("WORLD_SIZE")); err != nil {
		return err
	}
	e.LocalRank, e.LocalWorld = 0, 1
	if has("LOCAL_RANK") || has("LOCAL_WORLD_SIZE") {
		if e.LocalRank, err = envInt("LOCAL_RANK", get("LOCAL_RANK")); err != nil {
			return err
		}
		if e.LocalWorld, err = envInt("LOCAL_WORLD_SIZE", get("LOCAL_WORLD_SIZE")); err != nil {
			return err
		}
	}
	job := get(EnvK8sJob)
	if job != "" && (len(job) > 63 || strings.ContainsAny(job, " \t\n/.")) {
		return errs.New(errs.Input, "%s=%.80q: want a Kubernetes object name (up to 63 characters, no dots or slashes)", EnvK8sJob, job)
	}
	e.JobID = "k8s"
	if job != "" {
		e.JobID = "k8s-" + job
	}
	if external && !has("MASTER_ADDR") && !has("MASTER_PORT") {
		return nil
	}
	def := ""
	if svc := get(EnvK8sService); job != "" && svc != "" {
		if strings.ContainsAny(svc, " \t\n/") {
			return errs.New(errs.Input, "%s=%.80q: want a service name", EnvK8sService, svc)
		}
		def = job + "-0." + svc
	}
	if def == "" && !has("MASTER_ADDR") {
		return errs.New(errs.Input, "MASTER_ADDR is not set and neither are %s and %s: index 0's pod (<job>-0.<headless service>) is needed to meet", EnvK8sJob, EnvK8sService)
	}
	return e.parseMaster(get, has, def, DefaultMasterPort)
}
