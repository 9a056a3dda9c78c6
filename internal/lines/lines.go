// Package lines turns a stream of writes into whole lines: the output of a
// child process, logged or printed one line at a time.
package lines

import (
	"bytes"
	"sync"
)

// Writer passes each line written to it, without its newline, to Emit.
// Write never fails. The zero value is not usable: Emit is required.
type Writer struct {
	// Emit receives each line. Writer calls it with its lock held, from
	// the goroutine calling Write or Flush, one line at a time; line is
	// only valid during the call.
	Emit func(line []byte)
	// Max is the longest line passed to Emit at once; a longer one is
	// passed in pieces of Max bytes. Zero means no limit.
	Max int

	mu  sync.Mutex
	buf []byte
}

// Write buffers p and emits every line it completes. It does not block
// beyond Emit.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if w.Max > 0 && (i > w.Max || (i < 0 && len(w.buf) >= w.Max)) {
			w.Emit(w.buf[:w.Max])
			w.buf = w.buf[w.Max:]
			continue
		}
		if i < 0 {
			break
		}
		w.Emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) == 0 {
		w.buf = nil
	}
	return len(p), nil
}

// Flush emits what is left after the last newline, if anything: call it
// once the writing side is done.
func (w *Writer) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.Emit(w.buf)
		w.buf = nil
	}
}
