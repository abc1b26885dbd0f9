// Package relay pumps one bridge session: a browser or CLI WebSocket on one
// side, KubeVirt's subresource WebSocket (or an SSH channel) on the other.
//
// Concurrency contract: Relay runs one goroutine per direction (the
// calling goroutine pumps upstream to client, one goroutine of its own
// client to upstream), so each Endpoint has exactly one reader and one
// writer; close frames and pings go through gorilla's WriteControl, which
// is safe beside them. Nothing else parks a goroutine per session: pings
// and the idle check are timers, and ctx and the session's Lost context
// are watched with context.AfterFunc. Memory per session is bounded: a direction holds at most one message in flight, and every
// socket has a read limit, so a slow client slows its upstream instead of
// growing a buffer. An idle session holds no large buffer: message, write
// and read-ahead buffers come from pools while bytes are in flight (see
// WS and ReadAheadConn). Every read and write has a deadline, and pings
// every PingInterval keep idle-but-alive sockets open through proxies.
//
// A session ends for exactly one reason, which both sides hear in a close
// frame: see the Code constants.
package relay
