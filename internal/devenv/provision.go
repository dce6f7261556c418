package devenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/provisioning"
)

// Endpoint is one environment's API as credentials.json describes it.
type Endpoint struct {
	BaseURL   string `json:"baseUrl"`
	APIKey    string `json:"apiKey,omitempty"`
	V1BaseURL string `json:"v1BaseUrl"`
	V1Token   string `json:"v1Token,omitempty"`
}

// Credentials is credentials.json: per partner ("namespace/name"), per environment.
type Credentials struct {
	Partners map[string]map[string]*Endpoint `json:"partners"`
}

// issuedKey is what the state directory remembers of a key, so restarts keep keys stable, the
// way the operator keeps them in Secrets.
type issuedKey struct {
	Rotation  int64  `json:"rotation"`
	Plaintext string `json:"plaintext"`
}

// Provision applies the manifests through the provisioning package, in dependency order
// (catalogs, partners, keys, wallets), and returns the credentials of the keys they ask for.
// baseURLs maps environment to the API's address ("http://127.0.0.1:8080").
func Provision(
	ctx context.Context, prov *provisioning.Provisioner, m *Manifests, stateDir string, baseURLs map[string]string,
) (*Credentials, []string, error) {
	catalogIDs, err := provisionCatalogs(ctx, prov, m)
	if err != nil {
		return nil, nil, err
	}
	warnings, err := provisionPartners(ctx, prov, m, catalogIDs)
	if err != nil {
		return nil, nil, err
	}
	creds, err := provisionKeys(ctx, prov, m, stateDir, baseURLs)
	if err != nil {
		return nil, nil, err
	}
	walletWarnings, err := provisionWallets(ctx, prov, m)
	if err != nil {
		return nil, nil, err
	}
	topUpWarnings, err := provisionTopUps(ctx, prov, m)
	if err != nil {
		return nil, nil, err
	}
	return creds, append(append(warnings, walletWarnings...), topUpWarnings...), nil
}

// provisionCatalogs applies every catalog and returns their IDs by "namespace/name".
func provisionCatalogs(
	ctx context.Context, prov *provisioning.Provisioner, m *Manifests,
) (map[string]uuid.UUID, error) {
	catalogIDs := map[string]uuid.UUID{}
	for i := range m.Catalogs {
		c := &m.Catalogs[i]
		products, err := m.catalogProducts(c)
		if err != nil {
			return nil, err
		}
		res, err := prov.ApplyCatalog(ctx, c, products)
		if err != nil {
			return nil, fmt.Errorf("catalog %s/%s: %w", c.Namespace, c.Name, err)
		}
		if len(res.Invalid) > 0 {
			return nil, fmt.Errorf("catalog %s/%s has invalid products: %v", c.Namespace, c.Name, res.Invalid)
		}
		catalogIDs[c.Namespace+"/"+c.Name] = res.ID
	}
	return catalogIDs, nil
}

// catalogProducts is a catalog's inline products followed by those of the ConfigMaps it names
// and of the CatalogShards naming it (in name order), as the operator merges them.
func (m *Manifests) catalogProducts(c *v1alpha1.Catalog) ([]v1alpha1.CatalogProduct, error) {
	sources := []provisioning.ProductSource{{Name: "Catalog " + c.Name, Products: c.Spec.Products}}
	for _, src := range c.Spec.ProductsFrom {
		data, ok := m.configMapData(c.Namespace, src.ConfigMapRef.Name, src.ConfigMapRef.Key)
		if !ok {
			return nil, fmt.Errorf("catalog %s/%s: ConfigMap %s key %s is not among the manifests",
				c.Namespace, c.Name, src.ConfigMapRef.Name, src.ConfigMapRef.Key)
		}
		feed, err := provisioning.ParseProductFeed([]byte(data))
		if err != nil {
			return nil, fmt.Errorf("catalog %s/%s: ConfigMap %s: %w", c.Namespace, c.Name, src.ConfigMapRef.Name, err)
		}
		sources = append(sources, provisioning.ProductSource{
			Name: "ConfigMap " + src.ConfigMapRef.Name + " key " + src.ConfigMapRef.Key, Products: feed})
	}
	var shards []*v1alpha1.CatalogShard
	for i := range m.Shards {
		if s := &m.Shards[i]; s.Namespace == c.Namespace && s.Spec.CatalogRef.Name == c.Name {
			shards = append(shards, s)
		}
	}
	slices.SortFunc(shards, func(a, b *v1alpha1.CatalogShard) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range shards {
		sources = append(sources, provisioning.ProductSource{Name: "CatalogShard " + s.Name, Products: s.Spec.Products})
	}
	products, dups := provisioning.MergeProducts(sources)
	if len(dups) > 0 {
		return nil, fmt.Errorf("catalog %s/%s: %s", c.Namespace, c.Name, provisioning.DuplicatesMessage(dups))
	}
	return products, nil
}

// provisionPartners applies every partner, with the catalog and webhook secrets it names; a
// missing catalog or secret is a warning, not an error.
func provisionPartners(
	ctx context.Context, prov *provisioning.Provisioner, m *Manifests, catalogIDs map[string]uuid.UUID,
) ([]string, error) {
	var warnings []string
	for i := range m.Partners {
		p := &m.Partners[i]
		var catalogID *uuid.UUID
		if p.Spec.CatalogRef != nil {
			id, ok := catalogIDs[p.Namespace+"/"+p.Spec.CatalogRef.Name]
			if !ok {
				warnings = append(warnings, fmt.Sprintf("partner %s/%s: catalog %s not found; its catalog is empty",
					p.Namespace, p.Name, p.Spec.CatalogRef.Name))
			} else {
				catalogID = &id
			}
		}
		webhooks, err := provisioning.ResolveWebhooks(&p.Spec, func(ref v1alpha1.SecretKeySelector) ([]byte, bool, error) {
			secret, ok := m.secretData(p.Namespace, ref.Name, ref.Key)
			if !ok {
				warnings = append(warnings, fmt.Sprintf(
					"partner %s/%s: webhook secret %s not among the manifests; its webhook is off",
					p.Namespace, p.Name, ref.Name))
			}
			return secret, ok, nil
		})
		if err != nil {
			return nil, fmt.Errorf("partner %s/%s: %w", p.Namespace, p.Name, err)
		}
		if _, err := prov.ApplyPartner(ctx, p, catalogID, webhooks); err != nil {
			return nil, fmt.Errorf("partner %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return warnings, nil
}

// provisionWallets applies every wallet; top-ups it cannot apply are warnings. As the operator
// does, the first Wallet of a partner environment is applied and a second one is refused.
func provisionWallets(ctx context.Context, prov *provisioning.Provisioner, m *Manifests) ([]string, error) {
	var warnings []string
	first := map[string]string{}
	for i := range m.Wallets {
		w := &m.Wallets[i]
		account := w.Namespace + "/" + w.Spec.PartnerRef.Name + "/" + string(w.Spec.Environment)
		if other, ok := first[account]; ok {
			warnings = append(warnings, fmt.Sprintf("wallet %s/%s: not applied: Wallet %s already manages the %s wallet "+
				"of partner %s", w.Namespace, w.Name, other, w.Spec.Environment, w.Spec.PartnerRef.Name))
			continue
		}
		first[account] = w.Name
		res, err := prov.ApplyWallet(ctx, w)
		if err != nil {
			return nil, fmt.Errorf("wallet %s/%s: %w", w.Namespace, w.Name, err)
		}
		for id, why := range res.Invalid {
			warnings = append(warnings, fmt.Sprintf("wallet %s/%s: top-up %s not applied: %s", w.Namespace, w.Name, id, why))
		}
	}
	return warnings, nil
}

// provisionTopUps credits every WalletTopUp to the Wallet it names, once by id, as the operator
// does; one it cannot apply (no such Wallet, a duplicate Wallet, an id taken, an invalid amount)
// is a warning.
func provisionTopUps(ctx context.Context, prov *provisioning.Provisioner, m *Manifests) ([]string, error) {
	var warnings []string
	applied := map[string]*v1alpha1.Wallet{}
	seen := map[string]bool{}
	for i := range m.Wallets {
		w := &m.Wallets[i]
		account := w.Namespace + "/" + w.Spec.PartnerRef.Name + "/" + string(w.Spec.Environment)
		if !seen[account] {
			seen[account] = true
			applied[w.Namespace+"/"+w.Name] = w
		}
	}
	for i := range m.TopUps {
		t := &m.TopUps[i]
		w, ok := applied[t.Namespace+"/"+t.Spec.WalletRef.Name]
		if !ok {
			warnings = append(warnings, fmt.Sprintf("wallet top-up %s/%s: not applied: Wallet %s not found or not applied",
				t.Namespace, t.Name, t.Spec.WalletRef.Name))
			continue
		}
		res, err := prov.ApplyTopUp(ctx, provisioning.TopUpOf(t, w))
		var invalid *provisioning.InvalidTopUpError
		switch {
		case errors.As(err, &invalid):
			warnings = append(warnings, fmt.Sprintf("wallet top-up %s/%s: not applied: %v", t.Namespace, t.Name, err))
		case err != nil:
			return nil, fmt.Errorf("wallet top-up %s/%s: %w", t.Namespace, t.Name, err)
		case res.Conflict != "":
			warnings = append(warnings, fmt.Sprintf("wallet top-up %s/%s: %s", t.Namespace, t.Name, res.Conflict))
		}
	}
	return warnings, nil
}

func provisionKeys(
	ctx context.Context, prov *provisioning.Provisioner, m *Manifests, stateDir string, baseURLs map[string]string,
) (*Credentials, error) {
	keysPath := filepath.Join(stateDir, "keys.json")
	issued, err := readIssuedKeys(keysPath)
	if err != nil {
		return nil, err
	}
	creds := &Credentials{Partners: map[string]map[string]*Endpoint{}}
	for i := range m.APIKeys {
		k := &m.APIKeys[i]
		source := k.Namespace + "/" + k.Name
		env := string(k.Spec.Environment)
		kind := string(k.Spec.Type)
		if kind == "" {
			kind = string(v1alpha1.ApiKeyTypeAPIKey)
		}
		prev, ok := issued[source]
		plaintext, err := keyPlaintext(ctx, prov, prev, ok && prev.Rotation == k.Spec.Rotation, env, source)
		if err != nil {
			return nil, err
		}
		// A raised rotation gives the replaced key its grace period, as the operator does.
		var grace time.Duration
		if g := k.Spec.PreviousKeyGracePeriod; g != nil && ok && prev.Rotation < k.Spec.Rotation {
			grace = g.Duration
		}
		if _, err := prov.RegisterKey(ctx, provisioning.Key{
			Namespace:        k.Namespace,
			Partner:          k.Spec.PartnerRef.Name,
			Environment:      env,
			Kind:             kind,
			Source:           source,
			Rotation:         k.Spec.Rotation,
			Plaintext:        plaintext,
			PreviousKeyGrace: grace,
		}); err != nil {
			return nil, fmt.Errorf("api key %s: %w", source, err)
		}
		issued[source] = issuedKey{Rotation: k.Spec.Rotation, Plaintext: plaintext}
		creds.add(k.Namespace+"/"+k.Spec.PartnerRef.Name, env, strings.TrimSuffix(baseURLs[env], "/"), kind, plaintext)
	}
	if err := writeJSON(keysPath, issued); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(stateDir, "credentials.json"), creds); err != nil {
		return nil, err
	}
	return creds, nil
}

// readIssuedKeys reads the keys issued by earlier runs; a missing file means none.
func readIssuedKeys(keysPath string) (map[string]issuedKey, error) {
	issued := map[string]issuedKey{}
	if raw, err := os.ReadFile(keysPath); err == nil {
		if err := json.Unmarshal(raw, &issued); err != nil {
			return nil, fmt.Errorf("read %s: %w", keysPath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", keysPath, err)
	}
	return issued, nil
}

// keyPlaintext keeps the key issued earlier (prev) for source while it is of the current
// rotation, and generates a new one otherwise.
func keyPlaintext(
	ctx context.Context, prov *provisioning.Provisioner, prev issuedKey, current bool, env, source string,
) (string, error) {
	reuse := current
	if reuse {
		// A key revoked meanwhile, of another environment or registered to another source is
		// replaced, as the operator does.
		stored, err := prov.KeyState(ctx, prev.Plaintext)
		if err != nil {
			return "", err
		}
		keyEnv, _ := auth.ParseKey(prev.Plaintext)
		reuse = keyEnv == env && (!stored.Exists || stored.Active && stored.Source == source)
	}
	if reuse {
		return prev.Plaintext, nil
	}
	return auth.GenerateKey(env)
}

// add records a key as the credential of partner's endpoint in env, served at base.
func (c *Credentials) add(partner, env, base, kind, plaintext string) {
	if c.Partners[partner] == nil {
		c.Partners[partner] = map[string]*Endpoint{}
	}
	ep := c.Partners[partner][env]
	if ep == nil {
		ep = &Endpoint{BaseURL: base + "/v2", V1BaseURL: base + "/v1"}
		c.Partners[partner][env] = ep
	}
	if kind == string(v1alpha1.ApiKeyTypeBearerToken) {
		ep.V1Token = plaintext
	} else {
		ep.APIKey = plaintext
	}
}

// writeJSON writes a file readable by its owner only: it holds plaintext keys.
func writeJSON(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func (m *Manifests) configMapData(namespace, name, key string) (string, bool) {
	for _, cm := range m.ConfigMaps {
		if cm.Namespace == namespace && cm.Name == name {
			v, ok := cm.Data[key]
			return v, ok
		}
	}
	return "", false
}

func (m *Manifests) secretData(namespace, name, key string) ([]byte, bool) {
	for _, s := range m.Secrets {
		if s.Namespace == namespace && s.Name == name {
			v, ok := s.Data[key]
			return v, ok
		}
	}
	return nil, false
}
