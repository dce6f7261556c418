package apiserver_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/google/uuid"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// delivery is one request the webhook receiver saw.
type delivery struct {
	id, timestamp, signature string
	body                     []byte
	status                   int
}

// receiver is a real HTTP webhook endpoint that fails the first failFirst attempts of each event.
type receiver struct {
	mu        sync.Mutex
	all       []delivery
	failFirst int
	attempts  map[string]int
	server    *httptest.Server
}

func newReceiver(t *testing.T, failFirst int) *receiver {
	t.Helper()
	r := &receiver{failFirst: failFirst, attempts: map[string]int{}}
	r.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		id := req.Header.Get("webhook-id")
		r.attempts[id]++
		status := http.StatusOK
		if r.attempts[id] <= r.failFirst {
			status = http.StatusServiceUnavailable
		}
		r.all = append(r.all, delivery{id: id, timestamp: req.Header.Get("webhook-timestamp"),
			signature: req.Header.Get("webhook-signature"), body: body, status: status})
		w.WriteHeader(status)
	}))
	t.Cleanup(r.server.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.all...)
}

// verify checks a Standard Webhooks signature independently of the code under test.
func verify(secret string, d delivery) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(d.id + "." + d.timestamp + "." + string(d.body)))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(d.signature) {
		version, value, _ := strings.Cut(sig, ",")
		if version == "v1" && hmac.Equal([]byte(value), []byte(want)) {
			return true
		}
	}
	return false
}

const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func (s *stack) setWebhook(t *testing.T, tn *tenant, url string, events ...string) {
	t.Helper()
	w := &provisioning.Webhook{URL: url, Secret: []byte(webhookSecret), Events: events}
	s.setWebhooks(t, tn, provisioning.Webhooks{"sandbox": w, "production": w})
}

// setWebhooks gives each environment of the tenant its own endpoint.
func (s *stack) setWebhooks(t *testing.T, tn *tenant, webhooks provisioning.Webhooks) {
	t.Helper()
	s.setWebhooksWith(t, s.prov, tn, webhooks)
}

// setWebhooksWith provisions the tenant's endpoints through prov, as an operator holding prov's
// codes key would.
func (s *stack) setWebhooksWith(
	t *testing.T, prov *provisioning.Provisioner, tn *tenant, webhooks provisioning.Webhooks,
) {
	t.Helper()
	c, _ := testCatalog(tn.namespace)
	id, err := s.prov.CatalogID(t.Context(), c.Namespace, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prov.ApplyPartner(t.Context(), partnerOf(tn.namespace, tn.name), &id, webhooks); err != nil {
		t.Fatal(err)
	}
}

func TestWebhooks(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	rcv := newReceiver(t, 3)
	s.setWebhook(t, tn, rcv.server.URL)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "1000.00"})
	key := tn.keys["sandbox"]
	want := map[string]string{}
	events := map[string]string{
		"wh-ok":      "order.completed",
		"wh-fail":    "order.failed",
		"wh-partial": "order.partially_completed",
	}
	for code, l := range map[string]line{
		"wh-ok":      {"productCode": "99000000000001", "quantity": 1},
		"wh-fail":    {"productCode": "99000000000003", "quantity": 1},
		"wh-partial": {"productCode": "99000000000004", "quantity": 2},
	} {
		r := s.call(t, "sandbox", "POST", "/v2/orders", key, order(code, l))
		if r.status != 202 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		want[r.str("orderId")] = events[code]
	}
	poll.UntilTrue(t, 30*time.Second, "three events delivered", func() bool {
		ok := 0
		for _, d := range rcv.deliveries() {
			if d.status == 200 {
				ok++
			}
		}
		return ok == 3
	})
	time.Sleep(300 * time.Millisecond) // no late duplicates
	perID := map[string][]delivery{}
	for _, d := range rcv.deliveries() {
		perID[d.id] = append(perID[d.id], d)
		if !verify(webhookSecret, d) {
			t.Fatalf("signature does not verify: %+v", d)
		}
		if ts, _ := strconv.ParseInt(d.timestamp, 10, 64); time.Since(time.Unix(ts, 0)) > time.Minute {
			t.Fatalf("timestamp %s", d.timestamp)
		}
	}
	if len(perID) != 3 {
		t.Fatalf("%d distinct events", len(perID))
	}
	for id, attempts := range perID {
		if len(attempts) != 4 || attempts[3].status != 200 {
			t.Fatalf("event %s: %d attempts, want 3 failures then one success", id, len(attempts))
		}
		var ev struct {
			ID, Type, Environment, CreatedAt string
			Data                             struct{ OrderID, ExternalOrderCode, Status string }
		}
		if err := json.Unmarshal(attempts[3].body, &ev); err != nil {
			t.Fatal(err)
		}
		for _, a := range attempts {
			if !bytes.Equal(a.body, attempts[0].body) {
				t.Fatal("retries carried different bodies")
			}
		}
		if ev.ID != id || want[ev.Data.OrderID] != ev.Type || "order."+ev.Data.Status != ev.Type ||
			ev.Data.ExternalOrderCode == "" || ev.Environment != "sandbox" {
			t.Fatalf("event %s: %s", id, attempts[3].body)
		}
		// The API's one date-time format, as in the 202 and on GET.
		if !etaFormat.MatchString(ev.CreatedAt) {
			t.Fatalf("event %s: createdAt %q is not RFC 3339 UTC with milliseconds", id, ev.CreatedAt)
		}
	}
}

func TestWebhookEventFilter(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	rcv := newReceiver(t, 0)
	s.setWebhook(t, tn, rcv.server.URL, notify.EventOrderFailed)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	for code, product := range map[string]string{"f-ok": "99000000000001", "f-fail": "99000000000003"} {
		r := s.call(t, "sandbox", "POST", "/v2/orders", tn.keys["sandbox"],
			order(code, line{"productCode": product, "quantity": 1}))
		if r.status != 202 {
			t.Fatal(r.status)
		}
		s.waitOrder(t, "sandbox", tn.keys["sandbox"], code)
	}
	poll.UntilTrue(t, 10*time.Second, "failed event", func() bool { return len(rcv.deliveries()) == 1 })
	time.Sleep(300 * time.Millisecond)
	if d := rcv.deliveries(); len(d) != 1 || !strings.Contains(string(d[0].body), `"order.failed"`) {
		t.Fatalf("deliveries: %v", d)
	}
}

// TestWebhooksPerEnvironment: each environment's events go to its own endpoint, signed with its
// own secret, and say which environment they are from, so an externalOrderCode used in both
// cannot be mistaken.
func TestWebhooksPerEnvironment(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	const liveSecret = "whsec_bGl2ZS1zaWduaW5nLXNlY3JldC1vZi0zMg=="
	sandboxRcv, liveRcv := newReceiver(t, 0), newReceiver(t, 0)
	s.setWebhooks(t, tn, provisioning.Webhooks{
		"sandbox":    {URL: sandboxRcv.server.URL, Secret: []byte(webhookSecret)},
		"production": {URL: liveRcv.server.URL, Secret: []byte(liveSecret)},
	})
	if _, err := codes.Import(t.Context(), s.db.Pool, s.cipher, "10000000000001", "t",
		strings.NewReader("ENV-"+tn.namespace+"\n"), nil); err != nil {
		t.Fatal(err)
	}
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	s.topUp(t, tn, "production", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	for env, product := range map[string]string{"sandbox": "99000000000001", "production": "10000000000001"} {
		r := s.call(t, env, "POST", "/v2/orders", tn.keys[env],
			order("same-code", line{"productCode": product, "quantity": 1}))
		if r.status != 202 {
			t.Fatalf("%s: %d %s", env, r.status, r.raw)
		}
	}
	poll.UntilTrue(t, 30*time.Second, "one event at each endpoint", func() bool {
		return len(sandboxRcv.deliveries()) == 1 && len(liveRcv.deliveries()) == 1
	})
	for env, c := range map[string]struct {
		rcv    *receiver
		secret string
	}{"sandbox": {sandboxRcv, webhookSecret}, "production": {liveRcv, liveSecret}} {
		d := c.rcv.deliveries()[0]
		if !verify(c.secret, d) {
			t.Errorf("%s event not signed with the %s endpoint's secret", env, env)
		}
		var ev struct {
			Environment string
			Data        struct{ ExternalOrderCode string }
		}
		if err := json.Unmarshal(d.body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Environment != env || ev.Data.ExternalOrderCode != "same-code" {
			t.Errorf("%s endpoint got %s", env, d.body)
		}
	}
}

// TestWebhookSecretsFollowACodesKeyChange: a webhook secret sealed under a codes key the data
// plane no longer holds cannot sign an event, so its delivery fails and is retried, never sent.
// Once the operator, given the new key, reconciles the partner, the secret is sealed again
// under that key and the waiting event goes out signed with the partner's secret; the stored
// secret no longer opens with the old key and holds no plaintext.
func TestWebhookSecretsFollowACodesKeyChange(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	rcv := newReceiver(t, 0)
	oldKey := make([]byte, codes.KeySize)
	if _, err := rand.Read(oldKey); err != nil {
		t.Fatal(err)
	}
	old, err := codes.NewCipher(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	hook := &provisioning.Webhook{URL: rcv.server.URL, Secret: []byte(webhookSecret)}
	both := provisioning.Webhooks{"sandbox": hook, "production": hook}
	// Sealed by an operator that still ran with the previous codes key.
	oldProv := testfixture.Provisioner(t, s.db, old)
	s.setWebhooksWith(t, oldProv, tn, both)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "10.00"})
	r := s.call(t, "sandbox", "POST", "/v2/orders", tn.keys["sandbox"],
		order("wh-rekey", line{"productCode": "99000000000001", "quantity": 1}))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	poll.Until(t, 30*time.Second, "two attempts failed on the unopenable secret", func() (bool, string) {
		if d := rcv.deliveries(); len(d) != 0 {
			t.Fatalf("an event went out while its secret did not open (%d deliveries)", len(d))
		}
		var attempts int
		var errs string
		err := s.db.Pool.QueryRow(t.Context(), `
			SELECT j.attempt, coalesce(array_to_string(j.errors::text[], ' '), '')
			FROM river_job j JOIN webhook_events e ON e.id = j.args->>'eventId'
			WHERE j.kind = 'codeport.deliver_webhook' AND e.payload->'data'->>'externalOrderCode' = 'wh-rekey'`).
			Scan(&attempts, &errs)
		return err == nil && attempts >= 2 && strings.Count(errs, codes.ErrTampered.Error()) >= 2,
			fmt.Sprintf("attempt %d, errors %s (%v)", attempts, errs, err)
	})

	// The operator, restarted with the current key, reconciles the partner.
	s.setWebhooks(t, tn, both)
	poll.UntilTrue(t, 30*time.Second, "the waiting event delivered", func() bool { return len(rcv.deliveries()) == 1 })
	if d := rcv.deliveries()[0]; !verify(webhookSecret, d) {
		t.Fatalf("the event is not signed with the partner's secret: %+v", d)
	}
	rows, err := s.db.Pool.Query(t.Context(), `SELECT w.partner_id, w.environment, w.sealed_secret
		FROM webhook_endpoints w JOIN partners p ON p.id = w.partner_id WHERE p.namespace = $1 AND p.name = $2`,
		tn.namespace, tn.name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	endpoints := 0
	for rows.Next() {
		var partnerID uuid.UUID
		var environment string
		var sealed []byte
		if err := rows.Scan(&partnerID, &environment, &sealed); err != nil {
			t.Fatal(err)
		}
		endpoints++
		owner := store.WebhookSecretOwner(partnerID, environment)
		if plain, err := s.cipher.OpenSecret(s.cipher.Key(), sealed, owner); err != nil || string(plain) != webhookSecret {
			t.Errorf("%s: the stored secret does not open with the current key to the partner's: %q %v",
				environment, plain, err)
		}
		if _, err := old.OpenSecret(old.Key(), sealed, owner); !errors.Is(err, codes.ErrTampered) {
			t.Errorf("%s: the stored secret still opens with the old key: %v", environment, err)
		}
		if bytes.Contains(sealed, []byte(webhookSecret)) {
			t.Errorf("%s: the stored secret holds the plaintext", environment)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if endpoints != 2 {
		t.Fatalf("%d endpoints stored, want one per environment", endpoints)
	}
}

// TestWebhookRedirectIsAFailedAttempt: a receiver answering 3xx has not taken the event. The
// redirect is not followed (following would turn the POST into a GET elsewhere whose 2xx marks
// the event delivered); the attempt fails and is retried until the receiver answers 2xx itself.
func TestWebhookRedirectIsAFailedAttempt(t *testing.T) {
	s := newStack(t, stackOptions{})
	tn := s.onboard(t, "acme", nil)
	var elsewhereHits atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhereHits.Add(1) }))
	t.Cleanup(elsewhere.Close)
	const redirects = 2
	var mu sync.Mutex
	var answered []int
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		mu.Lock()
		defer mu.Unlock()
		status := http.StatusOK
		if len(answered) < redirects {
			status = []int{http.StatusFound, http.StatusTemporaryRedirect}[len(answered)]
			w.Header().Set("Location", elsewhere.URL)
		}
		answered = append(answered, status)
		w.WriteHeader(status)
	}))
	t.Cleanup(rcv.Close)
	s.setWebhook(t, tn, rcv.URL)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "10.00"})
	r := s.call(t, "sandbox", "POST", "/v2/orders", tn.keys["sandbox"],
		order("wh-redirect", line{"productCode": "99000000000001", "quantity": 1}))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	// The event's job, as the queue recorded it: finished when the event counts as delivered.
	var state, errs string
	poll.Until(t, 30*time.Second, "the event delivered", func() (bool, string) {
		err := s.db.Pool.QueryRow(t.Context(), `
			SELECT j.state, coalesce(array_to_string(j.errors::text[], ' '), '')
			FROM river_job j JOIN webhook_events e ON e.id = j.args->>'eventId'
			WHERE j.kind = 'codeport.deliver_webhook' AND e.payload->'data'->>'externalOrderCode' = 'wh-redirect'`).
			Scan(&state, &errs)
		return err == nil && state == "completed", fmt.Sprintf("job %s (%v)", state, err)
	})
	mu.Lock()
	defer mu.Unlock()
	want := []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusOK}
	if fmt.Sprint(answered) != fmt.Sprint(want) {
		t.Fatalf("receiver answered %v before the event counted as delivered, want %v: "+
			"each redirect a failed attempt (redirect target called %d times)", answered, want, elsewhereHits.Load())
	}
	if n := elsewhereHits.Load(); n != 0 {
		t.Fatalf("the redirect target was called %d times", n)
	}
	// Each redirect is recorded as the attempt's failure, naming the status.
	for _, status := range []string{"answered 302", "answered 307"} {
		if !strings.Contains(errs, status) {
			t.Errorf("the attempts' recorded errors do not say %q: %s", status, errs)
		}
	}
}

// TestWebhooksGoToPublicAddressesOnly: as deployed, a webhook URL that reaches the service's own
// network (here loopback) is never called; the attempt fails as refused and is retried, so a
// partner that fixes its URL still gets the event.
func TestWebhooksGoToPublicAddressesOnly(t *testing.T) {
	s := newStack(t, stackOptions{publicWebhooksOnly: true})
	tn := s.onboard(t, "acme", nil)
	rcv := newReceiver(t, 0)
	s.setWebhook(t, tn, rcv.server.URL)
	s.topUp(t, tn, "sandbox", "0", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "10.00"})
	r := s.call(t, "sandbox", "POST", "/v2/orders", tn.keys["sandbox"],
		order("wh-private", line{"productCode": "99000000000001", "quantity": 1}))
	if r.status != 202 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	var attempts int
	var errs string
	poll.UntilTrue(t, 30*time.Second, "two refused attempts", func() bool {
		err := s.db.Pool.QueryRow(t.Context(), `
			SELECT j.attempt, coalesce(array_to_string(j.errors::text[], ' '), '')
			FROM river_job j JOIN webhook_events e ON e.id = j.args->>'eventId'
			WHERE j.kind = 'codeport.deliver_webhook' AND e.payload->'data'->>'externalOrderCode' = 'wh-private'`).
			Scan(&attempts, &errs)
		return err == nil && attempts >= 2 && strings.Count(errs, notify.ErrNonPublicAddress.Error()) >= 2
	})
	if d := rcv.deliveries(); len(d) != 0 {
		t.Fatalf("the loopback receiver was called: %v", d)
	}
}

// mailbox is a real SMTP server that keeps what it receives.
type mailbox struct {
	mu   sync.Mutex
	mail []string
}

type mailSession struct {
	box *mailbox
	to  string
}

func (m *mailbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &mailSession{box: m}, nil }
func (s *mailSession) Reset()                                  {}
func (s *mailSession) Logout() error                           { return nil }
func (s *mailSession) Mail(string, *smtp.MailOptions) error    { return nil }
func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = to
	return nil
}

func (s *mailSession) Data(r io.Reader) error {
	body, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.box.mu.Lock()
	s.box.mail = append(s.box.mail, "To: "+s.to+"\n"+string(body))
	s.box.mu.Unlock()
	return nil
}

func (m *mailbox) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mail)
}

func startMailbox(t *testing.T) (*mailbox, string) {
	t.Helper()
	box := &mailbox{}
	srv := smtp.NewServer(box)
	srv.Domain = "localhost"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return box, "smtp://" + ln.Addr().String()
}

func TestLowBalanceEmailOncePerCrossing(t *testing.T) {
	box, url := startMailbox(t)
	smtpCfg, err := notify.ParseSMTP(url, "billing@codeport.example")
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackOptions{smtp: smtpCfg})
	tn := s.onboard(t, "acme", nil)
	rcv := newReceiver(t, 0)
	s.setWebhook(t, tn, rcv.server.URL, notify.EventBalanceLow)
	key := tn.keys["production"]
	// Stock for every order, so that no refund lifts the balance back meanwhile.
	var stock strings.Builder
	for i := range 10 {
		fmt.Fprintf(&stock, "MAIL-%s-%d\n", tn.namespace, i)
	}
	if _, err := codes.Import(t.Context(), s.db.Pool, s.cipher, "10000000000001", "t",
		strings.NewReader(stock.String()), nil); err != nil {
		t.Fatal(err)
	}
	// 100.00 EUR with a threshold of 50.005, finer than the currency: balances are judged against
	// 50.01, while the notices show the threshold as configured. Each order is 20.00.
	s.topUp(t, tn, "production", "50.005", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"})
	place := func(code string) {
		t.Helper()
		r := s.call(t, "production", "POST", "/v2/orders", key,
			order(code, line{"productCode": "10000000000001", "quantity": 1}))
		if r.status != 202 {
			t.Fatalf("%s: %d %s", code, r.status, r.raw)
		}
	}
	place("o1") // 80
	place("o2") // 60
	place("o3") // 40: crosses
	poll.UntilTrue(t, 10*time.Second, "first e-mail", func() bool { return box.count() == 1 })
	place("o4") // 20: still low, no new mail
	time.Sleep(500 * time.Millisecond)
	if n := box.count(); n != 1 {
		t.Fatalf("%d e-mails while the balance stayed low", n)
	}
	// A top-up re-arms the alert; the next crossing mails again.
	s.topUp(t, tn, "production", "50.005", v1alpha1.TopUp{ID: "t1", Currency: "EUR", Amount: "100.00"},
		v1alpha1.TopUp{ID: "t2", Currency: "EUR", Amount: "50.02"})
	place("o5") // 70.02 -> 50.02: not below 50.01
	if n := box.count(); n != 1 {
		t.Fatalf("%d e-mails after a balance of 50.02, above the threshold of 50.005", n)
	}
	place("o6") // 30.02: crosses
	poll.UntilTrue(t, 10*time.Second, "second e-mail", func() bool { return box.count() == 2 })
	box.mu.Lock()
	first := box.mail[0]
	box.mu.Unlock()
	for _, want := range []string{
		"To: acme@example.com", "Subject: Low balance", tn.namespace + "/acme", "production", "EUR", "40.00",
		"Threshold:   50.005\r\n",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("e-mail lacks %q:\n%s", want, first)
		}
	}
	poll.UntilTrue(t, 10*time.Second, "two balance.low webhooks", func() bool { return len(rcv.deliveries()) == 2 })
	var ev struct {
		Type, Environment, CreatedAt string
		Data                         map[string]any
	}
	_ = json.Unmarshal(rcv.deliveries()[0].body, &ev)
	if ev.Type != "balance.low" || ev.Data["currency"] != "EUR" || fmt.Sprint(ev.Data["balance"]) != "40" ||
		fmt.Sprint(ev.Data["threshold"]) != "50.005" || ev.Environment != "production" ||
		!etaFormat.MatchString(ev.CreatedAt) {
		t.Fatalf("balance.low event: %+v", ev)
	}
}
