package kubectlplugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
)

// Rotation is the outcome of a rotation: the ApiKey as the operator left it.
type Rotation struct {
	Key *v1alpha1.ApiKey
	// Rotation is the spec.rotation asked for.
	Rotation int64
}

// RotateAPIKey asks for a new key the way docs/operator.md says: it raises spec.rotation by one
// and, when grace is not nil, sets spec.previousKeyGracePeriod, in one write that fails if the
// ApiKey changed since it was read (so two rotations at once are two, not one).
func RotateAPIKey(
	ctx context.Context, c client.Client, namespace, name string, grace *time.Duration,
) (*Rotation, error) {
	var k v1alpha1.ApiKey
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &k); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, refused("apikey %s/%s not found", namespace, name)
		}
		return nil, fmt.Errorf("read apikey %s/%s: %w", namespace, name, err)
	}
	before := k.DeepCopy()
	k.Spec.Rotation = max(k.Spec.Rotation, k.Status.Rotation) + 1
	if grace != nil {
		k.Spec.PreviousKeyGracePeriod = &metav1.Duration{Duration: *grace}
	}
	if err := c.Patch(ctx, &k, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("rotate apikey %s/%s: %w", namespace, name, err)
	}
	return &Rotation{Key: &k, Rotation: k.Spec.Rotation}, nil
}

// WaitRotated waits until the operator issued the key of r's rotation and the ApiKey is Ready.
func WaitRotated(ctx context.Context, c client.Client, r *Rotation, timeout time.Duration) error {
	k := r.Key
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(k), k); err != nil {
			return false, fmt.Errorf("read apikey %s/%s: %w", k.Namespace, k.Name, err)
		}
		ready, reason, message := readiness(k.Status.Conditions, k.Generation)
		last = fmt.Sprintf("Ready %s %s: %s", ready, reason, message)
		return ready == string(metav1.ConditionTrue) && k.Status.ObservedGeneration >= k.Generation &&
			k.Status.Rotation >= r.Rotation, nil
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("apikey %s/%s: rotation %d asked for, not issued after %s (%s)", k.Namespace, k.Name,
			r.Rotation, timeout, last)
	}
	return err
}

func newRotateCommand(flags *kubeFlags) *cobra.Command {
	var grace, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "rotate APIKEY",
		Short: "Rotate an ApiKey (raise spec.rotation) and print the new key's prefix once it is Ready",
		Long: `Rotate an ApiKey: raise its spec.rotation by one, so that the operator issues a new key into
its Secret and revokes the previous one, at once or, with --grace, after that long
(spec.previousKeyGracePeriod, 0s to 168h; without --grace the ApiKey's own setting holds). It then
waits for the new key and prints its prefix; the key itself is only ever in the Secret.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := flags.connect()
			if err != nil {
				return err
			}
			var g *time.Duration
			if cmd.Flags().Changed("grace") {
				g = &grace
			}
			r, err := RotateAPIKey(cmd.Context(), c.client, c.namespace, args[0], g)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "apikey/%s rotation %d asked for\n", r.Key.Name, r.Rotation)
			if err := WaitRotated(cmd.Context(), c.client, r, timeout); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), rotatedLine(r.Key))
			return nil
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0,
		"keep the previous key valid this long (spec.previousKeyGracePeriod; default: the ApiKey's own)")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the new key")
	return cmd
}

// rotatedLine says which key is active now and what became of the previous one.
func rotatedLine(k *v1alpha1.ApiKey) string {
	line := fmt.Sprintf("apikey/%s rotated: new key %s (rotation %d, issued %s); ", k.Name, k.Status.KeyPrefix,
		k.Status.Rotation, when(k.Status.IssuedAt))
	if k.Status.PreviousKeyPrefix != "" {
		return line + fmt.Sprintf("previous key %s valid until %s", k.Status.PreviousKeyPrefix,
			when(k.Status.PreviousKeyExpiresAt))
	}
	return line + "previous key revoked"
}
