// Package autotune chooses kernel schedules by measuring them. For every tunable kernel of a
// compiled program it enumerates a config space (tile shapes, pipeline stages) filtered for the
// problem and the device, checks each candidate's outputs against the default schedule's,
// times the survivors with a Timer, keeps the fastest, and remembers the choice in a
// persistent, process-safe Cache. The result is compiler.Options.Configs.
//
// Index:
//
//	Device, CPUDevice, Tunable   device.go  what configs are tuned for (arch, SM count, shared memory)
//	Config, Space                space.go   config spaces per kernel kind and their validity rules
//	Timer, Runner, WallTimer     timer.go   measurement: CUDA events on a GPU, wall clock on the CPU
//	CompareOutputs               compare.go the correctness gate every candidate passes before timing
//	Cache, Entry, OpenCache      cache.go   the JSON cache, one file per device, flock + atomic rename
//	Tuner, Report                tune.go    the driver
//
// Guarantees: a cache hit times nothing; a candidate whose outputs differ from the default
// schedule's beyond tolerance is never chosen; the same timings always give the same choice
// (ties break towards the default, then the smallest config); entries of different devices
// (arch, SM count) live in different files and never overwrite each other. See docs/autotune.md.
package autotune
