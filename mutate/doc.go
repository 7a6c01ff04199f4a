// Package mutate is the mutation check of the whole harness (`tessera-qa mutate`): it plants
// each fault of a catalogue of realistic engine bugs (package engine/failpoint) in turn, runs
// the CPU suites that CI runs against a failpoints build with that fault switched on, and
// records which suites catch it. A fault no suite catches is a hole in the harness.
//
// Index, one concern per file:
//
//	fault.go   Fault, Layer, Catalogue, SelectFaults: the planted bugs, one value each
//	suite.go   Suite, Kind, Suites, SelectSuites: what runs against each fault, and when a
//	           suite is present in the tree
//	build.go   FindRoot, GoTool, building the suite binaries with -tags failpoints
//	exec.go    running one suite binary under one fault: Outcome (caught, missed, skipped)
//	bits.go    BitsCheck: with no fault on, a failpoints build gives the normal build's bits
//	run.go     Options, Run, Report: baseline, bits check, faults x suites
//	table.go   WriteTable, WriteMarkdown: the fault -> suites report
//
// A run:
//
//	rep, err := mutate.Run(mutate.Options{Root: root})
//	mutate.WriteTable(os.Stdout, rep)
//	// rep.OK(): the baseline passed, the bits matched and every fault was caught.
package mutate
