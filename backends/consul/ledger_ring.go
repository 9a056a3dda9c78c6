package consul

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
)

// decodeSlot returns the slot state of a ring entry as read.
func decodeSlot(pair *api.KVPair) (slotState, error) {
	if pair.ModifyIndex == 0 {
		return slotState{known: true}, nil // get-or-empty of a key that does not exist
	}
	var r ringRun
	if err := json.Unmarshal(pair.Value, &r); err != nil {
		return slotState{}, fmt.Errorf("decode %s: %w", pair.Key, err)
	}
	return slotState{known: true, index: pair.ModifyIndex, seq: r.Seq, tick: r.Tick.UnixNano(), token: r.Token}, nil
}

// slotWrite is a run to be put in its job's ring slot.
type slotWrite struct {
	job   string
	seq   uint64
	tick  time.Time
	token uint64
	raw   []byte // the ringRun
	// replace: Finish, which replaces the run's entry if the slot holds
	// it already; a copy keeps it (it may be finished).
	replace bool
}

// writeSlots puts each run of ws in its ring slot with a CAS on the
// ModifyIndex this Ledger knows, after reading the slots it does not
// know, unless the slot holds a newer run (the run was trimmed) or,
// for a copy, the run already. It returns one error per write, nil when
// it was written or had nothing to do. A slot that changed meanwhile is
// read again and decided again. One write transaction unless the values
// are too large for one (at most MaxBatch writes per call).
func (l *tickLedger) writeSlots(ctx context.Context, ws []slotWrite) []error {
	errs := make([]error, len(ws))
	pending := make([]int, len(ws))
	for i := range pending {
		pending[i] = i
	}
	conflicts := map[int]int{}
	for len(pending) > 0 {
		pending = l.readSlots(ctx, ws, pending, errs)
		send, index := l.slotsToSend(ws, pending)
		pending = l.sendSlots(ctx, ws, send, index, conflicts, errs)
	}
	return errs
}

// setErrs sets errs[i] to err for each i of is.
func setErrs(errs []error, is []int, err error) {
	for _, i := range is {
		errs[i] = err
	}
}

// readSlots reads, in one call, the slots of the writes of pending (ws's
// indexes) this Ledger does not know, and returns pending without those
// it could not read (their errors set).
func (l *tickLedger) readSlots(ctx context.Context, ws []slotWrite, pending []int, errs []error) []int {
	var unknown []int
	for _, i := range pending {
		if _, ok := l.slot(ws[i].job, ws[i].seq); !ok {
			unknown = append(unknown, i)
		}
	}
	if len(unknown) == 0 {
		return pending
	}
	keys := make([]string, len(unknown))
	for k, i := range unknown {
		keys[k] = l.slotKey(ws[i].job, ws[i].seq)
	}
	got, err := l.get(ctx, api.KVGetOrEmpty, keys)
	for k, i := range unknown {
		var s slotState
		if err == nil {
			if pair := got[keys[k]]; pair == nil {
				err = fmt.Errorf("%s missing from the transaction's results (an ACL may hide it)", keys[k])
			} else {
				s, err = decodeSlot(pair)
			}
		}
		if err != nil {
			setErrs(errs, []int{i}, fmt.Errorf("read %s: %w", keys[k], err))
			pending = without(pending, i)
			continue
		}
		l.setSlot(ws[i].job, ws[i].seq, s)
	}
	return pending
}

// slotsToSend decides each write of pending against its slot as known:
// it returns those to send and the ModifyIndex each is to CAS on. The
// others have nothing to do.
func (l *tickLedger) slotsToSend(ws []slotWrite, pending []int) (send []int, index map[int]uint64) {
	index = map[int]uint64{}
	for _, i := range pending {
		w := ws[i]
		s, _ := l.slot(w.job, w.seq)
		trimmed := s.index != 0 && s.tick > w.tick.UnixNano()                        // a newer run is there
		another := s.index != 0 && s.tick == w.tick.UnixNano() && s.token != w.token // not this run's entry
		there := s.holds(w.tick, w.token) && !w.replace                              // a copy the ring has already
		if !trimmed && !another && !there {
			send = append(send, i)
			index[i] = s.index
		}
	}
	return send, index
}

// sendSlots writes send, one transaction per opLimit writes or
// maxTxnBytes of values, and sets their errors. It returns the writes
// to read and decide again: their slots changed meanwhile (conflicts
// counts how often, per write).
func (l *tickLedger) sendSlots(ctx context.Context, ws []slotWrite, send []int, index map[int]uint64, conflicts map[int]int, errs []error) (again []int) {
	for len(send) > 0 {
		n, size := 0, 0
		for n < len(send) && int64(n) < l.opLimit.Load() && (n == 0 || size+len(ws[send[n]].raw) <= maxTxnBytes) {
			size += len(ws[send[n]].raw)
			n++
		}
		part := send[:n]
		send = send[n:]
		ops := make(api.TxnOps, len(part))
		for k, i := range part {
			ops[k] = &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: l.slotKey(ws[i].job, ws[i].seq), Value: ws[i].raw, Index: index[i]}}
		}
		ok, resp, err := l.txn(ctx, ops)
		switch {
		case errors.Is(err, errTooManyOps) && l.lower(len(ops)):
			// Nothing applied: sent again, within the lowered limit.
			send = append(slices.Clone(part), send...)
		case err != nil:
			// Written or not: read the slots again next time.
			for _, i := range part {
				l.setSlot(ws[i].job, ws[i].seq, slotState{stale: true})
			}
			setErrs(errs, part, err)
		case ok:
			got := make(map[string]uint64, len(resp.Results))
			for _, r := range resp.Results {
				if r != nil && r.KV != nil {
					got[r.KV.Key] = r.KV.ModifyIndex
				}
			}
			for _, i := range part {
				w := ws[i]
				s := slotState{stale: true}
				if ix, found := got[l.slotKey(w.job, w.seq)]; found {
					s = slotState{known: true, index: ix, seq: w.seq, tick: w.tick.UnixNano(), token: w.token}
				}
				l.setSlot(w.job, w.seq, s)
			}
		default:
			again = append(again, l.slotsRolledBack(ws, part, resp, conflicts, errs)...)
		}
	}
	return again
}

// slotsRolledBack decides the writes of part, whose transaction was
// rolled back: the slots that changed are read again (returned, unless
// they kept changing); the others are sent again (returned too), unless
// an operation failed for another reason (then all fail).
func (l *tickLedger) slotsRolledBack(ws []slotWrite, part []int, resp *api.TxnResponse, conflicts map[int]int, errs []error) (again []int) {
	var other, gaveUp []int
	for _, e := range resp.Errors {
		if e.OpIndex < 0 || e.OpIndex >= len(part) || !strings.HasSuffix(e.What, "index is stale") {
			other = append(other, e.OpIndex)
			continue
		}
		i := part[e.OpIndex]
		l.setSlot(ws[i].job, ws[i].seq, slotState{stale: true})
		if conflicts[i]++; conflicts[i] >= casAttempts {
			setErrs(errs, []int{i}, fmt.Errorf("%s kept changing (%d attempts)", l.slotKey(ws[i].job, ws[i].seq), conflicts[i]))
			gaveUp = append(gaveUp, i)
		}
	}
	if len(other) > 0 {
		setErrs(errs, part, fmt.Errorf("transaction rolled back: %s", txnErrors(resp)))
		return nil
	}
	for _, i := range part {
		if !slices.Contains(gaveUp, i) {
			again = append(again, i)
		}
	}
	return again
}
