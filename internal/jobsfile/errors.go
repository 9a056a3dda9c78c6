package jobsfile

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Error is one problem in a file.
type Error struct {
	File  string
	Line  int
	Field string // e.g. "jobs[1].timeout"; empty for the whole file
	Msg   string // what is wrong, starting with the offending value if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// JobLine returns the line of the job named name, or 0.
func (f *File) JobLine(name string) int {
	for _, j := range f.Jobs {
		if j.Name == name {
			return j.Line
		}
	}
	return 0
}

var hostJob = regexp.MustCompile(`job "((?:[^"\\]|\\.)*)"`)

// Locate rewrites an error from schedulerhost.New (or anything else that
// names jobs as job "NAME") so that each of its lines starts with
// FILE:LINE of the job it names, or FILE when it names none.
func (f *File) Locate(err error) error {
	if err == nil {
		return nil
	}
	var out []error
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimPrefix(line, "schedulerhost: invalid config: ")
		e := &Error{File: f.Path, Msg: line}
		if m := hostJob.FindStringSubmatch(line); m != nil {
			name, uerr := strconv.Unquote(`"` + m[1] + `"`)
			if uerr == nil {
				for i, j := range f.Jobs {
					if j.Name == name {
						e.Line = j.Line
						e.Field = fmt.Sprintf("jobs[%d]", i)
						e.Msg = strings.TrimPrefix(strings.TrimPrefix(line, m[0]), ": ")
					}
				}
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}
