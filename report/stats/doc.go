// Package stats holds the reporter's statistics: the comparison of a run with its baseline
// window (Mann-Whitney U through golang.org/x/perf/benchmath, plus an effect size) and change
// point detection over a series' history (a penalized least-squares step fit, solved exactly
// with PELT pruning).
package stats
