package kubectlplugin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/money"
)

// TopUpRequest is one credit `kubectl codeport topup` asks for.
type TopUpRequest struct {
	Namespace, Wallet string
	// ID is the top-up's id in the wallet's ledger; NewTopUpID gives a fresh one.
	ID, Currency, Amount, Note string
	// MaxTopUp is the operator's --max-top-up, in major units of Currency.
	MaxTopUp int64
}

// ErrRefused marks a top-up or rotation the plugin did not create because it would be wrong:
// nothing was written.
var ErrRefused = errors.New("refused")

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// NewTopUpID is a fresh top-up id: the UTC day and time and 48 random bits, so that ids sort
// by when they were made and two engineers topping up at once never share one.
func NewTopUpID(now time.Time) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("top-up id: %w", err)
	}
	return "topup-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:]), nil
}

// CreateTopUp checks req against the rule the operator applies to every top-up
// (money.TopUpAmount) and against the wallet's top-ups, then creates its WalletTopUp. It refuses
// an amount the operator would refuse, a wallet that does not exist, and an id the wallet has
// already: applied, or pending in another WalletTopUp, or listed in the Wallet's spec.topUps
// (ids are shared with it).
func CreateTopUp(ctx context.Context, c client.Client, req TopUpRequest) (*v1alpha1.WalletTopUp, error) {
	if _, err := money.TopUpAmount(req.Amount, req.Currency, req.MaxTopUp); err != nil {
		return nil, refused("the operator would not credit it: %v", err)
	}
	if req.ID == "" || len(req.ID) > 128 {
		return nil, refused("a top-up id is 1 to 128 characters, got %d", len(req.ID))
	}
	var w v1alpha1.Wallet
	if err := c.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Wallet}, &w); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, refused("wallet %s/%s not found", req.Namespace, req.Wallet)
		}
		return nil, fmt.Errorf("read wallet %s/%s: %w", req.Namespace, req.Wallet, err)
	}
	for _, t := range w.Spec.TopUps {
		if t.ID == req.ID {
			return nil, refused("top-up id %q is already in wallet %s's spec.topUps (%s %s)", req.ID, w.Name,
				t.Amount, t.Currency)
		}
	}
	var existing v1alpha1.WalletTopUpList
	if err := c.List(ctx, &existing, client.InNamespace(req.Namespace)); err != nil {
		return nil, fmt.Errorf("list wallettopups of %s: %w", req.Namespace, err)
	}
	for _, u := range existing.Items {
		if u.Spec.WalletRef.Name != req.Wallet || u.Spec.ID != req.ID {
			continue
		}
		state := "pending, not applied yet"
		if u.Status.Applied {
			state = "applied"
		}
		return nil, refused("top-up id %q of wallet %s is already taken by WalletTopUp %s (%s %s, %s)",
			req.ID, req.Wallet, u.Name, u.Spec.Amount, u.Spec.Currency, state)
	}
	u := &v1alpha1.WalletTopUp{
		ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: TopUpObjectName(req.Wallet, req.ID)},
		Spec: v1alpha1.WalletTopUpSpec{WalletRef: v1alpha1.LocalObjectReference{Name: req.Wallet}, ID: req.ID,
			Currency: v1alpha1.CurrencyCode(req.Currency), Amount: req.Amount, Note: req.Note},
	}
	if err := c.Create(ctx, u); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Another engineer's top-up of the same id got there first: the name is the guard.
			return nil, refused("WalletTopUp %s/%s already exists", u.Namespace, u.Name)
		}
		return nil, fmt.Errorf("create WalletTopUp %s/%s: %w", u.Namespace, u.Name, err)
	}
	return u, nil
}

var notInName = regexp.MustCompile(`[^a-z0-9-]+`)

// TopUpObjectName is the WalletTopUp's name, the wallet's and the id's, as the documentation's
// examples name them: the same id gives the same name, so that the API server refuses a second
// creation. An id that is not a valid name as it is, or too long, is shortened and given a
// digest of itself, which keeps distinct ids apart.
func TopUpObjectName(wallet, id string) string {
	name := wallet + "-" + id
	clean := strings.Trim(notInName.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if clean == name && len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(id))
	suffix := "-" + hex.EncodeToString(sum[:5])
	if len(clean) > 253-len(suffix) {
		clean = strings.Trim(clean[:253-len(suffix)], "-")
	}
	return clean + suffix
}

// terminalTopUp are the reasons a WalletTopUp is never applied: the operator does not retry.
var terminalTopUp = map[string]bool{v1alpha1.ReasonInvalidTopUp: true, v1alpha1.ReasonTopUpConflict: true,
	v1alpha1.ReasonBalanceOverflow: true}

// WaitTopUp waits until the operator applied u, or refused it for good, or timeout passed.
func WaitTopUp(ctx context.Context, c client.Client, u *v1alpha1.WalletTopUp, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return false, fmt.Errorf("read WalletTopUp %s/%s: %w", u.Namespace, u.Name, err)
		}
		if u.Status.Applied {
			return true, nil
		}
		cond := meta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionReady)
		if cond == nil {
			last = "not reconciled yet"
			return false, nil
		}
		last = cond.Reason + ": " + cond.Message
		if terminalTopUp[cond.Reason] {
			return false, fmt.Errorf("the operator refused WalletTopUp %s/%s (%s); nothing was credited: "+
				"delete it and create a correct one", u.Namespace, u.Name, last)
		}
		return false, nil
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("WalletTopUp %s/%s is created but not applied after %s (%s): do not create it again; "+
			"follow it with `kubectl get cptopup %s -n %s`", u.Namespace, u.Name, timeout, last, u.Name, u.Namespace)
	}
	return err
}

func newTopUpCommand(flags *kubeFlags) *cobra.Command {
	req := TopUpRequest{}
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "topup WALLET --currency EUR --amount 100.00",
		Short: "Credit a wallet: create a WalletTopUp with a fresh id and wait until it is applied",
		Long: `Credit a wallet by creating a WalletTopUp. The amount must pass the rule the operator applies
to every top-up (an active currency, a positive amount with no more decimals than the currency
has, at most --max-top-up): a top-up that breaks it is refused here, before anything is created.
The id is fresh unless --id gives one (e.g. the bank transfer's reference); an id the wallet
already has, applied or pending, is refused. It then waits --wait for the operator to apply it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := flags.connect()
			if err != nil {
				return err
			}
			req.Namespace, req.Wallet = c.namespace, args[0]
			if req.ID == "" {
				if req.ID, err = NewTopUpID(time.Now()); err != nil {
					return err
				}
			}
			u, err := CreateTopUp(cmd.Context(), c.client, req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wallettopup/%s created: %s %s to wallet %s, id %s\n", u.Name,
				u.Spec.Currency, u.Spec.Amount, req.Wallet, req.ID)
			if timeout <= 0 {
				return nil
			}
			if err := WaitTopUp(cmd.Context(), c.client, u, timeout); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wallettopup/%s applied at %s\n", u.Name, when(u.Status.AppliedAt))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Currency, "currency", "", "ISO 4217 code of the balance credited (EUR)")
	f.StringVar(&req.Amount, "amount", "", "amount in major units (100.00)")
	f.StringVar(&req.Note, "note", "", "free text kept on the ledger entry")
	f.StringVar(&req.ID, "id", "", "the top-up's id, e.g. the bank transfer's reference (default: a fresh one)")
	f.Int64Var(&req.MaxTopUp, "max-top-up", money.DefaultMaxTopUp,
		"the operator's --max-top-up (the chart's operator.maxTopUp), in major units")
	f.DurationVar(&timeout, "wait", time.Minute, "how long to wait for the operator to apply it (0: do not wait)")
	_ = cmd.MarkFlagRequired("currency")
	_ = cmd.MarkFlagRequired("amount")
	return cmd
}
