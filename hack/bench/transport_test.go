package main

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/codeport/codeport/internal/test/testprocess"
)

// TestWireTransportCarriesRequestsAndAnswers: what vegeta's targets say (method, headers, body)
// reaches the server, and what the server answers (status, body) reaches vegeta's results, over
// a real listener.
func TestWireTransportCarriesRequestsAndAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/orders" || r.Header.Get("X-Api-Key") != "key-1" ||
			string(body) != `{"n":1}` {
			w.WriteHeader(http.StatusTeapot)
			_, _ = w.Write([]byte(r.Method + " " + r.URL.Path + " " + r.Header.Get("X-Api-Key") + " " + string(body)))
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"accepted":true}`))
	})
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: handler}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	targeter := vegeta.NewStaticTargeter(vegeta.Target{
		Method: http.MethodPost, URL: "http://" + ln.Addr().String() + "/orders",
		Header: http.Header{"X-Api-Key": []string{"key-1"}}, Body: []byte(`{"n":1}`),
	})
	attacker := newAttacker(2)
	results := 0
	for res := range attacker.Attack(targeter, vegeta.Rate{Freq: 50, Per: time.Second}, 200*time.Millisecond, "test") {
		results++
		if res.Code != http.StatusAccepted || string(res.Body) != `{"accepted":true}` || res.Error != "" {
			t.Fatalf("result %d %q (error %q)", res.Code, res.Body, res.Error)
		}
	}
	if results == 0 {
		t.Fatal("no results")
	}

	// A server that is not there is an error result, not a retry or a hang.
	addr := testprocess.Addr(t)
	closedPort := vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: "http://" + addr + "/"})
	res := newAttacker(1).Attack(closedPort, vegeta.Rate{Freq: 1, Per: time.Second}, time.Millisecond, "test")
	for r := range res {
		if r.Error == "" || r.Code != 0 {
			t.Fatalf("request to a closed port: code %d, error %q", r.Code, r.Error)
		}
	}
}
