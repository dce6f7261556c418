// Package tenancy defines what every layer says about a partner's tenancy: the environments its
// accounts live in and the kinds of key they are reached with. It imports nothing of the module,
// so the operator, the data layer and the HTTP layer can all share it; api/v1alpha1 keeps its
// own API types and converts to these.
package tenancy

// Environment is an account's environment. A serve process accepts keys of exactly one.
type Environment string

// The environments every partner has.
const (
	Sandbox    Environment = "sandbox"
	Production Environment = "production"
)

// Environments are every partner's environments, sandbox first.
func Environments() []Environment { return []Environment{Sandbox, Production} }

// KeyKind is the kind of an API credential.
type KeyKind string

// The kinds of API credential.
const (
	APIKey      KeyKind = "apiKey"
	BearerToken KeyKind = "bearerToken"
)

// Owner is the partner (namespace and name) and environment an account belongs to.
type Owner struct {
	Namespace, Partner string
	Environment        Environment
}
