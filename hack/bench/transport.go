package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"github.com/valyala/fasthttp"
)

// wireTransport hands vegeta's requests to fasthttp's client: vegeta paces the load and measures
// it, fasthttp writes and reads each request on the calling goroutine. net/http's transport
// passes every request through two goroutines of its connection, and on two CPUs shared with the
// servers it measures those hand-offs were a large part of the load generator's CPU.
type wireTransport struct{ client *fasthttp.Client }

func newWireTransport() *wireTransport {
	return &wireTransport{client: &fasthttp.Client{
		NoDefaultUserAgentHeader: true,
		MaxConnsPerHost:          1024,
		// A failed request is a result to count, not one to send again.
		MaxIdemponentCallAttempts: 1,
		// vegeta's own default timeout, which its http.Client would have enforced.
		ReadTimeout:  vegeta.DefaultTimeout,
		WriteTimeout: vegeta.DefaultTimeout,
	}}
}

// RoundTrip implements http.RoundTripper.
func (t *wireTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetMethod(r.Method)
	req.SetRequestURI(r.URL.String())
	for name, values := range r.Header {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read request body: %w", err)
		}
		req.SetBodyRaw(body)
	}
	resp := fasthttp.AcquireResponse()
	if err := t.client.Do(req, resp); err != nil {
		fasthttp.ReleaseResponse(resp)
		return nil, fmt.Errorf("%s %s: %w", r.Method, r.URL, err)
	}
	body := resp.Body()
	return &http.Response{
		Status:     strconv.Itoa(resp.StatusCode()),
		StatusCode: resp.StatusCode(),
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{},
		Body:          &responseBody{Reader: bytes.NewReader(body), resp: resp},
		ContentLength: int64(len(body)),
		Request:       r,
	}, nil
}

// responseBody reads a fasthttp response's body and returns the response to its pool on Close.
type responseBody struct {
	*bytes.Reader
	resp *fasthttp.Response
}

func (b *responseBody) Close() error {
	if b.resp != nil {
		fasthttp.ReleaseResponse(b.resp)
		b.resp = nil
	}
	return nil
}
