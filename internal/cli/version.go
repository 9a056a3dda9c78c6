package cli

// The release build (tools/release) stamps these with -ldflags -X
// github.com/batonhq/baton/internal/cli.stampVersion=v1.2.3 and so on. A
// plain go build leaves them empty.
var (
	stampVersion string
	stampCommit  string
	stampDate    string
)

// VersionLine is what `baton version` prints: the version, and the commit
// and build date a release stamped in.
func VersionLine() string {
	s := "baton " + Version()
	if stampCommit != "" {
		s += " commit " + stampCommit
	}
	if stampDate != "" {
		s += " built " + stampDate
	}
	return s
}
