// Command tcprelay is the benchmark's ceiling: a plain TCP relay that
// copies each accepted connection to and from -target with io.Copy (which
// Go turns into splice(2) between two TCP sockets). With -buffer N it
// copies through a buffer of N bytes with read(2) and write(2) instead, as
// any relay that looks at the bytes must: the floor for such a relay. It
// prints "listening on HOST:PORT" once it accepts connections.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"time"
)

// dialTimeout bounds the dial to the target.
const dialTimeout = 10 * time.Second

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	target := flag.String("target", "", "host:port to relay to")
	buffer := flag.Int("buffer", 0, "copy through a buffer of this many bytes instead of splice(2)")
	flag.Parse()
	if *target == "" {
		log.Fatal("tcprelay: -target is required")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("tcprelay: %v", err)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatalf("tcprelay: %v", err)
		}
		go relay(c, *target, *buffer)
	}
}

// onlyReader and onlyWriter hide a TCP connection's ReadFrom and WriteTo,
// so that io.CopyBuffer uses the buffer instead of splice(2).
type (
	onlyReader struct{ io.Reader }
	onlyWriter struct{ io.Writer }
)

// copyBoth copies src to dst, through a buffer of size bytes when size > 0.
func copyBoth(dst, src net.Conn, size int) error {
	if size <= 0 {
		_, err := io.Copy(dst, src)
		return err
	}
	_, err := io.CopyBuffer(onlyWriter{dst}, onlyReader{src}, make([]byte, size))
	return err
}

// relay copies both ways until either direction ends, then closes both.
func relay(c net.Conn, target string, buffer int) {
	defer func() { _ = c.Close() }()
	t, err := net.DialTimeout("tcp", target, dialTimeout)
	if err != nil {
		log.Printf("tcprelay: dial: %v", err)
		return
	}
	defer func() { _ = t.Close() }()
	errc := make(chan error, 2)
	go func() { errc <- copyBoth(t, c, buffer) }()
	go func() { errc <- copyBoth(c, t, buffer) }()
	if err := <-errc; err != nil {
		log.Printf("tcprelay: %v", err)
	}
}
