// Package sanitizer runs NVIDIA compute-sanitizer's four tools (memcheck, racecheck,
// initcheck, synccheck) around a child process that runs our kernels, and judges the text the
// tool writes: every report becomes a Finding naming the tool, the kernel and the access, and
// a run is a pass only when the tool ran to its ERROR SUMMARY with 0 errors and the child
// reported every case it was given as right. A tool the machine refuses (unsupported device,
// internal error) is Skipped with the tool's own line, never a pass.
//
//   - parse.go: Parse, compute-sanitizer's output as Findings, summaries and refusals
//   - judge.go: Judge, one tool run as a verdict; the child's case lines
//   - run.go: Locate the tool, Exec it around a child under a deadline
//   - summary.go: Summarise every tool's result as one JSON document
//
// The cases themselves (which kernels run, on which shapes) are package sanitizer/cases.
package sanitizer
