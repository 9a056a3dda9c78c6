package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"strconv"
	"strings"
	"time"
)

// pgArray builds a PostgreSQL array literal ('{"a","b"}'), sent as one
// text parameter and cast in the statement ($3::text::bigint[]), so that
// the core needs no driver's array type and any database/sql driver can
// carry it.
type pgArray struct {
	b strings.Builder
	n int
}

func (a *pgArray) sep() {
	if a.n == 0 {
		a.b.WriteByte('{')
	} else {
		a.b.WriteByte(',')
	}
	a.n++
}

// text appends a quoted element: inside double quotes only '"' and '\'
// need a backslash.
func (a *pgArray) text(s string) {
	a.sep()
	a.b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			a.b.WriteByte('\\')
		}
		a.b.WriteByte(s[i])
	}
	a.b.WriteByte('"')
}

func (a *pgArray) int(n int64) {
	a.sep()
	a.b.WriteString(strconv.FormatInt(n, 10))
}

func (a *pgArray) bool(v bool) {
	a.sep()
	if v {
		a.b.WriteByte('t')
	} else {
		a.b.WriteByte('f')
	}
}

// time appends an ISO 8601 UTC timestamp with microseconds, or NULL for
// the zero time.
func (a *pgArray) time(t time.Time) {
	if t.IsZero() {
		a.sep()
		a.b.WriteString("NULL")
		return
	}
	a.text(t.UTC().Format("2006-01-02T15:04:05.000000Z"))
}

func (a *pgArray) String() string {
	if a.n == 0 {
		return "{}"
	}
	return a.b.String() + "}"
}

// claimPG runs the claim statement (see queries.claimPG) for items.
func (l *tickLedger) claimPG(ctx context.Context, token int64, items []claimItem) (claimChunk, error) {
	b := l.b
	var jobs, ticks, instances, catchUps, starts pgArray
	for _, it := range items {
		jobs.text(it.job)
		ticks.int(it.tick)
		instances.text(it.instance)
		catchUps.bool(it.catchUp)
		starts.time(it.started)
	}
	rows, err := b.cfg.DB.QueryContext(ctx, b.q.claimPG, b.cfg.Election, token, jobs.String(), ticks.String(),
		instances.String(), catchUps.String(), starts.String(), b.cfg.History)
	if err != nil {
		return claimChunk{}, err
	}
	defer rows.Close()
	res := claimChunk{claimed: make([]bool, len(items))}
	leases := int64(-1)
	for rows.Next() {
		var ord dbsql.NullInt64
		if err := rows.Scan(&leases, &ord); err != nil {
			return claimChunk{}, err
		}
		if ord.Valid && ord.Int64 >= 1 && ord.Int64 <= int64(len(items)) {
			res.claimed[ord.Int64-1] = true
		}
	}
	if err := rows.Err(); err != nil {
		return claimChunk{}, err
	}
	if leases < 0 {
		return claimChunk{}, errors.New("claim statement returned no row")
	}
	res.stale = leases == 0
	return res, nil
}

// finishPG runs the finish statement (see queries.finishPG) for items.
func (l *tickLedger) finishPG(ctx context.Context, items []finishItem) error {
	b := l.b
	var jobs, ticks, tokens, ended, results, msgs, tries pgArray
	for _, it := range items {
		jobs.text(it.job)
		ticks.int(it.tick)
		tokens.int(it.token)
		ended.time(it.ended)
		results.text(it.result)
		msgs.text(it.msg)
		tries.int(it.tries)
	}
	_, err := b.cfg.DB.ExecContext(ctx, b.q.finish, b.cfg.Election, jobs.String(), ticks.String(), tokens.String(),
		ended.String(), results.String(), msgs.String(), tries.String())
	return err
}
