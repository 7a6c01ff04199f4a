package pipeline

// Lower turns the plan's grid into one list per rank: each compute action in time order,
// preceded by the receive of its input when that comes from another rank (the previous
// stage's activations for a forward, the next stage's gradient for a backward) and followed
// by the send of its output to the rank that needs it. Stages on the same rank hand over
// locally, with no action.
func Lower(p *Plan) [][]Action {
	S := p.Stages()
	lists := make([][]Action, len(p.Grid))
	for r, row := range p.Grid {
		for _, a := range row {
			if a == nil {
				continue
			}
			switch a.Kind {
			case Forward:
				if a.Stage > 0 && p.RankOf(a.Stage-1) != r {
					lists[r] = append(lists[r], Action{Kind: RecvF, Stage: a.Stage, MB: a.MB, Peer: p.RankOf(a.Stage - 1)})
				}
				lists[r] = append(lists[r], *a)
				if a.Stage < S-1 && p.RankOf(a.Stage+1) != r {
					lists[r] = append(lists[r], Action{Kind: SendF, Stage: a.Stage, MB: a.MB, Peer: p.RankOf(a.Stage + 1)})
				}
			case Backward:
				if a.Stage < S-1 && p.RankOf(a.Stage+1) != r {
					lists[r] = append(lists[r], Action{Kind: RecvB, Stage: a.Stage, MB: a.MB, Peer: p.RankOf(a.Stage + 1)})
				}
				lists[r] = append(lists[r], *a)
				if a.Stage > 0 && p.RankOf(a.Stage-1) != r {
					lists[r] = append(lists[r], Action{Kind: SendB, Stage: a.Stage, MB: a.MB, Peer: p.RankOf(a.Stage - 1)})
				}
			}
		}
	}
	return lists
}

// Message identifies what a send carries, so that a receive can be matched with it: the
// forward output of stage s is the forward input of stage s+1, the input gradient of stage s
// the output gradient of stage s-1.
type Message struct {
	Kind     Kind // SendF or SendB
	Stage    int  // the sending stage
	MB       int
	From, To int
}

// MessageOf is the message a send or receive action moves, seen from rank me.
func MessageOf(a Action, me int) Message {
	switch a.Kind {
	case SendF, SendB:
		return Message{Kind: a.Kind, Stage: a.Stage, MB: a.MB, From: me, To: a.Peer}
	case RecvF:
		return Message{Kind: SendF, Stage: a.Stage - 1, MB: a.MB, From: a.Peer, To: me}
	case RecvB:
		return Message{Kind: SendB, Stage: a.Stage + 1, MB: a.MB, From: a.Peer, To: me}
	}
	return Message{}
}
