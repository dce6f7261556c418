package kubectlplugin

import (
	"regexp"

	corev1 "k8s.io/api/core/v1"
)

// redaction is one kind of secret a support bundle must not carry, and how it is blanked.
type redaction struct {
	what string
	re   *regexp.Regexp
	with string
}

// redactions apply to every byte of a bundle, in this order: a bearer token is blanked before
// the header that carries it, so that neither the scheme nor the token survives alone, and a
// field's whole value before the shapes that would blank only a part of it.
var redactions = []redaction{
	{"bearer token", regexp.MustCompile(`(?i)\b(bearer\s+)[^\s"',;\]}]+`), "${1}[REDACTED]"},
	// A credential written as a field, header, flag or DSN keyword: x-api-key: …,
	// Authorization: …, password=…, "token": "…", --codes-key=….
	{"credential field", regexp.MustCompile(`(?i)((?:x-api-key|authorization|api[_-]?key|token|secret|password|` +
		`passwd|codes[_-]key)["']?\s*[:=]\s*["']?)[^\s"',;\]}]+`), "${1}[REDACTED]"},
	// internal/auth's format: cp_test_ or cp_live_, 32 base62 characters and a 6-character
	// checksum. The prefix and the 4 characters status.keyPrefix shows are kept, so that a
	// reader can still tell which key a line was about; a test checks this against
	// auth.GenerateKey.
	{"API key", regexp.MustCompile(`\b(cp_(?:test|live)_[0-9A-Za-z]{4})[0-9A-Za-z]+`), "${1}[REDACTED]"},
	{"URL password", regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:/?#@\s"']*):[^@/\s"']*@`), "${1}:[REDACTED]@"},
	{"webhook secret", regexp.MustCompile(`\bwhsec_[A-Za-z0-9+/=_-]+`), "whsec_[REDACTED]"},
	{"sandbox code", regexp.MustCompile(`\bSANDBOX(-[A-Z0-9]{4}){4}\b`), "SANDBOX-[REDACTED]"},
	// The partner API's codes are {"code": "…"}; any JSON field of that name is blanked, wherever
	// a log line or a message carries one.
	{"redemption code", regexp.MustCompile(`("codes?"\s*:\s*")[^"]*"`), `${1}[REDACTED]"`},
}

// Redact blanks every key, token, password, webhook secret and redemption code in b that
// redactions recognise.
func Redact(b []byte) []byte {
	for _, r := range redactions {
		b = r.re.ReplaceAll(b, []byte(r.with))
	}
	return b
}

// sensitiveEnv are the names of environment variables whose literal values a bundle leaves out
// whatever they hold: codeport's own (CODEPORT_DATABASE_URL, CODEPORT_CODES_KEY,
// CODEPORT_REDIS_URL, CODEPORT_SMTP_URL) and the usual names of credentials.
var sensitiveEnv = regexp.MustCompile(`(?i)(KEY|SECRET|TOKEN|PASSWORD|PASSWD|PASS|CREDENTIAL|URL|DSN|AUTH)`)

// redactPod blanks the literal values of a Pod's sensitive environment variables. Values taken
// from Secrets are references already and stay as they are.
func redactPod(p *corev1.Pod) {
	for i := range p.Spec.InitContainers {
		blankEnv(p.Spec.InitContainers[i].Env)
	}
	for i := range p.Spec.Containers {
		blankEnv(p.Spec.Containers[i].Env)
	}
	for i := range p.Spec.EphemeralContainers {
		blankEnv(p.Spec.EphemeralContainers[i].Env)
	}
}

func blankEnv(env []corev1.EnvVar) {
	for i := range env {
		if env[i].Value != "" && sensitiveEnv.MatchString(env[i].Name) {
			env[i].Value = "[REDACTED]"
		}
	}
}
