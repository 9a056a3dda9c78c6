package mysql_test

import (
	dbsql "database/sql"
	"reflect"
	"testing"
	"time"

	"github.com/batonhq/baton/backends/sql"
	"github.com/batonhq/baton/backends/sql/mysql"
	"github.com/batonhq/baton/election"
)

// TestNew_Config: mysql.New takes the core's Config, validates it and
// speaks MySQL; nothing in it can ask for LISTEN.
func TestNew_Config(t *testing.T) {
	t.Parallel()
	b, err := mysql.New(mysql.Config{DB: &dbsql.DB{}, Table: "leader", Election: "jobs", Timing: election.Timing{TTL: 7 * time.Second}})
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if got := b.Timing().TTL; got != 7*time.Second {
		t.Errorf("Timing().TTL = %v, want 7s", got)
	}
	bad := mysql.Config{Table: "X"}
	verr := bad.Validate()
	if _, nerr := mysql.New(bad); verr == nil || nerr == nil || verr.Error() != nerr.Error() {
		t.Fatalf("Validate() = %v, New() = %v; want the same error", verr, nerr)
	}
	if _, ok := reflect.TypeFor[mysql.Config]().FieldByName("Listen"); ok {
		t.Error("mysql.Config has a Listen field: LISTEN/NOTIFY is PostgreSQL only")
	}
	if d := mysql.Driver(); d.Dialect != sql.MySQL || d.Listen != nil {
		t.Errorf("Driver() = %+v, want MySQL without Listen", d)
	}
}
