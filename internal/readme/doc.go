// Package readme has no code: its tests compile the library example shown
// in the repository's README.md and check that the README shows it
// verbatim, and check that every relative link of README.md, CHANGELOG.md
// and docs/**/*.md resolves: the file exists, and a #fragment names one of
// its headings by GitHub's anchor rules.
package readme
