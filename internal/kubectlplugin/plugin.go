package kubectlplugin

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
)

// cluster is what a subcommand talks to: the namespace the user chose (or the kubeconfig's),
// a client for the custom resources and core objects, and a clientset for the subresources
// (pods/log, pods/exec) controller-runtime's client does not serve.
type cluster struct {
	namespace string
	config    *rest.Config
	client    client.Client
	core      kubernetes.Interface
}

// kubeFlags are kubectl's connection flags (--kubeconfig, --context, --namespace, --server, …),
// bound the way kubectl binds them so that `kubectl codeport` takes what `kubectl` takes.
type kubeFlags struct {
	loading   *clientcmd.ClientConfigLoadingRules
	overrides *clientcmd.ConfigOverrides
}

func (k *kubeFlags) connect() (*cluster, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(k.loading, k.overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig namespace: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes clientset: %w", err)
	}
	return &cluster{namespace: ns, config: cfg, client: c, core: core}, nil
}

// NewCommand is `kubectl codeport` with its subcommands, writing to out and errOut.
func NewCommand(out, errOut io.Writer) *cobra.Command {
	flags := &kubeFlags{loading: clientcmd.NewDefaultClientConfigLoadingRules(),
		overrides: &clientcmd.ConfigOverrides{}}
	root := &cobra.Command{
		Use:   "kubectl-codeport",
		Short: "Inspect and operate codeport's partners, keys, wallets and catalogs",
		Long: `kubectl codeport works on codeport's custom resources (codeport.dev/v1alpha1) with your
kubeconfig and your rights: status per namespace, wallet top-ups, key rotations and support
bundles. It never reads a Secret.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl codeport"},
	}
	root.SetOut(out)
	root.SetErr(errOut)
	pf := root.PersistentFlags()
	pf.StringVar(&flags.loading.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file")
	clientcmd.BindOverrideFlags(flags.overrides, pf, clientcmd.RecommendedConfigOverrideFlags(""))
	root.AddCommand(newStatusCommand(flags), newTopUpCommand(flags), newRotateCommand(flags),
		newReportCommand(flags))
	return root
}
