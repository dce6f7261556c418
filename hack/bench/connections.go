package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/codeport/codeport/internal/tenancy"
)

// idleConnections is how many keep-alive connections the idle-connection figure holds open.
const idleConnections = 1000

// idleConnectionMemory is the resident memory a serve process holds per 1,000 keep-alive
// connections that each made a catalog request and then went quiet, as partners' client pools
// and an ingress controller's upstream pool leave them, in MB. It is measured on a process of
// its own, every key's state loaded over one connection first, so the difference is the
// connections alone.
func idleConnectionMemory(binary, databaseURL string, keys []string) (float64, error) {
	srv, err := startServe(binary, databaseURL, string(tenancy.Production))
	if err != nil {
		return 0, err
	}
	defer srv.stop()
	const path = "/catalog/products?take=20"
	for _, key := range keys {
		if _, err := fetch(srv.base+path, key); err != nil {
			return 0, err
		}
	}
	before, err := srv.residentMB()
	if err != nil {
		return 0, err
	}
	host := strings.TrimPrefix(strings.TrimSuffix(srv.base, "/v2"), "http://")
	conns := make([]net.Conn, 0, idleConnections)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for i := range idleConnections {
		c, err := new(net.Dialer).DialContext(context.Background(), "tcp", host)
		if err != nil {
			return 0, fmt.Errorf("idle connection %d: %w", i, err)
		}
		conns = append(conns, c)
		if err := getOnce(c, host, "/v2"+path, keys[i%len(keys)]); err != nil {
			return 0, fmt.Errorf("idle connection %d: %w", i, err)
		}
	}
	after, err := srv.residentMB()
	if err != nil {
		return 0, err
	}
	return (after - before) * 1000 / idleConnections, nil
}

// getOnce sends one GET over c and reads its answer to the end, leaving c open.
func getOnce(c net.Conn, host, path, key string) error {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nX-Api-Key: %s\r\n\r\n", path, host, key); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
