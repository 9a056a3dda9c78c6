// Package receivers has no code: its tests run the Express and Flask
// handlers of docs/receivers.md, as the page shows them, against baton's
// HTTP job client and Host.
package receivers
