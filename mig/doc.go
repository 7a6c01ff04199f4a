// Package mig discovers NVIDIA GPUs and their MIG partitions so that each partition can be
// listed, and targeted, as a device of its own (CUDA_VISIBLE_DEVICES=MIG-...).
//
// Discovery goes through NVML (libnvidia-ml.so.1, bound with purego like engine/backend/cuda
// binds libcuda, so the binary still builds with CGO_ENABLED=0): MIG mode, the MIG devices of
// each GPU with their GPU and compute instance ids, UUIDs, SM counts and memory. Without NVML
// it falls back on parsing `nvidia-smi -L`, which gives names, UUIDs and profiles but no SM
// counts or ids.
//
// Index: device.go (GPU, Partition, Target), smi.go (ParseSMI, FormatSMI), nvml.go (the NVML
// binding), discover.go (Discover: NVML, then nvidia-smi).
//
// MIG is disabled on the project's GPU machines and must never be changed (design.md §10):
// nothing here changes a MIG mode or creates instances; it only reads.
package mig
