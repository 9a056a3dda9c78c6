package kube

import (
	"context"
	"errors"
	"strconv"
)

// The terms ConfigMap (Name-terms) keeps the highest fencing token handed
// out, in data.token. The Lease's own annotation goes with the Lease when
// someone deletes it (and leaseTransitions restarts at zero with a new
// Lease, and resourceVersion is not an order): the floor is what keeps
// the next term's token above every earlier one then.

// floor reads the highest token handed out, 0 if none.
func (b *Backend) floor(ctx context.Context) (uint64, error) {
	o, err := b.c.get(ctx, configMaps, b.ns, b.terms)
	if isNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return termsToken(o), nil
}

func termsToken(o *object) uint64 {
	s, _ := o.section("data")["token"].(string)
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// raiseFloor makes the floor at least token, by compare-and-swap: it
// never lowers it, whoever else raises it meanwhile.
func (b *Backend) raiseFloor(ctx context.Context, token uint64) error {
	for range 5 {
		o, err := b.c.get(ctx, configMaps, b.ns, b.terms)
		if isNotFound(err) {
			o = configMaps.newObject(b.ns, b.terms)
			o.section("data")["token"] = strconv.FormatUint(token, 10)
			_, err = b.c.create(ctx, configMaps, b.ns, o)
			if err == nil || !isConflict(err) {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if termsToken(o) >= token {
			return nil
		}
		o.section("data")["token"] = strconv.FormatUint(token, 10)
		if _, err = b.c.update(ctx, configMaps, b.ns, o); err == nil || !isConflict(err) {
			return err
		}
	}
	return errors.New("kube: the terms ConfigMap kept changing")
}
