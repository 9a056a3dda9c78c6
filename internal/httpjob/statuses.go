package httpjob

import (
	"fmt"
	"strconv"
)

// DefaultRetryStatuses are the statuses retried when a job lists none:
// 408 Request Timeout, 429 Too Many Requests and every 5xx. Any other
// status (another 4xx, such as a 409 that refuses a stale token, or a
// redirect) is final: a retry would get the same answer.
var DefaultRetryStatuses = []string{"408", "429", "5xx"}

// statusSet is a parsed list of retry statuses.
type statusSet struct {
	codes   map[int]bool
	classes [6]bool // by status/100
}

func (s statusSet) has(status int) bool {
	if s.codes[status] {
		return true
	}
	c := status / 100
	return c >= 0 && c < len(s.classes) && s.classes[c]
}

// CheckStatus reports an entry of retry_statuses that is neither a status
// code from 300 to 599 ("503") nor a class of them ("3xx", "4xx", "5xx").
func CheckStatus(s string) error {
	_, _, err := parseStatus(s)
	return err
}

// parseStatus returns the code of s, or its class (3 to 5) if it is one.
func parseStatus(s string) (code, class int, err error) {
	if len(s) == 3 && s[1:] == "xx" && s[0] >= '3' && s[0] <= '5' {
		return 0, int(s[0] - '0'), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || len(s) != 3 || n < 300 || n > 599 {
		return 0, 0, fmt.Errorf("retry_statuses %q: want a status from 300 to 599 (e.g. 503) or a class (3xx, 4xx, 5xx)", s)
	}
	return n, 0, nil
}

// parseStatuses parses list; nil gives DefaultRetryStatuses.
func parseStatuses(list []string) (statusSet, error) {
	if list == nil {
		list = DefaultRetryStatuses
	}
	set := statusSet{codes: map[int]bool{}}
	for _, s := range list {
		code, class, err := parseStatus(s)
		if err != nil {
			return statusSet{}, err
		}
		if class > 0 {
			set.classes[class] = true
		} else {
			set.codes[code] = true
		}
	}
	return set, nil
}
