// Command tcprelay is the benchmark's ceiling: a plain TCP relay that
// copies each accepted connection to and from -target with io.Copy (which
// Go turns into splice(2) between two TCP sockets). It prints
// "listening on HOST:PORT" once it accepts connections.
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
		go relay(c, *target)
	}
}

// relay copies both ways until either direction ends, then closes both.
func relay(c net.Conn, target string) {
	defer func() { _ = c.Close() }()
	t, err := net.DialTimeout("tcp", target, dialTimeout)
	if err != nil {
		log.Printf("tcprelay: dial: %v", err)
		return
	}
	defer func() { _ = t.Close() }()
	errc := make(chan error, 2)
	go func() { _, err := io.Copy(t, c); errc <- err }()
	go func() { _, err := io.Copy(c, t); errc <- err }()
	if err := <-errc; err != nil {
		log.Printf("tcprelay: %v", err)
	}
}
