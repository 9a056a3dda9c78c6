// Package readme has no code: its tests compile the library example shown
// in the repository's README.md and check that the README shows it
// verbatim.
package readme
