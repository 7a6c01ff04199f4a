package launch

import (
	"bufio"
	"io"
	"sync"
)

// maxLine is the longest piece of a line written at once; a longer line is split, each piece
// with its prefix, so a rank printing without newlines cannot make the launcher buffer
// without bound.
const maxLine = 64 << 10

// lineWriter writes whole prefixed lines, one Write per line, so the lines of different ranks
// never interleave mid-line.
type lineWriter struct{ mu sync.Mutex }

func (lw *lineWriter) write(w io.Writer, b []byte) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	w.Write(b)
}

// copyLines copies r to w line by line, each line prefixed, until r ends. A last line without
// a newline gets one.
func (lw *lineWriter) copyLines(w io.Writer, r io.Reader, prefix []byte) {
	br := bufio.NewReaderSize(r, maxLine)
	line := make([]byte, 0, 256)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			line = append(append(line[:0], prefix...), chunk...)
			if line[len(line)-1] != '\n' {
				line = append(line, '\n')
			}
			lw.write(w, line)
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}
