package notify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/money"
	"github.com/codeport/codeport/internal/store"
)

// SMTP is where low-balance e-mails are sent from.
type SMTP struct {
	// URL is smtp://[user:pass@]host[:port] (STARTTLS whenever the server offers it) or
	// smtps://… (TLS from the first byte).
	URL  string
	From string
}

// ParseSMTP validates the settings.
func ParseSMTP(rawURL, from string) (*SMTP, error) {
	if rawURL == "" {
		return nil, nil // no SMTP configured is a valid state
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "" {
		return nil, fmt.Errorf("--smtp-url must look like smtp://user:pass@host:587 or smtps://host:465")
	}
	if !strings.Contains(from, "@") {
		return nil, fmt.Errorf("--smtp-from must be an e-mail address, got %q", from)
	}
	return &SMTP{URL: rawURL, From: from}, nil
}

// Send delivers one message.
func (s *SMTP) Send(ctx context.Context, to, subject, body string) error {
	u, err := url.Parse(s.URL)
	if err != nil {
		return fmt.Errorf("smtp url: %w", err)
	}
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = map[string]string{"smtp": "587", "smtps": "465"}[u.Scheme]
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	var conn net.Conn
	if u.Scheme == "smtps" {
		tlsDialer := &tls.Dialer{NetDialer: dialer, Config: &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}}
		conn, err = tlsDialer.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
	} else {
		conn, err = dialer.DialContext(ctx, "tcp", net.JoinHostPort(host, port))
	}
	if err != nil {
		return fmt.Errorf("connect to SMTP server: %w", err)
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("SMTP greeting: %w", err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok && u.Scheme == "smtp" {
		if err := c.StartTLS(&tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			return fmt.Errorf("STARTTLS: %w", err)
		}
	}
	if u.User != nil {
		password, _ := u.User.Password()
		if err := c.Auth(smtp.PlainAuth("", u.User.Username(), password, host)); err != nil {
			return fmt.Errorf("SMTP auth: %w", err)
		}
	}
	if err := c.Mail(s.From); err != nil {
		return fmt.Errorf("MAIL FROM: %w", err)
	}
	if err := c.Rcpt(to); err != nil {
		return fmt.Errorf("RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	msg := "From: " + s.From + "\r\nTo: " + to + "\r\nSubject: " + subject +
		"\r\nDate: " + time.Now().UTC().Format(time.RFC1123Z) +
		"\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		strings.ReplaceAll(body, "\n", "\r\n")
	if _, err := w.Write([]byte(msg)); err != nil {
		return fmt.Errorf("write message: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("end message: %w", err)
	}
	return c.Quit()
}

// EmailArgs is the low-balance e-mail of one crossing; amounts in minor units.
type EmailArgs struct {
	AccountID uuid.UUID `json:"accountId"`
	Currency  string    `json:"currency"`
	Balance   int64     `json:"balance"`
	// Threshold is the limit the balance crossed; ThresholdSetting the threshold as configured,
	// which the message shows (jobs enqueued without it show Threshold).
	Threshold        int64  `json:"threshold"`
	ThresholdSetting string `json:"thresholdSetting,omitempty"`
}

// Kind names the job.
func (EmailArgs) Kind() string { return "codeport.low_balance_email" }

type emailWorker struct {
	river.WorkerDefaults[EmailArgs]
	db    *store.DB
	smtp  *SMTP
	retry Retry
}

func (w *emailWorker) NextRetry(job *river.Job[EmailArgs]) time.Time {
	return time.Now().Add(w.retry.delay(job.Attempt))
}

func (w *emailWorker) Work(ctx context.Context, job *river.Job[EmailArgs]) error {
	contact, err := store.ContactOf(ctx, w.db.Pool, job.Args.AccountID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && contact.ContactEmail == "") {
		return river.JobCancel(fmt.Errorf("no contact for account %s", job.Args.AccountID))
	}
	if err != nil {
		return err
	}
	balance, _ := money.Format(job.Args.Balance, job.Args.Currency)
	threshold := job.Args.ThresholdSetting
	if threshold == "" {
		threshold, _ = money.Format(job.Args.Threshold, job.Args.Currency)
	}
	name := contact.DisplayName
	if name == "" {
		name = contact.Partner
	}
	subject := fmt.Sprintf("Low balance: %s %s wallet at %s %s", name, contact.Environment, balance, job.Args.Currency)
	body := fmt.Sprintf(`Hello %s,

the %s wallet of your account has fallen below its low-balance threshold.

Partner:     %s
Environment: %s
Currency:    %s
Balance:     %s
Threshold:   %s

Orders fail with "Insufficient funds" once the balance cannot cover them. Please top up your
wallet through your account manager. You can check balances at any time with GET /wallet.

This message is sent once each time the balance crosses below the threshold.
`, name, job.Args.Currency, contact.Partner, contact.Environment, job.Args.Currency, balance, threshold)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return w.smtp.Send(ctx, contact.ContactEmail, subject, body)
}

// Delivery configures the notification workers.
type Delivery struct {
	// SMTP, when set, sends low-balance e-mails.
	SMTP *SMTP
	// Retry schedules the retries of webhooks and e-mails.
	Retry Retry
	// AllowPrivateNetworks lets webhooks go to loopback, link-local and private addresses. Off in
	// production: a partner's URL must not reach the service's own network.
	AllowPrivateNetworks bool
	// Attempted, when set, hears of every webhook delivery attempt that reached the point of
	// posting: the partner (namespace/name), its environment and the outcome (Outcome*). The
	// serving process counts them in its metrics.
	Attempted func(partner, environment, outcome string)
}

// webhookTimeout bounds one delivery attempt, connection included.
const webhookTimeout = 10 * time.Second

// Workers registers the notification workers on a River worker set; secrets (the codes key)
// opens the webhook signing secrets.
func Workers(db *store.DB, secrets *codes.Cipher, d Delivery) func(*river.Workers) error {
	return func(workers *river.Workers) error {
		w := &deliverWorker{
			db:        db,
			secrets:   secrets,
			client:    newWebhookClient(webhookTimeout, d.AllowPrivateNetworks),
			retry:     d.Retry,
			timeout:   webhookTimeout,
			attempted: d.Attempted,
		}
		if err := river.AddWorkerSafely(workers, w); err != nil {
			return fmt.Errorf("register webhook worker: %w", err)
		}
		if err := river.AddWorkerSafely(workers, &pruneWorker{db: db}); err != nil {
			return fmt.Errorf("register webhook event pruning: %w", err)
		}
		if d.SMTP != nil {
			if err := river.AddWorkerSafely(workers, &emailWorker{db: db, smtp: d.SMTP, retry: d.Retry}); err != nil {
				return fmt.Errorf("register e-mail worker: %w", err)
			}
		}
		return nil
	}
}
