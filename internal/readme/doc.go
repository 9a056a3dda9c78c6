// Package readme has no code: its tests build the README's first code
// block (testdata/firstprogram, verbatim) and run it against a real etcd,
// compile the by-hand example of docs/configuration.md and check that the
// page shows it verbatim, check that every relative link of README.md,
// CHANGELOG.md and docs/**/*.md resolves (the file exists, and a
// #fragment names one of its headings by GitHub's anchor rules), and
// check that every backend package is named where the docs list the
// backends: the README's first paragraph and sidecar config, the root
// package's comment, and docs/ARCHITECTURE.md's guarantee rows for the
// fencing token and the once-per-tick claim.
package readme
