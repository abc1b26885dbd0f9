// Package ui serves the bridge's built-in browser client: one page per VM,
// at /ui/namespaces/{namespace}/virtualmachines/{name}, with the VM's
// display (noVNC), serial console and SSH (xterm.js).
//
// The page is built from web/ with esbuild (make ui) into dist/, which is
// committed and embedded, so `go build` never needs npm. Every response
// carries a strict Content-Security-Policy: scripts and styles from the
// bridge only, WebSockets and fetches to the bridge only, no framing. The
// page's one concession is a per-response nonce for the <style> elements
// that xterm.js creates, and inline style attributes (style-src-attr), which
// xterm.js sets on coloured cells and which cannot load anything from
// elsewhere under img-src 'self'.
//
// The page takes the user's Kubernetes token from a login form or the URL
// fragment (#token=…, which browsers never send to a server), removes it
// from the URL, keeps it in the tab's memory and sessionStorage, and sends
// it only in the WebSocket subprotocol and the Authorization header.
package ui
