package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/codeport/codeport/api/v1alpha1"
)

// Status is what `kubectl codeport status` shows, per namespace; -o json and -o yaml print it
// as it is, so its field names are part of the command's output.
type Status struct {
	Namespaces []NamespaceStatus `json:"namespaces"`
}

// NamespaceStatus is one namespace's screen.
type NamespaceStatus struct {
	Namespace string         `json:"namespace"`
	Partners  []PartnerLine  `json:"partners"`
	APIKeys   []APIKeyLine   `json:"apiKeys"`
	Wallets   []WalletLine   `json:"wallets"`
	Catalogs  []CatalogLine  `json:"catalogs"`
	NotReady  []NotReadyLine `json:"notReady"`
}

// PartnerLine is a Partner.
type PartnerLine struct {
	Name        string `json:"name"`
	DisplayName string `json:"displayName"`
	Catalog     string `json:"catalog,omitempty"`
	Suspended   bool   `json:"suspended"`
	Ready       string `json:"ready"`
}

// APIKeyLine is an ApiKey: its key by prefix, when it was issued and how its rotation stands.
type APIKeyLine struct {
	Name        string       `json:"name"`
	Partner     string       `json:"partner"`
	Environment string       `json:"environment"`
	Type        string       `json:"type"`
	Prefix      string       `json:"prefix,omitempty"`
	IssuedAt    *metav1.Time `json:"issuedAt,omitempty"`
	Rotation    int64        `json:"rotation"`
	// RotationPending is true while spec.rotation is ahead of the key issued.
	RotationPending bool `json:"rotationPending"`
	// PreviousPrefix and PreviousExpiresAt name the key a rotation replaced while it is still valid.
	PreviousPrefix    string       `json:"previousPrefix,omitempty"`
	PreviousExpiresAt *metav1.Time `json:"previousExpiresAt,omitempty"`
	Ready             string       `json:"ready"`
}

// WalletLine is a Wallet with its balances from status.
type WalletLine struct {
	Name          string            `json:"name"`
	Partner       string            `json:"partner"`
	Environment   string            `json:"environment"`
	Balances      map[string]string `json:"balances"`
	Low           bool              `json:"low"`
	AppliedTopUps int32             `json:"appliedTopUps"`
	Ready         string            `json:"ready"`
}

// CatalogLine is a Catalog with its production stock from status.stock.
type CatalogLine struct {
	Name     string `json:"name"`
	Products int32  `json:"products"`
	Shards   int32  `json:"shards"`
	// Counted is false until the operator has counted the catalog's stock.
	Counted      bool                    `json:"counted"`
	LowThreshold int32                   `json:"lowThreshold"`
	Low          int32                   `json:"low"`
	OutOfStock   int32                   `json:"outOfStock"`
	Lowest       []v1alpha1.ProductStock `json:"lowest,omitempty"`
	Ready        string                  `json:"ready"`
}

// NotReadyLine is a resource whose Ready condition is not True, with its reason and message.
type NotReadyLine struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func newStatusCommand(flags *kubeFlags) *cobra.Command {
	var allNamespaces bool
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Partners, keys, wallet balances, stock and everything not Ready, per namespace",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := flags.connect()
			if err != nil {
				return err
			}
			ns := c.namespace
			if allNamespaces {
				ns = ""
			}
			st, err := collectStatus(cmd.Context(), c.client, ns)
			if err != nil {
				return err
			}
			return printStatus(cmd.OutOrStdout(), st, output)
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "every namespace the user may list")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml (default: the screen)")
	return cmd
}

func checkOutput(output string) error {
	switch output {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output %q: use json or yaml, or leave it out for the screen", output)
}

// collectStatus reads codeport's resources of namespace ("" for all) into a Status.
func collectStatus(ctx context.Context, c client.Client, namespace string) (*Status, error) {
	res, err := listResources(ctx, c, namespace)
	if err != nil {
		return nil, err
	}
	byNS := map[string]*NamespaceStatus{}
	at := func(ns string) *NamespaceStatus {
		if byNS[ns] == nil {
			byNS[ns] = &NamespaceStatus{Namespace: ns, Partners: []PartnerLine{}, APIKeys: []APIKeyLine{},
				Wallets: []WalletLine{}, Catalogs: []CatalogLine{}, NotReady: []NotReadyLine{}}
		}
		return byNS[ns]
	}
	if namespace != "" {
		at(namespace)
	}
	notReady := func(ns, kind string, obj metav1.Object, conditions []metav1.Condition) string {
		ready, reason, message := readiness(conditions, obj.GetGeneration())
		if ready != "True" {
			at(ns).NotReady = append(at(ns).NotReady, NotReadyLine{Kind: kind, Name: obj.GetName(),
				Reason: reason, Message: message})
		}
		return ready
	}
	for i := range res.partners.Items {
		p := &res.partners.Items[i]
		line := PartnerLine{Name: p.Name, DisplayName: p.Spec.DisplayName, Suspended: p.Spec.Suspended,
			Ready: notReady(p.Namespace, "Partner", p, p.Status.Conditions)}
		if p.Spec.CatalogRef != nil {
			line.Catalog = p.Spec.CatalogRef.Name
		}
		at(p.Namespace).Partners = append(at(p.Namespace).Partners, line)
	}
	for i := range res.apiKeys.Items {
		k := &res.apiKeys.Items[i]
		at(k.Namespace).APIKeys = append(at(k.Namespace).APIKeys, APIKeyLine{Name: k.Name,
			Partner: k.Spec.PartnerRef.Name, Environment: string(k.Spec.Environment), Type: string(k.Spec.Type),
			Prefix: k.Status.KeyPrefix, IssuedAt: k.Status.IssuedAt, Rotation: k.Status.Rotation,
			RotationPending: k.Spec.Rotation > k.Status.Rotation, PreviousPrefix: k.Status.PreviousKeyPrefix,
			PreviousExpiresAt: k.Status.PreviousKeyExpiresAt,
			Ready:             notReady(k.Namespace, "ApiKey", k, k.Status.Conditions)})
	}
	for i := range res.wallets.Items {
		w := &res.wallets.Items[i]
		balances := w.Status.Balances
		if balances == nil {
			balances = map[string]string{}
		}
		at(w.Namespace).Wallets = append(at(w.Namespace).Wallets, WalletLine{Name: w.Name,
			Partner: w.Spec.PartnerRef.Name, Environment: string(w.Spec.Environment), Balances: balances,
			Low: w.Status.LowBalance, AppliedTopUps: w.Status.AppliedTopUps,
			Ready: notReady(w.Namespace, "Wallet", w, w.Status.Conditions)})
	}
	for i := range res.catalogs.Items {
		c := &res.catalogs.Items[i]
		line := CatalogLine{Name: c.Name, Products: c.Status.ProductCount, Shards: c.Status.ShardCount,
			Ready: notReady(c.Namespace, "Catalog", c, c.Status.Conditions)}
		if s := c.Status.Stock; s != nil {
			line.Counted, line.LowThreshold, line.Low, line.OutOfStock = true, s.LowThreshold, s.Low, s.OutOfStock
			line.Lowest = s.Lowest
		}
		at(c.Namespace).Catalogs = append(at(c.Namespace).Catalogs, line)
	}
	for i := range res.topUps.Items {
		u := &res.topUps.Items[i]
		notReady(u.Namespace, "WalletTopUp", u, u.Status.Conditions)
	}
	st := &Status{Namespaces: []NamespaceStatus{}}
	for _, ns := range byNS {
		sortStatus(ns)
		st.Namespaces = append(st.Namespaces, *ns)
	}
	sort.Slice(st.Namespaces, func(i, j int) bool { return st.Namespaces[i].Namespace < st.Namespaces[j].Namespace })
	return st, nil
}

func sortStatus(ns *NamespaceStatus) {
	sort.Slice(ns.Partners, func(i, j int) bool { return ns.Partners[i].Name < ns.Partners[j].Name })
	sort.Slice(ns.APIKeys, func(i, j int) bool { return ns.APIKeys[i].Name < ns.APIKeys[j].Name })
	sort.Slice(ns.Wallets, func(i, j int) bool { return ns.Wallets[i].Name < ns.Wallets[j].Name })
	sort.Slice(ns.Catalogs, func(i, j int) bool { return ns.Catalogs[i].Name < ns.Catalogs[j].Name })
	sort.Slice(ns.NotReady, func(i, j int) bool {
		a, b := ns.NotReady[i], ns.NotReady[j]
		return a.Kind < b.Kind || a.Kind == b.Kind && a.Name < b.Name
	})
}

// readiness is the Ready condition as the screen shows it. A condition written for an older
// generation is not the resource's state: the operator has not applied the current spec yet.
func readiness(conditions []metav1.Condition, generation int64) (ready, reason, message string) {
	cond := meta.FindStatusCondition(conditions, v1alpha1.ConditionReady)
	switch {
	case cond == nil:
		return "Unknown", "NotReconciled", "the operator has not reconciled it yet"
	case cond.ObservedGeneration != 0 && cond.ObservedGeneration < generation && cond.Status == metav1.ConditionTrue:
		return "Unknown", "Reconciling", fmt.Sprintf("generation %d is not applied yet (Ready was for %d)",
			generation, cond.ObservedGeneration)
	}
	return string(cond.Status), cond.Reason, cond.Message
}

// resources are codeport's resources of a namespace, as listed once.
type resources struct {
	partners v1alpha1.PartnerList
	catalogs v1alpha1.CatalogList
	shards   v1alpha1.CatalogShardList
	apiKeys  v1alpha1.ApiKeyList
	wallets  v1alpha1.WalletList
	topUps   v1alpha1.WalletTopUpList
}

func (r *resources) lists() []struct {
	kind string
	list client.ObjectList
} {
	return []struct {
		kind string
		list client.ObjectList
	}{
		{"partners", &r.partners}, {"catalogs", &r.catalogs}, {"catalogshards", &r.shards},
		{"apikeys", &r.apiKeys}, {"wallets", &r.wallets}, {"wallettopups", &r.topUps},
	}
}

func listResources(ctx context.Context, c client.Client, namespace string) (*resources, error) {
	r := &resources{}
	for _, l := range r.lists() {
		if err := c.List(ctx, l.list, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("list %s: %w", l.kind, err)
		}
	}
	return r, nil
}

func printStatus(w io.Writer, st *Status, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	case "yaml":
		b, err := yaml.Marshal(st)
		if err != nil {
			return fmt.Errorf("encode status: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	if len(st.Namespaces) == 0 {
		_, err := fmt.Fprintln(w, "No codeport resources found.")
		return err
	}
	for i, ns := range st.Namespaces {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := printNamespace(w, &ns); err != nil {
			return err
		}
	}
	return nil
}

// printNamespace writes one namespace's screen: a titled table per kind, each left out when
// the namespace has none, and NOT READY last.
func printNamespace(out io.Writer, ns *NamespaceStatus) error {
	fmt.Fprintf(out, "NAMESPACE %s\n", ns.Namespace)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	section := func(title, header string, n int, row func(i int) string) {
		if n == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s\n%s\n", title, header)
		for i := range n {
			fmt.Fprintln(w, row(i))
		}
	}
	section("PARTNERS", "NAME\tDISPLAY NAME\tCATALOG\tSUSPENDED\tREADY", len(ns.Partners), func(i int) string {
		p := ns.Partners[i]
		return strings.Join([]string{p.Name, p.DisplayName, dash(p.Catalog), strconv.FormatBool(p.Suspended), p.Ready}, "\t")
	})
	const keysHeader = "NAME\tPARTNER\tENVIRONMENT\tTYPE\tPREFIX\tISSUED\tROTATION\tPREVIOUS KEY\tPREVIOUS EXPIRES\tREADY"
	section("API KEYS", keysHeader, len(ns.APIKeys), func(i int) string {
		k := ns.APIKeys[i]
		rotation := strconv.FormatInt(k.Rotation, 10)
		if k.RotationPending {
			rotation += " (rotating)"
		}
		return strings.Join([]string{k.Name, k.Partner, k.Environment, k.Type, dash(k.Prefix), when(k.IssuedAt),
			rotation, dash(k.PreviousPrefix), when(k.PreviousExpiresAt), k.Ready}, "\t")
	})
	section("WALLETS", "NAME\tPARTNER\tENVIRONMENT\tBALANCES\tLOW\tTOP-UPS\tREADY", len(ns.Wallets), func(i int) string {
		wl := ns.Wallets[i]
		return strings.Join([]string{wl.Name, wl.Partner, wl.Environment, balances(wl.Balances),
			strconv.FormatBool(wl.Low), strconv.Itoa(int(wl.AppliedTopUps)), wl.Ready}, "\t")
	})
	section("CATALOGS", "NAME\tPRODUCTS\tSHARDS\tLOW (<THRESHOLD)\tOUT OF STOCK\tLOWEST\tREADY", len(ns.Catalogs),
		func(i int) string {
			c := ns.Catalogs[i]
			low, out, lowest := "-", "-", "-"
			if c.Counted {
				low = fmt.Sprintf("%d (<%d)", c.Low, c.LowThreshold)
				out, lowest = strconv.Itoa(int(c.OutOfStock)), stockList(c.Lowest)
			}
			return strings.Join([]string{c.Name, strconv.Itoa(int(c.Products)), strconv.Itoa(int(c.Shards)),
				low, out, lowest, c.Ready}, "\t")
		})
	if len(ns.NotReady) == 0 {
		fmt.Fprintf(w, "\nNOT READY\nnone\n")
	}
	section("NOT READY", "KIND\tNAME\tREASON\tMESSAGE", len(ns.NotReady), func(i int) string {
		n := ns.NotReady[i]
		return strings.Join([]string{n.Kind, n.Name, n.Reason, oneLine(n.Message)}, "\t")
	})
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func when(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// balances is "EUR 100.00, USD 5.00", by currency.
func balances(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for cur, amount := range m {
		parts = append(parts, cur+" "+amount)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// stockList is the products with the least stock, "code:available", lowest first as counted.
func stockList(products []v1alpha1.ProductStock) string {
	if len(products) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(products))
	for _, p := range products {
		parts = append(parts, fmt.Sprintf("%s:%d", p.ProductCode, p.Available))
	}
	return strings.Join(parts, ", ")
}

// oneLine keeps a condition's message on its row of the table.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
