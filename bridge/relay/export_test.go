package relay

// CloseGrace is closeGrace, for relay_test.
const CloseGrace = closeGrace
