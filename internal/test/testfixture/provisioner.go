package testfixture

import (
	"fmt"
	"testing"

	"github.com/codeport/codeport/internal/codes"
	"github.com/codeport/codeport/internal/notify"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/store"
)

// CodesKey is the codes key of Cipher: fixed, so that what one fixture seals another opens.
const CodesKey = "0123456789abcdef0123456789abcdef"

// NewProvisioner is a provisioner on db as the operator runs one, sealing webhook secrets with
// cipher (nil: partners with webhooks are refused). It sends no e-mail, as an operator without
// an SMTP server does: nothing a test, benchmark or soak provisions has a mailbox to reach.
func NewProvisioner(db *store.DB, cipher *codes.Cipher) (*provisioning.Provisioner, error) {
	prov, err := provisioning.New(db, cipher, notify.NewNotifier(false, notify.DefaultRetry()))
	if err != nil {
		return nil, fmt.Errorf("provisioner: %w", err)
	}
	return prov, nil
}

// Provisioner is NewProvisioner for a test, which fails when there is none.
func Provisioner(t testing.TB, db *store.DB, cipher *codes.Cipher) *provisioning.Provisioner {
	t.Helper()
	prov, err := NewProvisioner(db, cipher)
	if err != nil {
		t.Fatal(err)
	}
	return prov
}

// Cipher is a codes cipher on CodesKey.
func Cipher(t testing.TB) *codes.Cipher {
	t.Helper()
	cipher, err := codes.NewCipher([]byte(CodesKey))
	if err != nil {
		t.Fatal(err)
	}
	return cipher
}
