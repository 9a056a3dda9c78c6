package baton

// RunMain is Main up to its exit, for tests.
var RunMain = runMain
