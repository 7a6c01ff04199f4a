// Package pipeline holds pipeline-parallel schedules as data. A schedule (GPipe, 1F1B or
// interleaved 1F1B) is compiled to a grid of compute actions per rank and time step, and
// lowered to one action list per rank (forward, backward, send and receive per micro-batch and
// stage). Validate checks the grid and the lists before anything runs (every action exactly
// once on its stage's rank, forward before backward, stages in order, no micro-batch twice in
// one time step, every send received once); Simulate executes every rank's list against the
// others in virtual time and refuses a schedule that cannot finish with E_DEADLOCK naming the
// blocked ranks and their actions, and measures the bubble.
//
// Stages: a model cut into Stages() = Ranks*Chunks stages; stage s lives on rank s % Ranks
// (chunk s / Ranks), so with Chunks > 1 each rank holds several non-adjacent stages
// (Megatron-LM's interleaved layout).
//
// Files: schedule.go (actions, plans, the generators), lower.go (send/recv insertion),
// validate.go (the rules), simulate.go (the dry run and the bubble).
package pipeline
