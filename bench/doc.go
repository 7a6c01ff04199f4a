// Package bench measures the engine against PyTorch on the same GPU, in one command
// (`tessera-qa bench --vs torch`, docs/cli.md; design.md §8).
//
// Index:
//
//	ops.go       the op table: engine graph, input shapes and distributions, flop and byte
//	             counts, tolerance, and the slice the golden-model check keeps
//	select.go    Case, Selection, Select, ParseShape: --ops/--shapes/--dtypes to cases
//	inputs.go    parallel random inputs (never zeros), the files the oracle reads
//	engine.go    Engine, Device, CUDA: run and time on the CUDA backend (CUDA events)
//	oracle.go    Oracle, Torch: one long-lived python running torch_bench.py (embedded),
//	             a JSON-lines protocol with tensors passed as files
//	check.go     checkParallel: harness.Check (or CheckBound with a per-element bound) over large
//	             outputs, split across cores
//	run.go       Run, Row: per case, correctness first (torch, and engine/ref on a slice),
//	             then timing, median of the reps
//	report.go    PrintTable, NewReport (the bench JSON `report ingest` reads), CopyGBps
//	fake.go      FixedClock, RefOracle: the pipeline without a GPU or torch (tests)
//
// rows_gpu_test.go runs the golden row cases on the GPU (the fast row kernels of
// engine/compiler/ptx); testdata/gpurun.sh is the one device call that checks and times all of it.
package bench
