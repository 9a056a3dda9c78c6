// Package receivers has no code: its tests run the Express and Flask
// handlers of docs/receivers.md, as the page shows them, with the receiver
// modules of receivers/ beside them, against baton's HTTP job client and
// Host; and run each module's fence with fence/fencetest.
package receivers
